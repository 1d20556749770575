"""A large first sync, or a full one that changes (nearly) every record, builds ``<db>.new``
and renames it into place (issue 20).

``FRESH_BUILD_MIN`` is lowered so a few dozen records take that path. The built database must
hold what the one-transaction path writes (history, versions and the records that stay copied
from the old file); a reader of the old file keeps its snapshot and then reads the new one; a
stale ``<db>.new`` is no obstacle; a SIGKILL in the middle of the build leaves the old file
intact and the next sync works.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from published import build_tree, hashes, make_record, make_records

from errkb.report import SyncStatus
from errkb.store import open_store
from errkb.store import sqlite as sqlite_store
from errkb.store.sqlite import SqliteStore
from errkb.sync import sync

V1 = "2026-09-01T00:00:00.000Z"
TESTS_DIR = Path(__file__).resolve().parent
TABLES = ("records", "record_tags", "record_solutions", "pattern_specs", "match_tokens")
V2 = "2026-09-02T00:00:00.000Z"
#: Also compared after a second sync: what history and the version rows hold.
HISTORY = (
    "SELECT id, record_id, version_id, change, previous_json, previous_retired, "
    "previous_dataset_version FROM record_history"
)
VERSIONS = (
    'SELECT id, dataset_version, kind, source, "full", partial, added, updated, unchanged, '
    "retired, rejected FROM dataset_versions"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "tree", make_records(60, repos=3), V1)


def _dump(db: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(db)
    try:
        out = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in TABLES}
        out["search"] = sorted(
            conn.execute(
                "SELECT d.record_id FROM search_fts f JOIN search_docs d ON d.key = f.rowid "
                "WHERE search_fts MATCH 'error OR scale OR layer'"
            ).fetchall()
        )
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        # Every index and trigger, as the schema made them (a fresh build drops the secondary
        # indexes for its bulk insert and builds them again).
        out["schema"] = sorted(
            conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type <> 'table'"
            ).fetchall()
        )
        out["history"] = sorted(conn.execute(HISTORY).fetchall())
        out["versions"] = sorted(conn.execute(VERSIONS).fetchall())
        out["meta"] = sorted(
            # The anchor key's nonce is random per write (``store.anchors_key``).
            conn.execute(
                "SELECT key, value FROM meta WHERE key NOT IN ('sync_state', 'anchors_nonce')"
            ).fetchall()
        )
        return out
    finally:
        conn.close()


def test_a_fresh_build_writes_what_the_transaction_writes(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain.sqlite3"
    store = open_store(plain)
    store.ensure_schema()
    assert sync(store, tree).status is SyncStatus.APPLIED
    store.close()

    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    built = tmp_path / "built.sqlite3"
    store = open_store(built)
    store.ensure_schema()
    before = os.stat(built).st_ino
    report = sync(store, tree)
    assert report.status is SyncStatus.APPLIED and report.counts.added == 60
    assert os.stat(built).st_ino != before  # a new file was put in place
    assert not built.with_name(built.name + ".new").exists()
    assert store.inventory().hashes == hashes(make_records(60, repos=3))
    assert [v.counts.added for v in store.versions()] == [60]
    store.close()
    assert _dump(built) == _dump(plain)


def _opened(db: Path, *trees: Path) -> SqliteStore:
    """The store of ``db``, its schema made, each of ``trees`` synced into it in turn."""
    store = open_store(db)
    assert isinstance(store, SqliteStore)
    store.ensure_schema()
    for tree in trees:
        sync(store, tree)
    return store


def _second_version(tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    """v2: 50 of v1's 60 records with new content, 5 as they were, 5 gone, 10 new."""
    old = make_records(60, repos=3)
    records = [make_record(n, str(r["repo"]), marker="v2") for n, r in enumerate(old[:50])]
    records += [*old[50:55], *make_records(10, repos=3, start=60)]
    return build_tree(tmp_path / "tree2", records, V2), records


