"""The SQLite backend of the store: opening, migrating, reading, and applying in one transaction.

Two access paths, on purpose:

* Writes (ingest, sync, rollback) go through a SQLAlchemy engine, in ONE explicit
  ``BEGIN IMMEDIATE`` transaction per unit of work, so a reader never sees half a version and a
  crash leaves the database as it was. The bulk SQL runs on the driver connection inside that
  transaction: the ORM's per-row bookkeeping cost more than SQLite's own work at 150,000
  records.
* Reads, the explain hot path first, use the standard library's ``sqlite3`` (one connection per
  thread), because importing SQLAlchemy costs about half a second of start-up and explain needs
  only a few indexed look-ups. WAL journaling lets those readers run during a write.

The schema is created and evolved only by Alembic (``migrations/``). Opening a database checks
its revision with a single query; Alembic is imported only when an upgrade is due. A database
stamped with a revision this errkb does not know was made by a newer errkb and is refused.

Every ``sqlite3`` (and SQLAlchemy) error is translated here into ``StoreError`` or a subclass,
with one line naming the database (``translate``).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from errkb import _lazy
from errkb import records as rec
from errkb.errors import (
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
)
from errkb.records.fields import BOOK_COLUMNS, CHILD_FIELDS, COLUMN_FIELDS, RECORD_COLUMNS
from errkb.store.interface import (
    NO_KEEP,
    SCHEMA_HEAD,
    Change,
    ChangeKind,
    Keep,
    PatternRow,
    RecordJSON,
    VersionKind,
    classify,
    gc_paused,
    now_iso,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from errkb.store.search import Candidate as SearchCandidate
    from errkb.store.search import Filters as SearchFilters

    # The values of writes, history and inventory are imported where they are made: explain
    # reads patterns only (errkb.store.values).
    from errkb.store.values import (
        ApplyCounts,
        Diff,
        Incoming,
        Inventory,
        RecordChange,
        StoreCounts,
        StoredRecord,
        VersionInfo,
    )

#: How long a writer waits for another writer's lock before giving up (ms). Tests shorten it.
BUSY_TIMEOUT_MS = 10_000
BUSY_TIMEOUT_ENV = "ERRKB_BUSY_TIMEOUT_MS"
_CHUNK = 500  # ids per IN (...) query: well under SQLite's parameter limit
_APPLY_CHUNK = 2000  # records classified and written together: bounds apply's memory
_T = TypeVar("_T")

DBAPI = Any  # a DB-API connection (sqlite3's, or the one SQLAlchemy's engine hands out)


def busy_timeout_ms() -> int:
    """The busy timeout: ``$ERRKB_BUSY_TIMEOUT_MS`` when set (a whole number), else 10 s."""
    text = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    if not text:
        return BUSY_TIMEOUT_MS
    try:
        value = int(text)
    except ValueError:
        raise StoreError(f"{BUSY_TIMEOUT_ENV}={text!r} is not a whole number of ms") from None
    return max(value, 0)


def translate(exc: BaseException, path: Path, action: str, timeout_ms: int) -> StoreError:
    """One clear line for a database error: what happened to which database, doing what."""
    inner = getattr(exc, "orig", None)  # SQLAlchemy wraps the driver's error
    err = inner if isinstance(inner, sqlite3.Error) else exc
    name = getattr(err, "sqlite_errorname", "") or ""
    text = str(err)
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED") or "database is locked" in text:
        return StoreLockedError(
            f"database {path} is locked by another writer (waited {timeout_ms} ms while "
            f"{action}); try again later, or raise ${BUSY_TIMEOUT_ENV}"
        )
    if name.startswith("SQLITE_READONLY") or "readonly database" in text:
        return StoreReadOnlyError(f"database {path} is read-only: cannot write to it ({action})")
    if name == "SQLITE_FULL" or "disk is full" in text:
        return StoreError(f"database {path}: disk full while {action}; nothing was changed")
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return StoreError(f"cannot open database {path} ({text})")
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "not a database" in text:
        return StoreError(f"database {path} is not an errkb database or is damaged ({text})")
    if "no such table" in text or "no such column" in text:
        return StoreError(
            f"database {path} is damaged: {text}; restore it from a backup or use another --db"
        )
    return StoreError(f"database {path}: {action} failed: {text}")


def _chunks(items: Sequence[str], size: int = _CHUNK) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _marks(n: int) -> str:
    return ",".join("?" * n)


# ---------------------------------------------------------------------------- the read view
class SqliteView:
    """Reads on one connection (inside ``snapshot``, one committed state)."""

    def __init__(self, conn: DBAPI) -> None:
        self.conn = conn

    def meta_value(self, key: str) -> str | None:
        found = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def raw_record(self, record_id: str) -> RecordJSON | None:
        row = self.conn.execute(
            "SELECT raw_json FROM records WHERE id = ?", (record_id,)
        ).fetchone()
        if row is None:
            return None
        decoded: RecordJSON = json.loads(row[0])
        return decoded

    def candidate_ids(self, tokens: Sequence[str]) -> list[str]:
        if not tokens:
            return []
        marks = _marks(len(tokens))
        # The rank-0 (rarest) word selects through the index; the record's other indexed words
        # must be in the text too (a primary-key probe each).
        sql = (
            "SELECT t0.record_id FROM match_tokens t0 WHERE t0.rank = 0 AND t0.token IN ("  # noqa: S608
            + marks
            + ") AND NOT EXISTS (SELECT 1 FROM match_tokens t WHERE t.record_id = t0.record_id "
            "AND t.token NOT IN (" + marks + "))"
        )
        return [str(r[0]) for r in self.conn.execute(sql, (*tokens, *tokens))]

    def related_ids(self, tokens: Sequence[str], limit: int) -> list[str]:
        if not tokens:
            return []
        sql = (
            "SELECT record_id FROM match_tokens WHERE token IN ("  # noqa: S608
            + _marks(len(tokens))
            + ") GROUP BY record_id ORDER BY count(*) DESC, record_id LIMIT ?"
        )
        return [str(r[0]) for r in self.conn.execute(sql, (*tokens, limit))]

    def token_rows(self) -> Iterator[tuple[str, str, int]]:
        # Streamed: at 500,000 records the index is two million rows, and a list of them
        # was the largest thing a warm process ever held (the anchor table is built from them
        # once, then kept as ~200k strings).
        rows = self.conn.execute(
            "SELECT record_id, token, rank FROM match_tokens ORDER BY record_id, rank"
        )
        for rid, token, rank in rows:
            yield str(rid), str(token), int(rank)

    def pattern_rows(self, ids: Sequence[str]) -> list[PatternRow]:
        out: list[PatternRow] = []
        for chunk in _chunks(ids):
            sql = (
                "SELECT id, error_message, message_pattern, error_class, file_path, "  # noqa: S608
                "line_number, source_code FROM records WHERE retired = 0 AND id IN ("
                + _marks(len(chunk))
                + ")"
            )
            out += [PatternRow(*row) for row in self.conn.execute(sql, tuple(chunk))]
        return out

    def messages(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for chunk in _chunks(ids):
            sql = (
                "SELECT id, error_message FROM records WHERE id IN ("  # noqa: S608
                + _marks(len(chunk))
                + ")"
            )
            out += [(str(r), str(m)) for r, m in self.conn.execute(sql, tuple(chunk))]
        return out

    def search(
        self, words: Sequence[str], filters: SearchFilters, limit: int, max_terms: int
    ) -> list[SearchCandidate]:
        from errkb.store import search as fts

        return fts.candidates(self.conn, fts.plan(self.conn, words, max_terms), filters, limit)


# ---------------------------------------------------------------------------- the store
class SqliteStore:
    """One SQLite knowledge-base file."""

    #: Run on every write connection. Class-level so a test can add one (``max_page_count``).
    WRITE_PRAGMAS: tuple[str, ...] = (
        "PRAGMA journal_mode = WAL",
        "PRAGMA foreign_keys = ON",
        "PRAGMA synchronous = NORMAL",
        # 64 MiB of page cache: a 150k-record sync touches many index pages.
        "PRAGMA cache_size = -65536",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms()
        self._local = threading.local()
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()

    def _fail(self, exc: BaseException, action: str) -> StoreError:
        return translate(exc, self.path, action, self.busy_timeout_ms)

    def _read(self, action: str, fn: Callable[[SqliteView], _T]) -> _T:
        try:
            return fn(SqliteView(self.reader()))
        except sqlite3.Error as exc:
            raise self._fail(exc, action) from exc

    # ------------------------------------------------------------------ opening and schema
    def ensure_schema(self) -> bool:
        """Bring the schema to head; return True when the database was just created."""
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"database {self.path} is not a regular file; give a file path")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create its directory: {exc}") from exc
        revision = self._revision()
        if revision == SCHEMA_HEAD:
            return False
        self._upgrade(revision)
        return revision is None

    def _revision(self) -> str | None:
        conn = self.reader()
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise self._fail(exc, "reading its schema revision") from exc
            row = None
        except sqlite3.Error as exc:
            raise StoreError(f"database {self.path} is not an errkb database ({exc})") from exc
        if row is not None:
            return str(row[0])
        try:
            tables = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name <> "
                "'alembic_version'"
            ).fetchone()[0]
        except sqlite3.Error as exc:
            raise self._fail(exc, "reading its tables") from exc
        if tables:
            # Tables but no revision: migrating would fail half-way ("table already exists").
            raise StoreError(
                f"database {self.path} has tables but no schema revision (its alembic_version "
                "table is missing or empty): it is damaged or not an errkb database; "
                "use another --db"
            )
        return None

    def _upgrade(self, revision: str | None) -> None:
        from alembic import command
        from alembic.config import Config
        from alembic.script import ScriptDirectory
        from alembic.util import CommandError

        from errkb._resources import bundle_path

        cfg = Config()
        cfg.set_main_option("script_location", str(bundle_path("migrations")))
        script = ScriptDirectory.from_config(cfg)
        if revision is not None:
            try:
                known = script.get_revision(revision) is not None
            except CommandError:
                known = False
            if not known:
                raise SchemaVersionError(
                    f"{self.path}: database schema revision {revision!r} is newer than this "
                    f"errkb (which knows up to {SCHEMA_HEAD!r}); upgrade errkb or use another --db"
                )
        try:
            with self.engine().begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except StoreError:
            raise
        except Exception as exc:
            if _is_db_error(exc):
                raise self._fail(exc, "migrating its schema") from exc
            raise

    # ------------------------------------------------------------------ connections
    def reader(self) -> sqlite3.Connection:
        """The calling thread's read connection (standard library; cheap to open, never shared)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000)
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.Error as exc:
                raise self._fail(exc, "opening it") from exc
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[SqliteView]:
        """A read transaction: every query inside sees one committed state of the database."""
        conn = self.reader()
        try:
            conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self._fail(exc, "reading") from exc
        try:
            yield SqliteView(conn)
        except sqlite3.Error as exc:
            raise self._fail(exc, "reading") from exc
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")

    def engine(self) -> Engine:
        with self._engine_lock:
            if self._engine is None:
                from sqlalchemy import URL, create_engine, event
                from sqlalchemy.pool import NullPool

                # URL.create, not f"sqlite:///{path}": a file name holding "?" or "#" would be
                # parsed as a query and SQLAlchemy would open another file than the reader.
                url = URL.create("sqlite", database=str(self.path))
                engine = create_engine(url, poolclass=NullPool)
                pragmas = (*self.WRITE_PRAGMAS, f"PRAGMA busy_timeout = {self.busy_timeout_ms}")

                @event.listens_for(engine, "connect")
                def _on_connect(dbapi_conn: DBAPI, _record: object) -> None:
                    # Let us issue BEGIN ourselves (pysqlite's implicit BEGIN is DEFERRED).
                    dbapi_conn.isolation_level = None
                    cur = dbapi_conn.cursor()
                    for pragma in pragmas:
                        cur.execute(pragma)
                    cur.close()

                @event.listens_for(engine, "begin")
                def _on_begin(conn: Connection) -> None:
                    # IMMEDIATE takes the write lock up front: two writers never interleave
                    # and a reader never sees a half-applied unit of work.
                    conn.exec_driver_sql("BEGIN IMMEDIATE")

                self._engine = engine
            return self._engine

    @contextlib.contextmanager
    def write(self) -> Iterator[SqliteWriteTx]:
        """One write transaction (``BEGIN IMMEDIATE``): committed whole or not at all."""
        try:
            with gc_paused(), self.engine().begin() as conn:
                raw = conn.connection.dbapi_connection
                assert raw is not None  # noqa: S101 - an open connection has its driver's
                yield SqliteWriteTx(raw)
        except StoreError:
            raise
        except Exception as exc:
            if _is_db_error(exc):
                raise self._fail(exc, "writing") from exc
            raise

    def describe(self) -> str:
        return str(self.path)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        if self._engine is not None:
            self._engine.dispose()

    @contextlib.contextmanager
    def sync_lock(self) -> Iterator[Path]:
        from errkb.store.lock import sync_lock

        with sync_lock(self.path) as path:
            yield path

    # ------------------------------------------------------------------ reads
    def meta_value(self, key: str) -> str | None:
        """One meta key: what the explain path reads, without the sync's bulky state."""
        return self._read("reading", lambda v: v.meta_value(key))

    def raw_record(self, record_id: str) -> RecordJSON | None:
        return self._read("reading", lambda v: v.raw_record(record_id))

    def is_empty(self) -> bool:
        return self.counts_of("SELECT count(*) FROM dataset_versions") == 0

    def counts_of(self, sql: str) -> int:
        return self._read("reading", lambda v: int(v.conn.execute(sql).fetchone()[0]))

    def find_ids(self, key: str) -> list[str]:
        sql = "SELECT id FROM records WHERE id = ? OR slug = ? ORDER BY retired, repo, id"
        return self._read("reading", lambda v: [str(r[0]) for r in v.conn.execute(sql, (key, key))])

    def is_retired(self, record_id: str) -> bool:
        sql = "SELECT retired FROM records WHERE id = ?"
        row = self._read("reading", lambda v: v.conn.execute(sql, (record_id,)).fetchone())
        return bool(row and row[0])

    def live_records(
        self, *, repo: str | None = None, tag: str | None = None, error_class: str | None = None
    ) -> list[RecordJSON]:
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
        return self._read(
            "reading", lambda v: [json.loads(raw) for (raw,) in v.conn.execute(sql, params)]
        )

    def envelopes(
        self, *, include_retired: bool = False
    ) -> Iterator[tuple[RecordJSON, str | None]]:
        sql = "SELECT raw_json, dataset_version FROM records"
        if not include_retired:
            sql += " WHERE retired = 0"
        sql += " ORDER BY id"
        try:
            # A cursor of its own: export streams 150k records without holding them all.
            for raw, version in self.reader().execute(sql):
                yield json.loads(raw), version
        except sqlite3.Error as exc:
            raise self._fail(exc, "reading") from exc

    def counts(self) -> StoreCounts:
        from errkb.store.values import StoreCounts

        def run(v: SqliteView) -> StoreCounts:
            def one(sql: str) -> int:
                return int(v.conn.execute(sql).fetchone()[0])

            by_class = tuple(
                (str(c or "(none)"), int(n))
                for c, n in v.conn.execute(
                    "SELECT error_class, count(*) FROM records WHERE retired = 0 "
                    "GROUP BY error_class ORDER BY count(*) DESC, error_class LIMIT 10"
                )
            )
            return StoreCounts(
                records=one("SELECT count(*) FROM records WHERE retired = 0"),
                retired=one("SELECT count(*) FROM records WHERE retired = 1"),
                repos=one("SELECT count(DISTINCT repo) FROM records WHERE retired = 0"),
                versions=one("SELECT count(*) FROM dataset_versions"),
                dataset_version=v.meta_value("dataset_version"),
                by_class=by_class,
            )

        return self._read("reading", run)

    _VERSION_SQL = (
        "SELECT id, dataset_version, kind, source, full, partial, added, updated, unchanged, "
        "retired, rejected, started_at, finished_at, restores, hashes_json FROM dataset_versions"
    )

    def versions(self) -> list[VersionInfo]:
        sql = self._VERSION_SQL + " ORDER BY id"
        return self._read("reading", lambda v: [_version(r) for r in v.conn.execute(sql)])

    def latest_version(self) -> VersionInfo | None:
        sql = self._VERSION_SQL + " ORDER BY id DESC LIMIT 1"
        row = self._read("reading", lambda v: v.conn.execute(sql).fetchone())
        return _version(row) if row else None

    def resolve_version(self, key: str) -> int | None:
        """The version row id for a row id or a datasetVersion (its latest row), or None."""
        text = key.strip()
        arg: int | str
        if text.isdigit():
            sql, arg = "SELECT id FROM dataset_versions WHERE id = ?", int(text)
        else:
            sql, arg = "SELECT max(id) FROM dataset_versions WHERE dataset_version = ?", text
        row = self._read("reading", lambda v: v.conn.execute(sql, (arg,)).fetchone())
        return None if not row or row[0] is None else int(row[0])

    def record(self, record_id: str) -> StoredRecord | None:
        sql = (
            "SELECT id, raw_json, retired, content_hash, dataset_version FROM records WHERE id = ?"
        )
        row = self._read("reading", lambda v: v.conn.execute(sql, (record_id,)).fetchone())
        if row is None:
            return None
        from errkb.store.values import StoredRecord

        return StoredRecord(str(row[0]), json.loads(row[1]), bool(row[2]), str(row[3]), row[4])

    def record_changes(self, record_id: str) -> list[RecordChange]:
        sql = (
            "SELECT h.version_id, v.dataset_version, v.kind, v.finished_at, h.change, "
            "h.previous_json, h.previous_retired "
            "FROM record_history h JOIN dataset_versions v ON v.id = h.version_id "
            "WHERE h.record_id = ? ORDER BY h.version_id, h.id"
        )
        rows = self._read("reading", lambda v: v.conn.execute(sql, (record_id,)).fetchall())
        from errkb.store.values import record_changes_from

        return record_changes_from(rows)

    def inventory(self) -> Inventory:
        from errkb.store.values import inventory_from

        def run(v: SqliteView) -> Inventory:
            rows = v.conn.execute("SELECT id, repo, retired, content_hash FROM records")
            return inventory_from(rows)

        return self._read("reading", run)

    def state_at(self, version_id: int) -> list[Incoming]:
        """Every record as it was right after ``version_id``: live ones, and retired ones.

        A record's content right after V is the ``previous_json`` of its first history row
        after V, or, with none, its current content. Records added after V are left out.
        """
        from errkb.store.values import state_from

        def run(v: SqliteView) -> list[Incoming]:
            first_after = list(
                v.conn.execute(
                    "SELECT h.record_id, h.previous_json, h.previous_retired, "
                    "h.previous_dataset_version FROM record_history h JOIN ("
                    "  SELECT record_id, min(id) AS hid FROM record_history "
                    "  WHERE version_id > ? GROUP BY record_id"
                    ") f ON f.hid = h.id",
                    (version_id,),
                )
            )  # read before the next statement
            current = v.conn.execute("SELECT id, raw_json, retired, dataset_version FROM records")
            return state_from(first_after, current)

        return self._read("reading", run)

    def classify(self, incoming: Iterable[Incoming], *, full: bool, keep: Keep = NO_KEEP) -> Diff:
        """What applying ``incoming`` would do, by the same rules (``_classify_chunk``)."""
        from errkb.store.values import diff_from

        def run(v: SqliteView) -> Diff:
            classified = (
                (item.id, item.count)
                for batch in _batches(incoming)
                for item in _classify_chunk(v.conn, batch)
            )
            return diff_from(
                classified,
                lambda seen: _kept_ids(v.conn, keep, seen),
                (lambda spared: _to_retire(v.conn, spared)) if full else None,
            )

        with self.snapshot() as view:
            return run(view)

    # ------------------------------------------------------------------ writes
    def reindex(self) -> None:
        """Rebuild the match index in its own write transaction."""
        with self.write() as tx:
            tx.rebuild_index()
            tx.bump_state(None)


