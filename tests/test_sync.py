"""Tests for errkb.sync: published trees served over HTTP on 127.0.0.1, local trees, record files.

Every refusal is checked to leave the database exactly as it was (versions, records, history,
meta), because "nothing changed" is the promise a failed sync makes.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import query
from published import Server, build_tree, hashes, make_record, serve

import errkb
import errkb.cli.sync  # registers the sync commands on errkb.cli.cli
import errkb.sync
from errkb.cli import cli, main
from errkb.errors import IntegrityError, NetworkError, RecordError, SyncError, SyncLockedError
from errkb.report import SyncStatus
from errkb.store import Store, open_store
from errkb.sync import Progress, Stage, sync

V0 = "2026-08-31T00:00:00.000Z"
V1 = "2026-09-01T00:00:00.000Z"
V2 = "2026-09-02T00:00:00.000Z"
V3 = "2026-09-03T00:00:00.000Z"
REMOVED = (0, 1, 4, 5)  # v2 drops these (repos 0 and 1)
ADDED = (40, 41, 44, 45)  # v2 adds these (repos 0 and 1)
CHANGED = (8, 9)  # v2 changes their documentation (repos 0 and 1)


def repo_of(n: int) -> str:
    return f"org/repo-{n % 4}"


def records_v1() -> list[dict[str, Any]]:
    return [make_record(n, repo_of(n)) for n in range(40)]


def records_v2() -> list[dict[str, Any]]:
    return [
        make_record(n, repo_of(n), marker="v2" if n in CHANGED else "")
        for n in (*range(40), *ADDED)
        if n not in REMOVED
    ]


def ids(numbers: tuple[int, ...]) -> set[str]:
    return {make_record(n, repo_of(n))["id"] for n in numbers}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    build_tree(root / "v0", records_v1()[:10], V0)
    build_tree(root / "v1", records_v1(), V1)
    build_tree(root / "v2", records_v2(), V2)
    # v3: the same records as v2; repo-2's metadata changed, its file did not.
    build_tree(root / "v3", records_v2(), V3, repo_meta={"org/repo-2": {"contentChangedAt": V3}})
    return root


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[Server]:
    with serve(site) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_faults(server: Server) -> Iterator[None]:
    yield
    server.faults.clear()


@pytest.fixture
def store(db_target: str) -> Iterator[Store]:
    st = open_store(db_target)
    yield st
    st.close()


def live(store: Store) -> dict[str, str]:
    rows = query(store, "SELECT id, content_hash FROM records WHERE retired = 0")
    return {str(rid): str(h) for rid, h in rows}


def state(store: Store) -> tuple[Any, ...]:
    """Everything a failed sync must leave untouched."""
    return (
        query(store, "SELECT * FROM dataset_versions ORDER BY id"),
        query(store, "SELECT id, content_hash, retired FROM records ORDER BY id"),
        query(store, "SELECT count(*) FROM record_history"),
        query(store, "SELECT key, value FROM meta ORDER BY key"),
    )


def copy_tree(site: Path, name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(site / name, tmp_path / name))


def edit_repo_file(tree: Path, repo: str, edit: Any) -> None:
    path = tree / "data" / "repos" / f"{repo}.json"
    items = json.loads(path.read_text())
    edit(items)
    path.write_text(json.dumps(items))


# ---------------------------------------------------------------------------- versions
def test_first_version_over_http(store: Store, server: Server, site: Path) -> None:
    report = sync(store, f"{server.base}/v1")
    assert report.status is SyncStatus.APPLIED
    assert report.counts.to_dict() == {
        "added": 40,
        "updated": 0,
        "unchanged": 0,
        "retired": 0,
        "rejected": 0,
    }
    assert live(store) == hashes(records_v1())
    assert report.repos_fetched == 4 and report.repos_skipped == 0
    row = query(
        store,
        'SELECT dataset_version, kind, source, "full", partial, hashes_json, added '
        "FROM dataset_versions WHERE id = ?",
        (report.version_id,),
    )
    version, kind, source, full, partial, hashes_json, added = row[0]
    assert (version, kind, source, full, partial, added) == (
        V1,
        "sync",
        f"{server.base}/v1",
        1,
        0,
        40,
    )
    manifest = json.loads((site / "v1" / "data" / "manifest.json").read_text())
    recorded = json.loads(hashes_json)
    assert recorded["index"] == manifest["files"]["index"]["sha256"]
    assert recorded["indexRaw"] == manifest["files"]["index"]["rawSha256"]
    assert recorded["repos"] == manifest["files"]["repos"]["sha256"]
    assert store.meta_value("dataset_version") == V1


def test_second_version_adds_updates_and_retires(store: Store, server: Server) -> None:
    sync(store, f"{server.base}/v1")
    before = len(server.requests)
    report = sync(store, f"{server.base}/v2")
    assert (report.counts.added, report.counts.updated) == (4, 2)
    assert (report.counts.unchanged, report.counts.retired) == (34, 4)
    assert live(store) == hashes(records_v2())
    # Retired records are kept, marked, with their content.
    for rid in ids(REMOVED):
        assert errkb.KnowledgeBase(store).is_retired(rid)
        assert store.raw_record(rid)["id"] == rid
    # The two repositories that changed were read again; the two at the same commit were
    # only revalidated (records can be rewritten in place) and kept as they were.
    assert (report.repos_fetched, report.repos_skipped) == (2, 2)
    assert (report.revalidation.checked, report.revalidation.rewritten) == (2, 0)
    fetched = {p for p in server.paths()[before:] if "/repos/" in p}
    assert fetched == {f"/v2/data/repos/org/repo-{n}.json" for n in range(4)}
    changes = dict(
        query(
            store,
            "SELECT change, count(*) FROM record_history WHERE version_id = ? GROUP BY change",
            (report.version_id,),
        )
    )
    assert changes == {"added": 4, "updated": 2, "retired": 4}


def test_only_new_content_is_validated(
    store: Store, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync(store, f"{server.base}/v1")
    checked: list[str] = []
    real = errkb.sync.rec.check_record

    def counting(obj: Any, **kwargs: Any) -> Any:
        checked.append(obj["id"])
        return real(obj, **kwargs)

    monkeypatch.setattr(errkb.sync.rec, "check_record", counting)
    sync(store, f"{server.base}/v2")
    # The two fetched repositories hold 34 records; only the changed and added ones are new.
    assert set(checked) == ids(CHANGED) | ids(ADDED)


def test_same_version_again_is_a_noop(store: Store, server: Server) -> None:
    sync(store, f"{server.base}/v1")
    before, snapshot = len(server.requests), state(store)
    report = sync(store, f"{server.base}/v1")
    assert report.status is SyncStatus.UP_TO_DATE
    assert report.summary() == f"already at {V1}: nothing to do"
    assert state(store) == snapshot
    # One conditional request for the manifest, nothing else.
    (path, etag), *rest = server.requests[before:]
    assert path == "/v1/data/manifest.json" and etag and not rest


def test_same_version_from_a_local_tree_is_a_noop(store: Store, site: Path) -> None:
    sync(store, site / "v1")
    snapshot = state(store)
    report = sync(store, site / "v1" / "data" / "manifest.json")
    assert report.status is SyncStatus.UP_TO_DATE and state(store) == snapshot


def test_same_version_after_an_upgrade_compiles_the_records_again(store: Store, site: Path) -> None:
    from errkb.match.feed import FEED

    sync(store, site / "v1")
    live = query(store, "SELECT count(*) FROM records")[0][0]
    assert store.meta_value("compiler") == FEED.compiler
    # What an older errkb left: its compiler noted, a spec it compiled otherwise.
    with store.write() as tx:
        tx.set_meta("compiler", "0")
        tx.sql.execute("UPDATE pattern_specs SET regex = 'old'")  # type: ignore[attr-defined]
    state_before = store.meta_value("state")
    report = sync(store, site / "v1")
    assert report.status is SyncStatus.UP_TO_DATE and report.recompiled == live
    assert report.summary() == f"already at {V1}; {live} records compiled again for this errkb"
    assert report.to_dict()["recompiled"] == live
    assert query(store, "SELECT count(*) FROM pattern_specs WHERE regex = 'old'")[0][0] == 0
    assert store.meta_value("compiler") == FEED.compiler
    assert store.meta_value("state") != state_before  # readers drop what they compiled
    again = sync(store, site / "v1")
    assert again.recompiled == 0 and again.summary() == f"already at {V1}: nothing to do"


def test_older_version_is_refused_unless_allowed(store: Store, server: Server) -> None:
    sync(store, f"{server.base}/v1")
    snapshot = state(store)
    with pytest.raises(SyncError, match=f"datasetVersion {V0} is older than the current {V1}"):
        sync(store, f"{server.base}/v0")
    assert state(store) == snapshot
    report = sync(store, f"{server.base}/v0", allow_downgrade=True)
    assert report.counts.retired == 30
    assert live(store) == hashes(records_v1()[:10])


def test_metadata_change_without_content_change_gets_a_304(store: Store, site: Path) -> None:
    # Upstream publishes every version at the same URLs: switch what the server serves.
    with serve(site / "v2") as srv:
        sync(store, srv.base)
        srv.root = site / "v3"
        before = len(srv.requests)
        report = sync(store, srv.base)
    assert report.status is SyncStatus.APPLIED and report.dataset_version == V3
    assert (report.repos_fetched, report.repos_skipped) == (0, 4)
    assert report.counts.unchanged == 40 and report.counts.retired == 0
    # repo-2's fingerprint changed, the others' did not (revalidated for in-place rewrites):
    # every request is conditional, and each answered 304.
    asked = dict(r for r in srv.requests[before:] if "/repos/" in r[0])
    assert set(asked) == {f"/data/repos/org/repo-{n}.json" for n in range(4)}
    assert all(asked.values()) and report.revalidation.not_modified == 3
    assert live(store) == hashes(records_v2())


def test_dry_run_returns_the_diff_and_changes_nothing(store: Store, server: Server) -> None:
    sync(store, f"{server.base}/v1")
    snapshot = state(store)
    report = sync(store, f"{server.base}/v2", dry_run=True)
    assert report.status is SyncStatus.DRY_RUN and report.diff is not None
    assert set(report.diff.added) == ids(ADDED)
    assert set(report.diff.updated) == ids(CHANGED)
    assert set(report.diff.retired) == ids(REMOVED)
    assert len(report.diff.unchanged) == 34
    assert report.counts.added == 4 and report.summary().startswith("dry run, nothing changed:")
    assert state(store) == snapshot


# ---------------------------------------------------------------------------- refusals
def test_index_sha256_mismatch_changes_nothing(store: Store, site: Path, tmp_path: Path) -> None:
    sync(store, site / "v1")
    tree = copy_tree(site, "v2", tmp_path)
    index = tree / "data" / "index.json.gz"
    doc = json.loads(gzip.decompress(index.read_bytes()))
    doc["errors"].pop()
    index.write_bytes(gzip.compress(json.dumps(doc).encode()))
    snapshot = state(store)
    with pytest.raises(IntegrityError, match=r"index\.json\.gz: .*(sha256|bytes)"):
        sync(store, tree)
    assert state(store) == snapshot


def test_repos_json_sha256_mismatch_over_http(store: Store, site: Path, tmp_path: Path) -> None:
    tree = copy_tree(site, "v2", tmp_path)
    repos = tree / "data" / "repos.json"
    doc = json.loads(repos.read_text())
    doc[0]["stars"] = 2  # same length, different bytes
    repos.write_text(json.dumps(doc))
    with serve(tmp_path) as srv, pytest.raises(IntegrityError, match=r"repos\.json: sha256"):
        sync(store, f"{srv.base}/v2")
    assert store.is_empty()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda items: items.pop(), "missing ids listed in the index: "),
        (lambda items: items.append(make_record(99, "org/repo-1")), "ids the index does not list"),
        (lambda items: items.append(items[0]), "ids repeated"),
        (lambda items: items[0].update(repo="org/repo-9"), "claims repo 'org/repo-9'"),
    ],
)
def test_repo_file_must_match_the_index(
    store: Store, site: Path, tmp_path: Path, edit: Any, message: str
) -> None:
    sync(store, site / "v1")
    tree = copy_tree(site, "v2", tmp_path)
    edit_repo_file(tree, "org/repo-1", edit)
    snapshot = state(store)
    with pytest.raises(IntegrityError, match=f"repository org/repo-1 .*{message}"):
        sync(store, tree)
    assert state(store) == snapshot


def test_manifest_count_must_match_the_index(store: Store, site: Path, tmp_path: Path) -> None:
    tree = copy_tree(site, "v2", tmp_path)
    manifest = tree / "data" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["counts"]["errors"] += 1
    manifest.write_text(json.dumps(doc))
    with pytest.raises(IntegrityError, match="40 ids, but the manifest counts 41 errors"):
        sync(store, tree)


def test_unsafe_repo_name_in_the_index_is_refused(store: Store, site: Path, tmp_path: Path) -> None:
    records = [dict(make_record(1, "org/repo-1"), repo="org/..")]
    tree = build_tree(tmp_path / "evil", records, V1)
    with pytest.raises(IntegrityError, match=r"invalid repository name 'org/\.\.'"):
        sync(store, tree)


def _break_record(tree: Path, n: int) -> str:
    rid = make_record(n, repo_of(n))["id"]

    def edit(items: list[dict[str, Any]]) -> None:
        for item in items:
            if item["id"] == rid:
                item["severity"] = "fatal"

    edit_repo_file(tree, repo_of(n), edit)
    return rid


def test_invalid_record_refuses_the_version(store: Store, site: Path, tmp_path: Path) -> None:
    sync(store, site / "v1")
    tree = copy_tree(site, "v2", tmp_path)
    rid = _break_record(tree, 13)
    snapshot = state(store)
    with pytest.raises(RecordError) as caught:
        sync(store, tree)
    [problem] = caught.value.problems
    assert problem.record_id == rid and problem.json_path == "$.severity"
    assert problem.source.endswith("data/repos/org/repo-1.json")
    assert "nothing was changed" in str(caught.value) and rid in str(caught.value)
    assert state(store) == snapshot


def test_skip_invalid_applies_the_rest(store: Store, site: Path, tmp_path: Path) -> None:
    sync(store, site / "v1")
    tree = copy_tree(site, "v2", tmp_path)
    rid = _break_record(tree, 13)
    rejects = tmp_path / "rejects.jsonl"
    report = sync(store, tree, skip_invalid=True, reject_report=rejects)
    assert report.partial and report.counts.rejected == 1
    assert report.reject_report == str(rejects)
    [line] = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert (line["id"], line["path"], line["datasetVersion"]) == (rid, "$.severity", V2)
    assert "fatal" in line["rule"]
    expected = hashes(records_v2())
    expected[rid] = hashes(records_v1())[rid]  # the rejected record keeps its stored content
    assert live(store) == expected
    [partial] = query(
        store, "SELECT partial FROM dataset_versions WHERE id = ?", (report.version_id,)
    )
    assert partial == (1,)


def test_skip_invalid_default_report_beside_the_database(
    store: Store, site: Path, tmp_path: Path
) -> None:
    tree = copy_tree(site, "v2", tmp_path)
    _break_record(tree, 13)
    report = sync(store, tree, skip_invalid=True)
    assert report.reject_report == str(store.path) + ".rejects.jsonl"
    assert Path(report.reject_report).read_text().count("\n") == 1
    assert report.counts.added == 39


def test_unreadable_repo_file(store: Store, site: Path, tmp_path: Path) -> None:
    sync(store, site / "v1")
    tree = copy_tree(site, "v2", tmp_path)
    (tree / "data" / "repos" / "org" / "repo-1.json").write_text("[{not json")
    snapshot = state(store)
    with pytest.raises(RecordError, match=r"repo-1\.json line 1 .*invalid JSON"):
        sync(store, tree)
    assert state(store) == snapshot
    report = sync(store, tree, skip_invalid=True)
    in_repo_1 = [r for r in records_v2() if r["repo"] == "org/repo-1"]
    assert report.counts.rejected == len(in_repo_1) and report.partial
    # Every record the file should hold is rejected; those stored before stay as they were,
    # those the index no longer lists are retired.
    rejected = {r["id"] for r in in_repo_1}
    expected = {k: v for k, v in hashes(records_v2()).items() if k not in rejected}
    expected |= {k: v for k, v in hashes(records_v1()).items() if k in rejected}
    assert live(store) == expected
    assert len(expected) == 40 - 2  # repo-1 lost records 1 and 5 and could not add 41 and 45


@pytest.mark.parametrize("fault", ["500", "404", "drop", "truncate"])
def test_network_failure_halfway_changes_nothing(store: Store, server: Server, fault: str) -> None:
    sync(store, f"{server.base}/v1")
    snapshot = state(store)
    server.faults["/v2/data/repos/org/repo-1.json"] = fault
    with pytest.raises(NetworkError, match=r"/v2/data/repos/org/repo-1\.json"):
        sync(store, f"{server.base}/v2", timeout=5)
    assert state(store) == snapshot
    assert "/v2/data/repos/org/repo-1.json" in server.paths()  # it failed halfway
    server.faults.clear()
    assert sync(store, f"{server.base}/v2").status is SyncStatus.APPLIED
    assert live(store) == hashes(records_v2())


def test_network_failure_on_the_manifest(store: Store, server: Server) -> None:
    server.faults["/v1/data/manifest.json"] = "500"
    with pytest.raises(NetworkError, match="HTTP 500"):
        sync(store, f"{server.base}/v1")
    assert store.is_empty()


def test_a_second_sync_fails_at_once(store: Store, site: Path) -> None:
    store.ensure_schema()
    with store.sync_lock(), pytest.raises(SyncLockedError, match="another sync is running"):
        sync(store, site / "v1")
    assert store.is_empty()
    assert sync(store, site / "v1").status is SyncStatus.APPLIED  # the lock was released


# ---------------------------------------------------------------------------- record files
def _write_envelopes(path: Path, records: list[dict[str, Any]], version: str) -> Path:
    with path.open("w") as fh:
        for r in records:
            fh.write(json.dumps({"record": r, "datasetVersion": version}) + "\n")
    return path


def test_record_files_are_a_partial_source(store: Store, site: Path, tmp_path: Path) -> None:
    sync(store, site / "v1")
    changed = [make_record(n, repo_of(n), marker="local") for n in (2, 3)]
    source = _write_envelopes(tmp_path / "some.jsonl", changed, V2)
    report = sync(store, source)
    assert (report.counts.updated, report.counts.retired, report.full) == (2, 0, False)
    assert len(live(store)) == 40
    report = sync(store, source, full=True)
    assert (report.counts.unchanged, report.counts.retired) == (2, 38)
    assert live(store) == hashes(changed)


def test_invalid_record_file_names_file_line_and_path(store: Store, tmp_path: Path) -> None:
    bad = make_record(7, "org/repo-3")
    bad["httpStatus"] = 42
    source = _write_envelopes(tmp_path / "bad.jsonl", [make_record(6, "org/repo-2"), bad], V1)
    with pytest.raises(RecordError) as caught:
        sync(store, source)
    [problem] = caught.value.problems
    assert (problem.source, problem.location) == (str(source), "line 2")
    assert (problem.record_id, problem.json_path) == (bad["id"], "$.record.httpStatus")
    assert store.is_empty()


# ---------------------------------------------------------------------------- callers
def test_progress_reports_every_stage(store: Store, site: Path) -> None:
    seen: list[Progress] = []
    sync(store, site / "v1", progress=seen.append)
    stages = [p.stage for p in seen]
    order = [Stage.MANIFEST, Stage.INDEX, Stage.REPOS, Stage.APPLY]
    assert [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s] == order
    repos = [p for p in seen if p.stage is Stage.REPOS]
    assert repos[-1].done == repos[-1].total == 4
    assert seen[-1] == Progress(Stage.APPLY, 1, 1)


def test_sync_a_knowledge_base(tmp_path: Path, site: Path) -> None:
    with errkb.open(tmp_path / "kb.sqlite3", bundled=False) as kb:
        report = kb.sync(site / "v1")  # the front door: KnowledgeBase.sync
        assert report.to_dict()["added"] == 40
        stats = kb.stats()
        assert (stats.records, stats.dataset_version) == (40, V1)


# ---------------------------------------------------------------------------- CLI
def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        main(list(args))
    out = capsys.readouterr()
    return int(caught.value.code or 0), out.out, out.err


def test_cli_sync(capsys: pytest.CaptureFixture[str], tmp_path: Path, site: Path) -> None:
    db = str(tmp_path / "kb.sqlite3")
    code, out, _ = _main(capsys, "--db", db, "sync", str(site / "v1"))
    assert code == 0 and out.startswith("added 40, updated 0, unchanged 0, retired 3")
    code, out, _ = _main(capsys, "--db", db, "sync", str(site / "v1"))
    assert (code, out) == (0, f"already at {V1}: nothing to do\n")
    code, out, err = _main(capsys, "--db", db, "sync", str(site / "v0"))
    assert code == 2 and out == "" and "refusing to downgrade" in err
    code, out, _ = _main(capsys, "--db", db, "sync", "--quiet", str(site / "v2"))
    assert (code, out) == (0, "")
    code, out, _ = _main(capsys, "--db", db, "sync", "--format", "json", str(site / "v2"))
    assert code == 0 and json.loads(out)["status"] == "up-to-date"


def test_cli_sync_dry_run_and_skip_invalid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: Path
) -> None:
    db = str(tmp_path / "kb.sqlite3")
    tree = copy_tree(site, "v2", tmp_path)
    rid = _break_record(tree, 13)
    code, out, err = _main(capsys, "--db", db, "sync", "--dry-run", str(tree))
    assert code == 2 and rid in err and "$.severity" in err
    code, out, err = _main(
        capsys, "--db", db, "sync", "--skip-invalid", "--dry-run", "--format", "json", str(tree)
    )
    report = json.loads(out)
    assert code == 1 and report["status"] == "dry-run" and len(report["diff"]["added"]) == 39
    assert f"rejected: {tree}" in err
    rejects = tmp_path / "r.jsonl"
    code, out, err = _main(
        capsys, "--db", db, "sync", "--skip-invalid", "--reject-report", str(rejects), str(tree)
    )
    assert code == 1 and "rejected 1" in out and f"written to {rejects}" in err
    assert json.loads(rejects.read_text())["id"] == rid


def test_cli_sync_help_and_runner(tmp_path: Path, site: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["sync", "--help"])
    assert result.exit_code == 0 and "--allow-downgrade" in result.output
    result = runner.invoke(cli, ["--db", str(tmp_path / "kb.sqlite3"), "sync", str(site / "v1")])
    assert result.exception is None and result.exit_code == 0
    assert "added 40" in result.stdout and result.stderr == ""  # no progress bar off a terminal


def test_published_tree_as_a_partial_source(store: Store, site: Path) -> None:
    sync(store, site / "v1")
    report = sync(store, site / "v2", full=False)
    assert (report.counts.added, report.counts.retired, report.full) == (4, 0, False)
    assert set(live(store)) == set(hashes(records_v1())) | ids(ADDED)


def test_cli_progress_bars(capsys: pytest.CaptureFixture[str]) -> None:
    from errkb.cli.sync import _progress

    with _progress(enabled=False) as none:
        assert none is None
    with _progress(enabled=True) as bars:
        assert bars is not None
        for event in (
            Progress(Stage.MANIFEST, 0, 1),
            Progress(Stage.MANIFEST, 1, 1),
            Progress(Stage.REPOS, 0, 3),
            Progress(Stage.REPOS, 3, 3),
            Progress(Stage.APPLY, 1, 1),
        ):
            bars(event)
    err = capsys.readouterr().err
    assert [s.value for s in (Stage.MANIFEST, Stage.REPOS, Stage.APPLY)] == [
        label for label in ("manifest", "repos", "apply") if label in err
    ]


def test_an_empty_source_is_refused_and_records_no_version(tmp_path: Path) -> None:
    """Issue 15: `sync EMPTYDIR` recorded an empty version each time; now nothing to apply."""
    empty = tmp_path / "empty"
    empty.mkdir()
    db = tmp_path / "kb.sqlite3"
    with errkb.open(db) as kb:
        before = kb.store.counts()
        with pytest.raises(errkb.SyncError, match="holds no records; nothing to apply"):
            kb.sync(empty)
        assert kb.store.counts() == before


def test_ctrl_c_after_the_commit_says_what_was_applied(store: Store, site: Path) -> None:
    # The interrupt lands the moment the transaction has committed (APPLY done): the version is
    # in place, and the error says which one instead of a silent 130.
    def interrupt(progress: Progress) -> None:
        if progress.stage is Stage.APPLY and progress.done == progress.total:
            raise KeyboardInterrupt

    with pytest.raises(errkb.errors.SyncInterruptedError) as caught:
        sync(store, site / "v1", progress=interrupt)
    assert caught.value.exit_code == 130
    message = str(caught.value)
    assert f"datasetVersion {V1} is in place as version 1" in message
    assert f"added {len(records_v1())}," in message and "nothing was undone" in message
    assert store.meta_value("dataset_version") == V1

    # Before the commit, an interrupt is a plain KeyboardInterrupt: nothing applied.
    def early(progress: Progress) -> None:
        if progress.stage is Stage.APPLY and progress.done == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sync(store, site / "v2", progress=early)
    assert store.meta_value("dataset_version") == V1


def test_a_tree_copied_to_another_folder_is_hashed_not_read_again(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The body sha256 applied is kept by the file's path in the tree, not by where it was
    # read: the same bytes from another folder are the same records.
    first = build_tree(tmp_path / "a", records_v1(), V1)
    assert sync(store, first, plan_workers=0).counts.added == 40
    changed = [make_record(n, repo_of(n), marker="v2" if n % 4 == 0 else "") for n in range(40)]
    second = build_tree(tmp_path / "b", changed, V2)
    read: list[str] = []
    real = errkb.sync.read_repo

    def counting(path: Path, *args: Any, **kwargs: Any) -> Any:
        read.append(args[1])
        return real(path, *args, **kwargs)

    monkeypatch.setattr(errkb.sync, "read_repo", counting)
    report = sync(store, second, plan_workers=0)
    assert (report.counts.updated, report.counts.unchanged) == (10, 30)
    assert report.revalidation.same_body == 3
    assert read == ["org/repo-0"]  # only the changed repository's file was parsed
    assert live(store) == hashes(changed)


def test_a_local_trees_unwritten_files_are_not_hashed_again(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import filecmp
    import os

    # Files written just now count as racy (their times may not show the next write): none.
    monkeypatch.setattr(errkb.sync, "_RACY_NS", -(10**12))
    tree = build_tree(tmp_path / "tree", records_v1(), V1)

    def publish(version: str, marked: set[int]) -> None:
        # The next version written over the tree, only the files whose bytes differ.
        changed = [
            make_record(n, repo_of(n), marker=version if n % 4 in marked else "") for n in range(40)
        ]
        new = build_tree(tmp_path / version[:10], changed, version)
        for path in new.rglob("*"):
            old = tree / path.relative_to(new)
            if path.is_file() and not (old.exists() and filecmp.cmp(path, old, shallow=False)):
                old.write_bytes(path.read_bytes())

    hashed: list[str] = []
    real = errkb.sync.fetching.file_sha256

    def counting(path: Path) -> str:
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(errkb.sync.fetching, "file_sha256", counting)
    assert sync(store, tree, plan_workers=0).counts.added == 40
    assert sorted(hashed) == [f"repo-{n}.json" for n in range(4)]
    hashed.clear()
    publish(V2, {0})
    report = sync(store, tree, plan_workers=0)
    assert (report.counts.updated, report.revalidation.same_body) == (10, 3)
    assert hashed == ["repo-0.json"]  # read and applied; the other three only stat'ed
    hashed.clear()
    repo1 = tree / "data" / "repos" / "org" / "repo-1.json"
    repo1.write_bytes(repo1.read_bytes())  # the same bytes, written again: hashed again
    publish(V3, {0, 3})
    report = sync(store, tree, plan_workers=0)
    assert (report.counts.updated, report.revalidation.same_body) == (20, 2)
    assert sorted(hashed) == ["repo-0.json", "repo-1.json", "repo-3.json"]  # not repo-2
    assert os.path.exists(repo1) and live(store) == hashes(
        make_record(n, repo_of(n), marker=V3 if n % 4 in {0, 3} else "") for n in range(40)
    )


def test_a_file_changed_just_before_it_was_hashed_gets_no_signature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write in the same clock tick as the read would leave its times as they were: only a
    # file whose status changed well before the hash is trusted by its signature next time.
    path = tmp_path / "repo.json"
    path.write_bytes(b"[]")
    fresh = errkb.sync._Validators(local=True)
    fresh.hash("data/repos/o/r.json", path)
    assert fresh.hashed and not fresh.signed
    monkeypatch.setattr(errkb.sync, "_RACY_NS", -(10**12))  # as if written long ago
    old = errkb.sync._Validators(local=True)
    old.hash("data/repos/o/r.json", path)
    assert old.signed == {"data/repos/o/r.json": errkb.sync._signature(path)}
