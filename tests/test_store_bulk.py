"""The SQLite store's bulk write paths (issue 11), each equal to the row-by-row result.

A large apply fills the full-text index in one ``INSERT ... SELECT`` at the end of its
transaction (the per-row insert trigger dropped meanwhile), and the match index is rebuilt in
key order with its secondary index created again after. Both must give exactly what the
triggers and the old build gave, survive a repeated id, and leave nothing half-done (no
trigger or index missing) when the unit of work fails.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.match.feed import FEED
from errkb.store import Incoming, VersionKind, engine
from errkb.store import sqlite as sqlite_store
from tests.conftest import QUANTO_ID, index_rows, make_record
from tests.test_search import fts_integrity, ids

VERSION = "2026-12-01T00:00:00.000Z"


def _schema_objects(path: Path) -> set[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'index')"
        ).fetchall()
    finally:
        conn.close()
    return {(str(t), str(n)) for t, n in rows}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps({"record": r, "datasetVersion": VERSION}) + "\n" for r in records)
    )
    return path


def _variants(seed: dict[str, Any], count: int, word: str) -> list[dict[str, Any]]:
    out = []
    for n in range(count):
        rec = make_record(seed, f"Bulkword{n} tensor {{name!r}} is {word}{n}")
        rec["documentation"] = f"Documented {word} number {n}."
        rec["tags"] = [f"tag{n % 3}", word]
        out.append(rec)
    return out


@pytest.fixture
def bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every apply takes the bulk path, in chunks of 7 records."""
    monkeypatch.setattr(sqlite_store, "BULK_SEARCH_MIN", 1)
    monkeypatch.setattr(engine, "_APPLY_CHUNK", 7)


def test_the_schemas_insert_trigger_has_the_bulk_shape(kb: errkb.KnowledgeBase) -> None:
    # Without this, every large sync would silently fall back to the per-row trigger.
    conn = sqlite3.connect(kb.path)
    try:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'search_records_insert'"
        ).fetchone()
    finally:
        conn.close()
    fill = sqlite_store.bulk_search_sql(sql)
    assert fill is not None and "NEW" not in fill and "r.raw_json" in fill
    assert sqlite_store.bulk_search_sql(sql.replace("NEW.id);", "NEW.id, 1);")) is None


def test_bulk_indexing_equals_the_trigger(
    tmp_path: Path, seed_records: dict[str, Any], bulk: None
) -> None:
    seed = seed_records[QUANTO_ID]
    records = _variants(seed, 30, "lopsided")
    records[4]["futureField"] = float("nan")  # raw_json SQLite's JSON refuses: no tags indexed
    with errkb.open(tmp_path / "kb.sqlite3") as kb:
        before = _schema_objects(kb.path)
        report = kb.ingest([_write(tmp_path / "a.jsonl", records)])
        assert report.counts.added == 30
        assert _schema_objects(kb.path) == before  # the trigger and indexes are back
        fts_integrity(kb)
        assert ids(kb.search("bulkword7")) == [records[7]["id"]]
        assert set(ids(kb.search("lopsided", limit=50))) == {r["id"] for r in records}
        # Records indexed in bulk are updated (the update trigger removes what bulk added).
        changed = [dict(r, documentation=f"Now a teapot {n}.") for n, r in enumerate(records)]
        assert kb.ingest([_write(tmp_path / "b.jsonl", changed)]).counts.updated == 30
        fts_integrity(kb)
        assert ids(kb.search("Documented")) == []
        assert len(ids(kb.search("teapot", limit=50))) == 30
        # The bundled records, indexed by the trigger, are still found.
        assert QUANTO_ID in ids(kb.search("quanto incompatible scale"))


def test_an_id_repeated_across_chunks_is_indexed_once_with_its_last_content(
    tmp_path: Path, seed_records: dict[str, Any], bulk: None
) -> None:
    records = _variants(seed_records[QUANTO_ID], 20, "wobbly")
    again = dict(records[0], documentation="Finally a gyroscope.")
    with errkb.open(tmp_path / "kb.sqlite3") as kb:
        report = kb.ingest([_write(tmp_path / "a.jsonl", [*records, again])])
        assert report.counts.added == 20
        fts_integrity(kb)
        assert ids(kb.search("gyroscope")) == [records[0]["id"]]
        assert ("trigger", "search_records_insert") in _schema_objects(kb.path)


