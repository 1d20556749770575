"""Tests for errkb.sync.history: the version list, one record's history, and rollback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import query
from published import build_tree, hashes, make_record

import errkb
import errkb.cli.sync
from errkb.cli import main
from errkb.errors import NotFoundError, SyncLockedError, UsageError
from errkb.ingest import ingest_paths
from errkb.report import SyncStatus
from errkb.store import ChangeKind, Store, VersionKind, open_store
from errkb.sync import sync
from errkb.sync.history import record_history, resolve_version, rollback, versions

V1 = "2026-09-01T00:00:00.000Z"
V2 = "2026-09-02T00:00:00.000Z"
V3 = "2026-09-03T00:00:00.000Z"
REPO = "org/repo-0"


def rec(n: int, marker: str = "") -> dict[str, Any]:
    return make_record(n, f"org/repo-{n % 2}", marker=marker)


# Record 1 is changed in v2 and removed in v3; record 2 is added in v2; record 3 is removed in v2
# and back (changed) in v3.
SETS = {
    V1: [rec(0), rec(1), rec(3)],
    V2: [rec(0), rec(1, "v2"), rec(2)],
    V3: [rec(0), rec(2), rec(3, "v3")],
}


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("trees")
    return {v: build_tree(root / v[:10], records, v) for v, records in SETS.items()}


@pytest.fixture
def store(db_target: str, trees: dict[str, Path]) -> Iterator[Store]:
    """A database that went through v1, v2 and v3 (version ids 1, 2, 3)."""
    st = open_store(db_target)
    for version in (V1, V2, V3):
        sync(st, trees[version])
    yield st
    st.close()


def live(store: Store) -> dict[str, str]:
    rows = query(store, "SELECT id, content_hash FROM records WHERE retired = 0")
    return {str(rid): str(h) for rid, h in rows}


def test_versions_lists_every_applied_version(store: Store) -> None:
    listed = versions(store)
    assert [(v.id, v.dataset_version, v.kind) for v in listed] == [
        (1, V1, VersionKind.SYNC),
        (2, V2, VersionKind.SYNC),
        (3, V3, VersionKind.SYNC),
    ]
    second = listed[1].to_dict()
    assert (second["added"], second["updated"], second["retired"]) == (1, 1, 1)
    assert set(second["hashes"]) == {"manifest", "index", "indexRaw", "repos"}


def test_resolve_version(store: Store) -> None:
    assert resolve_version(store, "2") == 2
    assert resolve_version(store, V1) == 1
    with pytest.raises(NotFoundError, match="no applied version '9'"):
        resolve_version(store, "9")
    with pytest.raises(NotFoundError, match="no applied version '2020-01-01'"):
        resolve_version(store, "2020-01-01")


def test_record_history_shows_the_content_after_each_change(store: Store) -> None:
    entries = record_history(store, rec(1)["id"])
    assert [(e.version_id, e.change, e.retired) for e in entries] == [
        (1, ChangeKind.ADDED, False),
        (2, ChangeKind.UPDATED, False),
        (3, ChangeKind.RETIRED, True),
    ]
    assert entries[0].content == rec(1)
    assert entries[1].content == rec(1, "v2")
    assert entries[2].content == rec(1, "v2")  # retired with its last content
    assert entries[1].to_dict()["datasetVersion"] == V2


def test_record_history_of_a_retired_then_changed_record(store: Store) -> None:
    entries = record_history(store, rec(3)["id"])
    assert [(e.change, e.retired) for e in entries] == [
        (ChangeKind.ADDED, False),
        (ChangeKind.RETIRED, True),
        (ChangeKind.UPDATED, False),  # came back with new content
    ]
    assert entries[-1].content == rec(3, "v3")


def test_record_history_by_slug_and_unknown(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no record with id or slug 'nope'"):
        record_history(store, "nope")
    slug = rec(0)["slug"]
    assert record_history(store, slug)[0].content["id"] == rec(0)["id"]


def test_record_history_slug_naming_several_records(tmp_path: Path, db_target: str) -> None:
    a, b = make_record(5, "org/a"), make_record(5, "org/b")  # same message: same slug
    tree = build_tree(tmp_path / "t", [a, b], V1)
    st = open_store(db_target)
    sync(st, tree)
    with pytest.raises(UsageError, match="names 2 records; give an id"):
        record_history(st, a["slug"])


@pytest.mark.parametrize("target", [1, 2])
def test_rollback_restores_the_version_exactly(store: Store, target: int) -> None:
    version = (V1, V2)[target - 1]
    report = rollback(store, target)
    assert report.status is SyncStatus.APPLIED and report.kind is VersionKind.ROLLBACK
    assert live(store) == hashes(SETS[version])
    row = versions(store)[-1]
    assert (row.kind, row.restores, row.dataset_version) == (VersionKind.ROLLBACK, target, version)
    assert store.meta_value("dataset_version") == version
    assert report.dataset_version == version and report.previous_version == V3


def test_rollback_writes_history_for_what_it_changes(store: Store) -> None:
    report = rollback(store, 1)
    changes = dict(
        query(
            store,
            "SELECT record_id, change FROM record_history WHERE version_id = ?",
            (report.version_id,),
        )
    )
    assert changes == {
        rec(1)["id"]: "updated",  # retired in v3 with its v2 content: back, with v1 content
        rec(2)["id"]: "retired",  # added after v1
        rec(3)["id"]: "updated",  # changed in v3
    }
    assert (report.counts.updated, report.counts.retired, report.counts.unchanged) == (2, 1, 1)
    # rec(1) came back live with its v1 content
    assert store.raw_record(rec(1)["id"]) == rec(1)
    assert record_history(store, rec(1)["id"])[-1].retired is False


def test_rollback_restores_a_retired_record_with_its_content(store: Store) -> None:
    report = rollback(store, 2)
    [(change, was_retired)] = query(
        store,
        "SELECT change, previous_retired FROM record_history "
        "WHERE version_id = ? AND record_id = ?",
        (report.version_id, rec(1)["id"]),
    )
    assert (change, was_retired) == ("restored", 1)
    assert not errkb.KnowledgeBase(store).is_retired(rec(1)["id"])


def test_rollback_of_a_rollback(store: Store) -> None:
    first = rollback(store, 1)
    assert first.version_id == 4
    rollback(store, 3)
    assert live(store) == hashes(SETS[V3])
    assert [v.restores for v in versions(store)] == [None, None, None, 1, 3]


def test_rollback_to_the_latest_version_is_a_noop(store: Store) -> None:
    report = rollback(store, 3)
    assert report.status is SyncStatus.UP_TO_DATE and report.version_id is None
    assert len(versions(store)) == 3


def test_rollback_unknown_version_and_lock(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no applied version 7"):
        rollback(store, 7)
    with store.sync_lock(), pytest.raises(SyncLockedError):
        rollback(store, 1)
    assert len(versions(store)) == 3


def test_sync_after_rollback_moves_forward_and_refetches(
    store: Store, trees: dict[str, Path]
) -> None:
    rollback(store, 1)
    report = sync(store, trees[V3])
    assert report.status is SyncStatus.APPLIED
    # The rollback invalidated what the last sync knew: every repository is read again.
    assert (report.repos_fetched, report.repos_skipped) == (2, 0)
    assert live(store) == hashes(SETS[V3])
    # Rolled back to v3 itself, the same version again is a no-op.
    rollback(store, 3)
    assert sync(store, trees[V3]).status is SyncStatus.UP_TO_DATE


def test_rollback_before_any_dataset_version_forgets_it(tmp_path: Path, db_target: str) -> None:
    plain = make_record(7, REPO)
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    st = open_store(db_target)
    st.ensure_schema()
    ingest_paths(st, [tmp_path / "plain.json"])  # version 1: no datasetVersion
    sync(st, build_tree(tmp_path / "t", [rec(0)], V1))
    assert st.meta_value("dataset_version") == V1
    rollback(st, 1)
    assert st.meta_value("dataset_version") is None
    assert live(st) == hashes([plain])


# ---------------------------------------------------------------------------- front door
def test_the_knowledge_base_is_the_front_door(store: Store) -> None:
    kb = errkb.KnowledgeBase(store)
    assert kb.versions().versions == tuple(versions(store))
    assert kb.latest_version() == versions(store)[-1]
    slug, rid = rec(1)["slug"], rec(1)["id"]
    assert kb.record_id(slug) == kb.record_id(rid) == rid
    history = kb.history(slug)
    assert (history.key, history.entries) == (slug, tuple(record_history(store, rid)))
    with pytest.raises(NotFoundError):
        kb.record_id("nope")
    kb.refresh()
    report = kb.rollback(V1)
    assert (report.status, report.version_id) == (SyncStatus.APPLIED, 4)
    latest = kb.latest_version()
    assert latest is not None and (latest.kind, latest.restores) == (VersionKind.ROLLBACK, 1)
    assert kb.refresh() is False  # the rollback already dropped what was compiled before it


# ---------------------------------------------------------------------------- CLI
def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        main(list(args))
    out = capsys.readouterr()
    return int(caught.value.code or 0), out.out, out.err


def test_cli_versions_history_rollback(
    capsys: pytest.CaptureFixture[str], store: Store, db_target: str
) -> None:
    db = db_target
    code, out, _ = _main(capsys, "--db", db, "versions")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["id", "kind", "datasetVersion"]
    assert lines[2].split()[:3] == ["2", "sync", V2]
    code, out, _ = _main(capsys, "--db", db, "versions", "--format", "json")
    assert [v["id"] for v in json.loads(out)] == [1, 2, 3]
    rid = rec(1)["id"]
    code, out, _ = _main(capsys, "--db", db, "history", rid)
    assert code == 0 and [line.split()[4] for line in out.splitlines()] == [
        "added",
        "updated",
        "retired",
    ]
    code, out, _ = _main(capsys, "--db", db, "history", "--format", "json", rid)
    assert json.loads(out)[1]["record"]["documentation"].endswith("[v2]")
    code, out, _ = _main(capsys, "--db", db, "rollback", V1)
    assert code == 0 and out.startswith("rollback to version 1: added 0, updated 2")
    code, out, err = _main(capsys, "--db", db, "rollback", "nope")
    assert code == 2 and "no applied version 'nope'" in err
    code, out, err = _main(capsys, "--db", db, "history", "0000000000000000")
    assert code == 2 and "no record with id or slug" in err


def test_rollback_to_a_version_a_record_was_retired_at_restores_that_content(
    store: Store,
) -> None:
    # rec(3) was retired at v2 holding its v1 content, then came back changed in v3.
    rid = rec(3)["id"]
    rollback(store, 2)
    stored = store.record(rid)
    assert stored is not None and stored.retired and stored.content == rec(3)
    assert record_history(store, rid)[-1].content == rec(3)
    retired = {
        e["record"]["id"]: e["record"]
        for e in errkb.KnowledgeBase(store).iter_envelopes(include_retired=True)
    }
    assert retired[rid] == rec(3)
    # and forward again: v3's content, live
    rollback(store, 3)
    stored = store.record(rid)
    assert stored is not None and not stored.retired and stored.content == rec(3, "v3")
    assert live(store) == hashes(SETS[V3])


def test_history_digest_is_the_stored_content_hash(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    db_target: str,
) -> None:
    record = make_record(5, REPO, marker="é—ü")  # non-ASCII: a look-alike digest differs
    st = open_store(db_target)
    sync(st, build_tree(tmp_path / "t", [record], V1))
    stored = st.record(record["id"])
    assert stored is not None
    assert record_history(st, record["id"])[-1].content_hash == stored.content_hash
    code, out, _ = _main(capsys, "--db", db_target, "history", record["id"])
    assert code == 0 and out.split()[-1] == stored.content_hash[:12]
