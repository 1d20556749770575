"""The store's interface: the protocols every backend implements and the values explain reads.

The ``Store`` / ``ReadView`` / ``WriteTx`` protocols, ``PatternRow`` (what the matcher compiles)
and the enums live here, in a module of their own, so that the backends
(``errkb.store.sqlite``, ``errkb.store.postgres``) import them without importing the package's
factory, and the factory (``errkb.store.open_store``) imports the backends: no cycle. The values
of writes, history and inventory (``Incoming``, ``ApplyCounts``, ``Diff``, ``VersionInfo`` ...)
are ``errkb.store.values``, re-exported here on first use. Import these names from
``errkb.store``, which re-exports them.

Nothing here imports a database driver: the explain hot path must not pay for SQLAlchemy.
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
    """The one add / update / restore / unchanged rule, for apply and dry run alike.

    ``existing`` is the stored (content hash, retired) of the record's id, or None.
    """
    if existing is None:
        return Change.ADDED
    if existing[0] != content_hash:
        return Change.UPDATED
    return Change.RESTORED if existing[1] else Change.UNCHANGED


@dataclass(frozen=True)
class Keep:
    """Stored live records a full unit of work keeps as they are, without loading them.

    A sync's repositories that did not change, and the ids of records it rejected: they count
    as unchanged and are not retired.
    """

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


#: (record id, anchor or None without a stored spec, literals, regex, template) of one live
#: record: what the record-driven scan's anchor database is built from (``anchor_rows``).
AnchorRow = tuple[str, str | None, tuple[str, ...], str, str]

#: Meta keys: the ``state`` (and the dataset version then) of the last write that changed what
#: the anchor files beside the knowledge base are built from. The files are keyed by these,
#: not by ``state``: a re-analysis upstream that rewrites 1% of the records' documentation
#: leaves every live record's anchor, literals, regex, template and index words as they were,
#: and at 500,000 records rebuilding the files anyway was 40 of the incremental sync's 59 s.
ANCHORS_STATE_KEY = "anchors_state"
ANCHORS_VERSION_KEY = "anchors_version"
#: Meta key: a random value drawn by the same write, so that the key names this knowledge
#: base's contents and not only a state counter another knowledge base may share.
ANCHORS_NONCE_KEY = "anchors_nonce"


def anchors_key(meta: Callable[[str], str | None]) -> tuple[str, str | None]:
    """(key, dataset version) the anchor files of a snapshot are keyed by (``meta_value``).

    The key is ``<state>.<nonce>``: the state of the last write that changed what the files
    are built from and the random nonce that write drew, so a file copied from another
    knowledge base (of the same dataset version and state counter) is never current here. A
    knowledge base written before the key existed has none: its own ``state`` and dataset
    version then; one written before the nonce, its state alone until its next such write.
    """
    state = meta(ANCHORS_STATE_KEY)
    if state is None:
        return meta("state") or "0", meta("dataset_version")
    nonce = meta(ANCHORS_NONCE_KEY)
    return (f"{state}.{nonce}" if nonce else state), meta(ANCHORS_VERSION_KEY)


class Feed(Protocol):
    """What the store is fed with by its caller (``errkb.match.feed``): it computes nothing.

    A record's compiled matcher and index words (``Derived``) usually come with it
    (``Incoming.derived``, made in the sync's worker processes); ``derive`` makes them for a
    record that came without (an ingest, a rollback's old content, a database from before
    they were stored). ``rank`` turns every live record's (id, index words) into the match
    index's (token, record id, rank) rows: rarity is a property of the whole knowledge base.
    """

    #: The version of the compiler ``derive`` runs (``records.patterns.COMPILER_VERSION``):
    #: the store recompiles what an older one compiled.
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
        """``rank``'s rows of only the records whose rows change, and their ids.

        ``previous`` holds each changed record's words before the change (None: not live),
        ``after`` those of the ones live now. None for the ids: rank them all instead.
        """
        ...


@dataclass(frozen=True)
class Ending:
    """What a streamed apply learns only once its records have all come (``Streamed``)."""

    keep: Keep = NO_KEEP
    partial: bool = False
    rejected: int = 0


@runtime_checkable
class Streamed(Protocol):
    """Incoming records still being read while the apply writes them (a sync's workers).

    ``WriteTx.apply`` asks ``ending`` once it has iterated them all: the ``keep``, ``partial``
    and ``rejected`` it then uses instead of its arguments'.
    """

    def ending(self) -> Ending: ...


@runtime_checkable
class CountedRank(Protocol):
    """A ``Feed`` that can rank some records by counts the store keeps (``rank_counted``).

    With it, a write that changes a few records' index words ranks only the records whose
    rows can change, reading each word's count across the knowledge base from the store
    (``match_word_counts``, migration 0011) instead of every live record's words
    (``Feed.rerank``). Optional: a feed without it is reranked as before.
    """

    def rank_counted(
        self, words: Iterable[tuple[str, Sequence[str]]], count: Mapping[str, int]
    ) -> Iterator[tuple[str, str, int]]:
        """``rank``'s rows of the records of ``words`` (by id), their words' rarity from ``count``.

        ``count`` gives, for each of their words, how many live records hold it (the records
        given among them).
        """
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
        """The stored compiled matcher of each live record of ``ids`` that has one.

        A database written before migration 0006, and not reindexed since, has none.
        """
        ...

    def anchor_rows(self) -> Iterable[AnchorRow]:
        """``AnchorRow`` of every live record by id (anchor None: no stored spec row).

        May be a stream: consume it inside the snapshot it came from.
        """
        ...

    def token_rows(self) -> Iterable[tuple[str, str, int]]:
        """(record id, token, rank) of the whole match index, by record id then rank.

        May be a stream: consume it inside the snapshot it came from.
        """
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

        With ``full``, stored live records absent from ``incoming`` and not in ``keep`` are
        retired. Each written record's ``Derived`` (or ``feed.derive``'s) is stored beside
        it, and the match index is rebuilt from them (``feed.rank``) in this transaction when
        anything changed.
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
        """True when this process cannot write the database.

        A read-only file, directory or mount (SQLite); a read-only role, default or standby
        server (PostgreSQL).
        """
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
        """A unit of work into a new file put in place whole when it commits, or None.

        For ``records`` incoming records into an empty database, or when ``changed`` of them
        (None: the caller asks for a rebuild) bring new content (faster: no journal, what
        stays copied from the old file); None: ``write()``.
        """
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

    Accepts a file path or an SQLAlchemy SQLite URL (``sqlite:///relative.db``,
    ``sqlite:////abs/path.db``). PostgreSQL URLs name no file (``resolve_target`` returns them
    for ``open_store``); other database engines, URL query options (``?mode=ro``) and SQLite
    ``file:`` URIs are refused with a clear message: the standard library reader and
    SQLAlchemy must open the same file, the same way.
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
    """Pause the cyclic garbage collector around bulk work on many small acyclic objects.

    Parsing and applying 150,000 records allocates millions of dicts and strings; the collector
    would rescan the growing heap again and again (measured: ~10 s of a 50 s sync). Reference
    counting still frees everything; the collector resumes, as it was, afterwards.
    """
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
