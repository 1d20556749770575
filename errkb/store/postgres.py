"""The PostgreSQL backend of the store: one shared knowledge base, one sync job, many readers.

A ``postgresql://`` URL (``errkb[postgres]``). Each read and ``snapshot`` is one ``REPEATABLE
READ READ ONLY`` transaction from a pool (a dropped connection retried once, never inside a
snapshot); each write one transaction under an advisory lock, rows by ``COPY``. Lock keys come
from the database and schema, so knowledge bases can share a server. Every psycopg error
becomes a ``StoreError`` (``translate``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from errkb.errors import (
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
    SyncLockedError,
)
from errkb.store import engine
from errkb.store.engine import StoreEngine, UnitOfWork, envelopes_query, raw_record_texts
from errkb.store.interface import (
    RELATED_COMMON,
    SCHEMA_HEAD,
    RecordJSON,
    gc_paused,
)
from errkb.store.sqlite import busy_timeout_ms

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool
    from sqlalchemy.engine import Engine

    from errkb.store.search import Candidate as SearchCandidate
    from errkb.store.search import Filters as SearchFilters
    from errkb.store.values import Incoming

#: Largest number of pooled connections (readers and writers of one process).
POOL_MAX = 20
POOL_MAX_ENV = "ERRKB_PG_POOL_MAX"
INSTALL_HINT = "install the PostgreSQL extra: pip install 'errkb[postgres]'"
_T = TypeVar("_T")

# Transaction-level advisory locks, keyed by database and schema (several knowledge bases may
# share a server). hashtextextended is PostgreSQL's own 64-bit string hash (11+).
_KEY = "hashtextextended(%s || current_database() || '.' || current_schema(), 0)"
_WRITE_LOCK = f"SELECT pg_advisory_xact_lock({_KEY})"
_SYNC_LOCK = f"SELECT pg_try_advisory_xact_lock({_KEY})"


def conninfo(url: str) -> str:
    """The libpq connection URI for an errkb URL (the SQLAlchemy driver suffix dropped)."""
    _scheme, _, rest = url.partition("://")
    return "postgresql://" + rest


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def translate(exc: BaseException, name: str, action: str, timeout_ms: int) -> StoreError:
    """One clear line for a PostgreSQL error: what happened to which database, doing what."""
    import psycopg
    from psycopg import errors as pg
    from psycopg_pool import PoolTimeout

    inner = getattr(exc, "orig", None)  # SQLAlchemy wraps the driver's error
    err = inner if isinstance(inner, psycopg.Error) else exc
    text = _first_line(err)
    if isinstance(err, PoolTimeout):
        return StoreLockedError(
            f"database {name}: no pooled connection came free while {action} ({text}); "
            f"raise ${POOL_MAX_ENV} or the server's max_connections"
        )
    if isinstance(err, pg.LockNotAvailable):
        return StoreLockedError(
            f"database {name} is locked by another writer (waited {timeout_ms} ms while "
            f"{action}); try again later, or raise $ERRKB_BUSY_TIMEOUT_MS"
        )
    if isinstance(err, pg.ReadOnlySqlTransaction | pg.InsufficientPrivilege):
        return StoreReadOnlyError(
            f"database {name} cannot be written by this user ({action}): {text}"
        )
    if isinstance(err, pg.DiskFull):
        return StoreError(f"database {name}: disk full while {action}; nothing was changed")
    if isinstance(err, pg.UndefinedTable | pg.UndefinedColumn):
        return StoreError(
            f"database {name} is damaged: {text}; restore it from a backup or use another --db"
        )
    if isinstance(err, psycopg.OperationalError):
        return StoreError(f"database {name}: connection failed or was lost while {action}: {text}")
    return StoreError(f"database {name}: {action} failed: {text}")


def _is_db_error(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error) or isinstance(getattr(exc, "orig", None), psycopg.Error)


def _local_dir(url: str) -> Path:
    """Where a server database's local files live (sync downloads, reject reports)."""
    from platformdirs import user_data_dir

    digest = hashlib.sha256(conninfo(url).encode()).hexdigest()[:16]
    return Path(user_data_dir("errkb", appauthor=False)) / "postgres" / digest