# The default sync (nearly all changed) stays in the default tier; --full is the same path.
@pytest.mark.parametrize("full", [None, pytest.param(True, marks=pytest.mark.slow)])
def test_a_full_sync_changing_nearly_everything_builds_a_new_file(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: bool | None
) -> None:
    tree2, records = _second_version(tmp_path)
    plain = tmp_path / "plain.sqlite3"
    store = _opened(plain, tree)
    assert sync(store, tree2, full=full).counts.updated == 50
    store.close()

    built = tmp_path / "built.sqlite3"
    store = _opened(built, tree)  # 60 records: below the default minimum, one transaction
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    before = os.stat(built).st_ino
    report = sync(store, tree2, full=full)
    assert (report.counts.added, report.counts.updated, report.counts.unchanged) == (10, 50, 5)
    assert report.counts.retired == 5
    assert os.stat(built).st_ino != before  # a new file was put in place
    assert store.inventory().hashes == {**hashes(make_records(60, repos=3)), **hashes(records)}
    store.close()
    assert _dump(built) == _dump(plain)


def test_a_fresh_build_compiles_again_what_an_older_errkb_compiled(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.match.feed import FEED

    tree2, _records = _second_version(tmp_path)
    built = tmp_path / "built.sqlite3"
    store = _opened(built, tree)
    with store.write() as tx:  # what an older errkb left: its compiler, its specs
        tx.set_meta("compiler", "0")
        tx.sql.execute("UPDATE pattern_specs SET regex = 'old'")  # type: ignore[attr-defined]
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    before = os.stat(built).st_ino
    report = sync(store, tree2)
    assert report.counts.unchanged == 5  # copied from the old file, specs and all
    assert os.stat(built).st_ino != before  # a new file was put in place
    store.close()
    conn = sqlite3.connect(built)
    try:
        assert conn.execute(
            "SELECT count(*) FROM pattern_specs WHERE regex = 'old'"
        ).fetchone() == (0,)
        assert conn.execute("SELECT value FROM meta WHERE key = 'compiler'").fetchone() == (
            FEED.compiler,
        )
    finally:
        conn.close()


def test_a_sync_changing_few_records_keeps_the_one_transaction(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    db = tmp_path / "kb.sqlite3"
    store = _opened(db, tree)
    old = make_records(60, repos=3)
    changed = [make_record(0, str(old[0]["repo"]), marker="v2"), *old[1:]]
    before = os.stat(db).st_ino
    report = sync(store, build_tree(tmp_path / "tree2", changed, V2))
    assert (report.counts.updated, report.counts.unchanged) == (1, 59)
    assert os.stat(db).st_ino == before  # written in place
    store.close()


def test_a_sync_changing_one_repository_keeps_the_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the changed repository's records come in (the other files are the ones applied,
    # kept as stored): every incoming record is new content, but few of the rows stored.
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    old = make_records(120, repos=6)
    db = tmp_path / "kb.sqlite3"
    store = _opened(db, build_tree(tmp_path / "tree", old, V1))
    changed = [
        make_record(n, str(r["repo"]), marker="v2") if n % 6 == 0 else r for n, r in enumerate(old)
    ]
    before = os.stat(db).st_ino
    report = sync(store, build_tree(tmp_path / "tree2", changed, V2))
    assert (report.counts.updated, report.counts.unchanged) == (20, 100)
    assert report.repos_skipped == 5  # 20 incoming records, all of them new content
    assert os.stat(db).st_ino == before  # written in place
    assert store.inventory().hashes == hashes(changed)
    store.close()


def test_a_reader_keeps_its_snapshot_then_reads_the_new_file(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    db = tmp_path / "kb.sqlite3"
    writer = open_store(db)
    writer.ensure_schema()
    reader = SqliteStore(db)
    with reader.snapshot() as view:
        assert view.one("SELECT count(*) FROM records") == (0,)
        assert sync(writer, tree).status is SyncStatus.APPLIED
        assert view.one("SELECT count(*) FROM records") == (0,)  # its file, its snapshot
    assert reader.counts().records == 60  # the next read opens the new file
    reader.close()
    writer.close()


def test_a_stale_build_file_is_removed(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    db = tmp_path / "kb.sqlite3"
    for suffix in (".new", ".new-journal"):
        db.with_name(db.name + suffix).write_bytes(b"left by a killed sync")
    store = open_store(db)
    store.ensure_schema()
    assert sync(store, tree).counts.added == 60
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("kb.")) == [
        "kb.sqlite3",
        "kb.sqlite3.sync.lock",
    ]


KILLED_IN_THE_BUILD = """
import os, signal, sys
from errkb.store import engine, open_store
from errkb.store import sqlite as sqlite_store
from errkb.sync import sync

sqlite_store.FRESH_BUILD_MIN = 10
engine._APPLY_CHUNK = 20
real = engine.UnitOfWork._apply_chunk
calls = []

def apply_chunk(self, *args, **kwargs):
    real(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)

store = open_store(sys.argv[1])
store.ensure_schema()
if len(sys.argv) > 4:  # a first version, in one transaction: the build then copies from it
    sqlite_store.FRESH_BUILD_MIN = 10**9
    sync(store, sys.argv[4], plan_workers=0)
    sqlite_store.FRESH_BUILD_MIN = 10
engine.UnitOfWork._apply_chunk = apply_chunk
sync(store, sys.argv[2], plan_workers=0)
os.kill(os.getpid(), signal.SIGKILL)  # after the rename: the new file must be whole
"""


@pytest.mark.slow
@pytest.mark.parametrize("chunks", [1, 99])
def test_a_kill_during_the_build_leaves_the_old_file_and_the_next_sync_works(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: int
) -> None:
    db = tmp_path / "kb.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR.parent), str(TESTS_DIR)])}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_IN_THE_BUILD, str(db), str(tree), str(chunks)],
        env=env,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = open_store(db)
    store.ensure_schema()
    expected = 0 if chunks == 1 else 60  # killed mid-build, or right after the rename
    assert store.counts().records == expected
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    report = sync(store, tree)
    assert report.status is (SyncStatus.APPLIED if chunks == 1 else SyncStatus.UP_TO_DATE)
    assert store.inventory().hashes == hashes(make_records(60, repos=3))
    store.close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("chunks", [1, 99])
def test_a_kill_during_a_rebuild_leaves_the_old_version_and_the_next_sync_works(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: int
) -> None:
    tree2, records = _second_version(tmp_path)
    db = tmp_path / "kb.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR.parent), str(TESTS_DIR)])}
    argv = [sys.executable, "-c", KILLED_IN_THE_BUILD, str(db), str(tree2), str(chunks), str(tree)]
    proc = subprocess.run(argv, env=env, capture_output=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    v1, v2 = hashes(make_records(60, repos=3)), hashes(records)
    store = open_store(db)
    store.ensure_schema()
    # Killed mid-build: v1 as it was; right after the rename: v2 whole.
    assert store.meta_value("dataset_version") == (V1 if chunks == 1 else V2)
    assert store.counts().records == (60 if chunks == 1 else 65)
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    report = sync(store, tree2)
    assert report.status is (SyncStatus.APPLIED if chunks == 1 else SyncStatus.UP_TO_DATE)
    assert store.inventory().hashes == {**v1, **v2}
    assert len(store.versions()) == 2
    store.close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    assert not db.with_name(db.name + ".new").exists()


@pytest.mark.parametrize("fresh", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_version_rewriting_only_documentation_compiles_nothing(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: bool, workers: int
) -> None:
    # A re-analysis upstream: every record's documentation rewritten, its message, pattern,
    # class, file, line and source as they were. No record is compiled again (in this
    # process, in a worker, or by the store), in one transaction or a fresh build (the spec
    # rows copied from the old file), and the specs and match index are those a compile
    # from scratch gives.
    from errkb.match import feed as feed_module
    from errkb.sync import repofile

    records = make_records(60, repos=3)
    for r in records:
        r["documentation"] = f"{r['documentation']} (re-analysed)"
    tree2 = build_tree(tmp_path / "tree2", records, V2)
    scratch = _opened(tmp_path / "scratch.sqlite3", tree2)
    scratch.close()

    db = tmp_path / "kb.sqlite3"
    store = _opened(db, tree)
    compiled: list[str] = []
    real_checker, real_feed = repofile.derive, feed_module.IndexFeed.derive
    monkeypatch.setattr(
        repofile, "derive", lambda r: compiled.append(str(r["id"])) or real_checker(r)
    )
    monkeypatch.setattr(
        feed_module.IndexFeed,
        "derive",
        lambda self, r: compiled.append(str(r["id"])) or real_feed(self, r),
    )
    if fresh:
        monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10)
    before = os.stat(db).st_ino
    report = sync(store, tree2, plan_workers=workers)
    assert report.counts.updated == 60
    assert (os.stat(db).st_ino != before) is fresh
    assert compiled == []
    store.close()
    mine, theirs = _dump(db), _dump(tmp_path / "scratch.sqlite3")
    assert mine["pattern_specs"] == theirs["pattern_specs"]
    assert mine["match_tokens"] == theirs["match_tokens"]
