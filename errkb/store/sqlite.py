"""The SQLite backend of the store: opening, migrating, reading, and applying in one transaction.

What differs from PostgreSQL only (the unit of work is ``errkb.store.engine``'s): connections,
pragmas, locking, ``IN (?, ...)`` chunks, error translation, FTS5's bulk fill. Writes go
through a SQLAlchemy engine in ONE ``BEGIN IMMEDIATE`` transaction per unit of work (bulk SQL
on its driver connection); reads use the standard library's ``sqlite3``, one connection per
thread, so explain never imports SQLAlchemy; WAL lets readers run during a write. The schema is
Alembic's alone; a revision this errkb does not know is refused. Every driver error becomes a
``StoreError`` naming the database (``translate``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from errkb import _lazy
from errkb.errors import (
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
)
from errkb.records.fields import CHILD_FIELDS
from errkb.store import engine
from errkb.store.engine import StoreEngine, UnitOfWork, envelopes_query, raw_record_texts
from errkb.store.interface import (
    RELATED_COMMON,
    SCHEMA_HEAD,
    RecordJSON,
    gc_paused,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from errkb.store.search import Candidate as SearchCandidate
    from errkb.store.search import Filters as SearchFilters
    from errkb.store.values import Incoming, Inventory

#: How long a writer waits for another writer's lock before giving up (ms). Tests shorten it.
BUSY_TIMEOUT_MS = 10_000
BUSY_TIMEOUT_ENV = "ERRKB_BUSY_TIMEOUT_MS"
_CHUNK = 500  # ids per IN (...) query: well under SQLite's parameter limit
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


def _padded(ids: Sequence[str]) -> list[str]:
    """``ids``, the last repeated so the last ``IN`` chunk holds a power of two (few statements)."""
    out = list(ids)
    rest = len(out) % _CHUNK
    if rest:
        size = min(1 << (rest - 1).bit_length(), _CHUNK)
        out += [out[-1]] * (size - rest)
    return out


def _marks(n: int) -> str:
    return ",".join("?" * n)


class SqliteSql:
    """The engine's ``Sql`` on one SQLite connection: ``?`` placeholders, ids in chunks."""

    collate = ""  #: SQLite sorts text by its bytes already (BINARY)

    def __init__(self, conn: DBAPI) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Sequence[object] = ()) -> Iterable[Sequence[Any]]:
        cursor: Iterable[Sequence[Any]] = self.conn.execute(sql, params)
        return cursor

    def one(self, sql: str, params: Sequence[object] = ()) -> Sequence[Any] | None:
        row: Sequence[Any] | None = self.conn.execute(sql, params).fetchone()
        return row

    def in_ids(
        self, sql: str, ids: Sequence[str], params: Sequence[object] = ()
    ) -> Iterator[Sequence[Any]]:
        for chunk in _chunks(_padded(ids)):
            # Only "?" placeholders are interpolated; values are bound parameters.
            yield from self.conn.execute(
                sql.replace("$IDS", f"IN ({_marks(len(chunk))})"), (*params, *chunk)
            )


