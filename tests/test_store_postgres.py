"""The PostgreSQL backend against a real server: schema, migrations, locks, pooling, faults.

Every test here needs ``$ERRKB_TEST_PG_URL`` (``.ci/postgres.sh`` starts a server and sets it);
without it they skip, except under CI, where they fail (see ``conftest.pg_server_url``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import LINEAR_ID, _admin, query, require_extra
from published import build_tree, make_record, make_records

import errkb
from errkb.errors import (
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
    SyncLockedError,
)
from errkb.match.index import message_tokens
from errkb.store import SCHEMA_HEAD, is_server_url, open_store, resolve_target
from errkb.store.interface import RELATED_COMMON
from errkb.store.postgres import PostgresStore, redacted
from errkb.sync import sync
from tests import zygote

ROOT = Path(__file__).resolve().parent.parent
V1 = "2026-09-01T00:00:00.000Z"


def _schema(url: str) -> str:
    return url.rsplit("%3D", 1)[1]


def _errkb(db: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``errkb --db DB ARGS`` as a child process (forked warm: see tests/zygote.py)."""
    done = zygote.run(
        ["--db", db, *args], stdin=None if stdin is None else stdin.encode(), cwd=str(ROOT)
    )
    return subprocess.CompletedProcess(
        args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


# ---------------------------------------------------------------------------- URLs (no server)
@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://u@h/db",
        "postgresql://u@/db?host=/run/postgresql",
        "postgres://u:secret@h:5433/db",
    ],
)
def test_server_urls_select_the_postgres_backend(url: str) -> None:
    assert is_server_url(url)
    assert resolve_target(url) == url
    assert not is_server_url("sqlite:///x.db") and not is_server_url("kb.sqlite3")


def test_passwords_never_appear_in_messages() -> None:
    assert redacted("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redacted("postgresql://u@h/db") == "postgresql://u@h/db"


def test_without_the_extra_a_clear_error_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    with pytest.raises(StoreError, match=r"pip install 'errkb\[postgres\]'"):
        open_store("postgresql+psycopg://u@h/db")
    # The CLI: one line, exit 2 (a subprocess whose psycopg import fails the same way).
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "psycopg.py").write_text("raise ImportError('no psycopg here', name='psycopg')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "errkb", "--db", "postgresql+psycopg://u@h/db", "stats"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(shim)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'errkb[postgres]'" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------- schema
def test_migrations_create_the_schema_the_models_describe(pg_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from errkb.store.models import Base

    store = PostgresStore(pg_url)
    assert store.ensure_schema() is True
    assert store.ensure_schema() is False
    with store.engine().connect() as conn:
        conn.exec_driver_sql(f"SET search_path TO {_schema(pg_url)}")
        # The search index (migration 0005: records.search_tsv and its GIN index) is kept by a
        # trigger, not described by the ORM models (which SQLite shares).
        context = MigrationContext.configure(
            conn,
            opts={"include_name": lambda name, kind, _p: not (name or "").startswith("search_")},
        )
        diff = compare_metadata(context, Base.metadata)
    store.close()
    assert diff == []


@pytest.mark.parametrize("start", ["0001", "0002", "0003", "0004"])
def test_migrations_from_each_earlier_revision(pg_url: str, start: str) -> None:
    from alembic import command
    from alembic.config import Config

    from errkb._resources import bundle_path

    store = PostgresStore(pg_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(bundle_path("migrations")))
    with store.engine().begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, start)
    assert query(store, "SELECT version_num FROM alembic_version") == [(start,)]
    store.close()
    with errkb.open(pg_url) as kb:  # migrates to head, reindexes, fills from the bundled data
        assert query(kb.store, "SELECT version_num FROM alembic_version") == [(SCHEMA_HEAD,)]
        assert kb.store.meta_value("match_index") is None  # the stale index was rebuilt
        assert [m.id for m in kb.match_message(LINEAR).exact] == [LINEAR_ID]


LINEAR = (
    "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape (2,)"
)


def test_a_database_from_a_newer_errkb_is_refused(pg_url: str) -> None:
    errkb.open(pg_url, bundled=False).close()
    with _admin(pg_url) as conn:
        conn.execute(f"SET search_path TO {_schema(pg_url)}")
        conn.execute("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(SchemaVersionError, match="newer than this errkb"):
        errkb.open(pg_url)


def test_tables_without_a_revision_are_refused(pg_url: str) -> None:
    with _admin(pg_url) as conn:
        conn.execute(f"CREATE TABLE {_schema(pg_url)}.unrelated (x int)")
    with pytest.raises(StoreError, match="has tables but no schema revision"):
        errkb.open(pg_url)


def test_a_read_only_login_reads_and_refuses_writes(pg_url: str) -> None:
    from errkb._resources import bundled_dataset_dir

    with errkb.open(pg_url) as kb:  # created, migrated and seeded by a writer
        assert not kb.read_only
        records = kb.stats().records
    # A read-only role or standby: every transaction of the login defaults to read-only.
    ro = pg_url.replace("options=-c", "options=-cdefault_transaction_read_only%3Don%20-c", 1)
    with errkb.open(ro) as kb:
        assert kb.read_only and kb.store.read_only
        assert kb.stats().records == records
        with pytest.raises(StoreReadOnlyError, match="is read-only"):
            kb.sync(bundled_dataset_dir())
        with pytest.raises(StoreReadOnlyError, match="is read-only"):
            kb.ingest([bundled_dataset_dir()])


def test_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    require_extra("psycopg", "postgres")  # without it the line says to install the extra
    url = f"postgresql+psycopg://postgres@/nowhere?host={tmp_path}"
    proc = _errkb(url, "stats")
    assert proc.returncode == 2, proc.stderr
    assert "connection failed" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------- the knowledge base
def test_explain_stats_and_export_match_sqlite(pg_url: str, tmp_path: Path) -> None:
    log = (ROOT / "data" / "examples" / "quanto-incompatible-scale.log").read_text()
    with errkb.open(pg_url) as pg, errkb.open(tmp_path / "kb.sqlite3") as lite:
        assert pg.explain(log).to_dict() == lite.explain(log).to_dict()
        assert pg.stats().to_dict() | {"path": ""} == lite.stats().to_dict() | {"path": ""}
        assert list(pg.iter_envelopes()) == list(lite.iter_envelopes())
        assert [r.id for r in pg.records()] == [r.id for r in lite.records()]


def test_many_threads_share_one_pool(pg_url: str) -> None:
    kb = errkb.open(pg_url)
    errors: list[BaseException] = []
    found: list[str] = []

    def work() -> None:
        try:
            for _ in range(20):
                found.extend(m.id for m in kb.match_message(LINEAR).exact)
        except BaseException as exc:  # every failure is the test's
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(32)]  # more threads than the pool
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    kb.close()
    assert errors == []
    assert found == [LINEAR_ID] * 32 * 20


def _terminate_others(url: str) -> int:
    """Cut this test's other connections to the server (what a server restart does)."""
    with _admin(url) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (_schema(url),),
        ).fetchall()
    return len(rows)


