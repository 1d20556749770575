"""``errkb.sync.stream``: a large sync's records written while the next files are checked.

``MIN_RECORDS`` and the chunk sizes are lowered so a few dozen records take that path. A
streamed sync must leave exactly what the spooled one leaves (both backends; SQLite's fresh
build and its one transaction), the writer must be writing before the last file is checked,
and any failure (an invalid record, the writer's own error) must leave the database as it was.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from published import build_tree, hashes, make_record, make_records

from errkb.errors import RecordError, StoreError
from errkb.report import SyncStatus
from errkb.store import engine, open_store
from errkb.store import sqlite as sqlite_store
from errkb.sync import stream, sync
from errkb.sync.stream import StreamedApply
from tests.conftest import is_pg, query

V0 = "2026-08-31T00:00:00.000Z"
V1 = "2026-09-01T00:00:00.000Z"
TABLES = ("records", "record_tags", "record_solutions", "pattern_specs", "match_tokens")


@pytest.fixture
def streaming(monkeypatch: pytest.MonkeyPatch) -> list[StreamedApply]:
    """Streams for 20 records and more, in chunks of 5, one chunk queued; those started."""
    started: list[StreamedApply] = []
    real = StreamedApply.start

    def start(self: StreamedApply, begin: stream.Begin) -> None:
        started.append(self)
        real(self, begin)

    monkeypatch.setattr(StreamedApply, "start", start)
    monkeypatch.setattr(stream, "MIN_RECORDS", 20)
    monkeypatch.setattr(stream, "CHUNK", 5)
    monkeypatch.setattr(stream, "QUEUE_CHUNKS", 1)
    monkeypatch.setattr(engine, "_APPLY_CHUNK", 10)
    return started


def _trees(tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """v0: 4 records; v1: 60, two of v0's among them (one with other content)."""
    records = make_records(60, repos=4)
    first = [records[0], make_record(1, str(records[1]["repo"]), marker="old")]
    first += make_records(2, repos=1, owner="other", start=100)
    v0 = build_tree(tmp_path / "v0", first, V0)
    return v0, build_tree(tmp_path / "v1", records, V1), records


def _dump(target: str) -> dict[str, list[tuple[object, ...]]]:
    """What a database holds, history without its row ids (the streamed order differs)."""
    store = open_store(target)
    try:
        out = {t: sorted(map(tuple, query(store, f"SELECT * FROM {t}"))) for t in TABLES}
        out["history"] = sorted(
            map(
                tuple,
                query(
                    store,
                    "SELECT record_id, version_id, change, previous_json, previous_retired, "
                    "previous_dataset_version FROM record_history",
                ),
            )
        )
        out["versions"] = sorted(
            map(
                tuple,
                query(
                    store,
                    'SELECT id, dataset_version, kind, source, "full", partial, added, updated, '
                    "unchanged, retired, rejected FROM dataset_versions",
                ),
            )
        )
        out["words"] = sorted(map(tuple, query(store, "SELECT * FROM match_words")))
        return out
    finally:
        store.close()


def _synced(target: str, *trees: Path, **options: Any) -> Any:
    store = open_store(target)
    store.ensure_schema()
    report = None
    for tree in trees:
        report = sync(store, tree, **options)
    store.close()
    return report


@pytest.mark.parametrize("fresh", [True, False])
def test_a_streamed_sync_writes_what_a_spooled_one_writes(
    db_target: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    streaming: list[StreamedApply],
    fresh: bool,
) -> None:
    if is_pg(db_target) and fresh:
        pytest.skip("PostgreSQL has no fresh build: the parameter is SQLite's")
    v0, v1, records = _trees(tmp_path)
    monkeypatch.setattr(sqlite_store, "FRESH_BUILD_MIN", 10 if fresh else 10**9)
    plain = tmp_path / "plain.sqlite3"
    monkeypatch.setattr(stream, "MIN_RECORDS", 10**9)
    _synced(str(plain), v0, v1)
    assert not streaming
    monkeypatch.setattr(stream, "MIN_RECORDS", 20)
    report = _synced(db_target, v0, v1)
    assert len(streaming) == 1 and len(streaming[0].overlap) == 2  # v1's first sync: v0's
    assert report.status is SyncStatus.APPLIED
    assert (report.counts.added, report.counts.updated, report.counts.unchanged) == (58, 1, 1)
    assert report.counts.retired == 2
    got, expected = _dump(db_target), _dump(str(plain))
    if is_pg(db_target):  # JSON and flags read back in PostgreSQL's types
        assert got["records"] and len(got["records"]) == len(expected["records"])
        assert got["match_tokens"] == expected["match_tokens"]
        assert got["words"] == expected["words"]
    else:
        assert got == expected
    store = open_store(db_target)
    live = {rid for rid, _h in hashes(records).items()}
    assert {k for k, _v in store.inventory().hashes.items()} >= live
    store.close()


