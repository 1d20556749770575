"""The store: the only room that holds a database connection or SQL text.

``open_store`` picks the backend for a path or URL (``sqlite``, ``postgres``; a new backend is
a module plus a branch here). The protocols (``interface``) and values (``values``) are
re-exported. Backends translate every driver error into ``StoreError``. No driver is imported
here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from errkb import _lazy
from errkb.errors import UsageError
from errkb.store.interface import _LAZY as _INTERFACE_LAZY
from errkb.store.interface import (
    NO_KEEP,
    SCHEMA_HEAD,
    Change,
    ChangeKind,
    CountedRank,
    Feed,
    Keep,
    PatternRow,
    ReadView,
    RecordJSON,
    Store,
    VersionKind,
    WriteTx,
    anchors_key,
    classify,
    gc_paused,
    is_server_url,
    now_iso,
    resolve_db_path,
    resolve_target,
)

if TYPE_CHECKING:
    from errkb.store.values import (
        ApplyCounts,
        Derived,
        Diff,
        Ending,
        Incoming,
        Inventory,
        RecordChange,
        StoreCounts,
        StoredRecord,
        VersionInfo,
    )


def open_store(target: str | os.PathLike[str] | None) -> Store:
    """The store for ``--db`` / ``ERRKB_DB`` / the default, not yet migrated (``ensure_schema``).

    A PostgreSQL URL opens that backend (``errkb[postgres]``); anything else is an SQLite file.
    """
    resolved = resolve_target(target)
    if isinstance(resolved, str):
        from errkb.store.postgres import PostgresStore

        return PostgresStore(_checked_server_url(resolved))
    from errkb.store.sqlite import SqliteStore

    return SqliteStore(resolved)


def _checked_server_url(url: str) -> str:
    """``url`` when it parses as a URL, else a ``UsageError`` naming ``--db`` (no credentials)."""
    import urllib.parse

    try:
        urllib.parse.urlsplit(url)
    except ValueError as exc:
        scheme, _sep, rest = url.partition("://")
        shown = f"{scheme}://{'***@' if '@' in rest else ''}{rest.rpartition('@')[2]}"
        raise UsageError(
            f"--db (or ERRKB_DB) {shown!r} is not a valid PostgreSQL URL: {exc} "
            "(expected postgresql+psycopg://USER@HOST[:PORT]/DB)"
        ) from None
    return url


__all__ = [
    "NO_KEEP",
    "SCHEMA_HEAD",
    "ApplyCounts",
    "Change",
    "ChangeKind",
    "CountedRank",
    "Derived",
    "Diff",
    "Ending",
    "Feed",
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
    "anchors_key",
    "classify",
    "gc_paused",
    "is_server_url",
    "now_iso",
    "open_store",
    "resolve_db_path",
    "resolve_target",
]

#: The values of writes, history and inventory (``errkb.store.values``), imported on first use:
#: explain needs none of them. The same table as the interface's, less its row helpers.
_LAZY = {name: where for name, where in _INTERFACE_LAZY.items() if name in __all__}


def __getattr__(name: str) -> object:
    return _lazy.load(__name__, globals(), _LAZY, name)