def test_a_dropped_connection_is_retried_once_for_reads(pg_url: str) -> None:
    kb = errkb.open(pg_url)
    assert _terminate_others(pg_url) >= 1
    time.sleep(0.2)
    # The pooled connection is dead; the read runs again on a fresh one.
    assert [m.id for m in kb.match_message(LINEAR).exact] == [LINEAR_ID]
    assert kb.stats().records == 3
    kb.close()


def test_a_dropped_connection_while_writing_is_reported(pg_url: str, tmp_path: Path) -> None:
    store = open_store(pg_url)
    store.ensure_schema()
    records = [make_record(n, "org/repo") for n in range(50)]
    tree = build_tree(tmp_path / "t", records, V1)
    lost = r"connection lost while writing .*nothing was committed"
    with pytest.raises(StoreError, match=lost), store.write() as tx:
        tx.set_meta("probe", "1")
        _terminate_others(pg_url)
        time.sleep(0.2)
        tx.set_meta("probe", "2")
    assert store.meta_value("probe") is None  # nothing was committed; reads work again
    sync(store, tree)  # and so do writes
    assert store.counts().records == 50
    store.close()


def test_a_second_writer_waits_then_gives_up_as_locked(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERRKB_BUSY_TIMEOUT_MS", "300")
    first, second = open_store(pg_url), open_store(pg_url)
    first.ensure_schema()
    with first.write() as tx:
        tx.set_meta("held", "yes")
        # The first writer holds its transaction open throughout: the second gives up by its
        # busy timeout (300 ms) instead of waiting for the commit, or this would never return.
        with pytest.raises(StoreLockedError, match="locked by another writer"), second.write():
            pass
    assert second.meta_value("held") == "yes"
    first.close()
    second.close()


HOLDER = """
import sys, time
from errkb.store import open_store
store = open_store(sys.argv[1])
with store.sync_lock():
    print("HELD", flush=True)
    time.sleep(600)
"""


def test_the_sync_lock_fails_at_once_and_a_sigkilled_holder_frees_it(pg_url: str) -> None:
    store = open_store(pg_url)
    store.ensure_schema()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, pg_url], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "HELD"
        # The holder sleeps for ten minutes: a lock that waited for it would hang, not fail.
        with pytest.raises(SyncLockedError, match="another sync is running"), store.sync_lock():
            pass
        assert proc.poll() is None  # refused while it is still held
    finally:
        proc.send_signal(signal.SIGKILL)  # our own child
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            with store.sync_lock():
                break
        except SyncLockedError:
            assert time.monotonic() < deadline, "the killed holder's lock was never freed"
            time.sleep(0.05)
    store.close()


