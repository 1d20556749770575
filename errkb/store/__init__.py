"""The SQLite store: opening, migrating, and applying records in one transaction.

Two access paths, on purpose:

* Writes (ingest, sync, rollback) and the maintenance commands go through SQLAlchemy's typed
  ORM, in ONE explicit ``BEGIN IMMEDIATE`` transaction per unit of work, so a reader never sees
  half a version and a crash leaves the database as it was.
* The explain hot path reads with the standard library's ``sqlite3`` (one connection per thread),
  because importing SQLAlchemy's ORM costs about half a second of start-up and explain needs
  only a few indexed look-ups. WAL journaling lets those readers run during a write.

The schema is created and evolved only by Alembic (``migrations/``). Opening a database checks
its revision with a single query; Alembic is imported only when an upgrade is due. A database
stamped with a revision this errkb does not know was made by a newer errkb and is refused.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb import records as rec
from errkb.errors import SchemaVersionError, StoreError, UsageError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.orm import Session

#: The Alembic revision this code expects (tests pin it to the migrations' head).
SCHEMA_HEAD = "0003"
BUSY_TIMEOUT_MS = 10_000
_CHUNK = 500  # ids per IN (...) query: well under SQLite's parameter limit
_APPLY_CHUNK = 2000  # records classified and written together: bounds apply's memory


def resolve_db_path(target: str | os.PathLike[str] | None) -> Path:
    """Turn ``--db`` / ``ERRKB_DB`` / the default into a database file path.

    Accepts a file path or an SQLAlchemy SQLite URL (``sqlite:///relative.db``,
    ``sqlite:////abs/path.db``). errkb reads with the standard library's sqlite3, so other
    database engines are refused with a clear message.
    """
    if target is None:
        env = os.environ.get("ERRKB_DB")
        if env:
            return resolve_db_path(env)
        from platformdirs import user_data_dir

        return Path(user_data_dir("errkb", appauthor=False)) / "errkb.sqlite3"
    text = os.fspath(target)
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if not scheme.startswith("sqlite"):
            raise UsageError(f"unsupported database URL {text!r}: errkb stores its data in SQLite")
        path = rest[1:] if rest.startswith("/") else rest
        if not path or path == ":memory:":
            raise UsageError(f"database URL {text!r} names no file; give a path")
        return Path(path.split("?", 1)[0])
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


@dataclass(frozen=True)
class ApplyCounts:
    """What one unit of work did to the records."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    retired: int = 0
    rejected: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "retired": self.retired,
            "rejected": self.rejected,
        }


@dataclass(frozen=True)
class Incoming:
    """A validated record on its way into the store.

    ``data`` is the record, or its compact JSON text (``records.verbatim_json``) with its id in
    ``packed_id``, as a sync streams them back from its spool file: text is decoded chunk by
    chunk as it is applied, and reused as the stored ``raw_json``.
    """

    data: Mapping[str, Any] | str
    dataset_version: str | None
    packed_id: str | None = None  #: the record's id, kept beside packed text

    @property
    def id(self) -> str:
        return self.packed_id if self.packed_id is not None else str(self.obj["id"])

    @property
    def obj(self) -> Mapping[str, Any]:
        if isinstance(self.data, str):
            decoded: Mapping[str, Any] = json.loads(self.data)
            return decoded
        return self.data


