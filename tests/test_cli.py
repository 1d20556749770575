"""The CLI group (``errkb.cli``): usage errors, a broken database, help for every command, the
entry point. Each command family has its own ``test_cli_<family>.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from errkb.cli import cli
from tests.cli import QUANTO_LOG, run
from tests.conftest import QUANTO_ID


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.sqlite3"


def test_bad_option_exits_2(db: Path) -> None:
    result = run(db, "explain", "--format", "yaml")
    assert result.exit_code == 2
    assert "yaml" in result.stderr


def test_broken_database_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"garbage" * 1000)
    result = run(bad, "explain", str(QUANTO_LOG))
    assert result.exit_code == 2
    assert result.stderr.startswith("errkb: error:") and str(bad) in result.stderr


def test_every_command_has_help() -> None:
    # Commands register lazily, so cli.commands depends on what earlier tests imported: ask the
    # group, which knows every family's commands whatever has been imported.
    from errkb.cli import COMMAND_MODULES

    expected = sorted(name for names in COMMAND_MODULES.values() for name in names)
    with click.Context(cli) as ctx:
        names = cli.list_commands(ctx)
        assert names == expected and len(names) >= 14
        for name in names:
            command = cli.get_command(ctx, name)
            assert command is not None and command.help, name
            result = CliRunner().invoke(cli, [name, "--help"])
            assert result.exit_code == 0, name
            assert result.stdout.startswith(f"Usage: cli {name} "), name


def test_entry_point_runs_as_a_user_would(tmp_path: Path) -> None:
    env = {**os.environ, "ERRKB_DB": str(tmp_path / "ep.sqlite3"), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "errkb", "explain", str(QUANTO_LOG)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert QUANTO_ID in proc.stdout


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(flag: str) -> None:
    result = CliRunner().invoke(cli, [flag])
    assert result.exit_code == 0 and result.stdout.startswith("errkb, version ")