class SqliteView(SqliteSql, engine.EngineReads):
    """Reads on one connection (inside ``snapshot``, one committed state)."""

    def meta_value(self, key: str) -> str | None:
        found = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def raw_records(self, record_ids: Sequence[str]) -> dict[str, RecordJSON]:
        return {rid: json.loads(text) for rid, text in raw_record_texts(self, record_ids).items()}

    def candidate_ids(self, tokens: Sequence[str]) -> list[str]:
        if not tokens:
            return []
        marks = _marks(len(tokens))
        # The rarest word selects through the index; the other indexed words must be in the text
        # too.
        sql = (
            "SELECT t0.record_id FROM match_tokens t0 WHERE t0.rank = 0 AND t0.token IN ("  # noqa: S608
            + marks
            + ") AND NOT EXISTS (SELECT 1 FROM match_tokens t WHERE t.record_id = t0.record_id "
            "AND t.token NOT IN (" + marks + "))"
        )
        return [str(r[0]) for r in self.conn.execute(sql, (*tokens, *tokens))]

    def related_ids(
        self, tokens: Sequence[str], limit: int, *, common: int = RELATED_COMMON
    ) -> list[str]:
        if not tokens:
            return []
        # A common token's rows are counted only up to ``common + 1``: an index walk bounded
        # whatever the dataset holds.
        sql = (
            "WITH t(token) AS (VALUES "  # noqa: S608
            + ",".join(["(?)"] * len(tokens))
            + ") SELECT record_id FROM match_tokens WHERE token IN (SELECT token FROM t WHERE "
            "(SELECT count(*) FROM (SELECT 1 FROM match_tokens m WHERE m.token = t.token "
            "LIMIT ?)) <= ?) GROUP BY record_id ORDER BY count(*) DESC, record_id LIMIT ?"
        )
        rows = self.conn.execute(sql, (*tokens, common + 1, common, limit))
        return [str(r[0]) for r in rows]

    def token_rows(self) -> Iterator[tuple[str, str, int]]:
        # Streamed: at 500,000 records the index is two million rows.
        rows = self.conn.execute(
            "SELECT record_id, token, rank FROM match_tokens ORDER BY record_id, rank"
        )
        for rid, token, rank in rows:
            yield str(rid), str(token), int(rank)

    def search(
        self, words: Sequence[str], filters: SearchFilters, limit: int, max_terms: int
    ) -> list[SearchCandidate]:
        from errkb.store import search as fts

        return fts.candidates(self.conn, fts.plan(self.conn, words, max_terms), filters, limit)