def _is_db_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) or isinstance(getattr(exc, "orig", None), sqlite3.Error)


def _version(row: Sequence[Any]) -> VersionInfo:
    from errkb.store.values import ApplyCounts, VersionInfo

    hashes = json.loads(row[14]) if row[14] else {}
    return VersionInfo(
        id=int(row[0]),
        dataset_version=row[1],
        kind=VersionKind(row[2]),
        source=str(row[3]),
        full=bool(row[4]),
        partial=bool(row[5]),
        counts=ApplyCounts(*(int(n) for n in row[6:11])),
        started_at=str(row[11]),
        finished_at=str(row[12]),
        restores=row[13],
        hashes=tuple(sorted((str(k), str(v)) for k, v in hashes.items())),
    )


def _batches(incoming: Iterable[Incoming]) -> Iterator[list[Incoming]]:
    batch: list[Incoming] = []
    for item in incoming:
        batch.append(item)
        if len(batch) >= _APPLY_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


class _Write(enum.Enum):
    """How one classified record is written."""

    INSERT = "insert"
    UPDATE = "update"  #: new content (and the retired flag it should have)
    FLAG = "flag"  #: same content, only the retired flag changes


def _plan(
    existing: tuple[str, bool] | None, chash: str, retired: bool
) -> tuple[_Write | None, ChangeKind | None, str]:
    """(how to write, history row, which count) for one record: ``classify`` plus retirement.

    ``retired`` asks for the record to end up retired with this content (a rollback to a
    version it was retired at): it counts as retired when it was live, as updated when only
    its content changes, and not at all when it is already retired as it was.
    """
    change = classify(existing, chash)
    was_live = existing is not None and not existing[1]
    if not retired:
        return {
            Change.ADDED: (_Write.INSERT, ChangeKind.ADDED, "added"),
            Change.UPDATED: (_Write.UPDATE, ChangeKind.UPDATED, "updated"),
            Change.RESTORED: (_Write.FLAG, ChangeKind.RESTORED, "updated"),
            Change.UNCHANGED: (None, None, "unchanged"),
        }[change]
    if change is Change.ADDED:
        return _Write.INSERT, ChangeKind.ADDED, "added"
    if change is Change.UPDATED:
        if was_live:
            return _Write.UPDATE, ChangeKind.RETIRED, "retired"
        return _Write.UPDATE, ChangeKind.UPDATED, "updated"
    if was_live:
        return _Write.FLAG, ChangeKind.RETIRED, "retired"
    return None, None, ""


