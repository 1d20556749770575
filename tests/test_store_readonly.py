"""A knowledge base on a read-only file system opens read-only (issue 20).

The database is built, closed, and then mounted read-only (a bind mount remounted ``ro``: as
root, the tests' user, ``chmod`` stops no write; ``access(2)`` answers ``EROFS`` for a read-only
mount whoever asks). Main could not open it at all ("unable to open database file": a WAL
reader needs its ``-shm`` file); every read works now, and a write command says in one line
that the database is read-only, exit 2.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import errkb
from errkb.errors import StoreReadOnlyError
from tests.cli import QUANTO_LOG, run
from tests.conftest import DATASET, QUANTO_ID


def _mount_read_only(src: Path, dst: Path) -> bool:
    """Make ``dst`` a read-only view of ``src``; False where this process may not mount."""
    if os.geteuid() != 0:
        return False
    steps = (["mount", "--bind", str(src), str(dst)], ["mount", "-o", "remount,ro,bind", str(dst)])
    for n, cmd in enumerate(steps):
        done = subprocess.run(cmd, capture_output=True, check=False)
        if done.returncode != 0:
            if n:
                subprocess.run(["umount", str(dst)], check=False)
            return False
    return True


@pytest.fixture
def ro_db(tmp_path: Path) -> Iterator[Path]:
    """A seeded knowledge base, closed, in a directory no one can write."""
    src, dst = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    dst.mkdir()
    with errkb.open(src / "kb.sqlite3"):
        pass
    if _mount_read_only(src, dst):
        try:
            yield dst / "kb.sqlite3"
        finally:
            subprocess.run(["umount", str(dst)], check=False)
        return
    if os.geteuid() == 0:
        pytest.skip("no read-only mount here (mount refused) and root ignores chmod")
    # Not root: permissions are enough.
    (src / "kb.sqlite3").chmod(0o444)
    src.chmod(0o555)
    try:
        yield src / "kb.sqlite3"
    finally:
        src.chmod(0o755)
        (src / "kb.sqlite3").chmod(0o644)


def test_the_library_reads_a_read_only_knowledge_base(ro_db: Path) -> None:
    with pytest.raises(OSError):
        (ro_db.parent / "probe").write_text("x")  # really read-only
    with errkb.open(ro_db) as kb:
        assert kb.read_only and kb.store.read_only  # the Store protocol's, both backends
        report = kb.explain(QUANTO_LOG.read_bytes())
        assert [m.id for m in report.matches] == [QUANTO_ID]
        assert kb.search("quanto incompatible scale").results[0].id == QUANTO_ID
        assert kb.stats().records >= 3
        with pytest.raises(StoreReadOnlyError, match="read-only"):
            kb.sync(DATASET)
    assert sorted(p.name for p in ro_db.parent.iterdir()) == ["kb.sqlite3"]


def test_read_commands_work_and_a_write_command_says_read_only(ro_db: Path) -> None:
    assert run(ro_db, "explain", str(QUANTO_LOG)).exit_code == 0
    assert run(ro_db, "stats").exit_code == 0
    assert run(ro_db, "versions").exit_code == 0
    assert run(ro_db, "show", QUANTO_ID).exit_code == 0
    for args in (("ingest", str(DATASET)), ("sync", str(DATASET)), ("rollback", "1")):
        result = run(ro_db, *args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "is read-only" in lines[0], (args, result.output)
