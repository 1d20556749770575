from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.errors import SchemaVersionError, UsageError
from errkb.store import SCHEMA_HEAD, resolve_db_path
from errkb.store.sqlite import SqliteStore as Store
from tests.conftest import DATASET, QUANTO_ID, make_record, query


# The storage tests below run on both backends: these override conftest's SQLite-only fixtures.
@pytest.fixture
def kb(db_target: str) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(db_target) as opened:
        yield opened


@pytest.fixture
def empty_kb(db_target: str) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(db_target, bundled=False) as opened:
        yield opened


def test_schema_head_constant_is_the_migrations_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from errkb._resources import bundle_path

    cfg = Config()
    cfg.set_main_option("script_location", str(bundle_path("migrations")))
    assert ScriptDirectory.from_config(cfg).get_current_head() == SCHEMA_HEAD


def test_migrations_create_the_schema_the_models_describe(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from errkb.store.models import Base

    store = Store(tmp_path / "m.sqlite3")
    assert store.ensure_schema() is True
    assert store.ensure_schema() is False  # already at head: no second upgrade
    with store.engine().connect() as conn:
        # The search index (migration 0004) is SQLite FTS5 kept by triggers, not ORM tables.
        context = MigrationContext.configure(
            conn,
            opts={"include_name": lambda name, kind, _p: not (name or "").startswith("search_")},
        )
        diff = compare_metadata(context, Base.metadata)
    assert diff == []
    conn2 = sqlite3.connect(store.path)
    assert conn2.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_records_liveness_is_read_from_the_live_index(tmp_path: Path) -> None:
    # ``retired`` comes after ``raw_json`` in a row: read from the row it walked the row's
    # overflow pages (migration 0007). The spec rows' join, a look-up of ids and the anchor
    # build's ordered scan of live records read the covering index alone.
    from errkb.store import engine

    store = Store(tmp_path / "plan.sqlite3")
    store.ensure_schema()
    conn = sqlite3.connect(store.path)
    queries = {
        "spec rows": engine._SPEC_SQL.replace("$IDS", "IN (?, ?)"),
        "anchor rows": engine._ANCHOR_SQL,
        "live ids": "SELECT id FROM records WHERE retired = FALSE AND id IN (?, ?)",
    }
    for name, sql in queries.items():
        params = ("a", "b")[: sql.count("?")]
        plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        on_records = [step for step in plan if step.split()[1] in ("r", "records")]
        assert on_records, (name, plan)
        # Each step on records reads the index alone, never a record's row.
        assert all("USING COVERING INDEX ix_records_live" in step for step in on_records), (
            name,
            plan,
        )
    conn.close()


def test_a_sync_s_inventory_and_kept_ids_read_the_inventory_index(tmp_path: Path) -> None:
    # Every sync reads each record's id, repository, liveness and content hash, and the live
    # ids of the repositories it keeps: from the rows they walked every record's overflow
    # pages (migration 0008). Both read the covering index alone.
    from errkb.store import engine
    from errkb.store import sqlite as sqlite_store

    store = Store(tmp_path / "plan.sqlite3")
    store.ensure_schema()
    conn = sqlite3.connect(store.path)
    kept = engine._KEPT_SQL.format(column="repo", collate="")
    for sql in (engine._INVENTORY_SQL, sqlite_store._GROUPED_INVENTORY, kept):
        sql = sql.replace("$IDS", "IN (?, ?)")
        params = ("a", "b")[: sql.count("?")]
        plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        on_records = [step for step in plan if "records" in step.split()[:2]]
        assert on_records, (sql, plan)
        assert all("USING COVERING INDEX ix_records_inventory" in s for s in on_records), plan
    conn.close()


def test_the_grouped_inventory_is_the_one_read_a_row_per_record(
    tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    # SQLite's inventory joins each repository's ids in SQL; the engine's reads a row per
    # record. Retired records, and a repository with none live, included; an id holding a
    # space (never valid) makes the grouped one give way.
    from errkb.store.engine import StoreEngine

    seed = seed_records[QUANTO_ID]
    records = []
    for n in range(30):
        rec = make_record(seed, f"Inventory{n} tensor {{name!r}} is odd{n}")
        rec["repo"] = f"org/r{n % 4}"
        records.append(rec)
    source = tmp_path / "a.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    with errkb.open(tmp_path / "inv.sqlite3", bundled=False) as kb:
        assert kb.ingest([source]).counts.added == 30
        store = kb.store
        gone = [r["id"] for r in records if r["repo"] == "org/r3"][:-1]
        with store.write() as tx:
            tx.sql.execute(  # type: ignore[attr-defined]
                f"UPDATE records SET retired = TRUE WHERE id IN ({','.join('?' * len(gone))})",
                gone,
            )
            tx.sql.execute(  # type: ignore[attr-defined]
                "UPDATE records SET retired = TRUE WHERE repo = 'org/r2'"
            )
        grouped, rows = store.inventory(), StoreEngine.inventory(store)
        assert grouped == rows
        assert "org/r2" not in grouped.live_by_repo and len(grouped.hashes) == 30
        assert len(grouped.live_by_repo["org/r3"]) == 1

    class Spaced:  # a group whose id holds a space: it does not split as counted
        def rows(self, sql: str) -> list[tuple[object, ...]]:
            return [("org/x", 1, 1, "odd id 0123", "odd id")]

    from errkb.store import sqlite as sqlite_store

    assert sqlite_store._grouped_inventory(Spaced()) is None  # type: ignore[arg-type]


def test_a_database_from_a_newer_errkb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.sqlite3"
    Store(path).ensure_schema()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(SchemaVersionError, match="newer than this errkb"):
        errkb.open(path)


def test_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(errkb.StoreError):
        errkb.open(path)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("kb.db", Path("kb.db")),
        ("sqlite:///rel/kb.db", Path("rel/kb.db")),
        ("sqlite:////abs/kb.db", Path("/abs/kb.db")),
    ],
)
def test_db_targets(target: str, expected: Path) -> None:
    assert resolve_db_path(target) == expected