class _Classified:
    """One incoming record of a chunk, decoded once, with what applying it does."""

    __slots__ = (
        "chash",
        "count",
        "dataset_version",
        "history",
        "id",
        "obj",
        "retired",
        "text",
        "write",
    )  # fmt: skip

    def __init__(self, item: Incoming, obj: RecordJSON, existing: tuple[str, bool] | None) -> None:
        # A spooled record's id is the spool's own string: the ids a sync keeps (``seen``)
        # are then held once, not once more per decoded record.
        self.id = item.packed_id if item.packed_id is not None else str(obj["id"])
        self.obj = obj
        self.text = item.data if isinstance(item.data, str) else None
        self.dataset_version = item.dataset_version
        self.chash = item.content_hash or rec.content_hash(obj)
        self.retired = item.retired
        self.write, self.history, self.count = _plan(existing, self.chash, item.retired)


def _classify_chunk(conn: DBAPI, batch: list[Incoming]) -> list[_Classified]:
    """Classify one chunk against the stored records (the one rule: ``store.classify``)."""
    # Decode packed records once for the chunk (the text doubles as the stored raw_json).
    by_id: dict[str, tuple[Incoming, RecordJSON]] = {}
    for item in batch:
        obj = item.obj
        by_id[item.packed_id if item.packed_id is not None else str(obj["id"])] = (item, obj)
    ids = sorted(by_id)
    existing: dict[str, tuple[str, bool]] = {}
    for chunk in _chunks(ids):
        sql = (
            "SELECT id, content_hash, retired FROM records WHERE id IN ("  # noqa: S608
            + _marks(len(chunk))
            + ")"
        )
        for rid, chash, retired in conn.execute(sql, tuple(chunk)):
            existing[str(rid)] = (str(chash), bool(retired))
    # Key order keeps B-tree inserts local.
    return [_Classified(*by_id[rid], existing.get(rid)) for rid in ids]