#: Record JSON texts kept per state of the knowledge base (see ``RecordCache``).
RECORD_CACHE_SIZE = 8192
#: One statement opens every read: the transaction and the whole meta table in one round trip.
_OPEN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT key, value FROM meta"
# COMMIT, not ROLLBACK, ends a read: a ROLLBACK drops psycopg's prepared statements.
_CLOSE = "COMMIT"
#: Opening a read of a database that may have no schema yet (the revision check).
_OPEN_BARE = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class RecordCache:
    """Record JSON texts of one state of the knowledge base, shared by threads, bounded (LRU).

    A write that changes a record bumps ``state``, so a text read at state S holds for all of S.
    """

    def __init__(self, size: int = RECORD_CACHE_SIZE) -> None:
        self._lock = threading.Lock()
        self._size = size
        self._state: str | None = None
        self._texts: OrderedDict[str, str | None] = OrderedDict()

    def get(self, state: str, record_id: str) -> tuple[bool, str | None]:
        """(True, text or None when no such record) if known for ``state``, else (False, None)."""
        with self._lock:
            if state != self._state or record_id not in self._texts:
                return False, None
            self._texts.move_to_end(record_id)
            return True, self._texts[record_id]

    def put(self, state: str, record_id: str, text: str | None) -> None:
        with self._lock:
            if state != self._state:
                self._state = state
                self._texts.clear()
            self._texts[record_id] = text
            self._texts.move_to_end(record_id)
            while len(self._texts) > self._size:
                self._texts.popitem(last=False)


class Closer:
    """Ends read transactions off the reader's path (``COMMIT``, then back to the pool)."""

    BACKLOG = 2

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[tuple[psycopg.Connection[Any], ConnectionPool[Any]]] = []
        self._thread: threading.Thread | None = None
        self._busy = 0  # connections handed over and not yet back in the pool
        self._stopping = False

    def end(self, conn: psycopg.Connection[Any], pool: ConnectionPool[Any]) -> bool:
        """Hand ``conn`` over to be committed and returned; False if the caller must do it."""
        with self._cond:
            if self._stopping or self._busy >= self.BACKLOG:
                return False
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="errkb-pg-close", daemon=True
                )
                self._thread.start()
            self._busy += 1
            self._queue.append((conn, pool))
            self._cond.notify_all()
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return  # stopping, and nothing left to end
                conn, pool = self._queue.pop(0)
            try:
                with contextlib.suppress(Exception):  # a dropped connection: the pool discards it
                    conn.execute(_CLOSE)
            finally:
                with contextlib.suppress(Exception):
                    pool.putconn(conn)
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def stop(self, timeout: float = 30.0) -> None:
        """End every handed-over transaction and stop the thread (before the pool closes)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        with self._cond:
            self._stopping = False
            self._thread = None


@functools.lru_cache(maxsize=256)
def _pg_sql(sql: str) -> str:
    """The engine's SQL for psycopg: ``%s`` placeholders, ids bound as one array."""
    return sql.replace("?", "%s").replace("$IDS", "= ANY(%s)")


class PgSql:
    """The engine's ``Sql`` on one psycopg connection."""

    collate = ' COLLATE "C"'  #: byte order, as SQLite sorts (the server's locale may not)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(_pg_sql(sql), params).fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        return self.conn.execute(_pg_sql(sql), params).fetchone()

    def in_ids(
        self, sql: str, ids: Sequence[str], params: Sequence[object] = ()
    ) -> Iterator[Sequence[Any]]:
        if not ids:
            return
        cur = self.conn.execute(_pg_sql(sql), (*params, list(ids)))
        if cur.description is not None:  # a statement without rows has none
            yield from cur.fetchall()