class SqliteStore(StoreEngine):
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
        self._read_only: bool | None = None

    def _fail(self, exc: BaseException, action: str) -> StoreError:
        return translate(exc, self.path, action, self.busy_timeout_ms)

    def _read(self, action: str, fn: Callable[[SqliteView], _T]) -> _T:
        try:
            return fn(SqliteView(self.reader()))
        except sqlite3.Error as exc:
            raise self._fail(exc, action) from exc

    def inventory(self) -> Inventory:
        """``StoreEngine.inventory`` from one row per repository (``group_concat``)."""
        fast = self._read("reading", _grouped_inventory)
        return fast if fast is not None else super().inventory()

    def ensure_schema(self) -> bool:
        """Bring the schema to head; return True when the database was just created."""
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"database {self.path} is not a regular file; give a file path")
        if not self.path.parent.is_dir():  # a read-only file system refuses even exist_ok
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot create its directory: {exc}") from exc
        revision = self._revision()
        if revision == SCHEMA_HEAD:
            return False
        if self.read_only:
            raise StoreReadOnlyError(
                f"database {self.path} is read-only and at schema revision {revision!r}; this "
                f"errkb needs {SCHEMA_HEAD!r}: open it once where it can be written, to migrate"
            )
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
        engine.upgrade_schema(
            str(self.path), revision, self.engine(), is_db_error=_is_db_error, fail=self._fail
        )

    @property
    def read_only(self) -> bool:
        """True when this process cannot write the database file, its directory or disk."""
        if self._read_only is None:
            path = self.path
            self._read_only = path.is_file() and not (
                os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
            )
        return self._read_only

    def _read_only_uri(self) -> str:
        """How a read-only database is opened: ``mode=ro``, and ``immutable=1`` when safe."""
        uri = "file:" + urllib.parse.quote(os.fspath(self.path.resolve())) + "?mode=ro"
        wal = self.path.with_name(self.path.name + "-wal")
        wal_empty = not wal.exists() or wal.stat().st_size == 0
        if wal_empty and not os.access(self.path.parent, os.W_OK):
            uri += "&immutable=1"
        return uri

    def _assert_writable(self, action: str) -> None:
        if self.read_only:
            raise StoreReadOnlyError(
                f"database {self.path} is read-only (its file, directory or file system "
                f"cannot be written): cannot {action}"
            )

    def reader(self) -> sqlite3.Connection:
        """The thread's read connection, reopened when ``path`` is another file (a fresh build)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.in_transaction and _inode(self.path) != self._local.ino:
            conn.close()
            conn = self._local.conn = None
        if conn is None:
            self._local.ino = _inode(self.path)
            try:
                if self.read_only:
                    conn = sqlite3.connect(self._read_only_uri(), uri=True)
                else:
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

                # URL.create, not an f-string: a "?" or "#" in a file name would open another file.
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
                    # IMMEDIATE takes the write lock up front: writers never interleave.
                    conn.exec_driver_sql("BEGIN IMMEDIATE")

                self._engine = engine
            return self._engine

    @contextlib.contextmanager
    def write(self) -> Iterator[UnitOfWork]:
        """One write transaction (``BEGIN IMMEDIATE``): committed whole or not at all."""
        self._assert_writable("write to it")
        try:
            with gc_paused(), self.engine().begin() as conn:
                raw = conn.connection.dbapi_connection
                assert raw is not None  # noqa: S101 - an open connection has its driver's
                yield UnitOfWork(SqliteWriteSql(raw))
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

    def fresh_build(
        self, records: int, *, changed: int | None = None
    ) -> AbstractContextManager[UnitOfWork] | None:
        """A unit of work into a new file renamed over this one, when that pays; else None.

        It pays for at least ``FRESH_BUILD_MIN`` records into an empty database, or when ``changed``
        is at least ``FRESH_CHANGED_SHARE`` of them and of the rows stored, or None (``--full``).
        ``<db>.new`` is written with the journal and foreign-key checks off, the old file attached
        read-only: what stays is copied first (``_CopyUnchanged``), the rest classified against it
        and written once; then WAL, synced, renamed into place (``_swap``). A kill before the rename
        leaves the old file as it was; the next sync removes a stale ``<db>.new``. Readers switch at
        their next read (``reader``).
        """
        if records < FRESH_BUILD_MIN or self.read_only:
            return None
        if changed is not None and not self.is_empty():
            stored = self._read("reading", lambda v: v.one("SELECT count(*) FROM records"))
            if changed < max(records, int(stored[0]) if stored else 0) * FRESH_CHANGED_SHARE:
                return None
        return self._fresh_build()

    @contextlib.contextmanager
    def _fresh_build(self) -> Iterator[UnitOfWork]:
        new = self.path.with_name(self.path.name + ".new")
        _remove(new)
        builder = SqliteStore(new)
        try:
            builder.ensure_schema()
            builder.close()
            conn = sqlite3.connect(new, isolation_level=None)
            try:
                for pragma in _BUILD_PRAGMAS:
                    conn.execute(pragma)
                conn.execute("ATTACH DATABASE ? AS old", (os.fspath(self.path),))
                conn.execute("BEGIN")
                rebuild = _CopyUnchanged(conn)
                yield UnitOfWork(SqliteWriteSql(conn), rebuild)
                rebuild.rows_written()  # whatever the unit of work did: never a file without them
                conn.execute("COMMIT")
                conn.execute("DETACH DATABASE old")
                conn.execute("PRAGMA journal_mode = WAL")  # as every write connection sets it
            except sqlite3.Error as exc:
                raise self._fail(exc, "building its new file") from exc
            finally:
                conn.close()
            _fsync(new)
            self._swap(new)
        finally:
            builder.close()
            _remove(new)

    def _swap(self, new: Path) -> None:
        """Rename ``new`` over the database, the old ``-wal`` emptied and removed first."""
        self.close()
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000)
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise self._fail(exc, "replacing it with the new build") from exc
        if busy and busy[0]:
            raise StoreLockedError(
                f"database {self.path}: a reader held its log while the fresh build was put "
                "in place; nothing was changed, try again"
            )
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                self.path.with_name(self.path.name + suffix).unlink()
        os.replace(new, self.path)
        _fsync(self.path.parent)
        self._read_only = None

    @contextlib.contextmanager
    def sync_lock(self) -> Iterator[Path]:
        from errkb.store.lock import sync_lock

        self._assert_writable("sync or roll back")
        with sync_lock(self.path) as path:
            # Held: no build is under way, so a ``<db>.new`` is a killed build's leftover.
            _remove(self.path.with_name(self.path.name + ".new"))
            yield path

    def envelopes(
        self, *, include_retired: bool = False
    ) -> Iterator[tuple[RecordJSON, str | None]]:
        sql = envelopes_query(include_retired=include_retired, collate="")
        try:
            # A cursor of its own: export streams 150k records without holding them all.
            for raw, version in self.reader().execute(sql):
                yield json.loads(raw), version
        except sqlite3.Error as exc:
            raise self._fail(exc, "reading") from exc


#: Records an empty database must receive for a sync to build a fresh file instead.
FRESH_BUILD_MIN = 5_000


#: ... or when at least this share of them bring new content.
FRESH_CHANGED_SHARE = 0.9
#: The fresh build's connection to ``<db>.new``: no journal, no foreign-key checks.
_BUILD_PRAGMAS = (
    "PRAGMA journal_mode = OFF",
    "PRAGMA synchronous = OFF",
    "PRAGMA foreign_keys = OFF",
    "PRAGMA cache_size = -65536",
)


class _CopyUnchanged:
    """A fresh build's ``engine.Rebuild``: what stays is copied from the old file, ``old``.

    Versions, history, meta, and every record no incoming record changes, with its child, spec
    and search rows; not the match index (the apply rebuilds it).
    """

    source = "old"

    def __init__(self, raw: DBAPI) -> None:
        self.raw = raw
        self._indexes: list[str] = []  #: the secondary indexes dropped until ``rows_written``

    def _drop_indexes(self) -> None:
        # Secondary indexes are dropped for the bulk insert and made again by ``rows_written``.
        rows = self.raw.execute(
            "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            # A unique index decides what INSERT OR REPLACE replaces: never dropped.
            "AND sql NOT LIKE 'CREATE UNIQUE %' "
            "AND tbl_name IN ('records', 'record_history', 'record_tags', 'record_solutions', "
            "'record_prevention_tips', 'pattern_specs') ORDER BY rowid"
        ).fetchall()
        for name, sql in rows:
            self.raw.execute(f'DROP INDEX main."{name}"')
            self._indexes.append(str(sql))

    def rows_written(self) -> None:
        """Build the secondary indexes ``copy`` dropped (once; again is a no-op)."""
        indexes, self._indexes = self._indexes, []
        for sql in indexes:
            self.raw.execute(sql)

    def _columns(self, table: str) -> str:
        names = [str(r[1]) for r in self.raw.execute(f"PRAGMA main.table_info({table})")]
        return ", ".join(names)

    def copy(self, incoming: Iterable[tuple[str, str]]) -> None:
        raw = self.raw
        raw.execute(
            "CREATE TEMP TABLE incoming_hashes (id TEXT PRIMARY KEY, content_hash TEXT NOT NULL)"
            " WITHOUT ROWID"
        )
        raw.executemany("INSERT OR REPLACE INTO temp.incoming_hashes VALUES (?, ?)", incoming)
        self._drop_indexes()
        # Only fixed table and column names are interpolated below.
        for table in ("dataset_versions", "record_history", "meta"):
            cols = self._columns(table)
            raw.execute(
                f"INSERT OR REPLACE INTO main.{table} ({cols}) SELECT {cols} FROM old.{table}"  # noqa: S608
            )
        (trigger,) = raw.execute(
            "SELECT sql FROM main.sqlite_master WHERE type = 'trigger' AND name = ?",
            (_SEARCH_TRIGGER,),
        ).fetchone()
        fill = bulk_search_sql(str(trigger))
        if fill is not None:
            raw.execute(f"DROP TRIGGER main.{_SEARCH_TRIGGER}")
        cols = self._columns("records")
        raw.execute(
            f"INSERT INTO main.records ({cols}) SELECT {cols} FROM old.records r "  # noqa: S608
            "WHERE NOT EXISTS (SELECT 1 FROM temp.incoming_hashes i WHERE i.id = r.id "
            "AND i.content_hash <> r.content_hash) ORDER BY r.id"
        )
        for table in (*(f.column for f in CHILD_FIELDS), "pattern_specs"):
            cols = self._columns(table)
            raw.execute(
                f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM old.{table} "  # noqa: S608
                "WHERE record_id IN (SELECT id FROM main.records) ORDER BY record_id"
            )
        if fill is not None:
            raw.execute("INSERT INTO main.search_docs (record_id) SELECT id FROM main.records")
            raw.execute(fill, (0,))
            raw.execute(str(trigger))
        raw.execute("DROP TABLE temp.incoming_hashes")


#: ``SqliteStore.inventory``'s query: per repository, its (id, hash) pairs and live ids.
_GROUPED_INVENTORY = (
    "SELECT repo, count(*), sum(NOT retired), group_concat(id || ' ' || content_hash, ' '), "
    "group_concat(CASE WHEN retired THEN NULL ELSE id END, ' ') FROM records GROUP BY repo"
)


def _grouped_inventory(view: SqliteView) -> Inventory | None:
    """The inventory from ``_GROUPED_INVENTORY``; None if a group does not split as counted."""
    from errkb.store.values import Inventory

    live: dict[str, frozenset[str]] = {}
    hashes: dict[str, str] = {}
    for repo, total, alive, pairs, ids in view.rows(_GROUPED_INVENTORY):
        parts = str(pairs).split(" ")
        if len(parts) != 2 * int(total):
            return None
        hashes.update(zip(parts[::2], parts[1::2], strict=True))
        if alive:
            members = str(ids).split(" ")
            if len(members) != int(alive):
                return None
            live[str(repo)] = frozenset(members)
    return Inventory(live, hashes)


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(new: Path) -> None:
    """Remove a (stale) build file and its journal files."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            new.with_name(new.name + suffix).unlink()