class Store:
    """One SQLite knowledge-base file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()

    # ------------------------------------------------------------------ opening and schema
    def ensure_schema(self) -> bool:
        """Bring the schema to head; return True when the database was just created."""
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
            if "no such table" in str(exc):
                return None
            raise StoreError(f"{self.path}: cannot read database: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not an errkb database ({exc})") from exc
        return str(row[0]) if row else None

    def _upgrade(self, revision: str | None) -> None:
        from alembic import command
        from alembic.config import Config
        from alembic.script import ScriptDirectory

        from errkb._resources import bundle_path

        cfg = Config()
        cfg.set_main_option("script_location", str(bundle_path("migrations")))
        script = ScriptDirectory.from_config(cfg)
        if revision is not None and not _known_revision(script, revision):
            raise SchemaVersionError(
                f"{self.path}: database schema revision {revision!r} is newer than this errkb "
                f"(which knows up to {SCHEMA_HEAD!r}); upgrade errkb or use another --db"
            )
        with self.engine().begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    # ------------------------------------------------------------------ connections
    def reader(self) -> sqlite3.Connection:
        """The calling thread's read connection (standard library; cheap to open, never shared)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot open database: {exc}") from exc
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one committed state of the database."""
        conn = self.reader()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def engine(self) -> Engine:
        with self._engine_lock:
            if self._engine is None:
                from sqlalchemy import create_engine, event
                from sqlalchemy.pool import NullPool

                engine = create_engine(f"sqlite:///{self.path}", poolclass=NullPool)

                @event.listens_for(engine, "connect")
                def _on_connect(dbapi_conn: Any, _record: Any) -> None:
                    # Let us issue BEGIN ourselves (pysqlite's implicit BEGIN is DEFERRED).
                    dbapi_conn.isolation_level = None
                    cur = dbapi_conn.cursor()
                    cur.execute("PRAGMA journal_mode = WAL")
                    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                    cur.execute("PRAGMA foreign_keys = ON")
                    cur.execute("PRAGMA synchronous = NORMAL")
                    # 64 MiB of page cache: a 150k-record sync touches many index pages.
                    cur.execute("PRAGMA cache_size = -65536")
                    cur.close()

                @event.listens_for(engine, "begin")
                def _on_begin(conn: Connection) -> None:
                    # IMMEDIATE takes the write lock up front: two writers never interleave
                    # and a reader never sees a half-applied unit of work.
                    conn.exec_driver_sql("BEGIN IMMEDIATE")

                self._engine = engine
            return self._engine

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        """One write transaction (``BEGIN IMMEDIATE``): committed whole or not at all."""
        from sqlalchemy.orm import Session

        try:
            with gc_paused(), Session(self.engine()) as session, session.begin():
                yield session
        except sqlite3.OperationalError as exc:  # pragma: no cover - wrapped by SQLAlchemy
            raise StoreError(f"{self.path}: write failed: {exc}") from exc

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        if self._engine is not None:
            self._engine.dispose()

    # ------------------------------------------------------------------ reads (stdlib)
    def meta(self, conn: sqlite3.Connection | None = None) -> dict[str, str]:
        """Every meta key (some are large: a sync's per-repository state)."""
        conn = conn or self.reader()
        return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}

    def meta_value(self, key: str, conn: sqlite3.Connection | None = None) -> str | None:
        """One meta key: what the explain path reads, without the sync's bulky state."""
        row = (conn or self.reader()).execute("SELECT value FROM meta WHERE key = ?", (key,))
        found = row.fetchone()
        return None if found is None else str(found[0])

    def is_empty(self) -> bool:
        row = self.reader().execute("SELECT count(*) FROM dataset_versions").fetchone()
        return not row or row[0] == 0

    def raw_record(self, record_id: str, conn: sqlite3.Connection | None = None) -> Any:
        row = (
            (conn or self.reader())
            .execute("SELECT raw_json FROM records WHERE id = ?", (record_id,))
            .fetchone()
        )
        return json.loads(row[0]) if row else None

    def find_ids(self, key: str) -> list[str]:
        """Ids of records whose id or slug is ``key`` (a slug can repeat across repos)."""
        rows = self.reader().execute(
            "SELECT id FROM records WHERE id = ? OR slug = ? ORDER BY retired, repo, id",
            (key, key),
        )
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------------ writes (ORM)
    def apply(
        self,
        session: Session,
        incoming: Iterable[Incoming],
        *,
        kind: str,
        source: str,
        dataset_version: str | None,
        full: bool = False,
        partial: bool = False,
        rejected: int = 0,
        hashes: Mapping[str, Any] | None = None,
        keep: Collection[str] = (),
    ) -> tuple[int, ApplyCounts]:
        """Upsert ``incoming`` inside ``session``'s transaction and record the version row.

        Returns the new version id and the counts. With ``full``, records absent from
        ``incoming`` are retired (kept, marked, their content copied to history), except the
        ids in ``keep``: stored live records the caller knows are unchanged (a sync's
        repositories that did not change), counted as unchanged without being loaded.

        Work proceeds in chunks of ``_APPLY_CHUNK`` records, so memory stays bounded by the
        chunk, not by the size of the dataset. An id repeated in ``incoming`` is applied twice
        (the last content wins; the first counts as added or updated).
        """
        from errkb.store.models import VersionRow

        started = now_iso()
        version = VersionRow(
            dataset_version=dataset_version,
            kind=kind,
            source=source,
            partial=partial,
            full=full,
            hashes_json=json.dumps(dict(hashes)) if hashes else None,
            started_at=started,
            finished_at=started,
        )
        session.add(version)
        session.flush()
        vid = version.id
        raw = session.connection().connection.dbapi_connection
        assert raw is not None  # noqa: S101 - an open session always has its connection

        tally = {"added": 0, "updated": 0, "unchanged": 0}
        seen: set[str] = set()
        batch: list[Incoming] = []
        for item in incoming:
            batch.append(item)
            if len(batch) >= _APPLY_CHUNK:
                self._apply_chunk(raw, batch, vid, tally, seen)
                batch = []
        if batch:
            self._apply_chunk(raw, batch, vid, tally, seen)

        retired_count = 0
        if full:
            spare = seen.union(keep)
            live = [
                str(rid)
                for (rid,) in raw.execute("SELECT id FROM records WHERE retired = 0")
                if rid not in spare
            ]
            _copy_to_history(raw, live, vid, "retired")
            _mark_retired(raw, live, vid, retired=True)
            retired_count = len(live)

        counts = ApplyCounts(
            added=tally["added"],
            updated=tally["updated"],
            unchanged=tally["unchanged"] + len(set(keep) - seen),
            retired=retired_count,
            rejected=rejected,
        )
        version.added, version.updated = counts.added, counts.updated
        version.unchanged, version.retired = counts.unchanged, counts.retired
        version.rejected = counts.rejected
        version.finished_at = now_iso()
        if counts.added or counts.updated or counts.retired:
            from errkb.match import index as matchindex

            matchindex.rebuild(raw)
        self.bump_state(session, dataset_version)
        return vid, counts

    def _apply_chunk(
        self, raw: Any, batch: list[Incoming], vid: int, tally: dict[str, int], seen: set[str]
    ) -> None:
        """Classify and write one chunk of records (rows are built for this chunk only)."""
        # Decode packed records once for the chunk (the text doubles as the stored raw_json).
        by_id = {
            str(obj["id"]): (Incoming(obj, item.dataset_version), item.data)
            for item in batch
            for obj in (item.obj,)
        }
        ids = sorted(by_id)
        seen.update(ids)
        existing: dict[str, tuple[str, bool]] = {}
        for chunk in _chunks(ids, _CHUNK):
            sql = (
                "SELECT id, content_hash, retired FROM records WHERE id IN ("  # noqa: S608
                + ",".join("?" * len(chunk))
                + ")"
            )
            for rid, chash, retired in raw.execute(sql, chunk):
                existing[rid] = (chash, bool(retired))
        new_rows: list[dict[str, Any]] = []
        changed_rows: list[dict[str, Any]] = []
        restored: list[str] = []
        for rid in ids:  # key order keeps B-tree inserts local
            item, text = by_id[rid]
            chash = rec.content_hash(item.obj)
            old = existing.get(rid)
            if old is not None and old[0] == chash:
                if old[1]:
                    restored.append(rid)
                else:
                    tally["unchanged"] += 1
                continue
            row = _record_columns(item, vid, chash, text if isinstance(text, str) else None)
            if old is None:
                row["added_in"] = vid
                new_rows.append(row)
            else:
                changed_rows.append(row)
        changed_ids = [r["id"] for r in changed_rows]
        _copy_to_history(raw, changed_ids, vid, "updated")
        _copy_to_history(raw, restored, vid, "restored")
        # Rows go straight to the driver's executemany: the ORM's per-row bookkeeping cost
        # more than SQLite's own work at 150,000 records.
        if new_rows:
            raw.executemany(_INSERT_RECORD, [tuple(r[c] for c in _COLUMNS) for r in new_rows])
            raw.executemany(
                "INSERT INTO record_history (record_id, version_id, change) VALUES (?, ?, 'added')",
                [(r["id"], vid) for r in new_rows],
            )
        if changed_rows:
            raw.executemany(
                _UPDATE_RECORD,
                [
                    (*(r[c] for c in _COLUMNS if c not in _KEEP_ON_UPDATE), r["id"])
                    for r in changed_rows
                ],
            )
            for table in ("record_solutions", "record_prevention_tips", "record_tags"):
                raw.executemany(
                    f"DELETE FROM {table} WHERE record_id = ?",  # noqa: S608 - fixed names
                    [(rid,) for rid in changed_ids],
                )
        _mark_retired(raw, restored, vid, retired=False)
        _insert_children(raw, [by_id[r["id"]][0].obj for r in (*new_rows, *changed_rows)])
        tally["added"] += len(new_rows)
        tally["updated"] += len(changed_rows) + len(restored)

    def reindex(self) -> None:
        """Rebuild the match index in its own write transaction."""
        from errkb.match import index as matchindex

        with self.write() as session:
            matchindex.rebuild(session.connection().connection.dbapi_connection)
            self.bump_state(session, None)

    def bump_state(self, session: Session, dataset_version: str | None) -> None:
        """Record that the knowledge base changed: readers compare ``state`` to reload."""
        from errkb.store.models import MetaRow

        state = session.get(MetaRow, "state")
        counter = int(state.value) + 1 if state else 1
        session.merge(MetaRow(key="state", value=str(counter)))
        if dataset_version is not None:
            session.merge(MetaRow(key="dataset_version", value=dataset_version))