class PgView(PgSql, engine.EngineReads):
    """Reads on one connection (inside ``snapshot``, one committed state)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        meta: Mapping[str, str] | None = None,
        records: RecordCache | None = None,
    ) -> None:
        super().__init__(conn)
        # The meta table as the snapshot's first statement read it (None: read each key).
        self._meta = meta
        self._records = records
        self._state = None if meta is None else meta.get("state")

    def meta_value(self, key: str) -> str | None:
        if self._meta is not None:
            return self._meta.get(key)
        found = self.one("SELECT value FROM meta WHERE key = %s", (key,))
        return None if found is None else str(found[0])

    def raw_records(self, record_ids: Sequence[str]) -> dict[str, RecordJSON]:
        state = self._state
        cache = self._records if state is not None else None
        texts: dict[str, str | None] = {}
        unknown = list(dict.fromkeys(record_ids))
        if cache is not None and state is not None:
            # The state's shared texts first; only the others are read, in one query.
            asked, unknown = unknown, []
            for rid in asked:
                known, text = cache.get(state, rid)
                if known:
                    texts[rid] = text
                else:
                    unknown.append(rid)
        read = raw_record_texts(self, unknown) if unknown else {}
        for rid in unknown:
            texts[rid] = read.get(rid)
            if cache is not None and state is not None:
                cache.put(state, rid, texts[rid])
        # Decoded per call, as SQLite does: callers get their own dicts to keep or change.
        return {rid: json.loads(text) for rid, text in texts.items() if text is not None}

    def candidate_ids(self, tokens: Sequence[str]) -> list[str]:
        if not tokens:
            return []
        words = list(tokens)
        sql = (
            "SELECT t0.record_id FROM match_tokens t0 WHERE t0.rank = 0 AND t0.token = ANY(%s) "
            "AND NOT EXISTS (SELECT 1 FROM match_tokens t WHERE t.record_id = t0.record_id "
            "AND t.token <> ALL(%s))"
        )
        return [str(r[0]) for r in self.rows(sql, (words, words))]

    def related_ids(
        self, tokens: Sequence[str], limit: int, *, common: int = RELATED_COMMON
    ) -> list[str]:
        if not tokens:
            return []
        sql = (
            "SELECT record_id FROM match_tokens WHERE token = ANY(ARRAY(SELECT t FROM "
            "unnest(%s::text[]) AS t WHERE (SELECT count(*) FROM (SELECT 1 FROM match_tokens m "
            "WHERE m.token = t LIMIT %s) c) <= %s)) GROUP BY record_id "
            'ORDER BY count(*) DESC, record_id COLLATE "C" LIMIT %s'
        )
        return [str(r[0]) for r in self.rows(sql, (list(tokens), common + 1, common, limit))]

    def token_rows(self) -> list[tuple[str, str, int]]:
        rows = self.rows(
            'SELECT record_id, token, rank FROM match_tokens ORDER BY record_id COLLATE "C", rank'
        )
        return [(str(r), str(t), int(k)) for r, t, k in rows]

    def search(
        self, words: Sequence[str], filters: SearchFilters, limit: int, max_terms: int
    ) -> list[SearchCandidate]:
        from errkb.store import pgsearch

        planned = pgsearch.plan(self.conn, words, max_terms)
        return pgsearch.candidates(self.conn, planned, filters, limit)


class PostgresStore(StoreEngine):
    """One knowledge base in a PostgreSQL database (or schema)."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg  # noqa: F401 - the extra's presence is checked here, once
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise StoreError(
                f"database {redacted(url)}: the PostgreSQL backend is not installed "
                f"({exc.name} is missing); {INSTALL_HINT}"
            ) from None
        self.url = url
        self.name = redacted(url)
        self.conninfo = conninfo(url)
        self.path = _local_dir(url) / "errkb.pg"
        self.busy_timeout_ms = busy_timeout_ms()
        self._local = threading.local()
        self._records = RecordCache()
        self._pool: ConnectionPool[Any] | None = None
        self._engine: Engine | None = None
        self._open_lock = threading.Lock()
        self._closer = Closer()
        self._read_only: bool | None = None
        self._toast_lz4: bool | None = None

    def _fail(self, exc: BaseException, action: str) -> StoreError:
        return translate(exc, self.name, action, self.busy_timeout_ms)

    @property
    def read_only(self) -> bool:
        """True when the server lets this login only read (a standby, a read-only default)."""
        if self._read_only is None:
            row = self._read(
                "checking whether it can be written",
                lambda v: v.one(
                    "SELECT pg_is_in_recovery() "
                    "OR current_setting('default_transaction_read_only') = 'on'"
                ),
                schema=False,
            )
            self._read_only = bool(row and row[0])
        return self._read_only

    def pool(self) -> ConnectionPool[Any]:
        with self._open_lock:
            if self._pool is None:
                import psycopg
                from psycopg_pool import ConnectionPool

                # One direct connection first: an unreachable server or refused login is one clear
                # error.
                try:
                    psycopg.connect(self.conninfo, connect_timeout=10).close()
                except psycopg.Error as exc:
                    raise self._fail(exc, "connecting") from exc

                text = os.environ.get(POOL_MAX_ENV, "").strip()
                size = int(text) if text.isdigit() and int(text) > 0 else POOL_MAX
                self._pool = ConnectionPool(
                    self.conninfo,
                    min_size=1,
                    max_size=size,
                    # Autocommit: every transaction is begun explicitly, with its isolation.
                    kwargs={"autocommit": True, "connect_timeout": 10},
                    # No liveness check per checkout: a read that finds its connection dropped
                    # retries (``_read``).
                    timeout=max(self.busy_timeout_ms / 1000, 1.0),
                    open=False,
                    name="errkb",
                )
                try:
                    self._pool.open(wait=True, timeout=10)
                except Exception as exc:
                    pool, self._pool = self._pool, None
                    pool.close()
                    if _is_db_error(exc):
                        raise self._fail(exc, "connecting") from exc
                    raise
            return self._pool

    def _read(self, action: str, fn: Callable[[PgView], _T], *, schema: bool = True) -> _T:
        """Run ``fn`` in this thread's open snapshot, or in one of its own (retried once)."""
        import psycopg

        view: PgView | None = getattr(self._local, "view", None)
        if view is not None:
            try:
                return fn(view)
            except psycopg.Error as exc:
                raise self._fail(exc, action) from exc
        for attempt in (1, 2):
            try:
                with self._snapshot_conn(schema=schema) as view:
                    return fn(view)
            except psycopg.OperationalError as exc:
                if attempt == 1 and self._dropped(exc):
                    continue  # a dropped connection: once more on a fresh one
                raise self._fail(exc, action) from exc
            except psycopg.Error as exc:
                raise self._fail(exc, action) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _dropped(self, exc: BaseException) -> bool:
        """True for a dropped connection; then the pool's idle connections are checked too."""
        if not _disconnected(exc):
            return False
        pool = self._pool
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.check()
        return True

    @contextlib.contextmanager
    def _snapshot_conn(self, *, schema: bool = True) -> Iterator[PgView]:
        """A pooled connection in one REPEATABLE READ READ ONLY transaction (one round trip)."""
        pool = self.pool()
        conn = pool.getconn()
        handed = False
        try:
            meta: dict[str, str] | None = None
            if schema:
                cur = conn.execute(_OPEN)
                cur.nextset()  # past BEGIN's result to the meta rows
                meta = {str(k): str(v) for k, v in cur.fetchall()}
            else:
                conn.execute(_OPEN_BARE)
            yield PgView(conn, meta, self._records)
            handed = not conn.broken and self._closer.end(conn, pool)
        finally:
            if not handed:
                try:
                    if not conn.broken:
                        conn.execute(_CLOSE)  # read only: nothing to commit
                finally:
                    pool.putconn(conn)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[PgView]:
        """A read transaction seeing one committed state (a first drop retried once)."""
        import psycopg

        outer: PgView | None = getattr(self._local, "view", None)
        if outer is not None:  # nested: the outer snapshot already pins one state
            yield outer
            return
        for attempt in (1, 2):
            try:
                cm = self._snapshot_conn()
                view = cm.__enter__()
                break
            except psycopg.OperationalError as exc:
                if attempt == 1 and self._dropped(exc):
                    continue
                raise self._fail(exc, "reading") from exc
            except psycopg.Error as exc:
                raise self._fail(exc, "reading") from exc
        self._local.view = view
        try:
            yield view
        except psycopg.Error as exc:
            self._local.view = None
            with contextlib.suppress(Exception):
                cm.__exit__(type(exc), exc, exc.__traceback__)
            raise self._fail(exc, "reading") from exc
        except BaseException as exc:
            self._local.view = None
            with contextlib.suppress(Exception):
                cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._local.view = None
        try:
            cm.__exit__(None, None, None)
        except psycopg.Error as exc:
            raise self._fail(exc, "reading") from exc

    def engine(self) -> Engine:
        """A SQLAlchemy engine for Alembic, on the same libpq connection string."""
        with self._open_lock:
            if self._engine is None:
                import psycopg
                from sqlalchemy import create_engine
                from sqlalchemy.pool import NullPool

                info = self.conninfo
                self._engine = create_engine(
                    "postgresql+psycopg://",
                    creator=lambda: psycopg.connect(info, connect_timeout=10),
                    poolclass=NullPool,
                )
            return self._engine

    @contextlib.contextmanager
    def write(self) -> Iterator[UnitOfWork]:
        """One write transaction, serialised with every other writer: committed whole or not."""
        import psycopg

        try:
            pool = self.pool()
            conn_cm = pool.connection()
            conn = conn_cm.__enter__()
        except psycopg.Error as exc:
            raise self._fail(exc, "writing") from exc
        failure: BaseException | None = None
        sql: PgWriteSql | None = None
        try:
            with gc_paused():
                try:
                    conn.execute("BEGIN")
                    # Waiting for another writer is bounded like SQLite's busy timeout.
                    conn.execute(f"SET LOCAL lock_timeout = {int(self.busy_timeout_ms)}")
                    conn.execute(_WRITE_LOCK, ("errkb-write.",))
                    if self._lz4(conn):
                        conn.execute("SET LOCAL default_toast_compression = 'lz4'")
                except psycopg.Error as exc:
                    raise self._fail(exc, "taking the write lock") from exc
                sql = PgWriteSql(conn, pool)
                yield UnitOfWork(sql)
                try:
                    sql.before_commit()
                except psycopg.Error as exc:
                    raise self._fail(exc, "merging the search index") from exc
                try:
                    conn.execute("COMMIT")
                except psycopg.OperationalError as exc:
                    raise StoreError(
                        f"database {self.name}: connection lost while committing "
                        f"({_first_line(exc)}); the change may or may not have been applied: "
                        "check `errkb versions`"
                    ) from exc
                except psycopg.Error as exc:
                    raise self._fail(exc, "committing") from exc
        except BaseException as exc:
            failure = exc
            if not conn.broken:
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
            if isinstance(exc, StoreError):
                raise
            if _is_db_error(exc):
                if isinstance(exc, psycopg.OperationalError) and conn.broken:
                    raise StoreError(
                        f"database {self.name}: connection lost while writing "
                        f"({_first_line(exc)}); nothing was committed"
                    ) from exc
                raise self._fail(exc, "writing") from exc
            raise
        finally:
            if sql is not None:
                with contextlib.suppress(Exception):
                    sql.close()
            with contextlib.suppress(Exception):
                conn_cm.__exit__(None if failure is None else type(failure), failure, None)

    def _lz4(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the server compresses large values with LZ4 when asked (14+, built with it)."""
        if self._toast_lz4 is None:
            row = conn.execute(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                "WHERE name = 'default_toast_compression'"
            ).fetchone()
            self._toast_lz4 = bool(row and row[0])
        return self._toast_lz4

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        self._closer.stop()
        with self._open_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    @contextlib.contextmanager
    def sync_lock(self) -> Iterator[Path]:
        """Hold the sync advisory lock on a dedicated connection; fail at once if taken."""
        import psycopg

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise self._fail(exc, "taking the sync lock") from exc
        try:
            try:
                conn.execute("BEGIN")
                row = conn.execute(_SYNC_LOCK, ("errkb-sync.",)).fetchone()
            except psycopg.Error as exc:
                raise self._fail(exc, "taking the sync lock") from exc
            if not row or not row[0]:
                raise SyncLockedError(
                    f"{self.name}: another sync is running (it holds the database's sync "
                    "advisory lock); try again later"
                )
            yield self.path
        finally:
            # An explicit ROLLBACK first: answered only once the lock is released.
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            with contextlib.suppress(Exception):
                conn.close()

    def ensure_schema(self) -> bool:
        """Bring the schema to head; return True when the database was just created."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{self.path.parent}: cannot create its directory: {exc}") from exc
        revision = self._read("reading its schema revision", _revision_of(self.name), schema=False)
        if revision == SCHEMA_HEAD:
            return False
        self._upgrade(revision)
        return revision is None

    def _upgrade(self, revision: str | None) -> None:
        def lock(conn: Any) -> None:
            # Two processes opening a new database at once: one migrates, the other finds it at
            # head.
            conn.exec_driver_sql(_WRITE_LOCK, ("errkb-migrate.",))

        engine.upgrade_schema(
            self.name,
            revision,
            self.engine(),
            is_db_error=_is_db_error,
            fail=self._fail,
            prepare=lock,
        )

    def envelopes(
        self, *, include_retired: bool = False
    ) -> Iterator[tuple[RecordJSON, str | None]]:
        import psycopg

        sql = envelopes_query(include_retired=include_retired, collate=PgSql.collate)
        try:
            # A server-side cursor: export streams 150k records without holding them all.
            with self._snapshot_conn() as view, view.conn.cursor(name="errkb_export") as cur:
                cur.itersize = 2000
                cur.execute(sql)
                for raw, version in cur:
                    yield json.loads(raw), version
        except psycopg.Error as exc:
            raise self._fail(exc, "reading") from exc


