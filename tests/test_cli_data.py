"""``ingest`` and ``export`` through the CLI (``errkb.cli.data``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run
from tests.conftest import DATASET, LINEAR_ID


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.sqlite3"


def test_ingest_and_export(db: Path, tmp_path: Path) -> None:
    result = run(db, "ingest", str(DATASET))
    assert (
        result.exit_code == 0
        and result.stdout.strip() == "added 0, updated 0, unchanged 3, rejected 0"
    )
    out = tmp_path / "export.jsonl"
    assert run(db, "export", "--output", str(out)).exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["record"]["id"] == LINEAR_ID
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0].replace('"severity":"error"', '"severity":"fatal"') + "\n")
    rejected = run(db, "ingest", str(bad))
    assert rejected.exit_code == 1
    assert "line 1" in rejected.stderr and "$.record.severity" in rejected.stderr
