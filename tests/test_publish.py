"""Tests for errkb.sync.publish: locating a published tree, parsing and verifying files."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
from pathlib import Path

import pytest
from published import build_tree, make_records, serve

from errkb.errors import IntegrityError, NetworkError, SyncError
from errkb.sync import publish

VERSION = "2026-09-01T00:00:00.000Z"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("tree"), make_records(30, repos=3), VERSION)


# ---------------------------------------------------------------------------- locate
def test_locate_local_tree_three_ways(tree: Path) -> None:
    for source in (tree, tree / "data", tree / "data" / "manifest.json"):
        found = publish.locate(str(source))
        assert found == publish.LocalTree(tree), source
        assert found.where("/data/index.json.gz") == str(tree / "data" / "index.json.gz")


def test_locate_plain_records_is_none(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text("{}\n")
    assert publish.locate(str(records)) is None
    assert publish.locate(str(tmp_path)) is None


@pytest.mark.parametrize(
    ("url", "base", "manifest"),
    [
        ("https://errors.example", "https://errors.example", "data/manifest.json"),
        ("https://errors.example/", "https://errors.example", "data/manifest.json"),
        ("http://h:8/site/", "http://h:8/site", "data/manifest.json"),
        (
            "https://errors.example/data/manifest.json",
            "https://errors.example",
            "data/manifest.json",
        ),
        ("http://h/site/data/manifest.json", "http://h/site", "data/manifest.json"),
        ("http://h/mirror/manifest.json", "http://h/mirror", "manifest.json"),
    ],
)
def test_locate_urls(url: str, base: str, manifest: str) -> None:
    found = publish.locate(url)
    assert isinstance(found, publish.HttpTree)
    assert (found.base, found.manifest_path) == (base, manifest)
    # Listed paths are absolute on the site but live under the base (a sub-path mirror works).
    assert found.where("/data/index.json.gz") == f"{base}/data/index.json.gz"


def test_locate_refuses_other_schemes() -> None:
    with pytest.raises(SyncError, match="unsupported URL scheme 'ftp'"):
        publish.locate("ftp://errors.example/data/manifest.json")


@pytest.mark.parametrize(
    "path",
    ["../etc/passwd", "/data/../../etc/passwd", "http://evil.example/x", "", "/data//x", "a\\b"],
)
def test_clean_rel_refuses_escapes(path: str) -> None:
    with pytest.raises(IntegrityError, match="unsafe path"):
        publish.clean_rel(path)


def test_clean_rel_strips_the_leading_slash() -> None:
    assert publish.clean_rel("/data/index.json.gz") == "data/index.json.gz"


@pytest.mark.parametrize("repo", ["../x", "a/..", "a/b/c", "owner", "a/b c", "./b"])
def test_repo_file_refuses_bad_names(repo: str) -> None:
    with pytest.raises(IntegrityError, match="invalid repository name"):
        publish.repo_file(repo)


def test_repo_file_path() -> None:
    assert publish.repo_file("sgl-project/sglang") == "data/repos/sgl-project/sglang.json"


# ---------------------------------------------------------------------------- manifest
def _manifest(**changes: object) -> bytes:
    doc: dict[str, object] = {
        "schemaVersion": 2,
        "datasetVersion": VERSION,
        "counts": {"repos": 1, "errors": 1},
        "files": {"index": {"path": "/data/index.json.gz", "sha256": "a" * 64}},
    }
    doc.update(changes)
    return json.dumps(doc).encode()


def test_parse_manifest(tree: Path) -> None:
    data = (tree / "data" / "manifest.json").read_bytes()
    manifest = publish.parse_manifest(data, "m")
    assert manifest.dataset_version == VERSION
    assert manifest.sha256 == hashlib.sha256(data).hexdigest()
    index = manifest.entry("index", "m")
    assert index.encoding == "gzip" and index.raw_sha256 and index.raw_bytes
    with pytest.raises(SyncError, match="lists no 'missing' file"):
        manifest.entry("missing", "m")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (_manifest(schemaVersion=3), "schemaVersion 3 is not supported"),
        (_manifest(datasetVersion="yesterday"), "not an ISO timestamp"),
        (_manifest(files=[]), "no 'files' object"),
        (_manifest(files={"index": {"path": "/x"}}), "needs a path and a sha256"),
        (_manifest(files={"index": {"path": "/x", "sha256": "XYZ"}}), "needs a path and a sha256"),
    ],
)
def test_parse_manifest_refuses(data: bytes, message: str) -> None:
    with pytest.raises(SyncError, match=message):
        publish.parse_manifest(data, "the-manifest")


# ---------------------------------------------------------------------------- verify
def _entry(path: Path, **changes: object) -> publish.FileEntry:
    raw = gzip.decompress(path.read_bytes())
    fields: dict[str, object] = {
        "name": "index",
        "path": "/data/index.json.gz",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "bytes": path.stat().st_size,
        "encoding": "gzip",
        "raw_sha256": hashlib.sha256(raw).hexdigest(),
        "raw_bytes": len(raw),
    }
    fields.update(changes)
    return publish.FileEntry(**fields)  # type: ignore[arg-type]


def test_verify_file_returns_the_decompressed_content(tree: Path) -> None:
    path = tree / "data" / "index.json.gz"
    content = publish.verify_file(publish.Fetched("i", path), _entry(path), max_bytes=1 << 30)
    assert content.read_bytes() == gzip.decompress(path.read_bytes())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"bytes": 1}, "bytes, but the manifest says 1"),
        ({"sha256": "0" * 64}, "does not match the manifest's 0000"),
        ({"raw_sha256": "0" * 64}, "decompressed sha256 .* does not match"),
        ({"raw_bytes": 5}, "decompresses to more than the manifest's rawBytes 5"),
    ],
)
def test_verify_file_refuses_mismatches(tree: Path, changes: dict, message: str) -> None:
    path = tree / "data" / "index.json.gz"
    with pytest.raises(IntegrityError, match=message):
        publish.verify_file(publish.Fetched("i", path), _entry(path, **changes), max_bytes=1 << 30)


def test_verify_file_caps_decompression(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (4 << 20)))
    entry = _entry(bomb, raw_sha256=None, raw_bytes=None)
    with pytest.raises(SyncError, match="decompresses to over the 1048576-byte cap"):
        publish.verify_file(publish.Fetched("b", bomb), entry, max_bytes=1 << 20)


def test_verify_file_refuses_broken_gzip(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(b"[1, 2, 3]")[:-6])
    spec = publish.FileEntry(
        "index", "/x", hashlib.sha256(broken.read_bytes()).hexdigest(), encoding="gzip"
    )
    with pytest.raises(IntegrityError, match="not a valid gzip file"):
        publish.verify_file(publish.Fetched("b", broken), spec, max_bytes=1 << 20)


# ---------------------------------------------------------------------------- index, repos
def test_parse_index_groups_ids_by_repo() -> None:
    rows = [{"id": "a", "repo": "o/x"}, {"id": "b", "repo": "o/y"}, {"id": "c", "repo": "o/x"}]
    doc = {"datasetVersion": VERSION, "errors": rows}
    assert publish.parse_index(json.dumps(doc).encode(), "i", VERSION) == {
        "o/x": ["a", "c"],
        "o/y": ["b"],
    }
    assert publish.parse_index(json.dumps(rows).encode(), "i", VERSION)["o/y"] == ["b"]


def test_parse_index_refuses_duplicates_and_other_versions() -> None:
    rows = [{"id": "a", "repo": "o/x"}, {"id": "a", "repo": "o/y"}]
    with pytest.raises(IntegrityError, match="ids listed more than once: a"):
        publish.parse_index(json.dumps(rows).encode(), "i", VERSION)
    doc = {"datasetVersion": "2020-01-01T00:00:00Z", "errors": []}
    with pytest.raises(IntegrityError, match="index is for datasetVersion 2020"):
        publish.parse_index(json.dumps(doc).encode(), "i", VERSION)
    with pytest.raises(SyncError, match="row 0 has no string id"):
        publish.parse_index(b'[{"id": 1, "repo": "o/x"}]', "i", VERSION)


def test_parse_repos_accepts_both_shapes() -> None:
    entry = {"repo": "o/x", "analyzedSha": "a" * 40, "contentChangedAt": None}
    for doc in ([entry], {"repos": [entry]}):
        info = publish.parse_repos(json.dumps(doc).encode(), "r")["o/x"]
        assert info.fingerprint == ("a" * 40, None)
    with pytest.raises(SyncError, match="entry 0 has no string 'repo'"):
        publish.parse_repos(b"[{}]", "r")


# ---------------------------------------------------------------------------- downloads
def test_download_and_conditional_request(tree: Path, tmp_path: Path) -> None:
    with serve(tree) as server:
        url = f"{server.base}/data/repos.json"
        got = publish.download(url, tmp_path / "a")
        assert got.path is not None and got.etag
        assert got.path.read_bytes() == (tree / "data" / "repos.json").read_bytes()
        again = publish.download(url, tmp_path / "b", etag=got.etag)
        assert again.not_modified and not (tmp_path / "b").exists()
        assert server.requests[-1] == ("/data/repos.json", got.etag)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("500", "HTTP 500"),
        ("404", "HTTP 404"),
        ("drop", "GET http://127.0.0.1:[0-9]+/data/repos.json: "),
        ("truncate", "truncated body|connection lost"),
        ("redirect:ftp://e.example/repos.json", "refused redirect to 'ftp://e.example/repos.json'"),
        ("redirect:file:///etc/passwd", "refused redirect to 'file:///etc/passwd'"),
    ],
)
def test_download_failures_are_network_errors(
    tree: Path, tmp_path: Path, fault: str, message: str
) -> None:
    with serve(tree) as server:
        server.faults["/data/repos.json"] = fault
        with pytest.raises(NetworkError, match=message):
            publish.download(f"{server.base}/data/repos.json", tmp_path / "x", timeout=5)


def test_download_caps_the_size(tree: Path, tmp_path: Path) -> None:
    size = (tree / "data" / "repos.json").stat().st_size
    with serve(tree) as server:
        url = f"{server.base}/data/repos.json"
        with pytest.raises(NetworkError, match=f"{size} bytes is over the 100-byte cap"):
            publish.download(url, tmp_path / "x", max_bytes=100)
        # Without a Content-Length the cap is enforced while streaming.
        server.faults["/data/repos.json"] = "nolength"
        with pytest.raises(NetworkError, match="body is over the 100-byte cap"):
            publish.download(url, tmp_path / "y", max_bytes=100)
        assert publish.download(url, tmp_path / "z").path is not None


def test_download_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more.
    with pytest.raises(NetworkError, match="connection refused"):
        publish.download(f"http://127.0.0.1:{port}/data/manifest.json", tmp_path / "x")


def test_download_refuses_other_schemes(tmp_path: Path) -> None:
    with pytest.raises(NetworkError, match="only http and https"):
        publish.download("file:///etc/passwd", tmp_path / "x")