def test_a_released_sync_lock_is_free_at_once(pg_url: str) -> None:
    # Releasing by a bare close() let the server drop the lock only when it noticed the
    # disconnect; a sync right after the previous one then failed as "another sync is running"
    # (seen once, under load: on an idle machine the old backend usually exits first, so this
    # loop guards the order rather than reproducing the race every time).
    store = open_store(pg_url)
    store.ensure_schema()
    try:
        for _ in range(40):
            with store.sync_lock():
                pass
    finally:
        store.close()


def test_two_knowledge_bases_on_one_server_lock_separately(pg_url: str, tmp_path: Path) -> None:
    other: Any = None
    with _admin(pg_url) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS errkb_t_other")
    try:
        other = open_store(pg_url.rsplit("%3D", 1)[0] + "%3Derrkb_t_other")
        store = open_store(pg_url)
        store.ensure_schema()
        other.ensure_schema()
        with store.sync_lock(), other.sync_lock():
            pass  # different schemas, different lock keys
        store.close()
    finally:
        if other is not None:
            other.close()
        with _admin(pg_url) as conn:
            conn.execute("DROP SCHEMA errkb_t_other CASCADE")


# ---------------------------------------------------------------------------- anchor table
def test_token_rows_and_the_anchor_table_match_sqlite(pg_url: str, tmp_path: Path) -> None:
    from errkb.match.scan import anchor_path, load_table

    with errkb.open(tmp_path / "kb.sqlite3") as lite, errkb.open(pg_url) as pg:
        with lite.store.snapshot() as lv, pg.store.snapshot() as pv:
            rows = list(pv.token_rows())
            assert rows and rows == list(lv.token_rows())
            assert rows == sorted(rows, key=lambda r: (r[0], r[2]))
            state = pv.meta_value("state") or "0"
            version = pv.meta_value("dataset_version")
            table = load_table(pv, pg.store.path, state, version)
            # Suggestions: the same ids in the same order, a common token left out alike (no
            # seed shares an indexed token: with 0 every token is common).
            for message in (LINEAR, "Quanto layer has an incompatible scale shape", "none"):
                tokens = message_tokens(message)
                for common in (RELATED_COMMON, 0):
                    want = lv.related_ids(tokens, 10, common=common)
                    assert pv.related_ids(tokens, 10, common=common) == want, (message, common)
                    assert bool(want) == (common > 0 and message != "none")
        # Stored beside the server database's local files, and read back from there.
        assert anchor_path(pg.store.path).is_file()
        with pg.store.snapshot() as pv:
            again = load_table(pv, pg.store.path, state, version)
        assert again.candidates(LINEAR) == table.candidates(LINEAR) == [LINEAR_ID]
        big = "ValueError: " + LINEAR + "\n" + "filler line\n" * 40_000  # over Thresholds.scan_from
        assert [m.id for m in pg.explain(big).matches] == [m.id for m in lite.explain(big).matches]
        assert LINEAR_ID in [m.id for m in pg.explain(big).matches]


def test_a_write_merges_the_search_index_once_at_its_end(pg_url: str, tmp_path: Path) -> None:
    """An apply holds the GIN index's merging while it writes and merges it at the end.

    ``gin_clean_pending_list`` answers how many pending-list pages it merged: none after an
    errkb write; some after rows the trigger indexed outside one (the measure can see them).
    """
    schema = _schema(pg_url)
    pending = f"SELECT gin_clean_pending_list('{schema}.search_records_tsv'::regclass)"
    records = make_records(400, repos=4)
    with errkb.open(pg_url) as kb:
        kb.sync(build_tree(tmp_path / "t", records, V1))
    count = f"SELECT count(*) FROM {schema}.records WHERE search_tsv @@ to_tsquery('simple', %s)"
    with _admin(pg_url) as conn:
        assert conn.execute(pending).fetchone() == (0,)
        # The index answers as the vectors do (a scan of the table) for the records' words.
        for word in ("generated", "layer", "repo"):
            conn.execute("SET enable_seqscan = on; SET enable_bitmapscan = off")
            scanned = conn.execute(count, (word,)).fetchone()
            conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = on")
            assert conn.execute(count, (word,)).fetchone() == scanned
            assert scanned is not None and scanned[0] >= len(records)
        conn.execute(f"UPDATE {schema}.records SET documentation = documentation || ' zq'")
        assert conn.execute(pending).fetchone()[0] > 0


