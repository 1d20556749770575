"""The store's interface: the protocols every backend implements and the values explain reads.

``Store`` / ``ReadView`` / ``WriteTx``, ``PatternRow`` and the enums live here so the backends
import them without the factory (``open_store``), which imports the backends: no cycle. The
values of writes (``errkb.store.values``, a streamed apply's ``Ending`` among them) are
re-exported here on first use; import all of them from ``errkb.store``. No database driver is
imported here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from errkb import _lazy
from errkb.errors import UsageError

if TYPE_CHECKING:
    from errkb.records.patterns import PatternSpec
    from errkb.store.search import Candidate as SearchCandidate
    from errkb.store.search import Filters as SearchFilters
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
        diff_from,
        inventory_from,
        record_changes_from,
        state_from,
    )

#: A token in more records' indexed words than this is left out of ``related_ids``: it says
#: little about which records are related, and counting its records is most of the query.
RELATED_COMMON = 500

#: The Alembic revision this code expects (tests pin it to the migrations' head).
SCHEMA_HEAD = "0011"

#: A record as JSON (dataset content: validated by ``errkb.records``, otherwise untyped).
RecordJSON = Mapping[str, Any]


class ChangeKind(enum.StrEnum):
    """What a history row records."""

    ADDED = "added"
    UPDATED = "updated"
    RETIRED = "retired"
    RESTORED = "restored"  #: a retired record came back (in a snapshot or by rollback)


class VersionKind(enum.StrEnum):
    """How a dataset version row came to be."""

    INGEST = "ingest"
    SYNC = "sync"
    ROLLBACK = "rollback"


class Change(enum.StrEnum):
    """What applying one incoming record does to the store (see ``classify``)."""

    ADDED = "added"  #: no record with this id yet
    UPDATED = "updated"  #: the content changed
    RESTORED = "restored"  #: same content, but the record was retired: it comes back
    UNCHANGED = "unchanged"


def classify(existing: tuple[str, bool] | None, content_hash: str) -> Change:
    """The one add / update / restore / unchanged rule (``existing``: stored or None)."""
    if existing is None:
        return Change.ADDED
    if existing[0] != content_hash:
        return Change.UPDATED
    return Change.RESTORED if existing[1] else Change.UNCHANGED


@dataclass(frozen=True)
class Keep:
    """Stored live records a full unit of work keeps as they are (unchanged, not retired)."""

    repos: frozenset[str] = frozenset()
    ids: frozenset[str] = frozenset()


NO_KEEP = Keep()


@dataclass(frozen=True)
class PatternRow:
    """What the matcher compiles for one live record."""

    id: str
    error_message: str
    message_pattern: str
    error_class: str | None
    file_path: str
    line_number: int | None
    source_code: str | None


#: (record id, anchor or None, literals, regex, template) of one live record (``anchor_rows``).
AnchorRow = tuple[str, str | None, tuple[str, ...], str, str]

#: Meta keys: the ``state`` (and dataset version) of the last write that changed what the
#: anchor files are built from: they are keyed by these, not by ``state``.
ANCHORS_STATE_KEY = "anchors_state"
ANCHORS_VERSION_KEY = "anchors_version"
#: Meta key: a random value drawn by the same write, naming this knowledge base's contents.
ANCHORS_NONCE_KEY = "anchors_nonce"


def anchors_key(meta: Callable[[str], str | None]) -> tuple[str, str | None]:
    """(key, dataset version) the anchor files of a snapshot are keyed by: ``<state>.<nonce>``."""
    state = meta(ANCHORS_STATE_KEY)
    if state is None:
        return meta("state") or "0", meta("dataset_version")
    nonce = meta(ANCHORS_NONCE_KEY)
    return (f"{state}.{nonce}" if nonce else state), meta(ANCHORS_VERSION_KEY)


class Feed(Protocol):
    """What the store is fed with by its caller (``errkb.match.feed``): it computes nothing."""

    #: The version of the compiler ``derive`` runs: the store recompiles an older one's specs.
    compiler: str

    def derive(self, record: RecordJSON) -> Derived: ...
    def rank(
        self, words: Iterable[tuple[str, Sequence[str]]]
    ) -> Iterator[tuple[str, str, int]]: ...
    def rerank(
        self,
        words: Iterable[tuple[str, Sequence[str]]],
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
        """``rank``'s rows of only the records whose rows change, and their ids (None: rank all)."""
        ...


@runtime_checkable
class Streamed(Protocol):
    """Incoming records still read while the apply writes them; ``ending`` once all are read."""

    def ending(self) -> Ending: ...


@runtime_checkable
class CountedRank(Protocol):
    """A ``Feed`` that can rank some records by the word counts the store keeps."""

    def rank_counted(
        self, words: Iterable[tuple[str, Sequence[str]]], count: Mapping[str, int]
    ) -> Iterator[tuple[str, str, int]]:
        """``rank``'s rows of the records of ``words``, rarity from ``count`` (holders per word)."""
        ...


