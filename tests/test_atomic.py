"""errkb.atomic: a failed write leaves the target exactly as it was and no temporary behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from errkb.atomic import atomic_write_text
from errkb.errors import OutputError


class Boom(Exception):
    """Raised mid-write by the test."""


def test_success_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with atomic_write_text(target) as fh:
        fh.write("new\n")
    assert target.read_text() == "new\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


@pytest.mark.parametrize("existed", [True, False])
def test_failure_mid_write_leaves_the_target_untouched(tmp_path: Path, existed: bool) -> None:
    target = tmp_path / "out.jsonl"
    if existed:
        target.write_text("old content\n")
    with pytest.raises(Boom), atomic_write_text(target) as fh:
        fh.write("half of the new con")
        fh.flush()  # the partial content is on disk, in the temporary file
        raise Boom
    assert (target.read_text() if existed else target.exists()) == (
        "old content\n" if existed else False
    )
    assert sorted(os.listdir(tmp_path)) == (["out.jsonl"] if existed else [])


def test_failure_in_the_final_fsync_leaves_the_target_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old content\n")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with (
        pytest.raises(OutputError, match=r"out\.jsonl: cannot write: No space left"),
        atomic_write_text(target) as fh,
    ):
        fh.write("new content\n")
    assert target.read_text() == "old content\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_export_failure_through_the_cli_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from errkb.cli import cli

    target = tmp_path / "export.jsonl"
    target.write_text("previous export\n")

    def crash(*_args: object, **_kw: object) -> int:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("errkb.kb.KnowledgeBase.export", crash)
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "kb.sqlite3"), "export", "-o", str(target)]
    )
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2
    assert result.stderr.startswith("errkb: error: unexpected OSError")
    assert target.read_text() == "previous export\n"
    assert [n for n in os.listdir(tmp_path) if not n.startswith("kb.sqlite3")] == ["export.jsonl"]