def _fts_state(path: Path) -> tuple[int, int]:
    """(the stored ``automerge`` setting, FTS5's default where none; segments of the index)."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT v FROM search_fts_config WHERE k = 'automerge'").fetchone()
        (segments,) = conn.execute("SELECT count(DISTINCT segid) FROM search_fts_idx").fetchone()
    finally:
        conn.close()
    return (int(row[0]) if row else 4), int(segments)


@pytest.mark.parametrize("setting", [None, 7])
def test_updates_merge_the_search_index_once_at_the_end_and_keep_its_setting(
    tmp_path: Path, seed_records: dict[str, Any], setting: int | None
) -> None:
    # Row by row (below BULK_SEARCH_MIN): FTS5's merging is off while the apply writes and
    # one bounded merge folds what it added at the end; the table's own setting comes back.
    records = _variants(seed_records[QUANTO_ID], 60, "zigzag")
    with errkb.open(tmp_path / "kb.sqlite3") as kb:
        if setting is not None:
            conn = sqlite3.connect(kb.path)
            with conn:
                conn.execute(
                    "INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', ?)", (setting,)
                )
            conn.close()
        want = setting if setting is not None else 4
        assert kb.ingest([_write(tmp_path / "a.jsonl", records)]).counts.added == 60
        for n in range(12):  # each apply flushes at least one new segment
            changed = [dict(r, documentation=f"Round {n} of {r['id']}.") for r in records]
            assert kb.ingest([_write(tmp_path / f"{n}.jsonl", changed)]).counts.updated == 60
            automerge, segments = _fts_state(kb.path)
            assert automerge == want
            assert segments <= 8, f"round {n}: {segments} segments"
        fts_integrity(kb)
        assert len(ids(kb.search("Round 11", limit=100))) == 60


class _Failing:
    """A sized stream of records that fails part-way, as a kill or a bad disk would."""

    def __init__(self, items: list[Incoming], fail_at: int) -> None:
        self.items, self.fail_at = items, fail_at

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Incoming]:
        for n, item in enumerate(self.items):
            if n == self.fail_at:
                raise RuntimeError("boom")
            yield item


def test_a_failed_bulk_apply_leaves_the_store_as_it_was(
    tmp_path: Path, seed_records: dict[str, Any], bulk: None
) -> None:
    records = _variants(seed_records[QUANTO_ID], 25, "quixotic")
    with errkb.open(tmp_path / "kb.sqlite3") as kb:
        store = kb.store
        before = _schema_objects(kb.path)
        counts = store.counts()
        incoming = _Failing([Incoming(r, VERSION) for r in records], fail_at=20)
        with pytest.raises(RuntimeError), store.write() as tx:
            tx.apply(
                incoming, kind=VersionKind.INGEST, source="x", dataset_version=VERSION, feed=FEED
            )
        assert _schema_objects(kb.path) == before
        assert store.counts() == counts
        assert ids(kb.search("quixotic")) == []
        fts_integrity(kb)
        # And the next unit of work takes the bulk path again and succeeds.
        with store.write() as tx:
            _vid, got = tx.apply(
                [Incoming(r, VERSION) for r in records],
                kind=VersionKind.INGEST,
                source="x",
                dataset_version=VERSION,
                feed=FEED,
            )
        assert got.added == 25
        fts_integrity(kb)


def test_the_match_index_is_the_same_whatever_the_input_order() -> None:
    pairs = [
        ("c" * 16, "shared words here {x} gamma"),
        ("a" * 16, "shared words here {x} alpha"),
        ("b" * 16, "shared words here {x} beta"),
    ]
    rows = list(index_rows(pairs))
    assert rows == list(index_rows(reversed(pairs)))
    assert [r[1] for r in rows] == sorted(r[1] for r in rows)  # key order: appends


def test_a_rebuilt_match_index_keeps_its_secondary_index(kb: errkb.KnowledgeBase) -> None:
    before = _schema_objects(kb.path)
    store = kb.store
    with kb.store.snapshot() as view:
        rows = sorted(view.token_rows())
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.rebuild_index(FEED)  # type: ignore[attr-defined]
        raise RuntimeError("boom")
    assert _schema_objects(kb.path) == before
    store.reindex(FEED)
    assert _schema_objects(kb.path) == before
    with kb.store.snapshot() as view:
        assert sorted(view.token_rows()) == rows


def test_a_sync_of_record_files_spools_them_instead_of_holding_them(
    tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    from errkb.ingest import validate_sources
    from errkb.sync import Spool, _plan_records

    records = _variants(seed_records[QUANTO_ID], 12, "spooled")
    bad = dict(records[3], severity="catastrophic")
    path = _write(tmp_path / "a.jsonl", [*records[:3], bad, *records[4:]])
    sunk: list[tuple[str, str | None]] = []
    validated = validate_sources([path], sink=lambda obj, v: sunk.append((obj["id"], v)))
    assert validated.incoming == () and validated.accepted == 11 == len(sunk)
    assert validated.rejected == 1 and validated.dataset_version == VERSION
    with errkb.open(tmp_path / "kb.sqlite3") as kb:
        work = tmp_path / "work"
        work.mkdir()
        plan = _plan_records(kb.store, path, work, full=False, notify=lambda _p: None)
        assert isinstance(plan.incoming, Spool) and len(plan.incoming) == 11
        assert plan.dataset_version == VERSION and plan.rejected == 1
        # Back in id order, for the B-trees' sake.
        assert [i.id for i in plan.incoming] == sorted(
            r["id"] for r in records if r is not records[3]
        )
        report = kb.sync(path, skip_invalid=True)
        assert report.counts.added == 11 and report.counts.rejected == 1
        assert kb.get(records[5]["id"]).to_json() == records[5]


def test_the_spool_gives_records_back_in_id_order_duplicates_in_their_order(
    tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    from errkb.sync import Spool

    records = _variants(seed_records[QUANTO_ID], 40, "ordered")
    # Text JSON leaves unescaped (U+2028, U+0085) must not split a line.
    records[0]["documentation"] = "odd\u2028line\x85breaks\x1c"
    spool = Spool(tmp_path / "spool")
    spool.extend(records[:20], "v1")
    spool.add(dict(records[0], documentation="second copy"), "v2")
    spool.extend(records[20:], None)
    got = list(spool)
    assert len(spool) == len(got) == 41
    assert [i.id for i in got] == sorted(i.id for i in got)
    copies = [i for i in got if i.id == records[0]["id"]]
    assert [c.obj["documentation"] for c in copies] == [records[0]["documentation"], "second copy"]
    assert [c.dataset_version for c in copies] == ["v1", "v2"]
    by_id = {i.id: i for i in got}
    assert by_id[records[25]["id"]].obj == records[25]
    assert by_id[records[25]["id"]].dataset_version is None
    assert list(spool) == got  # read again: the same