@pytest.mark.parametrize(
    "target", ["postgresql://u@h/db", "mysql://u@h/db", "sqlite://", "sqlite:///:memory:"]
)
def test_unsupported_db_targets(target: str) -> None:
    with pytest.raises(UsageError):
        resolve_db_path(target)


def test_env_var_and_default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERRKB_DB", str(tmp_path / "env.sqlite3"))
    assert resolve_db_path(None) == tmp_path / "env.sqlite3"
    monkeypatch.delenv("ERRKB_DB")
    assert resolve_db_path(None).name == "errkb.sqlite3"


def test_default_database_is_created_and_filled_from_bundled_data() -> None:
    with errkb.open() as kb:
        assert kb.stats().records == 3
        assert kb.path.exists()
        assert kb.stats().dataset_version == "2026-08-28T06:17:29.519Z"


def test_unwritable_data_dir_still_works_from_bundled_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))  # mkdir below a file fails, even as root
    with errkb.open() as kb:
        assert kb.get(QUANTO_ID).id == QUANTO_ID
        assert not str(kb.path).startswith(str(blocker))


def test_ingest_is_idempotent(empty_kb: errkb.KnowledgeBase) -> None:
    first = empty_kb.ingest([DATASET])
    assert (first.counts.added, first.counts.updated, first.counts.unchanged) == (3, 0, 0)
    again = empty_kb.ingest([DATASET])
    assert (again.counts.added, again.counts.updated, again.counts.unchanged) == (0, 0, 3)
    assert empty_kb.stats().records == 3


def test_update_keeps_previous_content_in_history(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, envelopes: list[dict[str, Any]]
) -> None:
    empty_kb.ingest([DATASET])
    changed = json.loads(json.dumps(envelopes[0]))
    changed["record"]["documentation"] = "Rewritten documentation."
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(changed))
    report = empty_kb.ingest([path])
    assert (report.counts.updated, report.counts.added) == (1, 0)
    assert empty_kb.get(QUANTO_ID).documentation == "Rewritten documentation."
    rows = query(
        empty_kb.store,
        "SELECT change, previous_json FROM record_history WHERE record_id = ? ORDER BY id",
        (QUANTO_ID,),
    )
    assert [r[0] for r in rows] == ["added", "updated"]
    assert rows[0][1] is None
    assert json.loads(rows[1][1]) == envelopes[0]["record"]


def test_invalid_records_are_rejected_and_the_rest_applied(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, envelopes: list[dict[str, Any]]
) -> None:
    bad = json.loads(json.dumps(envelopes[1]))
    bad["record"]["severity"] = "fatal"
    path = tmp_path / "mix.jsonl"
    path.write_text(json.dumps(envelopes[0]) + "\n" + json.dumps(bad) + "\n")
    report = empty_kb.ingest([path])
    assert report.counts.added == 1 and report.counts.rejected == 1
    (problem,) = report.problems
    assert problem.location == "line 2" and problem.json_path == "$.record.severity"
    assert problem.record_id == bad["record"]["id"]


def test_child_rows_are_ordered_and_queryable(
    kb: errkb.KnowledgeBase, seed_records: dict[str, Any]
) -> None:
    rows = query(
        kb.store,
        "SELECT text FROM record_solutions WHERE record_id = ? ORDER BY position",
        (QUANTO_ID,),
    )
    assert [r[0] for r in rows] == seed_records[QUANTO_ID]["solutions"]
    assert [r.id for r in kb.records(tag="quanto")] == [QUANTO_ID]
    assert len(kb.records(error_class="ValueError")) == 3
    assert kb.records(repo="nobody/nothing") == []


def test_export_round_trips_into_a_fresh_database(
    kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    extra = make_record(seed_records[QUANTO_ID], "Quanto layer {prefix!r} is odd")
    extra["futureField"] = {"kept": True}
    path = tmp_path / "extra.json"
    path.write_text(json.dumps(extra))
    kb.ingest([path])
    out = tmp_path / "export.jsonl"
    with out.open("w") as fh:
        assert kb.export(fh) == 4
    with errkb.open(tmp_path / "fresh.sqlite3", bundled=False) as fresh:
        report = fresh.ingest([out])
        assert report.counts.added == 4 and not report.problems
        assert list(fresh.iter_envelopes()) == list(kb.iter_envelopes())
        assert fresh.get(extra["id"]).raw["futureField"] == {"kept": True}