def _kept_ids(conn: DBAPI, keep: Keep, exclude: set[str]) -> list[str]:
    """Ids of the stored live records kept as they are (unchanged repositories, rejects).

    Only ids: the records stay in the database untouched, so nothing is loaded or re-hashed.
    """
    out: list[str] = []
    seen = set(exclude)
    for column, keys in (("repo", sorted(keep.repos)), ("id", sorted(keep.ids))):
        for chunk in _chunks(keys):
            # Only a fixed column name and "?" placeholders are interpolated.
            sql = f"SELECT id FROM records WHERE retired = 0 AND {column} IN ({_marks(len(chunk))})"  # noqa: S608
            for (rid,) in conn.execute(sql, tuple(chunk)):
                if rid not in seen:
                    seen.add(str(rid))
                    out.append(str(rid))
    return out


def _to_retire(conn: DBAPI, spare: set[str]) -> list[str]:
    """Live records a full unit of work retires: those not in ``spare``."""
    return [
        str(rid)
        for (rid,) in conn.execute("SELECT id FROM records WHERE retired = 0")
        if rid not in spare
    ]


_KEEP_ON_UPDATE = frozenset({"id", "added_in"})  #: a record's identity and when it first came
_INSERT_RECORD = (
    f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) "  # noqa: S608 - fixed names
    f"VALUES ({_marks(len(RECORD_COLUMNS))})"
)
_UPDATE_COLUMNS = tuple(c for c in RECORD_COLUMNS if c not in _KEEP_ON_UPDATE)
_UPDATE_RECORD = (
    "UPDATE records SET "  # noqa: S608 - fixed names
    + ", ".join(f"{c} = ?" for c in _UPDATE_COLUMNS)
    + " WHERE id = ?"
)
_CHILD_SQL = {
    f.name: (
        f"INSERT INTO {f.column} (record_id, position, {f.value_column}) VALUES (?, ?, ?)",  # noqa: S608
        f"DELETE FROM {f.column} WHERE record_id = ?",  # noqa: S608 - fixed names
    )
    for f in CHILD_FIELDS
}