def _disconnected(exc: BaseException) -> bool:
    """True for a connection the server or network dropped (worth one retry for a read)."""
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        return False
    text = str(exc).lower()
    return any(
        part in text
        for part in (
            "server closed the connection",
            "connection is closed",
            "terminating connection",
            "consuming input failed",
            "connection is lost",
            "eof detected",
            "the connection is bad",
        )
    ) or getattr(exc, "sqlstate", None) in ("57P01", "57P02", "57P03", "08000", "08003", "08006")


def _revision_of(name: str) -> Callable[[PgView], str | None]:
    def run(v: PgView) -> str | None:
        exists = v.one("SELECT to_regclass('alembic_version') IS NOT NULL")
        if exists and exists[0]:
            row = v.one("SELECT version_num FROM alembic_version")
            if row is not None:
                return str(row[0])
        tables = v.one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_name <> 'alembic_version'"
        )
        if tables and int(tables[0]):
            raise StoreError(
                f"database {name} has tables but no schema revision (its alembic_version "
                "table is missing or empty): it is damaged or not an errkb database; "
                "use another --db or another schema"
            )
        return None

    return run


class PgWriteSql(PgSql):
    """The engine's ``WriteSql``: one connection inside ``BEGIN``; bulk rows by ``COPY``."""

    #: The search index to merge before the commit (``_GinAfter``), when an apply held it.
    merge_index: int | None = None
    #: The connection computing the records' search vectors beside this one (``_Vectors``).
    vectors: _Vectors | None = None
    _vectors_asked = False

    def __init__(
        self, conn: psycopg.Connection[Any], pool: ConnectionPool[Any] | None = None
    ) -> None:
        super().__init__(conn)
        self.pool = pool

    def execute(self, sql: str, params: Sequence[object] = ()) -> None:
        self.conn.execute(_pg_sql(sql), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(_pg_sql(sql), rows)

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[object]]
    ) -> None:
        if table == "records" and self.pool is not None:
            listed = list(rows)
            vectors = self._vectors() if len(listed) >= VECTORS_MIN else None
            if vectors is not None:
                vectors.insert(self.conn, columns, listed)
                return
            rows = listed
        # Only fixed table and column names are interpolated.
        sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        with self.conn.cursor() as cur, cur.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)

    def bulk_search(self, incoming: Iterable[Incoming]) -> _GinAfter | None:
        return _GinAfter.start(self)

    def _vectors(self) -> _Vectors | None:
        """The connection computing vectors, taken at the first large insert, or None."""
        if self._vectors_asked:
            return self.vectors
        self._vectors_asked = True
        assert self.pool is not None  # noqa: S101 - insert_rows asks only with a pool
        row = self.conn.execute("SELECT to_regprocedure(%s) IS NOT NULL", (_VECTOR_FUNCTION,))
        found = row.fetchone()
        if found and found[0]:
            self.vectors = _Vectors.take(self.pool)
            if self.vectors is not None:
                self.conn.execute("SET LOCAL errkb.search_vectors = 'given'")
        return self.vectors

    def close(self) -> None:
        """Give back the vectors' connection, if one was taken (the transaction has ended)."""
        if self.vectors is not None:
            vectors, self.vectors = self.vectors, None
            vectors.close()

    def before_commit(self) -> None:
        """Merge the search index's pending list if an apply held it and the login may."""
        if self.merge_index is not None:
            self.conn.execute(
                "SELECT gin_clean_pending_list(%s::oid::regclass)", (self.merge_index,)
            )
            self.merge_index = None

    def replace_index(self, rows: Iterable[tuple[str, str, int]]) -> None:
        # DELETE, not TRUNCATE: TRUNCATE is not MVCC-safe and its lock blocks every explain.
        self.conn.execute("DELETE FROM match_tokens")
        self.insert_rows("match_tokens", ("token", "record_id", "rank"), rows)

    def fill_words(self) -> None:
        # DELETE, not TRUNCATE, as above: a reader's older snapshot keeps its rows.
        self.conn.execute("DELETE FROM match_words")
        self.conn.execute(
            "INSERT INTO match_words (word, record_id) SELECT DISTINCT j.w, s.record_id "
            "FROM pattern_specs s JOIN records r ON r.id = s.record_id "
            "CROSS JOIN LATERAL jsonb_array_elements_text(s.words::jsonb) AS j(w) "
            "WHERE r.retired = FALSE"
        )


