"""Syncing from ErrLookup as it publishes today (issue 23) and what a sync trusts (27.6).

A split index (``index-N.json.gz`` parts, listed three ways) gives the knowledge base the same
``export`` bytes as one index; every malformed-parts case is one error, nothing changed;
records rewritten in place at the same commit are found by conditional requests and show in
``history``; new fields and unknown ones round-trip; redirects to another host or from https
to http are refused; a source URL's query string is kept; a repository file must match the
index rows' messages, not only their ids. Run on both backends (``backend`` fixture).
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdn import serve_cdn
from published import build_tree, make_record, serve

import errkb
from errkb.errors import IntegrityError, NetworkError, SyncError
from errkb.records import schema_validator
from errkb.store import Store, open_store
from errkb.sync import history, publish, sync, transport
from errkb.sync.update import check_for_update

V1 = "2026-09-20T00:00:00.000Z"
V2 = "2026-09-20T01:00:00.000Z"
REPOS = 4


def dataset(marker: str = "") -> list[dict[str, Any]]:
    """12 records over 4 repositories, with upstream's newer fields and one unknown field."""
    out = []
    for n in range(12):
        obj = make_record(n, f"org/repo-{n % REPOS}")
        obj["contentChangedAt"] = None if n % 2 else "2026-09-19T12:00:00.000Z"
        obj["futureField"] = {"added": "later", "n": [n, 1.5, None]}
        out.append(obj)
    if marker:  # a tag backfill: one record rewritten at the same commit
        out[5]["backgroundTag"] = marker
    return out


def pinned(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """repos.json entries keeping every repository at one commit whatever its file holds."""
    return {f"org/repo-{k}": {"analyzedSha": f"{k:040x}"} for k in range(REPOS)}


@pytest.fixture
def store(db_target: str) -> Iterator[Store]:
    s = open_store(db_target)
    yield s
    s.close()


def export_text(store: Store) -> str:
    out = io.StringIO()
    errkb.KnowledgeBase(store).export(out)
    return out.getvalue()


def split_tree(root: Path, parts: int = 3, listing: str = "object") -> Path:
    return build_tree(
        root, dataset(), V1, repo_meta=pinned(dataset()), index_parts=parts, parts_listing=listing
    )


# ---------------------------------------------------------------------------- split index
@pytest.mark.parametrize(
    "listing",
    [
        "object",
        pytest.param("list", marks=pytest.mark.slow),
        pytest.param("numbered", marks=pytest.mark.slow),
    ],
)
def test_a_split_index_gives_the_same_knowledge_base_as_one_index(
    store: Store, tmp_path: Path, listing: str
) -> None:
    single = build_tree(tmp_path / "single", dataset(), V1, repo_meta=pinned(dataset()))
    split = split_tree(tmp_path / "split", 3, listing)
    assert not (split / "data" / "index.json.gz").exists()
    assert len(list((split / "data").glob("index-*.json.gz"))) == 3
    sync(store, split)
    got = export_text(store)
    other = open_store(tmp_path / "other.sqlite3")
    try:
        sync(other, single)
        assert got == export_text(other)
    finally:
        other.close()
    # New and unknown fields are kept verbatim: the export holds them byte for byte.
    first = json.loads(got.splitlines()[0])["record"]
    assert first["futureField"]["added"] == "later" and "contentChangedAt" in first
    assert '"futureField":{"added":"later","n":[' in got.replace(" ", "")


def test_a_split_index_over_http(store: Store, tmp_path: Path) -> None:
    with serve_cdn() as cdn:
        cdn.publish(V1, split_tree(tmp_path / "split"))
        report = sync(store, cdn.base)
    assert report.counts.added == 12
    assert {k for k, _ in report.hashes} >= {f"index.data/index-{n}.json.gz" for n in (1, 2, 3)}
    parts = [r for r in cdn.requests if r.path.startswith("/data/index-")]
    assert len(parts) == 3 and all(r.query["v"] == V1 for r in parts)


def _manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "data" / "manifest.json").read_text())


