"""``errkb mcp`` and ``errkb serve`` without the errkb[mcp] extra: how to install it, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import errkb
from errkb.cli import cli


@pytest.mark.parametrize("command", [["mcp"], ["mcp", "--http", "127.0.0.1:8765"], ["serve"]])
@pytest.mark.parametrize("missing", ["mcp", "uvicorn"])
def test_without_the_extra_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], missing: str
) -> None:
    db = tmp_path / "kb.sqlite3"
    errkb.open(db).close()
    for name in [m for m in sys.modules if m == missing or m.startswith(missing + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    result = CliRunner().invoke(cli, ["--db", str(db), *command])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "pip install 'errkb[mcp]'" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("value", ["nohostport", "127.0.0.1:", ":8000", "h:99999", "h:x"])
def test_mcp_http_address_is_checked(tmp_path: Path, value: str) -> None:
    db = tmp_path / "kb.sqlite3"
    errkb.open(db).close()
    result = CliRunner().invoke(cli, ["--db", str(db), "mcp", "--http", value])
    assert result.exit_code == 2 and "HOST:PORT" in result.stderr