#: The search index's pending list while an apply writes (kB), merged past it ``work_mem`` at
#: a time. A bound: a search scans the whole pending list, so it reads at most this.
GIN_PENDING_KB = 65536


class _GinAfter:
    """PostgreSQL's ``BulkSearch``: the GIN index's merging held while a transaction writes.

    The pending list's limit is raised (``SET LOCAL``) and, when the login owns the index, the
    list merged once before the commit; the index's contents are the same either way.
    """

    @classmethod
    def start(cls, sql: PgWriteSql) -> _GinAfter | None:
        row = sql.conn.execute(
            "SELECT c.oid, pg_has_role(c.relowner, 'USAGE') FROM pg_class c "
            "WHERE c.oid = to_regclass('search_records_tsv')"
        ).fetchone()
        if row is None:
            return None  # a schema before migration 0005: no full-text index
        sql.conn.execute(f"SET LOCAL gin_pending_list_limit = {GIN_PENDING_KB}")
        # The merges a larger apply still needs read the list ``work_mem`` at a time.
        sql.conn.execute(f"SET LOCAL work_mem = '{GIN_PENDING_KB}kB'")
        if row[1]:
            sql.merge_index = int(row[0])
        return cls()

    def added(self, rids: Sequence[str]) -> None:
        return None  # the trigger indexed them as they were written

    def finish(self) -> None:
        return None  # merged before the commit (``PgWriteSql.before_commit``)


