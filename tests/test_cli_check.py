"""``errkb check`` through the CLI: exit codes from the report, every format, records' fixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkpoints import T, quanto_layer, quanto_metadata, write
from click.testing import Result

from tests.cli import run as run_cli
from tests.conftest import EXAMPLES, LINEAR_ID, QUANTO_ID

CHECKPOINTS = EXAMPLES / "checkpoints"


def run(tmp_path: Path, *args: str) -> Result:
    return run_cli(tmp_path / "kb.sqlite3", "check", *args)


def test_findings_exit_1_with_each_record_s_fix(tmp_path: Path) -> None:
    result = run(tmp_path, str(CHECKPOINTS))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[-1] == "checked 3 file(s): 3 finding(s)"
    assert sum(line.startswith("    fix: ") for line in lines) == 3
    assert f"[{QUANTO_ID}]" in result.stdout and f"[{LINEAR_ID}]" in result.stdout


def test_clean_exit_0(tmp_path: Path) -> None:
    clean = write(tmp_path / "plain.safetensors", {"w": T("F32", (4, 4))})
    result = run(tmp_path, str(clean))
    assert result.exit_code == 0, result.output
    assert result.stdout == "checked 1 file(s): no findings\n"


def test_unreadable_input_exit_2_and_the_rest_still_checked(tmp_path: Path) -> None:
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x01")
    result = run(tmp_path, str(broken), str(CHECKPOINTS))
    assert result.exit_code == 2
    assert f"{broken}: error: " in result.stdout
    assert "3 finding(s), 1 error(s)" in result.stdout.splitlines()[-1]


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_every_format(tmp_path: Path, fmt: str) -> None:
    result = run(tmp_path, "--format", fmt, str(CHECKPOINTS))
    assert result.exit_code == 1
    if fmt == "github":
        assert result.stdout.count("::error file=") == 3
    else:
        data = json.loads(result.stdout)
        results = data["findings"] if fmt == "json" else data["runs"][0]["results"]
        assert len(results) == 3


def test_all_layers_reports_every_layer(tmp_path: Path) -> None:
    qmap = {p: {"weights": "qint8", "activations": "none"} for p in ("a", "b")}
    bad = T("F32", (4,))
    path = write(
        tmp_path / "m.safetensors",
        {**quanto_layer("a", scale=bad), **quanto_layer("b", scale=bad)},
        quanto_metadata(qmap),
    )
    first = run(tmp_path, "--format", "json", str(path))
    every = run(tmp_path, "--format", "json", "--all-layers", str(path))
    assert first.exit_code == every.exit_code == 1
    assert [f["prefix"] for f in json.loads(first.stdout)["findings"]] == ["a"]
    assert [f["prefix"] for f in json.loads(every.stdout)["findings"]] == ["a", "b"]


def test_a_format_check_has_not_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path, "--format", "markdown", str(CHECKPOINTS))
    assert result.exit_code == 2 and "Invalid value for '--format'" in result.stderr