def _known_revision(script: Any, revision: str) -> bool:
    from alembic.util import CommandError

    try:
        return script.get_revision(revision) is not None
    except CommandError:
        return False


def _copy_to_history(raw: Any, rids: Sequence[str], vid: int, change: str) -> None:
    """Copy the current content of ``rids`` to history, SQL-side (no record text in Python)."""
    for chunk in _chunks(list(rids), _CHUNK):
        # Only "?" placeholders are interpolated; values are bound parameters.
        sql = (
            "INSERT INTO record_history (record_id, version_id, change, previous_json, "  # noqa: S608
            "previous_retired, previous_dataset_version) SELECT id, ?, ?, raw_json, "
            "retired, dataset_version FROM records WHERE id IN (" + ",".join("?" * len(chunk)) + ")"
        )
        raw.execute(sql, (vid, change, *chunk))


def _mark_retired(raw: Any, rids: Sequence[str], vid: int, *, retired: bool) -> None:
    """Set or clear the retired flag of ``rids``, as changed by version ``vid``."""
    for chunk in _chunks(rids, _CHUNK):
        raw.execute(
            "UPDATE records SET retired = ?, changed_in = ? WHERE id IN ("  # noqa: S608
            + ",".join("?" * len(chunk))
            + ")",
            (int(retired), vid, *chunk),
        )


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