def test_the_writer_writes_while_the_files_are_still_being_checked(
    db_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streaming: list[StreamedApply]
) -> None:
    # With one chunk of five queued, the plan can be at most a few chunks ahead of the writer:
    # the first records are written long before the sixtieth is checked.
    _v0, v1, _records = _trees(tmp_path)
    seen: list[int] = []
    real = engine.UnitOfWork._apply_chunk

    def apply_chunk(self: Any, items: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(len(streaming[0].ids))
        real(self, items, *args, **kwargs)

    monkeypatch.setattr(engine.UnitOfWork, "_apply_chunk", apply_chunk)
    report = _synced(db_target, v1)
    assert report.counts.added == 60
    assert seen and seen[0] <= 30, seen


def _break(tree: Path, record: dict[str, Any]) -> None:
    path = tree / "data" / "repos" / f"{record['repo']}.json"
    items = json.loads(path.read_text())
    for item in items:
        if item["id"] == record["id"]:
            item["severity"] = "fatal"
    path.write_text(json.dumps(items))


def test_an_invalid_record_rolls_the_streamed_writer_back(
    db_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streaming: list[StreamedApply]
) -> None:
    v0, v1, records = _trees(tmp_path)
    _synced(db_target, v0)
    before = _dump(db_target)
    _break(v1, records[-1])
    with pytest.raises(RecordError, match="nothing was changed"):
        _synced(db_target, v1)
    assert streaming and streaming[0].error is not None  # rolled back, not committed
    assert _dump(db_target) == before
    # Skipping it applies the rest, as a spooled sync does.
    report = _synced(db_target, v1, skip_invalid=True)
    assert report.partial and report.counts.rejected == 1
    assert report.counts.added == 57
    store = open_store(db_target)
    [partial] = query(
        store, "SELECT partial FROM dataset_versions WHERE id = ?", (report.version_id,)
    )
    assert partial in ((1,), (True,))
    store.close()


def test_a_failing_writer_stops_the_sync_and_changes_nothing(
    db_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streaming: list[StreamedApply]
) -> None:
    v0, v1, _records = _trees(tmp_path)
    _synced(db_target, v0)
    before = _dump(db_target)
    calls: list[int] = []
    real = engine.UnitOfWork._apply_chunk

    def apply_chunk(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise StoreError("the disk is full (a test)")
        real(self, *args, **kwargs)

    monkeypatch.setattr(engine.UnitOfWork, "_apply_chunk", apply_chunk)
    with pytest.raises(StoreError, match="the disk is full"):
        _synced(db_target, v1)
    assert _dump(db_target) == before
    if not is_pg(db_target):
        assert not Path(db_target + ".new").exists()
        conn = sqlite3.connect(db_target)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()


KILLED_WHILE_STREAMING = """
import os, signal, sys
from errkb.store import engine, open_store
from errkb.store import sqlite as sqlite_store
from errkb.sync import stream, sync

stream.MIN_RECORDS, stream.CHUNK, stream.QUEUE_CHUNKS = 20, 5, 1
engine._APPLY_CHUNK = 10
sqlite_store.FRESH_BUILD_MIN = int(sys.argv[4])
real = engine.UnitOfWork._apply_chunk
calls = []

def apply_chunk(self, *args, **kwargs):
    real(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

store = open_store(sys.argv[1])
store.ensure_schema()
sync(store, sys.argv[2], plan_workers=0)
engine.UnitOfWork._apply_chunk = apply_chunk
sync(store, sys.argv[3], plan_workers=0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("fresh", [True, False])
def test_a_kill_while_streaming_leaves_the_old_version_and_the_next_sync_works(
    tmp_path: Path, fresh: bool
) -> None:
    import os
    import signal
    import subprocess
    import sys

    v0, v1, records = _trees(tmp_path)
    db = tmp_path / "kb.sqlite3"
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)])}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            KILLED_WHILE_STREAMING,
            *(str(db), str(v0), str(v1)),
            "10" if fresh else str(10**9),
        ],
        env=env,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = open_store(db)
    store.ensure_schema()
    assert [v.dataset_version for v in store.versions()] == [V0]  # killed mid-write
    report = sync(store, v1)
    assert report.status is SyncStatus.APPLIED and report.counts.added == 58
    assert set(hashes(records)) <= set(store.inventory().hashes)
    store.close()
    assert not db.with_name(db.name + ".new").exists()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
