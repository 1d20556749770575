"""``lint`` and ``extract`` through the CLI (``errkb.cli.maint``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from errkb.records import check_record
from tests.test_extract import DATA, FORMS, SGLANG_SHA, seed
from tests.test_lint import SEEDS


def invoke(args: list[str]) -> Any:
    from errkb.cli import cli  # errkb.cli registers errkb.cli.maint's commands

    return CliRunner().invoke(cli, args)


def test_cli_lint_findings_exit_1() -> None:
    result = invoke(["lint", str(SEEDS)])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and all(" lazy-capture: " in line for line in lines[:3])
    assert lines[-1] == "3 record(s): 0 error(s), 3 warning(s)"


def test_cli_lint_clean_exit_0_json() -> None:
    result = invoke(["lint", str(SEEDS), "--ignore", "lazy-capture", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"records": 3, "errors": 0, "warnings": 0, "findings": []}


def test_cli_lint_missing_path_exit_2() -> None:
    from errkb.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["lint", "/nonexistent/records.jsonl"])
    assert exc.value.code == 2


def test_cli_extract_to_stdout() -> None:
    result = invoke(["extract", str(DATA / "sample"), "--repo", "acme/widgets"])
    assert result.exception is None, result.output
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == len(FORMS) + 1
    assert all(check_record(json.loads(line), source="-").ok for line in lines)
    assert "extracted 12 record(s)" in result.stderr


def test_cli_extract_to_file_with_envelopes(tmp_path: Path) -> None:
    out = tmp_path / "drafts.jsonl"
    args = ["extract", str(DATA / "sglang"), "--repo", "sgl-project/sglang", "--sha", SGLANG_SHA]
    result = invoke([*args, "--envelope", "--output", str(out)])
    assert result.exception is None and result.exit_code == 0
    assert result.stdout == ""
    ids = {json.loads(line)["record"]["id"] for line in out.read_text("utf-8").splitlines()}
    assert ids == {
        seed(i)["id"] for i in ("a7ac2d40740eeeb5", "a920e8c742a5f565", "ab71de788ff7b754")
    }


def test_cli_extract_reports_skipped_files(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_bytes(b"def (:\n")
    result = invoke(["extract", str(tmp_path), "--repo", "acme/widgets"])
    assert result.exception is None and result.exit_code == 0
    assert "skipped" in result.stderr and "bad.py" in result.stderr


def test_cli_extract_bad_repo_is_an_error() -> None:
    result = invoke(["extract", str(DATA / "sample"), "--repo", "nope"])
    assert result.exit_code == 2
    assert "errkb: error: repo must look like owner/name, got 'nope'" in result.stderr
    assert result.stdout == ""


def test_cli_maint_compact_finds_a_whole_build_compact(tmp_path: Path) -> None:
    # (A knowledge base holding delta parts: tests/test_anchordelta.py.)
    pytest.importorskip("hyperscan")
    from tests.cli import run
    from tests.conftest import DATASET

    db = tmp_path / "kb.sqlite3"
    assert run(db, "sync", str(DATASET)).exit_code == 0
    result = run(db, "maint", "compact")
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 0
    assert result.stdout == "record anchors: current, already compact\n", result.output
