"""The sync lock: held by another process it fails at once; a SIGKILLed holder frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.errors import SyncLockedError
from errkb.store.lock import lock_path, sync_lock

ROOT = Path(__file__).resolve().parent.parent

HOLDER = """
import sys, time
from pathlib import Path
from errkb.store.lock import sync_lock
with sync_lock(Path(sys.argv[1])):
    print("HELD", flush=True)
    time.sleep(600)
"""


def _hold(db: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "HELD"
    return proc


def test_a_lock_held_by_another_process_fails_at_once(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    holder = _hold(db)
    try:
        # The holder never lets go: a lock that waited for it would hang here, not fail.
        with pytest.raises(SyncLockedError, match="another sync is running"), sync_lock(db):
            pass  # pragma: no cover - never entered
        assert holder.poll() is None  # refused while it is still held
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()


def test_a_sigkilled_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    holder = _hold(db)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert holder.stdout is not None
    holder.stdout.close()
    assert lock_path(db).exists()  # the file stays; the lock on it went with the process
    with sync_lock(db) as held:
        assert held == lock_path(db)


def test_the_lock_is_released_and_reusable_in_process(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    with sync_lock(db), pytest.raises(SyncLockedError), sync_lock(db):
        pass  # pragma: no cover - never entered
    with sync_lock(db):
        pass


def test_an_old_empty_lock_file_is_taken(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    lock_path(db).write_bytes(b"")  # what the flock-based lock of older errkb left behind
    with sync_lock(db):
        pass