_FIELD_NAMES = tuple(f.name for f in COLUMN_FIELDS)  #: JSON names, in column order
_UPDATE_POSITIONS = tuple(RECORD_COLUMNS.index(c) for c in _UPDATE_COLUMNS)
_ID_POSITION = RECORD_COLUMNS.index("id")


def _record_values(item: _Classified, vid: int) -> tuple[object, ...]:
    """The ``records`` row of one record, in ``RECORD_COLUMNS`` order (from the field table).

    A tuple built in one pass: at 500,000 records a dict per row, then a tuple from it, was
    a tenth of the apply time.
    """
    obj = item.obj
    extra = {k: obj[k] for k in rec.unknown_fields(obj)}
    book: dict[str, object] = {
        "extra_json": json.dumps(extra, ensure_ascii=False) if extra else None,
        "raw_json": item.text if item.text is not None else rec.verbatim_json(obj),
        "content_hash": item.chash,
        "dataset_version": item.dataset_version,
        "retired": item.retired,
        "added_in": vid,
        "changed_in": vid,
    }
    return (*map(obj.get, _FIELD_NAMES), *(book[c] for c in BOOK_COLUMNS))


def _update_values(values: tuple[object, ...]) -> tuple[object, ...]:
    """The parameters of ``_UPDATE_RECORD`` from a ``_record_values`` row: new values, then id."""
    return (*(values[i] for i in _UPDATE_POSITIONS), values[_ID_POSITION])