#: Migration 0005's trigger expressions, over a row's stored columns: the vector the trigger
#: gave every record before migration 0009.
VECTOR_0005 = " || ".join(
    f"setweight(to_tsvector('simple', errkb_search_words({value})), '{weight}')"
    for value, weight in (
        ("error_message", "A"),
        ("slug", "B"),
        ("error_class", "C"),
        ("CASE WHEN jsonb_typeof(raw_json::jsonb -> 'tags') = 'array' "
         "THEN (raw_json::jsonb -> 'tags')::text END", "C"),
        ("documentation", "D"),
        ("trigger_scenarios", "D"),
        ("common_situations", "D"),
        ("CASE WHEN jsonb_typeof(raw_json::jsonb -> 'solutions') = 'array' "
         "THEN (raw_json::jsonb -> 'solutions')::text END", "D"),
    )
)  # fmt: skip


def test_a_bulk_write_gives_each_record_the_vector_the_trigger_would(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second connection computes the vectors of a large insert (``_Vectors``), exactly."""
    from errkb.store import postgres

    computed: list[int] = []
    real = postgres._Vectors._receive

    def counted(self: Any, count: int) -> list[str]:
        got = real(self, count)
        computed.append(len(got))
        return got

    monkeypatch.setattr(postgres._Vectors, "_receive", counted)
    schema = _schema(pg_url)
    records = make_records(700, repos=3)
    records[0]["tags"] = ["cuda-oom", "fp8", "a-b-c"]
    records[1]["solutions"] = ["torch.nn.functional(x) -> y", 'quote"d new\nline ünï-côdé C:\\to']
    with errkb.open(pg_url) as kb:
        seeded = len(list(kb.records()))  # the bundled records: too few for a helper
        assert computed == []
        kb.sync(build_tree(tmp_path / "t", records, V1))
    assert sum(computed) == len(records) and max(computed) == postgres.VECTORS_BATCH
    with _admin(pg_url) as conn:
        rows = conn.execute(
            f"SELECT count(*), count(*) FILTER (WHERE search_tsv IS DISTINCT FROM ({VECTOR_0005}))"
            f" FROM {schema}.records"
        ).fetchone()
    assert rows == (len(records) + seeded, 0)


def test_without_a_free_pooled_connection_the_trigger_computes_the_vectors(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.store import postgres

    monkeypatch.setenv(postgres.POOL_MAX_ENV, "1")  # the write's own connection is the pool
    taken: list[object] = []
    real = postgres._Vectors.take

    def counted(pool: Any) -> Any:
        got = real(pool)
        taken.append(got)
        return got

    monkeypatch.setattr(postgres._Vectors, "take", counted)
    schema = _schema(pg_url)
    records = make_records(600, repos=2)
    with errkb.open(pg_url) as kb:
        kb.sync(build_tree(tmp_path / "t", records, V1))
        assert kb.stats().records == len(records)
    assert taken and all(t is None for t in taken)
    with _admin(pg_url) as conn:
        rows = conn.execute(
            f"SELECT count(*) FILTER (WHERE search_tsv IS DISTINCT FROM ({VECTOR_0005}))"
            f" FROM {schema}.records"
        ).fetchone()
    assert rows == (0,)


def test_a_failing_vector_query_fails_the_write_and_leaves_the_pool_whole(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.store import postgres

    with errkb.open(pg_url) as kb:
        before = kb.stats().records
        monkeypatch.setattr(postgres, "_VECTORS_SQL", "SELECT no_such_function($1::text)")
        with pytest.raises(StoreError, match=r"search vectors: .*no_such_function"):
            kb.sync(build_tree(tmp_path / "t", make_records(600, repos=2), V1))
        assert kb.stats().records == before  # nothing committed
        monkeypatch.undo()
        kb.sync(build_tree(tmp_path / "t2", make_records(600, repos=2), V1))
        assert kb.stats().records == 600


def test_a_write_compresses_large_values_with_lz4_where_the_server_can(
    pg_url: str, tmp_path: Path
) -> None:
    schema = _schema(pg_url)
    records = make_records(30, repos=1)
    for r in records:
        r["documentation"] = " ".join(f"word{n}" for n in range(2000))  # past TOAST's 2 KB
    with errkb.open(pg_url) as kb:
        kb.sync(build_tree(tmp_path / "t", records, V1))
    with _admin(pg_url) as conn:
        row = conn.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        ).fetchone()
        expected = "lz4" if row and row[0] else "pglz"
        methods = conn.execute(
            f"SELECT pg_column_compression(documentation), count(*) FROM {schema}.records "
            "WHERE length(documentation) > 10000 GROUP BY 1"
        ).fetchall()
    assert methods == [(expected, len(records))]


def test_a_writer_that_does_not_own_the_index_leaves_its_merge_to_the_next(
    pg_url: str, tmp_path: Path
) -> None:
    """``gin_clean_pending_list`` wants the index's owner: a writer with grants only writes."""
    schema = _schema(pg_url)
    role = f"w_{schema}"
    with errkb.open(pg_url) as kb:  # the owner makes the schema
        assert kb.stats().records
    with _admin(pg_url) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    try:
        writer = pg_url.replace("postgres@", f"{role}@", 1)
        assert writer != pg_url
        records = make_records(40, repos=2)
        with errkb.open(writer) as kb:
            kb.sync(build_tree(tmp_path / "t", records, V1))
            assert kb.stats().records == len(records)
        pending = f"SELECT gin_clean_pending_list('{schema}.search_records_tsv'::regclass)"
        with _admin(pg_url) as conn:
            assert conn.execute(pending).fetchone()[0] > 0  # left for the owner's merge
    finally:
        with _admin(pg_url) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


# ---------------------------------------------------------------------------- the read path
V2 = "2026-09-02T00:00:00.000Z"
CHANGING = "Generated failure number 7 in layer 'enc.0' of org/repo"


def _two_trees(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two versions in which record 7's documentation changes (its id stays)."""
    base = [make_record(n, "org/repo") for n in range(20) if n != 7]
    v1 = build_tree(tmp_path / "v1", [*base, make_record(7, "org/repo", marker="one")], V1)
    v2 = build_tree(tmp_path / "v2", [*base, make_record(7, "org/repo", marker="two")], V2)
    return v1, v2, make_record(7, "org/repo")["id"]


def _doc(report: Any) -> str:
    (match,) = report.exact
    return str(match.record["documentation"])[-5:]


def test_cached_records_follow_the_state_and_never_mix(pg_url: str, tmp_path: Path) -> None:
    v1, v2, rid = _two_trees(tmp_path)
    writer = open_store(pg_url)
    sync(writer, v1)
    kb = errkb.open(pg_url, bundled=False)
    assert _doc(kb.match_message(CHANGING)) == "[one]"
    assert _doc(kb.match_message(CHANGING)) == "[one]"  # now from the record cache
    opened = threading.Event()
    synced = threading.Event()
    seen: dict[str, Any] = {}

    def old_reader() -> None:
        # A snapshot that began before the sync: it must keep reading the old version, even
        # once a newer snapshot has put the new text in the cache.
        with kb.store.snapshot() as view:
            seen["state"] = view.meta_value("state")
            opened.set()
            synced.wait(60)
            seen["doc"] = (view.raw_record(rid) or {}).get("documentation", "")[-5:]
            seen["version"] = view.meta_value("dataset_version")

    thread = threading.Thread(target=old_reader)
    thread.start()
    assert opened.wait(60)
    sync(writer, v2)  # another store: as another process would
    assert _doc(kb.match_message(CHANGING)) == "[two]"  # the next explain sees the new state
    synced.set()
    thread.join(60)
    assert seen == {"state": seen["state"], "doc": "[one]", "version": V1}
    assert _doc(kb.match_message(CHANGING)) == "[two]"
    kb.close()
    writer.close()


def test_a_warm_explain_waits_for_one_round_trip(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    kb = errkb.open(pg_url)
    for _ in range(3):
        assert [m.id for m in kb.match_message(LINEAR).exact] == [LINEAR_ID]
    # The warm-up explains' commits are ended first: a closing thread with BACKLOG of them
    # still queued (a loaded machine) makes the reader commit its own, as it should.
    closer = kb.store._closer  # type: ignore[attr-defined]
    with closer._cond:
        assert closer._cond.wait_for(lambda: closer._busy == 0, timeout=60)
    sent: list[tuple[str, str]] = []
    execute = psycopg.Connection.execute

    def counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append((threading.current_thread().name, str(query)))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    assert [m.id for m in kb.match_message(LINEAR).exact] == [LINEAR_ID]
    kb.close()  # waits for the closing thread
    monkeypatch.undo()
    # The transaction and the meta table in one statement on the reader's thread; the commit
    # on the store's closing thread. No liveness check, no per-key meta reads, no record read
    # (cached for this state).
    # (The closing thread may still be ending the previous explain's transaction.)
    me = threading.current_thread().name
    mine = [query for thread, query in sent if thread == me]
    assert len(mine) == 1, sent
    assert mine[0].startswith("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;")
    assert sent[-1] == ("errkb-pg-close", "COMMIT")
    assert {thread for thread, _query in sent} == {me, "errkb-pg-close"}


def test_closing_reads_never_hand_out_a_connection_in_a_transaction(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Many threads, more than the pool: every checkout finds an idle connection, and the
    pool never had to roll one back (it logs a warning when it must)."""
    import logging

    from psycopg.pq import TransactionStatus

    caplog.set_level(logging.INFO, logger="psycopg")

    kb = errkb.open(pg_url)
    store = kb.store
    assert isinstance(store, PostgresStore)
    states: list[int] = []
    errors: list[BaseException] = []
    getconn = store.pool().getconn

    def watched(*args: Any, **kwargs: Any) -> Any:
        conn = getconn(*args, **kwargs)
        states.append(conn.pgconn.transaction_status)
        return conn

    store.pool().getconn = watched  # type: ignore[method-assign]

    def work() -> None:
        try:
            for _ in range(30):
                assert [m.id for m in kb.match_message(LINEAR).exact] == [LINEAR_ID]
        except BaseException as exc:  # every failure is the test's
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    kb.close()
    assert errors == []
    assert len(states) >= 24 * 30 and set(states) == {TransactionStatus.IDLE}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_server_restart_costs_no_read(pg_url: str) -> None:
    kb = errkb.open(pg_url)
    held = threading.Barrier(6)

    def hold() -> None:
        with kb.store.snapshot():
            held.wait(60)  # six snapshots at once: six pooled connections

    threads = [threading.Thread(target=hold) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert _terminate_others(pg_url) >= 6  # every pooled connection dies, as in a restart
    time.sleep(0.2)
    for _ in range(10):  # each read finds dead connections at most once, then fresh ones
        assert [m.id for m in kb.match_message(LINEAR).exact] == [LINEAR_ID]
        assert kb.stats().records == 3
    kb.close()


def test_every_command_on_postgres(pg_url: str, tmp_path: Path) -> None:
    """The CLI end to end on a server: ingest, explain, search, sync, versions, history,
    rollback, export, stats."""
    v1, v2, rid = _two_trees(tmp_path)
    first = _errkb(pg_url, "sync", str(v1))
    assert first.returncode == 0, first.stderr
    assert _errkb(pg_url, "sync", str(v2)).returncode == 0
    proc = _errkb(pg_url, "explain", "--format", "json", stdin=f"ValueError: {CHANGING}\n")
    assert proc.returncode == 0, proc.stderr
    assert [m["id"] for m in json.loads(proc.stdout)["matches"]] == [rid]
    proc = _errkb(pg_url, "search", "--format", "json", "Generated failure number 7")
    assert proc.returncode == 0 and rid in proc.stdout, proc.stderr
    proc = _errkb(pg_url, "versions")
    assert proc.returncode == 0 and V1 in proc.stdout and V2 in proc.stdout, proc.stderr
    proc = _errkb(pg_url, "history", rid)
    assert proc.returncode == 0 and "updated" in proc.stdout, proc.stderr
    proc = _errkb(pg_url, "rollback", V1)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "export.jsonl"
    proc = _errkb(pg_url, "export", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    docs = {
        e["record"]["id"]: e["record"]["documentation"]
        for e in map(json.loads, out.read_text().splitlines())
    }
    assert len(docs) == 20 and docs[rid].endswith("[one]")  # rolled back to v1's content
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(make_record(99, "org/other")))
    proc = _errkb(pg_url, "ingest", str(extra))
    assert proc.returncode == 0, proc.stderr
    proc = _errkb(pg_url, "stats", "--format", "json")
    assert proc.returncode == 0 and '"records": 21' in proc.stdout, proc.stdout