def _is_db_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) or isinstance(getattr(exc, "orig", None), sqlite3.Error)


#: Records one apply must bring for the search index to be filled in bulk at its end.
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

    Derived from the trigger itself, so the index gets exactly its values; None when the trigger
    is not of the expected shape (then rows are indexed one by one).
    """
    shape = _trigger_shape().fullmatch(trigger_sql)
    if shape is None:
        return None
    values = re.sub(r"\bNEW\.", "r.", shape.group(2))
    if re.search(r"\bNEW\b", values):
        return None
    values = _json_each().sub(_from_child_table, values)
    return (
        f"INSERT INTO search_fts (rowid, {shape.group(1)}) SELECT d.key, {values} "  # noqa: S608
        "FROM search_docs d JOIN records r ON r.id = d.record_id WHERE d.key > ? ORDER BY d.key"
    )


#: The trigger's list values, read from the child tables just written (the same strings).
_json_each = _lazy.pattern(
    r"\(SELECT group_concat\(value, ' '\) FROM json_each\(r\.raw_json, '\$\.(\w+)'\)\)"
)


def _from_child_table(m: re.Match[str]) -> str:
    field = next((f for f in CHILD_FIELDS if f.name == m.group(1)), None)
    if field is None:
        return m.group(0)
    table, column = field.column, field.value_column
    return (
        f"(SELECT group_concat({column}, ' ') FROM (SELECT {column} FROM {table} "  # noqa: S608
        "WHERE record_id = r.id ORDER BY position))"
    )


class _MergeAfter:
    """The full-text index's merging held off until the apply's end, then one bounded ``merge``."""

    def __init__(self, raw: DBAPI) -> None:
        self.raw = raw
        row = raw.execute("SELECT v FROM search_fts_config WHERE k = 'automerge'").fetchone()
        self.automerge = int(row[0]) if row is not None else _FTS5_AUTOMERGE
        raw.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', 0)")

    def added(self, rids: Sequence[str]) -> None:
        """Nothing: the insert trigger gives each new record its search key."""

    def finish(self) -> None:
        self.raw.execute(
            "INSERT INTO search_fts (search_fts, rank) VALUES ('merge', ?)", (MERGE_PAGES,)
        )
        self._restore()

    def _restore(self) -> None:
        self.raw.execute(
            "INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', ?)", (self.automerge,)
        )


#: Pages of merge work at the end of an apply at most (``_MergeAfter``): about 2 MB.
MERGE_PAGES = 500
#: FTS5's own ``automerge`` where the table's configuration names none.
_FTS5_AUTOMERGE = 4


class _BulkSearch(_MergeAfter):
    """The search index filled once at the end of an apply (``BULK_SEARCH_MIN``)."""

    def __init__(self, raw: DBAPI, trigger_sql: str, fill_sql: str) -> None:
        super().__init__(raw)
        self.trigger_sql, self.fill_sql = trigger_sql, fill_sql
        row = raw.execute("SELECT coalesce(max(key), 0) FROM search_docs").fetchone()
        self.after = int(row[0])
        # DDL is transactional in SQLite: a failure or a kill before COMMIT brings it back.
        raw.execute(f"DROP TRIGGER {_SEARCH_TRIGGER}")

    @classmethod
    def start(cls, raw: DBAPI, incoming: Iterable[Incoming]) -> _MergeAfter | None:
        if (
            raw.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_fts_config'"
            ).fetchone()
            is None
        ):
            return None  # a schema without the full-text index (before migration 0004)
        if not isinstance(incoming, Sized) or len(incoming) < BULK_SEARCH_MIN:
            return _MergeAfter(raw)
        row = raw.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
            (_SEARCH_TRIGGER,),
        ).fetchone()
        fill = bulk_search_sql(str(row[0])) if row and row[0] else None
        return _MergeAfter(raw) if fill is None else cls(raw, str(row[0]), fill)

    def added(self, rids: Sequence[str]) -> None:
        """What the trigger's first statement did for each new record: a search key."""
        self.raw.executemany(
            "INSERT INTO search_docs (record_id) VALUES (?)", ((rid,) for rid in rids)
        )

    def finish(self) -> None:
        # The setting back first: the fill merges as FTS5 does by default (fewer segments).
        self._restore()
        self.raw.execute(self.fill_sql, (self.after,))
        self.raw.execute(self.trigger_sql)