#: Records one apply must bring for the search index to be filled in bulk: the per-row insert
#: trigger is dropped for the transaction and one ``INSERT ... SELECT`` at its end indexes
#: them all (measured at 30,000 records: half the trigger's cost). Below it, a small sync keeps
#: the trigger rather than rewrite the schema.
BULK_SEARCH_MIN = 5_000
_SEARCH_TRIGGER = "search_records_insert"
#: The shape of migration 0004's insert trigger (our own SQL, not dataset content).
_trigger_shape = _lazy.pattern(
    r"\s*CREATE TRIGGER search_records_insert AFTER INSERT ON records BEGIN\s+"
    r"INSERT INTO search_docs \(record_id\) VALUES \(NEW\.id\);\s+"
    r"INSERT INTO search_fts \(rowid, ([^)]*)\)\s+"
    r"SELECT d\.key, (.*) FROM search_docs d WHERE d\.record_id = NEW\.id;\s+END\s*",
    re.DOTALL,
)


def bulk_search_sql(trigger_sql: str) -> str | None:
    """The insert trigger's full-text statement, set-based over search keys above ``?``.

    Derived from the trigger the database holds, so the index gets exactly the values the
    trigger would have given (and the update and delete triggers later hand back to remove
    them: a contentless FTS5 table needs those to match). None when the trigger is not of the
    expected shape: the caller then keeps it and indexes row by row.
    """
    shape = _trigger_shape().fullmatch(trigger_sql)
    if shape is None:
        return None
    values = re.sub(r"\bNEW\.", "r.", shape.group(2))
    if re.search(r"\bNEW\b", values):
        return None
    return (
        f"INSERT INTO search_fts (rowid, {shape.group(1)}) SELECT d.key, {values} "  # noqa: S608
        "FROM search_docs d JOIN records r ON r.id = d.record_id WHERE d.key > ? ORDER BY d.key"
    )