class ReadView(Protocol):
    """Reads inside one read transaction: every call sees one committed state."""

    def meta_value(self, key: str) -> str | None: ...
    def raw_record(self, record_id: str) -> RecordJSON | None: ...
    def raw_records(self, record_ids: Sequence[str]) -> dict[str, RecordJSON]:
        """The records of ``record_ids`` that exist, by id (``raw_record`` of each, batched)."""
        ...

    def candidate_ids(self, tokens: Sequence[str]) -> list[str]:
        """Ids of records whose rank-0 token is in ``tokens`` and all of whose are."""
        ...

    def related_ids(
        self, tokens: Sequence[str], limit: int, *, common: int = RELATED_COMMON
    ) -> list[str]:
        """Ids of records sharing the most indexed tokens with ``tokens``, most first, by id.

        A token held by more than ``common`` rows of the index is not counted.
        """
        ...

    def pattern_rows(self, ids: Sequence[str]) -> list[PatternRow]: ...
    def pattern_specs(self, ids: Sequence[str]) -> list[PatternSpec]:
        """The stored compiled matcher of each live record of ``ids`` that has one."""
        ...

    def anchor_rows(self) -> Iterable[AnchorRow]:
        """``AnchorRow`` of every live record by id; consume it inside the snapshot."""
        ...

    def anchor_rows_of(self, ids: Sequence[str]) -> list[AnchorRow]:
        """``AnchorRow`` of the live records among ``ids``, in the byte order of their ids."""
        ...

    def live_hashes(self) -> Iterable[tuple[str, str]]:
        """(id, content hash) of every live record, in no set order (an index read).

        May be a stream: consume it inside the snapshot it came from.
        """
        ...

    def token_rows(self) -> Iterable[tuple[str, str, int]]:
        """(record id, token, rank) of the match index by record, rank; consume in the snapshot."""
        ...

    def messages(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(id, errorMessage) of each of ``ids`` that exists."""
        ...

    def search(
        self, words: Sequence[str], filters: SearchFilters, limit: int, max_terms: int
    ) -> list[SearchCandidate]:
        """Live records holding ``words``, best full-text rank first (``errkb.store.search``)."""
        ...


class WriteTx(Protocol):
    """One write transaction: committed whole when the ``with`` block ends, or not at all."""

    def apply(
        self,
        incoming: Iterable[Incoming],
        *,
        kind: VersionKind,
        source: str,
        dataset_version: str | None,
        feed: Feed,
        full: bool = False,
        partial: bool = False,
        rejected: int = 0,
        hashes: Mapping[str, str] | None = None,
        keep: Keep = NO_KEEP,
        restores: int | None = None,
    ) -> tuple[int, ApplyCounts]:
        """Upsert ``incoming``, write the version row and history; return (version id, counts).

        With ``full``, live records absent from ``incoming`` and not in ``keep`` are retired.
        """
        ...

    def set_meta(self, key: str, value: str | None) -> None:
        """Set (or, with None, delete) one meta key."""
        ...

    def version_count(self) -> int: ...


class Store(Protocol):
    """One knowledge-base database. Every method translates driver errors to ``StoreError``."""

    path: Path  #: the database file (or, for a server database, where its lock file lives)

    def ensure_schema(self) -> bool:
        """Bring the schema to head; return True when the database was just created."""
        ...

    @property
    def read_only(self) -> bool:
        """True when this process cannot write the database (read-only file, role, standby)."""
        ...

    def close(self) -> None: ...
    def describe(self) -> str:
        """The database as a user names it: the file path, or the server URL (no password)."""
        ...

    # reads
    def snapshot(self) -> AbstractContextManager[ReadView]: ...
    def meta_value(self, key: str) -> str | None: ...
    def is_empty(self) -> bool: ...
    def raw_record(self, record_id: str) -> RecordJSON | None: ...
    def find_ids(self, key: str) -> list[str]:
        """Ids of records whose id or slug is ``key``: live first, then by repo and id."""
        ...

    def is_retired(self, record_id: str) -> bool: ...
    def live_records(
        self, *, repo: str | None = None, tag: str | None = None, error_class: str | None = None
    ) -> list[RecordJSON]:
        """Live records, filtered, ordered by repo then id."""
        ...

    def envelopes(
        self, *, include_retired: bool = False
    ) -> Iterator[tuple[RecordJSON, str | None]]:
        """(record, datasetVersion) of every (live) record in id order, streamed."""
        ...

    def counts(self) -> StoreCounts: ...
    def versions(self) -> list[VersionInfo]:
        """Every applied version, oldest first."""
        ...

    def latest_version(self) -> VersionInfo | None: ...
    def resolve_version(self, key: str) -> int | None:
        """The version row id for a row id or a datasetVersion (its latest row), or None."""
        ...

    def record(self, record_id: str) -> StoredRecord | None: ...
    def record_changes(self, record_id: str) -> list[RecordChange]:
        """Every history row of one record, in the order the changes were made."""
        ...

    def inventory(self) -> Inventory: ...
    def spec_keys(self, ids: Sequence[str]) -> dict[str, str]:
        """The spec key (``records.patterns.spec_key``) of each of ``ids`` stored with a spec."""
        ...

    def state_at(self, version_id: int) -> list[Incoming]:
        """Every record as it was right after ``version_id`` (those retired then too)."""
        ...

    def classify(self, incoming: Iterable[Incoming], *, full: bool, keep: Keep = NO_KEEP) -> Diff:
        """What ``WriteTx.apply`` would do with the same arguments; nothing is written."""
        ...

    # writes
    def write(self) -> AbstractContextManager[WriteTx]: ...
    def fresh_build(
        self, records: int, *, changed: int | None = None
    ) -> AbstractContextManager[WriteTx] | None:
        """A unit of work into a new file put in place whole when it commits, or None."""
        ...

    def reindex(self, feed: Feed) -> None:
        """Derive missing compiled matchers and rebuild the match index, in one transaction."""
        ...

    def recompile(self, feed: Feed) -> int:
        """Compile again what another compiler version compiled; the records compiled."""
        ...

    def sync_lock(self) -> AbstractContextManager[Path]:
        """Held for a whole sync or rollback; ``SyncLockedError`` at once if another holds it."""
        ...


#: URL schemes naming a PostgreSQL database (``postgresql+psycopg`` is SQLAlchemy's spelling).
SERVER_SCHEMES = ("postgresql+psycopg", "postgresql", "postgres")


def is_server_url(text: str) -> bool:
    """True when ``text`` is a PostgreSQL URL rather than an SQLite path or URL."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in SERVER_SCHEMES


def resolve_target(target: str | os.PathLike[str] | None) -> Path | str:
    """``--db`` / ``ERRKB_DB`` / the default: an SQLite file path, or a PostgreSQL URL (str)."""
    if target is None:
        env = os.environ.get("ERRKB_DB")
        if env:
            return resolve_target(env)
    elif is_server_url(os.fspath(target)):
        return os.fspath(target)
    return resolve_db_path(target)


def resolve_db_path(target: str | os.PathLike[str] | None) -> Path:
    """Turn ``--db`` / ``ERRKB_DB`` / the default into an SQLite database file path.

    A path or ``sqlite:///`` URL; other engines, URL options and ``file:`` URIs are refused.
    """
    if target is None:
        env = os.environ.get("ERRKB_DB")
        if env:
            return resolve_db_path(env)
        from platformdirs import user_data_dir

        return Path(user_data_dir("errkb", appauthor=False)) / "errkb.sqlite3"
    text = os.fspath(target)
    if text.startswith("file:"):
        raise UsageError(
            f"database {text!r}: SQLite 'file:' URIs are not supported; give a path "
            "or a sqlite:/// URL"
        )
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if is_server_url(text):
            raise UsageError(f"database URL {text!r} names a PostgreSQL server, not a file")
        if not scheme.startswith("sqlite"):
            raise UsageError(
                f"unsupported database URL {text!r}: errkb stores its data in SQLite "
                "(a path or sqlite:/// URL) or PostgreSQL (postgresql+psycopg://USER@HOST/DB)"
            )
        path = rest[1:] if rest.startswith("/") else rest
        if "?" in path:
            raise UsageError(
                f"database URL {text!r}: query options ({path.split('?', 1)[1]!r}) are not "
                "supported; give a plain sqlite:/// URL (a read-only file is used read-only)"
            )
        if not path or path == ":memory:":
            raise UsageError(f"database URL {text!r} names no file; give a path")
        return Path(path)
    return Path(text)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector around bulk work on many small acyclic objects."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The values of errkb.store.values, re-exported on first use (PEP 562).
_LAZY: dict[str, tuple[str, str]] = {
    name: ("errkb.store.values", name)
    for name in (
        "ApplyCounts",
        "Derived",
        "Diff",
        "Ending",
        "Incoming",
        "Inventory",
        "RecordChange",
        "StoreCounts",
        "StoredRecord",
        "VersionInfo",
        "diff_from",
        "inventory_from",
        "record_changes_from",
        "state_from",
    )
}


def __getattr__(name: str) -> object:
    return _lazy.load(__name__, globals(), _LAZY, name)


__all__ = [
    "NO_KEEP",
    "SCHEMA_HEAD",
    "AnchorRow",
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
    "Streamed",
    "VersionInfo",
    "VersionKind",
    "WriteTx",
    "classify",
    "diff_from",
    "gc_paused",
    "inventory_from",
    "is_server_url",
    "now_iso",
    "record_changes_from",
    "resolve_db_path",
    "resolve_target",
    "state_from",
]