class SqliteWriteSql(SqliteSql):
    """The engine's ``WriteSql``: the write transaction's driver connection (SQLAlchemy's)."""

    def execute(self, sql: str, params: Sequence[object] = ()) -> None:
        self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        self.conn.executemany(sql, rows)

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[object]]
    ) -> None:
        # Only fixed table and column names are interpolated.
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({_marks(len(columns))})"  # noqa: S608
        self.conn.executemany(sql, rows)

    def bulk_search(self, incoming: Iterable[Incoming]) -> _MergeAfter | None:
        return _BulkSearch.start(self.conn, incoming)

    def replace_index(self, rows: Iterable[tuple[str, str, int]]) -> None:
        """Rewrite the match index in this transaction (its B-tree dropped and made again)."""
        raw = self.conn
        secondary = raw.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'match_tokens' AND sql IS NOT NULL"
        ).fetchall()
        for name, _sql in secondary:
            raw.execute(f'DROP INDEX "{name}"')
        raw.execute("DELETE FROM match_tokens")
        raw.executemany("INSERT INTO match_tokens (token, record_id, rank) VALUES (?, ?, ?)", rows)
        for _name, sql in secondary:
            raw.execute(sql)

    def fill_words(self) -> None:
        """Write ``match_words`` in key order (a sort, then appends to its B-tree)."""
        self.conn.execute("DELETE FROM match_words")
        self.conn.execute(
            "INSERT INTO match_words (word, record_id) SELECT DISTINCT j.value, s.record_id "
            "FROM pattern_specs s JOIN records r ON r.id = s.record_id, json_each(s.words) j "
            "WHERE r.retired = FALSE ORDER BY 1, 2"
        )
