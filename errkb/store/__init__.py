"""The store: the only room that holds a database connection or SQL text.

This package's front is ``open_store``, which picks the backend for a path or URL. The values
that cross the seam (``Incoming``, ``ApplyCounts``, ``Diff``, ``VersionInfo`` ...) and the
``Store`` / ``ReadView`` / ``WriteTx`` protocols live in ``errkb.store.interface`` (re-exported
here), which the backends import: the factory imports the backends, never the reverse.
``errkb.store.sqlite`` is the SQLite backend, ``errkb.store.postgres`` the PostgreSQL one; a
further backend is one new module implementing the protocols plus one branch in
``open_store``. Backends translate every driver error into ``StoreError`` (and subclasses) at
this one boundary, naming the database.

Nothing here imports a database driver: the explain hot path must not pay for SQLAlchemy.
"""

from __future__ import annotations

import os

from errkb.store.interface import (
    NO_KEEP,
    SCHEMA_HEAD,
    ApplyCounts,
    Change,
    ChangeKind,
    Diff,
    Incoming,
    Inventory,
    Keep,
    PatternRow,
    ReadView,
    RecordChange,
    RecordJSON,
    Store,
    StoreCounts,
    StoredRecord,
    VersionInfo,
    VersionKind,
    WriteTx,
    classify,
    gc_paused,
    is_server_url,
    now_iso,
    resolve_db_path,
    resolve_target,
)


def open_store(target: str | os.PathLike[str] | None) -> Store:
    """The store for ``--db`` / ``ERRKB_DB`` / the default (not yet migrated: ``ensure_schema``).

    A ``postgresql+psycopg://`` (or ``postgresql://``, ``postgres://``) URL opens the
    PostgreSQL backend (the optional extra ``errkb[postgres]``); anything else is an SQLite file.
    """
    resolved = resolve_target(target)
    if isinstance(resolved, str):
        from errkb.store.postgres import PostgresStore

        return PostgresStore(resolved)
    from errkb.store.sqlite import SqliteStore

    return SqliteStore(resolved)


__all__ = [
    "NO_KEEP",
    "SCHEMA_HEAD",
    "ApplyCounts",
    "Change",
    "ChangeKind",
    "Diff",
    "Incoming",
    "Inventory",
    "Keep",
    "PatternRow",
    "ReadView",
    "RecordChange",
    "RecordJSON",
    "Store",
    "StoreCounts",
    "StoredRecord",
    "VersionInfo",
    "VersionKind",
    "WriteTx",
    "classify",
    "gc_paused",
    "is_server_url",
    "now_iso",
    "open_store",
    "resolve_db_path",
    "resolve_target",
]
