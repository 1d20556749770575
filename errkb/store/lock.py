"""The sync lock: one sync or rollback at a time per database, portable, never stale.

A sidecar SQLite file (``<db>.sync.lock``) held in an ``EXCLUSIVE`` transaction for the whole
run: the platform's file locks, refused at once when held, released by the OS even on SIGKILL.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from errkb.errors import SyncError, SyncLockedError


def lock_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".sync.lock")


@contextlib.contextmanager
def sync_lock(db_path: Path) -> Iterator[Path]:
    """Hold ``<db>.sync.lock`` for a sync or rollback; fail at once if another one holds it."""
    path = lock_path(db_path)
    try:
        # timeout=0: a held lock is an answer ("another sync is running"), not a wait.
        conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    except sqlite3.Error as exc:
        raise SyncError(f"{path}: cannot open the sync lock: {exc}") from exc
    try:
        try:
            conn.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorname not in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                raise SyncError(f"{path}: cannot take the sync lock: {exc}") from exc
            raise SyncLockedError(
                f"{db_path}: another sync is running (it holds {path}); try again later"
            ) from None
        try:
            yield path
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()