def _rewrite_part(root: Path, n: int, **changes: Any) -> None:
    """Change part ``n``'s header and re-hash it in the manifest (a well-formed lie)."""
    path = root / "data" / f"index-{n}.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc.update(changes)
    raw = json.dumps(doc).encode()
    body = gzip.compress(raw, mtime=0)
    path.write_bytes(body)
    manifest = _manifest(root)
    for spec in manifest["files"]["index"]["parts"]:
        if spec["path"] == f"/data/index-{n}.json.gz":
            spec.update(
                bytes=len(body),
                sha256=hashlib.sha256(body).hexdigest(),
                rawBytes=len(raw),
                rawSha256=hashlib.sha256(raw).hexdigest(),
            )
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))


def _drop_part(root: Path) -> None:
    manifest = _manifest(root)
    del manifest["files"]["index"]["parts"][1]
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))


def _duplicate_part(root: Path) -> None:
    shutil.copy(root / "data" / "index-1.json.gz", root / "data" / "index-2.json.gz")
    manifest = _manifest(root)
    parts = manifest["files"]["index"]["parts"]
    parts[1].update({k: parts[0][k] for k in ("bytes", "sha256", "rawBytes", "rawSha256")})
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))


def _wrong_sha(root: Path) -> None:
    manifest = _manifest(root)
    manifest["files"]["index"]["parts"][2]["sha256"] = "0" * 64
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))


def _no_parts(root: Path) -> None:
    manifest = _manifest(root)
    manifest["files"]["index"]["parts"] = []
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))


