"""The PostgreSQL backend of the store: one shared knowledge base, one sync job, many readers.

Selected by a URL: ``postgresql+psycopg://USER@HOST/DB`` (also ``postgresql://`` and
``postgres://``; libpq's query options such as ``?host=/run/postgresql`` for a Unix socket pass
through). It needs the optional extra ``errkb[postgres]`` (psycopg 3 and psycopg_pool).

* Reads come from a thread-safe connection pool (``psycopg_pool``). Every read, and every
  ``snapshot`` (one explain), runs in one ``REPEATABLE READ READ ONLY`` transaction, so it sees
  exactly one committed dataset version even while a sync commits the next. A read that finds
  its connection dropped (server restart, idle connection cut) is retried once on a fresh one;
  inside an open snapshot it is not, since a new connection could see another version.
* Writes (ingest, sync, rollback) run in ONE transaction each, serialised by a transaction-level
  advisory lock (the PostgreSQL counterpart of SQLite's ``BEGIN IMMEDIATE``), with bulk rows
  sent by ``COPY``. A dropped connection while writing is reported, never retried.
* The sync lock is ``pg_try_advisory_xact_lock`` held by a dedicated connection for the whole
  sync: a second sync fails at once, and a killed sync's lock goes with its connection.

The schema comes from the same Alembic migrations as SQLite's. Lock keys are derived from the
database and schema name, so several knowledge bases can share one server (one schema each,
chosen with ``?options=-csearch_path%3DNAME``).

Every psycopg error is translated here into ``StoreError`` or a subclass (``translate``).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from errkb.errors import (
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
    SyncLockedError,
)
from errkb.records.fields import CHILD_FIELDS, RECORD_COLUMNS
from errkb.store.interface import (
    NO_KEEP,
    SCHEMA_HEAD,
    ApplyCounts,
    ChangeKind,
    Diff,
    Incoming,
    Inventory,
    Keep,
    PatternRow,
    RecordChange,
    RecordJSON,
    StoreCounts,
    StoredRecord,
    VersionInfo,
    VersionKind,
    diff_from,
    gc_paused,
    inventory_from,
    now_iso,
    record_changes_from,
    state_from,
)
from errkb.store.sqlite import (
    _UPDATE_COLUMNS,
    _batches,
    _Classified,
    _record_values,
    _update_values,
    _version,
    _Write,
    busy_timeout_ms,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool
    from sqlalchemy.engine import Engine

    from errkb.store.search import Candidate as SearchCandidate
    from errkb.store.search import Filters as SearchFilters

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


# ---------------------------------------------------------------------------- the read view
#: Record JSON texts kept per state of the knowledge base (see ``RecordCache``).
RECORD_CACHE_SIZE = 8192
#: One statement opens every read: the transaction and the whole meta table in one round trip
#: (the simple query protocol takes several statements when nothing is bound).
_OPEN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT key, value FROM meta"
# COMMIT, not ROLLBACK, ends a read: the same for a read-only transaction, but psycopg drops a
# connection's prepared statements after a ROLLBACK (DEALLOCATE ALL: one more round trip, and
# every hot query unprepared again).
_CLOSE = "COMMIT"
#: Opening a read of a database that may have no schema yet (the revision check).
_OPEN_BARE = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class RecordCache:
    """Record JSON texts of one state of the knowledge base, shared by threads, bounded (LRU).

    A record's row changes only in a write transaction, and every write that changes a record
    bumps the ``state`` meta key in the same transaction (``PgWriteTx.bump_state``). So a text
    read in a snapshot of state S is the record's text in every snapshot of state S: a cache
    keyed by the state answers exactly what the snapshot would, without the round trip. A
    snapshot of another state starts a fresh cache (readers of the old and the new state
    alternate only while a sync's last old snapshots finish).
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
    """Ends read transactions off the reader's path: ``COMMIT``, then back to the pool.

    A reader waits for the server twice per snapshot (open, close); the close carries no answer,
    so one thread per store sends it while the reader goes on. Each connection stays checked
    out until its transaction has ended, so the pool never hands out one still in a
    transaction. When the thread already has ``BACKLOG`` connections to end (many busy
    reader threads), a reader ends its own: the thread speeds one reader up, it never caps
    how many snapshots a process can close per second.
    """

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


class PgView:
    """Reads on one connection (inside ``snapshot``, one committed state)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        meta: Mapping[str, str] | None = None,
        records: RecordCache | None = None,
    ) -> None:
        self.conn = conn
        # The meta table as the snapshot's first statement read it (None: read each key).
        self._meta = meta
        self._records = records
        self._state = None if meta is None else meta.get("state")

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        return self.conn.execute(sql, params).fetchone()

    def meta_value(self, key: str) -> str | None:
        if self._meta is not None:
            return self._meta.get(key)
        found = self.one("SELECT value FROM meta WHERE key = %s", (key,))
        return None if found is None else str(found[0])

    def raw_record(self, record_id: str) -> RecordJSON | None:
        state, cache = self._state, self._records
        if state is not None and cache is not None:
            known, text = cache.get(state, record_id)
            if not known:
                text = self._raw_text(record_id)
                cache.put(state, record_id, text)
        else:
            text = self._raw_text(record_id)
        if text is None:
            return None
        # Decoded per call, as SQLite does: callers get their own dict to keep or change.
        decoded: RecordJSON = json.loads(text)
        return decoded

    def _raw_text(self, record_id: str) -> str | None:
        row = self.one("SELECT raw_json FROM records WHERE id = %s", (record_id,))
        return None if row is None else str(row[0])

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

    def related_ids(self, tokens: Sequence[str], limit: int) -> list[str]:
        if not tokens:
            return []
        sql = (
            "SELECT record_id FROM match_tokens WHERE token = ANY(%s) GROUP BY record_id "
            'ORDER BY count(*) DESC, record_id COLLATE "C" LIMIT %s'
        )
        return [str(r[0]) for r in self.rows(sql, (list(tokens), limit))]

    def pattern_rows(self, ids: Sequence[str]) -> list[PatternRow]:
        if not ids:
            return []
        sql = (
            "SELECT id, error_message, message_pattern, error_class, file_path, line_number, "
            "source_code FROM records WHERE NOT retired AND id = ANY(%s)"
        )
        return [PatternRow(*row) for row in self.rows(sql, (list(ids),))]

    def messages(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        if not ids:
            return []
        sql = "SELECT id, error_message FROM records WHERE id = ANY(%s)"
        return [(str(r), str(m)) for r, m in self.rows(sql, (list(ids),))]

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


# ---------------------------------------------------------------------------- the store
class PostgresStore:
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

    def _fail(self, exc: BaseException, action: str) -> StoreError:
        return translate(exc, self.name, action, self.busy_timeout_ms)

    # ------------------------------------------------------------------ connections
    def pool(self) -> ConnectionPool[Any]:
        with self._open_lock:
            if self._pool is None:
                import psycopg
                from psycopg_pool import ConnectionPool

                # One direct connection first: an unreachable server or a refused login is one
                # clear error at once, not the pool's retries and a timeout.
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
                    # No liveness check per checkout (a round trip on every read): a read that
                    # finds its connection dropped checks the pool and runs again (``_read``).
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
        """Run ``fn`` in the open snapshot of this thread, or in one of its own (retried once).

        ``schema=False`` for a read of a database that may not have errkb's tables yet.
        """
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
        """True for a dropped connection; then the pool's idle connections are checked too.

        A server restart kills every idle connection at once, so the one retry must not be
        handed another dead one: ``check`` replaces the broken ones (a round trip each, paid
        only after a failure, instead of one on every checkout).
        """
        if not _disconnected(exc):
            return False
        pool = self._pool
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.check()
        return True

    @contextlib.contextmanager
    def _snapshot_conn(self, *, schema: bool = True) -> Iterator[PgView]:
        """A pooled connection in one REPEATABLE READ READ ONLY transaction.

        Opening costs one round trip (``_OPEN``: the transaction and the meta table); the
        closing one is sent by the ``Closer`` while the reader goes on. A warm explain needs
        nothing else (``RecordCache``).
        """
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
        """A read transaction: every query inside sees one committed state of the database.

        A connection found dropped by the first statement is retried once on a fresh one;
        later in the snapshot it is not, since a new connection could see another version.
        """
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
    def write(self) -> Iterator[PgWriteTx]:
        """One write transaction, serialised with every other writer: committed whole or not."""
        import psycopg

        try:
            pool = self.pool()
            conn_cm = pool.connection()
            conn = conn_cm.__enter__()
        except psycopg.Error as exc:
            raise self._fail(exc, "writing") from exc
        failure: BaseException | None = None
        try:
            with gc_paused():
                try:
                    conn.execute("BEGIN")
                    # Waiting for another writer is bounded like SQLite's busy timeout.
                    conn.execute(f"SET LOCAL lock_timeout = {int(self.busy_timeout_ms)}")
                    conn.execute(_WRITE_LOCK, ("errkb-write.",))
                except psycopg.Error as exc:
                    raise self._fail(exc, "taking the write lock") from exc
                yield PgWriteTx(conn)
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
            with contextlib.suppress(Exception):
                conn_cm.__exit__(None if failure is None else type(failure), failure, None)

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
            # An explicit ROLLBACK first: the server answers it only after releasing the lock,
            # whereas after a bare close() the backend ends the transaction when it notices the
            # disconnect, a moment later, so a sync started right after could find the lock
            # still held (seen as a SyncLockedError in test_sync under load).
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            with contextlib.suppress(Exception):
                conn.close()

    # ------------------------------------------------------------------ opening and schema
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
                    f"{self.name}: database schema revision {revision!r} is newer than this "
                    f"errkb (which knows up to {SCHEMA_HEAD!r}); upgrade errkb or use another --db"
                )
        try:
            with self.engine().begin() as conn:
                # Two processes opening a new database at once: one migrates, the other waits
                # and then finds the schema at head (Alembic reads the revision after the lock).
                conn.exec_driver_sql(_WRITE_LOCK, ("errkb-migrate.",))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except StoreError:
            raise
        except Exception as exc:
            if _is_db_error(exc):
                raise self._fail(exc, "migrating its schema") from exc
            raise

    # ------------------------------------------------------------------ reads
    def meta_value(self, key: str) -> str | None:
        return self._read("reading", lambda v: v.meta_value(key))

    def raw_record(self, record_id: str) -> RecordJSON | None:
        return self._read("reading", lambda v: v.raw_record(record_id))

    def is_empty(self) -> bool:
        row = self._read("reading", lambda v: v.one("SELECT count(*) FROM dataset_versions"))
        return not row or int(row[0]) == 0

    def find_ids(self, key: str) -> list[str]:
        sql = (
            "SELECT id FROM records WHERE id = %s OR slug = %s "
            'ORDER BY retired, repo COLLATE "C", id COLLATE "C"'
        )
        return self._read("reading", lambda v: [str(r[0]) for r in v.rows(sql, (key, key))])

    def is_retired(self, record_id: str) -> bool:
        sql = "SELECT retired FROM records WHERE id = %s"
        row = self._read("reading", lambda v: v.one(sql, (record_id,)))
        return bool(row and row[0])

    def live_records(
        self, *, repo: str | None = None, tag: str | None = None, error_class: str | None = None
    ) -> list[RecordJSON]:
        sql = "SELECT raw_json FROM records r WHERE NOT retired"
        params: list[str] = []
        if repo:
            sql += " AND repo = %s"
            params.append(repo)
        if error_class:
            sql += " AND error_class = %s"
            params.append(error_class)
        if tag:
            sql += (
                " AND EXISTS (SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = %s)"
            )
            params.append(tag)
        sql += ' ORDER BY repo COLLATE "C", id COLLATE "C"'
        return self._read("reading", lambda v: [json.loads(raw) for (raw,) in v.rows(sql, params)])

    def envelopes(
        self, *, include_retired: bool = False
    ) -> Iterator[tuple[RecordJSON, str | None]]:
        import psycopg

        sql = "SELECT raw_json, dataset_version FROM records"
        if not include_retired:
            sql += " WHERE NOT retired"
        sql += ' ORDER BY id COLLATE "C"'
        try:
            # A server-side cursor: export streams 150k records without holding them all.
            with self._snapshot_conn() as view, view.conn.cursor(name="errkb_export") as cur:
                cur.itersize = 2000
                cur.execute(sql)
                for raw, version in cur:
                    yield json.loads(raw), version
        except psycopg.Error as exc:
            raise self._fail(exc, "reading") from exc

    def counts(self) -> StoreCounts:
        def run(v: PgView) -> StoreCounts:
            def one(sql: str) -> int:
                row = v.one(sql)
                return int(row[0]) if row else 0

            by_class = tuple(
                (str(c or "(none)"), int(n))
                for c, n in v.rows(
                    "SELECT error_class, count(*) FROM records WHERE NOT retired "
                    'GROUP BY error_class ORDER BY count(*) DESC, error_class COLLATE "C" '
                    "NULLS FIRST LIMIT 10"
                )
            )
            return StoreCounts(
                records=one("SELECT count(*) FROM records WHERE NOT retired"),
                retired=one("SELECT count(*) FROM records WHERE retired"),
                repos=one("SELECT count(DISTINCT repo) FROM records WHERE NOT retired"),
                versions=one("SELECT count(*) FROM dataset_versions"),
                dataset_version=v.meta_value("dataset_version"),
                by_class=by_class,
            )

        return self._read("reading", run)

    _VERSION_SQL = (
        'SELECT id, dataset_version, kind, source, "full", partial, added, updated, unchanged, '
        "retired, rejected, started_at, finished_at, restores, hashes_json FROM dataset_versions"
    )

    def versions(self) -> list[VersionInfo]:
        sql = self._VERSION_SQL + " ORDER BY id"
        return self._read("reading", lambda v: [_version(r) for r in v.rows(sql)])

    def latest_version(self) -> VersionInfo | None:
        sql = self._VERSION_SQL + " ORDER BY id DESC LIMIT 1"
        row = self._read("reading", lambda v: v.one(sql))
        return _version(row) if row else None

    def resolve_version(self, key: str) -> int | None:
        text = key.strip()
        if text.isdigit():
            if int(text) > 2**31 - 1:
                return None  # beyond the integer column: no such row
            sql, arg = "SELECT id FROM dataset_versions WHERE id = %s", int(text)
            row = self._read("reading", lambda v: v.one(sql, (arg,)))
        else:
            sql2 = "SELECT max(id) FROM dataset_versions WHERE dataset_version = %s"
            row = self._read("reading", lambda v: v.one(sql2, (text,)))
        return None if not row or row[0] is None else int(row[0])

    def record(self, record_id: str) -> StoredRecord | None:
        sql = (
            "SELECT id, raw_json, retired, content_hash, dataset_version FROM records WHERE id = %s"
        )
        row = self._read("reading", lambda v: v.one(sql, (record_id,)))
        if row is None:
            return None
        return StoredRecord(str(row[0]), json.loads(row[1]), bool(row[2]), str(row[3]), row[4])

    def record_changes(self, record_id: str) -> list[RecordChange]:
        sql = (
            "SELECT h.version_id, v.dataset_version, v.kind, v.finished_at, h.change, "
            "h.previous_json, h.previous_retired "
            "FROM record_history h JOIN dataset_versions v ON v.id = h.version_id "
            "WHERE h.record_id = %s ORDER BY h.version_id, h.id"
        )
        rows = self._read("reading", lambda v: v.rows(sql, (record_id,)))
        return record_changes_from(rows)

    def inventory(self) -> Inventory:
        def run(v: PgView) -> Inventory:
            return inventory_from(v.rows("SELECT id, repo, retired, content_hash FROM records"))

        return self._read("reading", run)

    def state_at(self, version_id: int) -> list[Incoming]:
        """Every record as it was right after ``version_id`` (see the SQLite backend)."""

        def run(v: PgView) -> list[Incoming]:
            first_after = list(
                v.rows(
                    "SELECT h.record_id, h.previous_json, h.previous_retired, "
                    "h.previous_dataset_version FROM record_history h JOIN ("
                    "  SELECT record_id, min(id) AS hid FROM record_history "
                    "  WHERE version_id > %s GROUP BY record_id"
                    ") f ON f.hid = h.id",
                    (version_id,),
                )
            )  # read before the next statement
            current = v.rows(
                'SELECT id, raw_json, retired, dataset_version FROM records ORDER BY id COLLATE "C"'
            )
            return state_from(first_after, current)

        return self._read("reading", run)

    def classify(self, incoming: Iterable[Incoming], *, full: bool, keep: Keep = NO_KEEP) -> Diff:
        """What applying ``incoming`` would do, by the same rules (``_classify_chunk``)."""

        def run(v: PgView) -> Diff:
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


def _classify_chunk(conn: psycopg.Connection[Any], batch: list[Incoming]) -> list[_Classified]:
    """Classify one chunk against the stored records (the one rule: ``store.classify``)."""
    by_id: dict[str, tuple[Incoming, RecordJSON]] = {}
    for item in batch:
        obj = item.obj
        by_id[str(obj["id"])] = (item, obj)
    ids = sorted(by_id)
    existing: dict[str, tuple[str, bool]] = {}
    for rid, chash, retired in conn.execute(
        "SELECT id, content_hash, retired FROM records WHERE id = ANY(%s)", (ids,)
    ):
        existing[str(rid)] = (str(chash), bool(retired))
    return [_Classified(*by_id[rid], existing.get(rid)) for rid in ids]


def _kept_ids(conn: psycopg.Connection[Any], keep: Keep, exclude: set[str]) -> list[str]:
    """Ids of the stored live records kept as they are (unchanged repositories, rejects)."""
    out: list[str] = []
    seen = set(exclude)
    for column, keys in (("repo", sorted(keep.repos)), ("id", sorted(keep.ids))):
        if not keys:
            continue
        # Only a fixed column name is interpolated; the keys are one bound array.
        sql = (
            f"SELECT id FROM records WHERE NOT retired AND {column} = ANY(%s) "  # noqa: S608
            'ORDER BY id COLLATE "C"'
        )
        for (rid,) in conn.execute(sql, (keys,)):
            if rid not in seen:
                seen.add(str(rid))
                out.append(str(rid))
    return out


def _to_retire(conn: psycopg.Connection[Any], spare: set[str]) -> list[str]:
    """Live records a full unit of work retires: those not in ``spare``."""
    return [
        str(rid)
        for (rid,) in conn.execute(
            'SELECT id FROM records WHERE NOT retired ORDER BY id COLLATE "C"'
        )
        if rid not in spare
    ]


_UPDATE_RECORD = (
    "UPDATE records SET "  # noqa: S608 - fixed names
    + ", ".join(f"{c} = %s" for c in _UPDATE_COLUMNS)
    + " WHERE id = %s"
)
_COPY_RECORDS = f"COPY records ({', '.join(RECORD_COLUMNS)}) FROM STDIN"


class PgWriteTx:
    """The write transaction's operations, on one connection inside ``BEGIN``."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.conn.execute("DELETE FROM meta WHERE key = %s", (key,))
        else:
            self.conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (key, value),
            )

    def version_count(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM dataset_versions").fetchone()
        return int(row[0]) if row else 0

    def bump_state(self, dataset_version: str | None) -> None:
        """Record that the knowledge base changed: readers compare ``state`` to reload."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
        self.set_meta("state", str(int(row[0]) + 1 if row else 1))
        if dataset_version is not None:
            self.set_meta("dataset_version", dataset_version)

    def _copy(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        with self.conn.cursor() as cur, cur.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)

    def rebuild_index(self) -> int:
        """Recompute the whole match index from the live records (in this transaction).

        The live messages come through a server-side cursor and the rows go out by ``COPY``
        as ``index_rows`` yields them, so neither the messages nor the two million rows of a
        500,000-record index are ever a list here.
        """
        from errkb.match.index import index_rows

        with self.conn.cursor(name="errkb_index_messages") as live:
            live.itersize = 5000
            live.execute("SELECT id, error_message FROM records WHERE NOT retired")
            rows = index_rows(live)
            # index_rows reads every message before its first row: take that row now, so
            # the cursor is done before COPY starts on the same connection.
            first = list(itertools.islice(rows, 1))
        # DELETE, not TRUNCATE: TRUNCATE is not MVCC-safe, so a reader's older snapshot would
        # see an empty index, and its lock would block every explain until commit.
        self.conn.execute("DELETE FROM match_tokens")
        written = 0

        def counted() -> Iterator[tuple[str, str, int]]:
            nonlocal written
            for row in itertools.chain(first, rows):
                written += 1
                yield row

        self._copy("COPY match_tokens (token, record_id, rank) FROM STDIN", counted())
        self.conn.execute("DELETE FROM meta WHERE key = 'match_index'")
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
        """Upsert ``incoming`` and record the version row (see ``WriteTx.apply``)."""
        conn = self.conn
        started = now_iso()
        row = conn.execute(
            'INSERT INTO dataset_versions (dataset_version, kind, source, partial, "full", '
            "hashes_json, added, updated, unchanged, retired, rejected, started_at, finished_at, "
            "restores) VALUES (%s, %s, %s, %s, %s, %s, 0, 0, 0, 0, 0, %s, %s, %s) RETURNING id",
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
        ).fetchone()
        assert row is not None  # noqa: S101 - RETURNING gives one row
        vid = int(row[0])

        tally = {"added": 0, "updated": 0, "unchanged": 0, "retired": 0}
        seen: set[str] = set()
        for batch in _batches(incoming):
            self._apply_chunk(_classify_chunk(conn, batch), vid, tally, seen)

        kept = _kept_ids(conn, keep, seen)
        if full:
            live = _to_retire(conn, seen.union(kept))
            self._copy_to_history(live, vid, ChangeKind.RETIRED)
            self._mark_retired(live, vid, retired=True)
            tally["retired"] += len(live)

        counts = ApplyCounts(
            added=tally["added"],
            updated=tally["updated"],
            unchanged=tally["unchanged"] + len(kept),
            retired=tally["retired"],
            rejected=rejected,
        )
        conn.execute(
            "UPDATE dataset_versions SET added = %s, updated = %s, unchanged = %s, retired = %s, "
            "rejected = %s, finished_at = %s WHERE id = %s",
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
        self, items: list[_Classified], vid: int, tally: dict[str, int], seen: set[str]
    ) -> None:
        """Write one classified chunk (rows are built for this chunk only)."""
        conn = self.conn
        seen.update(item.id for item in items)
        for item in items:
            if item.count:
                tally[item.count] += 1
        for kind in ChangeKind:
            if kind is not ChangeKind.ADDED:
                self._copy_to_history([i.id for i in items if i.history is kind], vid, kind)
        new = [i for i in items if i.write is _Write.INSERT]
        changed = [i for i in items if i.write is _Write.UPDATE]
        if new:
            self._copy(_COPY_RECORDS, (_record_values(i, vid) for i in new))
            self._copy(
                "COPY record_history (record_id, version_id, change) FROM STDIN",
                ((i.id, vid, ChangeKind.ADDED.value) for i in new),
            )
        if changed:
            rows = [_update_values(_record_values(i, vid)) for i in changed]
            with conn.cursor() as cur:
                cur.executemany(_UPDATE_RECORD, rows)
            changed_ids = [i.id for i in changed]
            for f in CHILD_FIELDS:
                # Only fixed table names from the field table are interpolated.
                conn.execute(
                    f"DELETE FROM {f.column} WHERE record_id = ANY(%s)",  # noqa: S608
                    (changed_ids,),
                )
        for flag in (False, True):
            ids = [i.id for i in items if i.write is _Write.FLAG and i.retired is flag]
            self._mark_retired(ids, vid, retired=flag)
        children = [*new, *changed]
        for f in CHILD_FIELDS:
            self._copy(
                f"COPY {f.column} (record_id, position, {f.value_column}) FROM STDIN",
                ((i.id, n, text) for i in children for n, text in enumerate(i.obj[f.name])),
            )

    def _copy_to_history(self, rids: Sequence[str], vid: int, change: ChangeKind) -> None:
        """Copy the current content of ``rids`` to history, SQL-side (no record text in Python)."""
        if not rids:
            return
        self.conn.execute(
            "INSERT INTO record_history (record_id, version_id, change, previous_json, "
            "previous_retired, previous_dataset_version) SELECT id, %s, %s, raw_json, "
            'retired, dataset_version FROM records WHERE id = ANY(%s) ORDER BY id COLLATE "C"',
            (vid, change.value, list(rids)),
        )

    def _mark_retired(self, rids: Sequence[str], vid: int, *, retired: bool) -> None:
        """Set or clear the retired flag of ``rids``, as changed by version ``vid``."""
        if not rids:
            return
        self.conn.execute(
            "UPDATE records SET retired = %s, changed_in = %s WHERE id = ANY(%s)",
            (retired, vid, list(rids)),
        )
