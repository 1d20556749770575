"""Tests for errkb.sync.publish: locating a published tree, parsing and verifying files."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import zlib
from pathlib import Path

import pytest
from conftest import require_extra
from published import build_tree, download, make_records, serve

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


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"raw_sha256": "0" * 64}, "decompressed sha256 .* does not match"),
        ({"raw_bytes": 5}, "decompresses to more than the manifest's rawBytes 5"),
        ({"raw_bytes": 1 << 20}, "bytes decompressed, but the manifest says 1048576"),
    ],
)
def test_a_streamed_index_is_refused_before_its_end_is_read(
    tree: Path, changes: dict, message: str
) -> None:
    # The decompressed checks move into the one read the parse makes: the rows it yields
    # before the end are not the answer; ``read_index`` raises before it returns any.
    path = tree / "data" / "index.json.gz"
    entry = _entry(path, **changes)
    content = publish.verify_file(
        publish.Fetched("i", path), entry, max_bytes=1 << 30, streamed=True
    )
    assert content.check is not None  # nothing decompressed yet
    with pytest.raises(IntegrityError, match=message):
        publish.read_index(content, "i", VERSION)


@pytest.mark.parametrize(
    ("payload", "own_error"),
    [
        (b'{"errors": [{"id": "a", "repo": "o/x"}, }', "not valid JSON"),  # the stream's
        (b'{"errors": [{"id": "a", "repo": "o/x"}, 2]}', "index row 1 has no string id"),  # a row's
    ],
)
def test_a_streamed_index_that_reads_badly_says_first_that_it_is_not_the_hashed_one(
    tmp_path: Path, payload: bytes, own_error: str
) -> None:
    path = tmp_path / "index.json.gz"
    path.write_bytes(gzip.compress(payload))
    fetched = publish.Fetched("i", path)
    other = publish.verify_file(
        fetched, _entry(path, raw_sha256="0" * 64), max_bytes=1 << 30, streamed=True
    )
    with pytest.raises(IntegrityError, match=r"decompressed sha256 .* does not match"):
        publish.read_index(other, "i", VERSION)
    # The very bytes hashed: the reader's own error.
    same = publish.verify_file(fetched, _entry(path), max_bytes=1 << 30, streamed=True)
    with pytest.raises(SyncError, match=own_error):
        publish.read_index(same, "i", VERSION)


def test_a_streamed_index_reads_as_a_checked_one(tree: Path) -> None:
    path = tree / "data" / "index.json.gz"
    fetched = publish.Fetched("i", path)
    streamed = publish.verify_file(fetched, _entry(path), max_bytes=1 << 30, streamed=True)
    checked = publish.verify_file(fetched, _entry(path), max_bytes=1 << 30)
    assert checked.check is None
    assert publish.read_index(streamed, "i", VERSION) == publish.read_index(checked, "i", VERSION)
    # Without the compressed sha256 the bytes are proven only by the decompressed one: checked
    # before the content is returned, as ever.
    with pytest.raises(IntegrityError, match="decompressed sha256"):
        unhashed = _entry(path, sha256=None, raw_sha256="0" * 64)
        publish.verify_file(fetched, unhashed, max_bytes=1 << 30, streamed=True)


def test_a_streamed_bomb_is_refused_at_the_cap(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"[" + b"1," * (2 << 20) + b"1]"))
    entry = _entry(bomb, raw_sha256=None, raw_bytes=None)
    fetched = publish.Fetched("b", bomb)
    content = publish.verify_file(fetched, entry, max_bytes=1 << 20, streamed=True)
    with pytest.raises(SyncError, match="decompresses to over the 1048576-byte cap"):
        publish.read_index(content, "b", VERSION)


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)  # the same test ids in every process (xdist)


@pytest.mark.parametrize(
    "image",
    [
        pytest.param(_gz(b"one member"), id="one-member"),
        pytest.param(_gz(b"first, ") + _gz(b"second"), id="two-members"),
        pytest.param(_gz(b"padded") + b"\0" * 10, id="zeros-after"),
        pytest.param(_gz(b"a") + b"\0\0" + _gz(b"b") + b"\0", id="zeros-between"),
        pytest.param(_gz(b""), id="empty-member"),
        pytest.param(b"", id="empty-file"),
        pytest.param(_gz(bytes(range(256)) * 40_000), id="past-one-read"),
        # Members each past one capped inflate: what follows one is read once.
        pytest.param(_gz(b"a" * (9 << 20)) + _gz(b"b" * (5 << 20)) * 2, id="big-members"),
        pytest.param(_gz(b"cut short" * 100)[:-5], id="truncated"),
        pytest.param(_gz(b"bad crc")[:-8] + b"\0" * 8, id="bad-crc"),
        pytest.param(_gz(b"trailing") + b"junk", id="junk-after"),
        pytest.param(b"not gzip at all", id="not-gzip"),
    ],
)
def test_the_streamed_inflate_reads_what_gzip_reads(tmp_path: Path, image: bytes) -> None:
    import threading

    path = tmp_path / "f.gz"
    path.write_bytes(image)
    try:
        want: bytes | None = gzip.decompress(image)
    except (OSError, EOFError, zlib.error):
        want = None
    try:
        got: bytes | None = b"".join(publish._gunzipped(path, threading.Event()))
    except (OSError, EOFError, zlib.error):
        got = None
    assert got == want


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
def _awkward_index(rows: int) -> tuple[bytes, list[dict[str, object]]]:
    """An index whose rows defeat a bulk parse here and there, and the rows it holds."""
    out = []
    parts = []
    for n in range(rows):
        row: dict[str, object] = {
            "id": f"r{n:05d}",
            "repo": f"o/{n % 7}",
            "msg": f"message {n}: {{value!r}}",
            "pattern": f"message {n}: (.+?)",
            "cls": "ValueError",
        }
        text = json.dumps(row)
        if n % 997 == 5:
            row["msg"] = 'a "}, {" inside a string'  # a cut there does not parse
            text = json.dumps(row)
        elif n % 1499 == 9:
            row["n"] = 2**70  # orjson reads it as a float: a field no digest holds
            text = json.dumps(row)
        elif n % 1999 == 11:
            text = text[:-1] + ', "x": NaN}'  # Python's json reads it, orjson does not
            row["x"] = float("nan")
        elif n % 2003 == 13:
            text = text[:-1] + ', "s": "\\ud800"}'  # a lone surrogate
            row["s"] = "\ud800"
        parts.append(text)
        out.append(row)
    sep = [", ", ",", ",\n  "]
    body = "".join(parts[n] + (sep[n % 3] if n + 1 < rows else "") for n in range(rows))
    return f'{{"datasetVersion": "{VERSION}", "errors": [{body}]}}'.encode(), out


@pytest.mark.parametrize("bulk", [True, False])
def test_index_rows_read_in_bulk_are_the_rows_read_one_by_one(
    bulk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows of 1 MiB: rows cross their edges; some windows hold a row a bulk parse refuses.
    data, rows = _awkward_index(40_000)
    assert len(data) > 3 * (1 << 20)
    calls = {"parsed": 0, "refused": 0}
    loads = publish._bulk_loads()
    if bulk and loads is None:
        require_extra("orjson", "fast")

    def counted(text: str) -> object:
        assert loads is not None
        try:
            found = loads(text)
        except ValueError:
            calls["refused"] += 1
            raise
        calls["parsed"] += 1
        return found

    monkeypatch.setattr(publish, "_bulk_loads", lambda: counted if bulk else None)
    got = publish.read_index(data, "i", VERSION)
    want: dict[str, list[str]] = {}
    for row in rows:
        want.setdefault(str(row["repo"]), []).append(str(row["id"]))
    assert got.by_repo == want
    assert got.digests == {
        repo: publish.rows_digest(
            (r["id"], r["msg"], r["pattern"], r["cls"]) for r in rows if r["repo"] == repo
        )
        for repo in want
    }
    # Most windows were read in bulk, and the ones holding a row orjson refuses by the scanner.
    if bulk:
        assert calls["parsed"] > 2 and calls["refused"] > 2
    else:
        assert calls == {"parsed": 0, "refused": 0}


def test_read_index_groups_ids_by_repo() -> None:
    rows = [{"id": "a", "repo": "o/x"}, {"id": "b", "repo": "o/y"}, {"id": "c", "repo": "o/x"}]
    doc = {"datasetVersion": VERSION, "errors": rows}
    assert publish.read_index(json.dumps(doc).encode(), "i", VERSION).by_repo == {
        "o/x": ["a", "c"],
        "o/y": ["b"],
    }
    assert publish.read_index(json.dumps(rows).encode(), "i", VERSION).by_repo["o/y"] == ["b"]


def test_read_index_refuses_duplicates_and_other_versions() -> None:
    rows = [{"id": "a", "repo": "o/x"}, {"id": "a", "repo": "o/y"}]
    with pytest.raises(IntegrityError, match="ids listed more than once: a"):
        publish.read_index(json.dumps(rows).encode(), "i", VERSION)
    doc = {"datasetVersion": "2020-01-01T00:00:00Z", "errors": []}
    with pytest.raises(IntegrityError, match="index is for datasetVersion 2020"):
        publish.read_index(json.dumps(doc).encode(), "i", VERSION)
    with pytest.raises(SyncError, match="row 0 has no string id"):
        publish.read_index(b'[{"id": 1, "repo": "o/x"}]', "i", VERSION)


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
        got = download(url, tmp_path / "a")
        assert got.path is not None and got.etag
        assert got.path.read_bytes() == (tree / "data" / "repos.json").read_bytes()
        again = download(url, tmp_path / "b", etag=got.etag)
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
            download(f"{server.base}/data/repos.json", tmp_path / "x", timeout=5)


def test_download_caps_the_size(tree: Path, tmp_path: Path) -> None:
    size = (tree / "data" / "repos.json").stat().st_size
    with serve(tree) as server:
        url = f"{server.base}/data/repos.json"
        with pytest.raises(NetworkError, match=f"{size} bytes is over the 100-byte cap"):
            download(url, tmp_path / "x", max_bytes=100)
        # Without a Content-Length the cap is enforced while streaming.
        server.faults["/data/repos.json"] = "nolength"
        with pytest.raises(NetworkError, match="body is over the 100-byte cap"):
            download(url, tmp_path / "y", max_bytes=100)
        assert download(url, tmp_path / "z").path is not None


def test_download_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more.
    with pytest.raises(NetworkError, match="connection refused"):
        download(f"http://127.0.0.1:{port}/data/manifest.json", tmp_path / "x")


def test_download_refuses_other_schemes(tmp_path: Path) -> None:
    with pytest.raises(NetworkError, match="only http and https"):
        download("file:///etc/passwd", tmp_path / "x")


def test_a_streamed_read_stopped_early_leaves_no_thread_behind(tmp_path: Path) -> None:
    # The inflating thread holds at most a few chunks; a reader that stops (an error, a
    # limit) closes the stream, and the thread ends instead of waiting on a full queue.
    path = tmp_path / "big.gz"
    path.write_bytes(gzip.compress(bytes(range(256)) * 200_000, compresslevel=1))
    entry = _entry(path)
    content = publish.verify_file(
        publish.Fetched("b", path), entry, max_bytes=1 << 30, streamed=True
    )
    fh = content.open()
    assert fh.read(1000) == bytes(range(256)) * 3 + bytes(range(232))
    thread = fh._thread  # type: ignore[attr-defined]
    fh.close()
    assert not thread.is_alive()