#: ``errkb_search_vector``'s signature and arguments (migration 0009), in order.
_VECTOR_FUNCTION = "errkb_search_vector(text, text, text, text, text, text, text)"
_VECTOR_INPUTS = (
    "error_message", "slug", "error_class", "raw_json", "documentation", "trigger_scenarios",
    "common_situations",
)  # fmt: skip
#: One batch's vectors: its rows as one JSON array of arrays of the inputs, one parameter.
_VECTORS_SQL = (  # fixed names only
    "SELECT errkb_search_vector("  # noqa: S608
    + ", ".join(f"r.v ->> {i}" for i in range(len(_VECTOR_INPUTS)))
    + ")::text FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS r(v, n) "
    "ORDER BY r.n"
)
#: Records whose vectors one round trip computes.
VECTORS_BATCH = 256
#: An insert of fewer records leaves their vectors to the trigger (a round trip saves nothing).
VECTORS_MIN = 2 * VECTORS_BATCH


class _Vectors:
    """A second connection computing the search vectors of the records the first one writes.

    It runs ``errkb_search_vector`` (migration 0009) over each batch while the writer copies the
    one before; the trigger keeps a given vector. No free connection: the trigger computes them.
    """

    def __init__(self, pool: ConnectionPool[Any], conn: psycopg.Connection[Any]) -> None:
        from errkb.records import orjson_functions

        self.pool = pool
        self.conn = conn
        fast = orjson_functions()
        self.dumps: Callable[[object], bytes] = (
            fast[1] if fast is not None else lambda v: json.dumps(v).encode("utf-8")
        )
        self.sent = False

    @classmethod
    def take(cls, pool: ConnectionPool[Any]) -> _Vectors | None:
        from psycopg_pool import PoolTimeout

        if pool.max_size < 2:
            return None  # the write's own connection is the whole pool
        try:
            conn = pool.getconn(timeout=1.0)
        except PoolTimeout:
            return None  # every pooled connection busy: the trigger computes the vectors
        return cls(pool, conn)

    def _send(self, rows: Sequence[Sequence[object]], at: Sequence[int]) -> None:
        payload = self.dumps([[row[i] for i in at] for row in rows])
        pgconn = self.conn.pgconn
        pgconn.send_query_params(_VECTORS_SQL.encode(), [payload])  # raises if it cannot
        self.sent = True
        while pgconn.flush():  # the whole batch out before the copy starts
            pass

    def _receive(self, count: int) -> list[str]:
        from psycopg import pq

        pgconn = self.conn.pgconn
        self.sent = False
        result = pgconn.get_result()
        while pgconn.get_result() is not None:  # the query's end
            pass
        if result is None or result.status != pq.ExecStatus.TUPLES_OK:
            why = result.get_error_message() if result is not None else "no result"
            raise StoreError(f"search vectors: {why.strip()}")
        if result.ntuples != count:  # one vector a row, in order: anything else is a fault
            raise StoreError(f"search vectors: {result.ntuples} computed for {count} records")
        return [bytes(result.get_value(n, 0) or b"").decode() for n in range(count)]

    def insert(
        self,
        conn: psycopg.Connection[Any],
        columns: Sequence[str],
        rows: Sequence[Sequence[object]],
    ) -> None:
        """``COPY`` ``rows`` into ``records`` on ``conn``, each with its computed vector."""
        at = [list(columns).index(name) for name in _VECTOR_INPUTS]
        batches = [rows[i : i + VECTORS_BATCH] for i in range(0, len(rows), VECTORS_BATCH)]
        sql = f"COPY records ({', '.join(columns)}, search_tsv) FROM STDIN"
        try:
            self._send(batches[0], at)
            with conn.cursor() as cur, cur.copy(sql) as copy:
                for n, batch in enumerate(batches):
                    vectors = self._receive(len(batch))
                    if n + 1 < len(batches):
                        self._send(batches[n + 1], at)  # computed while this batch is copied
                    for row, vector in zip(batch, vectors, strict=True):
                        copy.write_row((*row, vector))
        finally:
            if self.sent:  # an error mid-way: the helper's answer read, so it is idle again
                with contextlib.suppress(Exception):
                    self._receive(0)

    def close(self) -> None:
        self.pool.putconn(self.conn)