class _BulkSearch:
    """The search index filled once at the end of an apply (see ``BULK_SEARCH_MIN``)."""

    def __init__(self, raw: DBAPI, trigger_sql: str, fill_sql: str) -> None:
        self.raw, self.trigger_sql, self.fill_sql = raw, trigger_sql, fill_sql
        row = raw.execute("SELECT coalesce(max(key), 0) FROM search_docs").fetchone()
        self.after = int(row[0])
        # DDL is transactional in SQLite: a failure or a kill before COMMIT brings it back.
        raw.execute(f"DROP TRIGGER {_SEARCH_TRIGGER}")

    @classmethod
    def start(cls, raw: DBAPI, incoming: Iterable[Incoming]) -> _BulkSearch | None:
        if not isinstance(incoming, Sized) or len(incoming) < BULK_SEARCH_MIN:
            return None
        row = raw.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
            (_SEARCH_TRIGGER,),
        ).fetchone()
        fill = bulk_search_sql(str(row[0])) if row and row[0] else None
        return None if fill is None else cls(raw, str(row[0]), fill)

    def added(self, rids: Sequence[str]) -> None:
        """What the trigger's first statement did for each new record: a search key."""
        self.raw.executemany(
            "INSERT INTO search_docs (record_id) VALUES (?)", ((rid,) for rid in rids)
        )

    def finish(self) -> None:
        self.raw.execute(self.fill_sql, (self.after,))
        self.raw.execute(self.trigger_sql)


