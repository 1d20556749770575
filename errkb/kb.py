"""The knowledge base: the library's front door (``errkb.open()``).

A ``KnowledgeBase`` wraps one SQLite store. Candidates for a message come from the match index
in the database and are compiled on first use into a cache shared by threads (bounded, one per
state of the store). It is safe to share between threads: each thread reads through its own
SQLite connection, and every explain runs inside one read transaction, so an answer is
consistent with exactly one dataset version even while a sync commits a new one. When the store
changes (a sync in another process), the next explain notices the changed state counter and
starts a fresh cache; ``refresh()`` does it on demand.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from errkb import __version__
from errkb.errors import NotFoundError, StoreError
from errkb.match.decide import decide
from errkb.match.matcher import IndexedMatcher, SpecCache
from errkb.parse.events import EventKind, LogEvent
from errkb.records import Record
from errkb.report import Report
from errkb.store import Store, resolve_db_path

if TYPE_CHECKING:
    from errkb.ingest import IngestReport
    from errkb.sync import SyncReport


@dataclass(frozen=True)
class Stats:
    """Counts describing the knowledge base."""

    path: str
    records: int
    retired: int
    repos: int
    versions: int
    dataset_version: str | None
    by_class: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "retired": self.retired,
            "repos": self.repos,
            "versions": self.versions,
            "datasetVersion": self.dataset_version,
            "byClass": dict(self.by_class),
        }


class KnowledgeBase:
    """An opened knowledge base. Create it with ``errkb.open()``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._cache: SpecCache | None = None
        self._state: str | None = None

    @property
    def path(self) -> Path:
        return self.store.path

    # ------------------------------------------------------------------ explain
    def explain(self, text: str | bytes) -> Report:
        """Find every known error in ``text`` (a log, a traceback, any pasted output)."""
        from errkb.parse.regions import parse_input

        return self._report(parse_input(bytes(text) if isinstance(text, bytearray) else text))

    def match_message(self, message: str, exc_class: str | None = None) -> Report:
        """Explain one exception message (what a bot has when it catches an error)."""
        event = LogEvent(EventKind.BARE, exc_class, message, (1,))
        return self._report([event])

    def _report(self, events: list[LogEvent]) -> Report:
        from errkb.validators import diagnose, validator_for

        def has_validator(rid: str) -> bool:
            return validator_for(rid) is not None

        with self.store.snapshot() as conn:
            state = self.store.meta_value("state", conn) or "0"
            dataset_version = self.store.meta_value("dataset_version", conn)
            matcher = IndexedMatcher(conn, self._cache_for(state))
            cache: dict[str, Mapping[str, Any] | None] = {}

            def lookup(rid: str) -> Mapping[str, Any] | None:
                if rid not in cache:
                    cache[rid] = self.store.raw_record(rid, conn)
                return cache[rid]

            matches, unmatched = decide(
                events, matcher, lookup, diagnose=diagnose, has_validator=has_validator
            )
        return Report(__version__, dataset_version, matches, unmatched)

    def _cache_for(self, state: str) -> SpecCache:
        # Compiled records are valid for one state of the store: a sync (in any process)
        # bumps the state, and the next report starts a fresh cache.
        with self._lock:
            if self._cache is None or self._state != state:
                self._cache = SpecCache()
                self._state = state
            return self._cache

    def refresh(self) -> bool:
        """Drop compiled records if the store changed since they were compiled; True if so."""
        with self.store.snapshot() as conn:
            state = self.store.meta_value("state", conn) or "0"
        changed = state != self._state
        self._cache_for(state)
        return changed

    # ------------------------------------------------------------------ records
    def get(self, key: str) -> Record:
        """The record with this id (or slug); NotFoundError if none."""
        ids = self.store.find_ids(key)
        if not ids:
            raise NotFoundError(f"no record with id or slug {key!r}")
        raw = self.store.raw_record(ids[0])
        return Record.from_json(raw)

    def is_retired(self, record_id: str) -> bool:
        row = (
            self.store.reader()
            .execute("SELECT retired FROM records WHERE id = ?", (record_id,))
            .fetchone()
        )
        return bool(row and row[0])

    def records(
        self, *, repo: str | None = None, tag: str | None = None, error_class: str | None = None
    ) -> list[Record]:
        """Live records, filtered; ordered by repo then id."""
        sql = "SELECT raw_json FROM records r WHERE retired = 0"
        params: list[str] = []
        if repo:
            sql += " AND repo = ?"
            params.append(repo)
        if error_class:
            sql += " AND error_class = ?"
            params.append(error_class)
        if tag:
            sql += (
                " AND EXISTS (SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ?)"
            )
            params.append(tag)
        sql += " ORDER BY repo, id"
        rows = self.store.reader().execute(sql, params)
        return [Record.from_json(json.loads(raw)) for (raw,) in rows]

    def stats(self) -> Stats:
        conn = self.store.reader()

        def one(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0])

        by_class = tuple(
            (str(c or "(none)"), int(n))
            for c, n in conn.execute(
                "SELECT error_class, count(*) FROM records WHERE retired = 0 "
                "GROUP BY error_class ORDER BY count(*) DESC, error_class LIMIT 10"
            )
        )
        return Stats(
            path=str(self.path),
            records=one("SELECT count(*) FROM records WHERE retired = 0"),
            retired=one("SELECT count(*) FROM records WHERE retired = 1"),
            repos=one("SELECT count(DISTINCT repo) FROM records WHERE retired = 0"),
            versions=one("SELECT count(*) FROM dataset_versions"),
            dataset_version=self.store.meta_value("dataset_version"),
            by_class=by_class,
        )

    def iter_envelopes(self, *, include_retired: bool = False) -> Iterator[dict[str, Any]]:
        """Every record as a ``{"record", "datasetVersion"}`` envelope, in id order."""
        sql = "SELECT raw_json, dataset_version FROM records"
        if not include_retired:
            sql += " WHERE retired = 0"
        sql += " ORDER BY id"
        # A cursor of its own: export streams 150k records without holding them all.
        for raw, version in self.store.reader().execute(sql):
            yield {"record": json.loads(raw), "datasetVersion": version}

    def export(self, out: IO[str], *, include_retired: bool = False) -> int:
        """Write JSON Lines of envelopes to ``out``; return how many."""
        count = 0
        for envelope in self.iter_envelopes(include_retired=include_retired):
            out.write(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")) + "\n")
            count += 1
        return count

    # ------------------------------------------------------------------ writes
    def ingest(self, paths: Iterable[str | os.PathLike[str]]) -> IngestReport:
        """Validate every record of ``paths``, then upsert the valid ones in one transaction."""
        from errkb.ingest import ingest_paths

        return ingest_paths(self.store, paths)

    def sync(self, source: str | os.PathLike[str], **options: Any) -> SyncReport:
        """Apply the dataset version ``source`` holds (see ``errkb.sync.sync`` for options)."""
        from errkb.sync import sync

        report = sync(self, source, **options)
        self.refresh()
        return report

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def open_kb(target: str | os.PathLike[str] | None = None, *, bundled: bool = True) -> KnowledgeBase:
    """Open (creating and migrating if needed) a knowledge base.

    ``target`` is a database path or SQLite URL; by default ``$ERRKB_DB``, else a file in the
    user's data directory. A database errkb creates is filled from the bundled dataset unless
    ``bundled`` is False. When the default location is not writable, errkb still works: it
    builds a private temporary database from the bundled data for this process.
    """
    explicit = target is not None or bool(os.environ.get("ERRKB_DB"))
    store = Store(resolve_db_path(target))
    try:
        store.ensure_schema()
    except StoreError:
        if explicit:
            raise
        store = _temporary_store()
    kb = KnowledgeBase(store)
    if store.meta_value("match_index") == "stale":
        store.reindex()  # a database migrated from before the match index
    if bundled and store.is_empty():
        from errkb._resources import bundled_dataset_dir
        from errkb.ingest import ingest_paths

        ingest_paths(store, [bundled_dataset_dir()], only_if_empty=True)
    return kb


def _temporary_store() -> Store:
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="errkb-")
    atexit.register(shutil.rmtree, folder, True)
    store = Store(Path(folder) / "errkb.sqlite3")
    store.ensure_schema()
    return store