MALFORMED = {
    "missing part": (_drop_part, IntegrityError, r"index part\(s\) 2 of 3 are not listed"),
    "duplicate part": (_duplicate_part, IntegrityError, "index part 1 of 3 is listed twice"),
    "another version": (
        lambda root: _rewrite_part(root, 2, datasetVersion="2026-09-19T00:00:00.000Z"),
        IntegrityError,
        "index part is for datasetVersion '2026-09-19T00:00:00.000Z', the manifest for",
    ),
    "wrong sha256": (_wrong_sha, IntegrityError, "index-3.json.gz: sha256 .* does not match"),
    "parts count 0": (
        lambda root: [_rewrite_part(root, n, parts=0) for n in (1, 2, 3)],
        IntegrityError,
        "index part 1 of 0 is out of range",
    ),
    "an empty listing": (_no_parts, SyncError, r"files.index lists no index parts \(0 parts\)"),
    "disagreeing counts": (
        lambda root: _rewrite_part(root, 3, parts=4),
        IntegrityError,
        "disagree on how many parts there are",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_split_index_is_one_error_and_changes_nothing(
    store: Store, tmp_path: Path, case: str
) -> None:
    old = build_tree(tmp_path / "old", dataset()[:6], "2026-09-01T00:00:00.000Z")
    sync(store, old)
    before = export_text(store), history.versions(store)
    bad = split_tree(tmp_path / "bad")
    damage, error, message = MALFORMED[case]
    damage(bad)
    with pytest.raises(error, match=message) as caught:
        sync(store, bad)
    assert "\n" not in str(caught.value)
    assert (export_text(store), history.versions(store)) == before


def unindexed_tree(root: Path, records: list[dict[str, Any]] | None = None, v: str = V1) -> Path:
    """A tree whose manifest lists no index in any form: repos.json and the repository files."""
    records = dataset() if records is None else records
    return build_tree(root, records, v, repo_meta=pinned(records), parts_listing="none")


def test_a_manifest_listing_no_index_falls_back_to_repos_json(store: Store, tmp_path: Path) -> None:
    root = unindexed_tree(tmp_path / "t")
    assert not list((root / "data").glob("index*")) and "index" not in _manifest(root)["files"]
    report = sync(store, root)
    assert report.counts.added == 12
    assert any("lists no index" in w and "repos.json only" in w for w in report.warnings)
    other = open_store(tmp_path / "other.sqlite3")
    try:
        sync(other, build_tree(tmp_path / "single", dataset(), V1, repo_meta=pinned(dataset())))
        assert export_text(store) == export_text(other)
    finally:
        other.close()


def test_without_an_index_an_unchanged_resync_is_all_304_over_the_cdn(
    store: Store, tmp_path: Path
) -> None:
    with serve_cdn() as cdn:
        cdn.publish(V1, unindexed_tree(tmp_path / "v1"))
        sync(store, cdn.base)
        cdn.publish(V2, unindexed_tree(tmp_path / "v2", dataset("gpu-oom"), V2))
        cdn.reset()
        report = sync(store, cdn.base)
        repo_requests = cdn.repo_requests()
    assert report.revalidation.to_dict()["rewritten"] == 1
    assert report.revalidation.to_dict()["notModified"] == REPOS - 1
    assert all("if-none-match" in r.headers for r in repo_requests)
    assert store.raw_record(dataset("gpu-oom")[5]["id"])["backgroundTag"] == "gpu-oom"


def test_without_an_index_skip_invalid_applies_the_readable_files(
    store: Store, tmp_path: Path
) -> None:
    bad = unindexed_tree(tmp_path / "t")
    (bad / "data" / "repos" / "org" / "repo-2.json").write_text("[{not json")
    with pytest.raises(errkb.errors.RecordError):
        sync(store, bad)
    report = sync(store, bad, skip_invalid=True, reject_report=tmp_path / "rejects.jsonl")
    assert report.partial and report.counts.added == 9  # the other three repositories
    assert report.counts.rejected == 3  # as many as repos.json counts for the unreadable one


def _extra_record(root: Path) -> None:
    path = root / "data" / "repos" / "org" / "repo-1.json"
    items = json.loads(path.read_text())
    items.append({**items[0], "id": "f" * 32})
    path.write_text(json.dumps(items))


def _moved_record(root: Path) -> None:
    src, dst = (root / "data" / "repos" / "org" / f"repo-{k}.json" for k in (1, 2))
    moved = json.loads(src.read_text())[0]
    dst_items = json.loads(dst.read_text())
    dst_items[0] = {**moved, "repo": "org/repo-2"}
    dst.write_text(json.dumps(dst_items))


def _foreign_claim(root: Path) -> None:
    path = root / "data" / "repos" / "org" / "repo-1.json"
    items = json.loads(path.read_text())
    items[0]["repo"] = "org/repo-3"
    path.write_text(json.dumps(items))


UNINDEXED_FAULTS = {
    "a record repos.json does not count": (_extra_record, "4 records, but repos.json counts 3"),
    "one id in two files": (_moved_record, "ids in more than one repository file"),
    "a record claiming another repository": (_foreign_claim, "claims repo 'org/repo-3'"),
}


@pytest.mark.parametrize("case", sorted(UNINDEXED_FAULTS))
def test_without_an_index_a_file_disagreeing_with_repos_json_changes_nothing(
    store: Store, tmp_path: Path, case: str
) -> None:
    sync(store, build_tree(tmp_path / "old", dataset()[:6], "2026-09-01T00:00:00.000Z"))
    before = export_text(store), history.versions(store)
    bad = unindexed_tree(tmp_path / "bad")
    damage, message = UNINDEXED_FAULTS[case]
    damage(bad)
    with pytest.raises(IntegrityError, match=message):
        sync(store, bad, plan_workers=0)
    assert (export_text(store), history.versions(store)) == before


# ---------------------------------------------------------------------------- rewritten in place
@pytest.fixture
def rewritten(tmp_path: Path) -> dict[str, Path]:
    """V1, and V2: the same commits and ids, one record's backgroundTag backfilled."""
    return {
        V1: build_tree(tmp_path / "v1", dataset(), V1, repo_meta=pinned(dataset())),
        V2: build_tree(tmp_path / "v2", dataset("gpu-oom"), V2, repo_meta=pinned(dataset())),
    }


def test_a_record_rewritten_in_place_is_found_by_a_conditional_request(
    store: Store, rewritten: dict[str, Path]
) -> None:
    target = dataset("gpu-oom")[5]
    with serve_cdn() as cdn:
        cdn.publish(V1, rewritten[V1])
        sync(store, cdn.base)
        cdn.publish(V2, rewritten[V2])
        cdn.reset()
        report = sync(store, cdn.base)
        repo_requests = cdn.repo_requests()
    assert report.revalidation.to_dict() == {
        "checked": REPOS,
        "notModified": REPOS - 1,
        "sameBody": 0,
        "rewritten": 1,
    }
    assert "4 checked, 3 unchanged (304), 1 rewritten" in report.summary()
    assert (report.counts.updated, report.counts.added, report.counts.retired) == (1, 0, 0)
    # Every revalidation was conditional: the ETag applied last time.
    assert len(repo_requests) == REPOS and all("if-none-match" in r.headers for r in repo_requests)
    assert store.raw_record(target["id"])["backgroundTag"] == "gpu-oom"
    changes = [
        (e.dataset_version, e.change.value) for e in history.record_history(store, target["id"])
    ]
    assert changes == [(V1, "added"), (V2, "updated")]
    schema_validator("sync.schema.json").validate(report.to_dict())


def test_last_modified_serves_when_there_is_no_etag(
    store: Store, rewritten: dict[str, Path], tmp_path: Path
) -> None:
    same = build_tree(tmp_path / "same", dataset(), V2, repo_meta=pinned(dataset()))
    with serve_cdn() as cdn:
        cdn.etags, cdn.last_modified = False, "Sun, 20 Sep 2026 00:00:00 GMT"
        cdn.publish(V1, rewritten[V1])
        sync(store, cdn.base)
        cdn.publish(V2, same)  # nothing rewritten: every repository answers 304
        cdn.reset()
        report = sync(store, cdn.base)
        asked = cdn.repo_requests()
    assert report.revalidation.not_modified == REPOS and report.counts.updated == 0
    assert all(r.headers.get("if-modified-since") == cdn.last_modified for r in asked)


def test_a_200_with_an_unchanged_body_costs_no_write(
    store: Store, rewritten: dict[str, Path], tmp_path: Path
) -> None:
    # A local tree has no 304: each file is read, and the same bytes (sha256) change nothing.
    sync(store, rewritten[V1])
    again = tmp_path / "again"
    shutil.copytree(rewritten[V1], again)
    manifest = _manifest(again)
    manifest["datasetVersion"] = V2
    (again / "data" / "manifest.json").write_text(json.dumps(manifest))
    for part in (again / "data").glob("index*.json.gz"):
        doc = json.loads(gzip.decompress(part.read_bytes()))
        doc["datasetVersion"] = V2
        raw = json.dumps(doc).encode()
        body = gzip.compress(raw, mtime=0)
        part.write_bytes(body)
        manifest["files"]["index"].update(
            bytes=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
            rawBytes=len(raw),
            rawSha256=hashlib.sha256(raw).hexdigest(),
        )
    (again / "data" / "manifest.json").write_text(json.dumps(manifest))
    report = sync(store, again)
    assert report.revalidation.to_dict() == {
        "checked": REPOS,
        "notModified": 0,
        "sameBody": REPOS,
        "rewritten": 0,
    }
    assert (report.counts.added, report.counts.updated, report.counts.unchanged) == (0, 0, 12)


def test_check_says_when_only_in_place_rewrites_are_pending(
    store: Store, rewritten: dict[str, Path], tmp_path: Path
) -> None:
    sync(store, rewritten[V1])
    checked = check_for_update(store, rewritten[V2])
    assert checked.update_available and checked.rewrites_only
    assert "only records rewritten in place" in checked.summary()
    assert checked.to_dict()["pending"] == "rewrites-only"
    moved = build_tree(tmp_path / "moved", dataset("x"), V2)  # new commits
    other = check_for_update(store, moved)
    assert other.update_available and not other.rewrites_only
    assert other.to_dict()["pending"] == "repositories"


def test_check_asks_conditionally_and_says_rewrites_only_over_http(
    store: Store, rewritten: dict[str, Path]
) -> None:
    with serve_cdn() as cdn:
        cdn.publish(V1, rewritten[V1])
        sync(store, cdn.base)
        cdn.reset()
        same = check_for_update(store, cdn.base)
        asked = list(cdn.requests)
        cdn.publish(V2, rewritten[V2])
        newer = check_for_update(store, cdn.base)
    # The manifest the sync applied, asked with its ETag: a 304, nothing else requested.
    assert [r.path for r in asked] == ["/data/manifest.json"]
    assert "if-none-match" in asked[0].headers
    assert (same.status.value, same.current, same.available) == ("current", V1, V1)
    assert newer.update_available and newer.rewrites_only


# ---------------------------------------------------------------------------- 27.6
def test_a_redirect_to_another_host_is_refused_unless_named(
    store: Store, rewritten: dict[str, Path], tmp_path: Path
) -> None:
    with serve(rewritten[V1]) as server:
        port = server.base.rsplit(":", 1)[1]
        server.faults["/data/manifest.json"] = f"redirect:http://localhost:{port}/m.json"
        shutil.copy(rewritten[V1] / "data" / "manifest.json", rewritten[V1] / "m.json")
        with pytest.raises(NetworkError, match=r"refused redirect .*another host \(localhost\)"):
            sync(store, server.base)
        assert store.is_empty()
        report = sync(store, server.base, allow_redirect_hosts=["localhost"])
    assert report.counts.added == 12


@pytest.mark.parametrize(
    ("url", "target", "allowed", "why"),
    [
        ("https://a.example/x", "http://a.example/x", (), "a downgrade from https to http"),
        ("https://a.example/x", "http://m.example/x", ("m.example",), "a downgrade"),
        ("https://a.example/x", "https://b.example/x", (), "another host (b.example)"),
        ("https://a.example/x", "https://m.example/x", ("m.example",), None),
        ("http://a.example/x", "https://a.example:8443/y", (), None),
        ("https://A.example/x", "https://a.example./y", (), None),
    ],
)
def test_redirect_policy(url: str, target: str, allowed: tuple[str, ...], why: str | None) -> None:
    found = transport.redirect_problem(url, target, frozenset(allowed))
    assert found == why if why is None else (found is not None and found.startswith(why))


def test_the_source_urls_query_string_is_kept(store: Store, rewritten: dict[str, Path]) -> None:
    tree = publish.locate("https://h.example/?token=X")
    assert isinstance(tree, publish.HttpTree) and tree.base == "https://h.example"
    assert tree.url("data/manifest.json") == "https://h.example/data/manifest.json?token=X"
    versioned = tree.for_version(V1).url("/data/repos.json")
    assert versioned == f"https://h.example/data/repos.json?token=X&v={V1.replace(':', '%3A')}"
    assert "token" not in tree.where("data/manifest.json")  # shown and stored without it
    with serve_cdn() as cdn:
        cdn.publish(V1, rewritten[V1])
        report = sync(store, f"{cdn.base}/?token=s3cret")
        seen = list(cdn.requests)
    assert report.counts.added == 12 and "s3cret" not in report.source
    assert seen and all(r.query.get("token") == "s3cret" for r in seen)


@pytest.mark.parametrize("field", ["errorMessage", "messagePattern", "errorClass"])
def test_a_repository_file_must_match_the_index_rows_not_only_ids(
    store: Store, tmp_path: Path, field: str
) -> None:
    root = build_tree(tmp_path / "t", dataset(), V1)
    path = root / "data" / "repos" / "org" / "repo-1.json"
    items = json.loads(path.read_text())
    changed = copy.deepcopy(items)
    changed[0][field] = "SomethingElse" if field == "errorClass" else changed[0][field] + " x"
    path.write_text(json.dumps(changed))
    with pytest.raises(IntegrityError, match="errorMessage, messagePattern or errorClass"):
        sync(store, root)
    assert store.is_empty()


def test_files_rewritten_in_place_are_checked_against_the_index_read_once_more(
    store: Store, rewritten: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first read sums the digests only of repositories whose fingerprint changed (none
    # here: every commit is pinned). Files rewritten in place are read all the same; the
    # first to need its digest reads the index once more, for all of them.
    sync(store, rewritten[V1])
    v2 = rewritten[V2]
    other = v2 / "data" / "repos" / "org" / "repo-2.json"
    other.write_text(json.dumps(json.loads(other.read_text()), indent=3))  # re-serialised
    reads: list[bool] = []
    real = publish.read_index

    def counted(*args: Any, **kwargs: Any) -> publish.IndexRows:
        rows = real(*args, **kwargs)
        reads.append(bool(rows.undigested))
        return rows

    monkeypatch.setattr(publish, "read_index", counted)
    report = sync(store, v2, plan_workers=0)
    assert report.revalidation is not None and report.revalidation.rewritten == 1
    assert report.counts.updated == 1
    assert reads == [True, False]  # every digest left out at first; then one read for them


def test_a_file_rewritten_in_place_that_disagrees_with_the_index_changes_nothing(
    store: Store, rewritten: dict[str, Path]
) -> None:
    sync(store, rewritten[V1])
    before = export_text(store), history.versions(store)
    path = rewritten[V2] / "data" / "repos" / "org" / "repo-1.json"
    items = json.loads(path.read_text())
    items[0]["errorMessage"] += " x"  # the index still lists the old message
    path.write_text(json.dumps(items))
    with pytest.raises(IntegrityError, match="errorMessage, messagePattern or errorClass"):
        sync(store, rewritten[V2], plan_workers=0)
    assert (export_text(store), history.versions(store)) == before


@pytest.mark.slow
def test_the_cli_check_and_redirect_option(tmp_path: Path, rewritten: dict[str, Path]) -> None:
    from click.testing import CliRunner

    import errkb.cli.sync  # noqa: F401 - registers the sync commands
    from errkb.cli import cli

    db = str(tmp_path / "cli.sqlite3")
    assert CliRunner().invoke(cli, ["--db", db, "sync", "-q", str(rewritten[V1])]).exit_code == 0
    result = CliRunner().invoke(cli, ["--db", db, "sync", "--check", str(rewritten[V2])])
    assert result.exit_code == 1
    assert "only records rewritten in place may be pending" in result.stdout
    with serve(rewritten[V2]) as server:
        port = server.base.rsplit(":", 1)[1]
        server.faults["/data/manifest.json"] = f"redirect:http://localhost:{port}/data/x.json"
        shutil.copy(rewritten[V2] / "data" / "manifest.json", rewritten[V2] / "data" / "x.json")
        refused = CliRunner().invoke(cli, ["--db", db, "sync", server.base])
        assert refused.exit_code == 2 and "--allow-redirect-host localhost" in refused.stderr
        args = ["--db", db, "sync", "--allow-redirect-host", "localhost", server.base]
        applied = CliRunner().invoke(cli, args)
    assert applied.exit_code == 0, applied.stderr
    # Synced from a local copy first: no ETag to send, so each file is read, and three hold
    # the records already stored.
    line = "4 checked, 0 unchanged (304), 3 unchanged (same records), 1 rewritten"
    assert line in applied.stdout


def test_a_field_upstreams_schema_requires_that_errkb_does_not_know_is_a_warning(
    store: Store, tmp_path: Path
) -> None:
    root = build_tree(tmp_path / "t", dataset(), V1)
    assert sync(store, root).warnings == ()  # the test tree's schema requires known fields
    schema = json.loads((root / "schema.json").read_text())
    schema["definitions"]["ErrorRecord"]["required"].append("rootCause")
    (root / "schema.json").write_text(json.dumps(schema))
    manifest = _manifest(root)
    manifest["datasetVersion"] = V2
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError):  # the index still says V1: refused, as it should be
        sync(store, root)
    assert publish.schema_warnings(
        (root / "schema.json").read_bytes(), "schema.json", ["id", "errorMessage"]
    ) == (
        "schema.json: upstream's schema makes record field 'messagePattern' required; errkb "
        "does not know it (kept verbatim, not validated: a newer errkb may read it)",
        "schema.json: upstream's schema makes record field 'rootCause' required; errkb does "
        "not know it (kept verbatim, not validated: a newer errkb may read it)",
    )
    other = build_tree(tmp_path / "u", dataset(), V2)
    shutil.copy(root / "schema.json", other / "schema.json")
    report = sync(store, other)
    assert len(report.warnings) == 1 and "'rootCause' required" in report.warnings[0]
    assert "warning: " in report.diagnostics().before[0]
    assert publish.schema_warnings(b"[", "s", [])[0].startswith("s: not valid JSON")


def test_without_validators_the_body_sha256_spares_the_next_read(
    store: Store, rewritten: dict[str, Path], tmp_path: Path
) -> None:
    same = build_tree(tmp_path / "same", dataset(), V2, repo_meta=pinned(dataset()))
    with serve_cdn() as cdn:
        cdn.etags = False  # no ETag, no Last-Modified: every request is a 200
        cdn.publish(V1, rewritten[V1])
        sync(store, cdn.base)
        state = json.loads(store.meta_value("sync_state") or "{}")
        assert len(state["bodies"]) == REPOS  # the sha256 of each file applied
        cdn.publish(V2, same)
        report = sync(store, cdn.base)
    assert report.revalidation.same_body == REPOS and report.counts.updated == 0