class SqliteWriteTx:
    """The write transaction's operations, on the driver connection SQLAlchemy opened."""

    def __init__(self, raw: DBAPI) -> None:
        self.raw = raw

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.raw.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.raw.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def version_count(self) -> int:
        return int(self.raw.execute("SELECT count(*) FROM dataset_versions").fetchone()[0])

    def bump_state(self, dataset_version: str | None) -> None:
        """Record that the knowledge base changed: readers compare ``state`` to reload."""
        row = self.raw.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
        self.set_meta("state", str(int(row[0]) + 1 if row else 1))
        if dataset_version is not None:
            self.set_meta("dataset_version", dataset_version)

    def rebuild_index(self) -> int:
        """Recompute the whole match index from the live records (in this transaction).

        At 500,000 records the index is two million rows: they are streamed to SQLite in key
        order (``index_rows``), and the secondary index on ``match_tokens`` is dropped first
        and created again after, one sort instead of two million random B-tree inserts. The
        DDL is part of this transaction, so a failure or a kill leaves the old index whole.
        """
        from errkb.match.index import index_rows

        raw = self.raw
        secondary = raw.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'match_tokens' AND sql IS NOT NULL"
        ).fetchall()
        for name, _sql in secondary:
            raw.execute(f'DROP INDEX "{name}"')
        raw.execute("DELETE FROM match_tokens")
        live = raw.execute("SELECT id, error_message FROM records WHERE retired = 0")
        written = 0

        def counted() -> Iterator[tuple[str, str, int]]:
            nonlocal written
            for row in index_rows(live):
                written += 1
                yield row

        raw.executemany(
            "INSERT INTO match_tokens (token, record_id, rank) VALUES (?, ?, ?)", counted()
        )
        for _name, sql in secondary:
            raw.execute(sql)
        raw.execute("DELETE FROM meta WHERE key = 'match_index'")
        return written

    def apply(
        self,
        incoming: Iterable[Incoming],
        *,
        kind: VersionKind,
        source: str,
        dataset_version: str | None,
        full: bool = False,
        partial: bool = False,
        rejected: int = 0,
        hashes: Mapping[str, str] | None = None,
        keep: Keep = NO_KEEP,
        restores: int | None = None,
    ) -> tuple[int, ApplyCounts]:
        """Upsert ``incoming`` and record the version row (see ``WriteTx.apply``).

        Work proceeds in chunks of ``_APPLY_CHUNK`` records, so memory stays bounded by the
        chunk, not by the size of the dataset. An id repeated in ``incoming`` is applied twice
        (the last content wins; the first counts as added or updated).
        """
        raw = self.raw
        started = now_iso()
        cur = raw.execute(
            "INSERT INTO dataset_versions (dataset_version, kind, source, partial, full, "
            "hashes_json, added, updated, unchanged, retired, rejected, started_at, finished_at, "
            "restores) VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 0, ?, ?, ?)",
            (
                dataset_version,
                VersionKind(kind).value,
                source,
                partial,
                full,
                json.dumps(dict(hashes)) if hashes else None,
                started,
                started,
                restores,
            ),
        )
        vid = int(cur.lastrowid)

        tally = {"added": 0, "updated": 0, "unchanged": 0, "retired": 0}
        seen: set[str] = set()
        bulk = _BulkSearch.start(raw, incoming)
        for batch in _batches(incoming):
            items = _classify_chunk(raw, batch)
            if bulk is not None and any(i.id in seen for i in items):
                # An id repeated across chunks is updated after being inserted here: the
                # update trigger needs its index entry, so index everything so far now and
                # go on row by row.
                bulk.finish()
                bulk = None
            self._apply_chunk(items, vid, tally, seen, bulk)
        if bulk is not None:
            bulk.finish()

        kept = _kept_ids(raw, keep, seen)
        if full:
            live = _to_retire(raw, seen.union(kept))
            self._copy_to_history(live, vid, ChangeKind.RETIRED)
            self._mark_retired(live, vid, retired=True)
            tally["retired"] += len(live)

        from errkb.store.values import ApplyCounts

        counts = ApplyCounts(
            added=tally["added"],
            updated=tally["updated"],
            unchanged=tally["unchanged"] + len(kept),
            retired=tally["retired"],
            rejected=rejected,
        )
        raw.execute(
            "UPDATE dataset_versions SET added = ?, updated = ?, unchanged = ?, retired = ?, "
            "rejected = ?, finished_at = ? WHERE id = ?",
            (
                counts.added,
                counts.updated,
                counts.unchanged,
                counts.retired,
                rejected,
                now_iso(),
                vid,
            ),
        )
        if counts.added or counts.updated or counts.retired:
            self.rebuild_index()
        self.bump_state(dataset_version)
        return vid, counts

    def _apply_chunk(
        self,
        items: list[_Classified],
        vid: int,
        tally: dict[str, int],
        seen: set[str],
        bulk: _BulkSearch | None = None,
    ) -> None:
        """Write one classified chunk (rows are built for this chunk only)."""
        raw = self.raw
        seen.update(item.id for item in items)
        for item in items:
            if item.count:
                tally[item.count] += 1
        for kind in ChangeKind:
            if kind is not ChangeKind.ADDED:
                self._copy_to_history([i.id for i in items if i.history is kind], vid, kind)
        new = [i for i in items if i.write is _Write.INSERT]
        changed = [i for i in items if i.write is _Write.UPDATE]
        changed_ids = [i.id for i in changed]
        if new:
            raw.executemany(_INSERT_RECORD, (_record_values(i, vid) for i in new))
            if bulk is not None:
                bulk.added([i.id for i in new])
            raw.executemany(
                "INSERT INTO record_history (record_id, version_id, change) VALUES (?, ?, ?)",
                [(i.id, vid, ChangeKind.ADDED.value) for i in new],
            )
        if changed:
            raw.executemany(
                _UPDATE_RECORD, (_update_values(_record_values(i, vid)) for i in changed)
            )
            for _insert, delete in _CHILD_SQL.values():
                raw.executemany(delete, [(rid,) for rid in changed_ids])
        for flag in (False, True):
            ids = [i.id for i in items if i.write is _Write.FLAG and i.retired is flag]
            self._mark_retired(ids, vid, retired=flag)
        children = [*new, *changed]
        for name, (insert, _delete) in _CHILD_SQL.items():
            raw.executemany(
                insert,
                [(i.id, n, text) for i in children for n, text in enumerate(i.obj[name])],
            )

    def _copy_to_history(self, rids: Sequence[str], vid: int, change: ChangeKind) -> None:
        """Copy the current content of ``rids`` to history, SQL-side (no record text in Python)."""
        for chunk in _chunks(list(rids)):
            # Only "?" placeholders are interpolated; values are bound parameters.
            sql = (
                "INSERT INTO record_history (record_id, version_id, change, previous_json, "  # noqa: S608
                "previous_retired, previous_dataset_version) SELECT id, ?, ?, raw_json, "
                "retired, dataset_version FROM records WHERE id IN (" + _marks(len(chunk)) + ")"
            )
            self.raw.execute(sql, (vid, change.value, *chunk))

    def _mark_retired(self, rids: Sequence[str], vid: int, *, retired: bool) -> None:
        """Set or clear the retired flag of ``rids``, as changed by version ``vid``."""
        for chunk in _chunks(rids):
            self.raw.execute(
                "UPDATE records SET retired = ?, changed_in = ? WHERE id IN ("  # noqa: S608
                + _marks(len(chunk))
                + ")",
                (int(retired), vid, *chunk),
            )