#: Columns of ``records`` in insert order (the keys ``_record_columns`` produces).
_COLUMNS = (
    "id", "repo", "slug", "error_code", "error_message", "message_pattern", "error_type",
    "error_class", "http_status", "severity", "file_path", "line_number", "source_code",
    "source_code_start", "source_code_end", "github_url", "documentation", "trigger_scenarios",
    "common_situations", "example_fix", "handling_strategy", "validation_code", "type_guard",
    "try_catch_pattern", "background_tag", "content_changed_at", "analyzed_sha", "analyzed_at",
    "schema_version", "extra_json", "raw_json", "content_hash", "dataset_version", "retired",
    "added_in", "changed_in",
)  # fmt: skip
#: Kept when a record's content changes: its identity and when it first came.
_KEEP_ON_UPDATE = frozenset({"id", "added_in"})
_INSERT_RECORD = (
    f"INSERT INTO records ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"  # noqa: S608
)
_UPDATE_RECORD = (
    "UPDATE records SET "  # noqa: S608
    + ", ".join(f"{c} = ?" for c in _COLUMNS if c not in _KEEP_ON_UPDATE)
    + " WHERE id = ?"
)


def _record_columns(
    item: Incoming, vid: int, chash: str, verbatim: str | None = None
) -> dict[str, Any]:
    obj = item.obj
    extra = {k: obj[k] for k in rec.unknown_fields(obj)}
    return {
        "id": obj["id"],
        "repo": obj["repo"],
        "slug": obj["slug"],
        "error_code": obj["errorCode"],
        "error_message": obj["errorMessage"],
        "message_pattern": obj["messagePattern"],
        "error_type": obj["errorType"],
        "error_class": obj["errorClass"],
        "http_status": obj["httpStatus"],
        "severity": obj["severity"],
        "file_path": obj["filePath"],
        "line_number": obj["lineNumber"],
        "source_code": obj["sourceCode"],
        "source_code_start": obj["sourceCodeStart"],
        "source_code_end": obj["sourceCodeEnd"],
        "github_url": obj["githubUrl"],
        "documentation": obj["documentation"],
        "trigger_scenarios": obj["triggerScenarios"],
        "common_situations": obj["commonSituations"],
        "example_fix": obj["exampleFix"],
        "handling_strategy": obj["handlingStrategy"],
        "validation_code": obj["validationCode"],
        "type_guard": obj["typeGuard"],
        "try_catch_pattern": obj["tryCatchPattern"],
        "background_tag": obj.get("backgroundTag"),
        "content_changed_at": obj.get("contentChangedAt"),
        "analyzed_sha": obj["analyzedSha"],
        "analyzed_at": obj["analyzedAt"],
        "schema_version": obj["schemaVersion"],
        "extra_json": json.dumps(extra, ensure_ascii=False) if extra else None,
        "raw_json": verbatim if verbatim is not None else rec.verbatim_json(obj),
        "content_hash": chash,
        "dataset_version": item.dataset_version,
        "retired": False,
        "changed_in": vid,
    }


def _insert_children(raw: Any, objs: Iterable[Mapping[str, Any]]) -> None:
    """Insert the ordered child rows (solutions, prevention tips, tags) of ``objs``."""
    solutions: list[tuple[str, int, str]] = []
    tips: list[tuple[str, int, str]] = []
    tags: list[tuple[str, int, str]] = []
    for obj in objs:
        rid = obj["id"]
        solutions += [(rid, i, t) for i, t in enumerate(obj["solutions"])]
        tips += [(rid, i, t) for i, t in enumerate(obj["preventionTips"])]
        tags += [(rid, i, t) for i, t in enumerate(obj["tags"])]
    raw.executemany(
        "INSERT INTO record_solutions (record_id, position, text) VALUES (?, ?, ?)", solutions
    )
    raw.executemany(
        "INSERT INTO record_prevention_tips (record_id, position, text) VALUES (?, ?, ?)", tips
    )
    raw.executemany("INSERT INTO record_tags (record_id, position, tag) VALUES (?, ?, ?)", tags)
