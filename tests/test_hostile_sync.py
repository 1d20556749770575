"""Hostile published trees for ``errkb sync`` (memory despite byte caps), and symlink loops
given to ``ingest`` and ``lint``.

Each sync case builds a hostile tree in ``tmp_path`` and runs ``errkb sync`` in a child under a
memory limit and a timeout (``tests.hostile``): the sync must refuse with one clear error
naming the file and the limit, leave the database unchanged, and stay inside the limit.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from errkb.errors import IntegrityError, SyncError
from errkb.kb import open_kb
from errkb.sync import publish
from tests.hostile import DEFAULT_MEMORY, run_errkb, run_python
from tests.published import build_tree, make_records, serve


# ---------------------------------------------------------------------------- symlink loops
@pytest.mark.parametrize("command", ["ingest", "lint"])
def test_a_symlink_loop_is_not_called_missing(tmp_path: Path, command: str) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), command, str(loop)], timeout=60)
    assert out.returncode == 2, out
    assert not out.crashed, out.stderr
    assert "loop.json: symlink loop" in out.stderr
    assert "does not exist" not in out.stderr


@pytest.mark.parametrize("command", ["ingest", "lint"])
def test_a_missing_path_is_still_an_error_naming_it(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "missing.json"
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), command, str(missing)], timeout=60)
    assert out.returncode == 2, out
    assert not out.crashed, out.stderr
    assert "missing.json: no such file or directory" in out.stderr


# ---------------------------------------------------------------------------- hostile trees
OLD, NEW = "2026-09-01T00:00:00.000Z", "2026-09-02T00:00:00.000Z"
MiB = 1 << 20


def _db_with_a_version(tmp_path: Path) -> Path:
    """A database synced to OLD: what every refused sync must leave exactly as it was."""
    db = tmp_path / "kb.sqlite3"
    good = build_tree(tmp_path / "good", make_records(6, repos=2), OLD)
    report = open_kb(db, bundled=False).sync(good)
    assert report.dataset_version == OLD
    return db


def _hostile_tree(tmp_path: Path) -> Path:
    # Other records: every repository has changed, so every repository file is fetched.
    return build_tree(tmp_path / "hostile", make_records(6, repos=2, start=100), NEW)


def _replace_index(root: Path, gz: bytes, *, counts: bool = False) -> None:
    """Swap in another gzip index; the manifest's sha256 follows, its raw hashes are dropped."""
    data = root / "data"
    (data / "index.json.gz").write_bytes(gz)
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["files"]["index"] = {
        "path": "/data/index.json.gz",
        "bytes": len(gz),
        "sha256": hashlib.sha256(gz).hexdigest(),
        "encoding": "gzip",
    }
    if not counts:
        del manifest["counts"]
    (data / "manifest.json").write_text(json.dumps(manifest))


def _members(*parts: tuple[bytes, int]) -> bytes:
    """Concatenated gzip members, each ``(text, times)``: a huge stream built from small ones."""
    out = bytearray()
    for text, times in parts:
        member = gzip.compress(text, compresslevel=9, mtime=0)
        out += member * times
    return bytes(out)


def _sync_refused(db: Path, source: Path | str, *, memory: int = DEFAULT_MEMORY) -> str:
    out = run_errkb(["--db", str(db), "sync", str(source)], memory=memory, timeout=120)
    assert out.returncode == 2, out
    assert not out.crashed, out.stderr
    latest = open_kb(db, bundled=False).store.latest_version()
    assert latest is not None and latest.dataset_version == OLD  # nothing changed
    return out.stderr


@pytest.mark.slow
def test_an_index_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    _replace_index(root, _members((b"\0" * (64 * MiB), 32)))  # 2 GiB from about 2 MB
    assert (root / "data" / "index.json.gz").stat().st_size < 4 * MiB
    # errkb maps about 400 MB before reading: holding the 512 MiB cap's worth would not fit.
    err = _sync_refused(db, root, memory=800 * MiB)
    assert "index.json.gz: decompresses to over the 536870912-byte cap" in err


def test_an_index_past_its_raw_bytes_is_refused_at_once(tmp_path: Path) -> None:
    root = _hostile_tree(tmp_path)
    index = root / "data" / "index.json.gz"
    entry = publish.FileEntry(
        "index",
        "/data/index.json.gz",
        hashlib.sha256(index.read_bytes()).hexdigest(),
        encoding="gzip",
        raw_bytes=10,
    )
    with pytest.raises(IntegrityError, match="more than the manifest's rawBytes 10"):
        publish.verify_file(publish.Fetched("i", index), entry, max_bytes=1 << 30)


@pytest.mark.slow
def test_a_four_million_row_index_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    row = b'{"id":"0123456789abcdef","repo":"org/repo-0"},'
    gz = _members(
        (b'{"schemaVersion":2,"errors":[', 1),
        (row * 500_000, 8),  # 4M rows
        (b'{"id":"x","repo":"org/repo-0"}]}', 1),
    )
    assert len(gz) < 12 * MiB
    _replace_index(root, gz)
    err = _sync_refused(db, root)
    assert "index.json.gz: lists more than 2000000 rows (the index row limit)" in err


def test_a_manifest_counting_too_many_errors_is_refused_before_the_index(tmp_path: Path) -> None:
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    manifest = json.loads((root / "data" / "manifest.json").read_text())
    manifest["counts"]["errors"] = 4_000_000
    (root / "data" / "manifest.json").write_text(json.dumps(manifest))
    (root / "data" / "index.json.gz").unlink()  # never fetched
    err = _sync_refused(db, root)
    assert "counts 4000000 errors, more than 2000000 (the index row limit)" in err


def _claim_parts(root: Path, parts: int) -> None:
    """Every index part of ``root`` says the index has ``parts`` parts (the manifest re-hashed)."""
    data = root / "data"
    manifest = json.loads((data / "manifest.json").read_text())
    for spec in manifest["files"]["index"]["parts"]:
        path = data / Path(spec["path"]).name
        doc = json.loads(gzip.decompress(path.read_bytes()))
        raw = json.dumps({**doc, "parts": parts}).encode()
        body = gzip.compress(raw, mtime=0)
        path.write_bytes(body)
        spec.update(
            bytes=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
            rawBytes=len(raw),
            rawSha256=hashlib.sha256(raw).hexdigest(),
        )
    (data / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("claimed", [10**30, publish.MAX_INDEX_PARTS + 1, 4])
def test_index_parts_claiming_more_parts_than_listed_are_refused(
    tmp_path: Path, claimed: int
) -> None:
    # 10**30 was an unexpected MemoryError at 4.5 GB: every number up to it was made.
    db = _db_with_a_version(tmp_path)
    root = build_tree(tmp_path / "hostile", make_records(6, repos=2, start=100), NEW, index_parts=3)
    _claim_parts(root, claimed)
    err = _sync_refused(db, root)
    (line,) = err.splitlines()
    if claimed > publish.MAX_INDEX_PARTS:
        assert "index-1.json.gz: the index part says the index has more than 10000 parts" in line
    else:
        assert "index part(s) 4 of 4 are not listed in the manifest (it lists 3)" in line
    assert line.endswith("nothing changed")


def test_a_manifest_listing_too_many_index_parts_is_refused_before_any_is_fetched() -> None:
    listed = [f"/data/index-{n}.json.gz" for n in range(1, publish.MAX_INDEX_PARTS + 2)]
    manifest = {"schemaVersion": 2, "datasetVersion": NEW, "files": {"index": {"parts": listed}}}
    with pytest.raises(SyncError, match="m: the manifest lists 10001 index parts, more than"):
        publish.parse_manifest(json.dumps(manifest).encode(), "m")


def test_too_many_repositories_are_refused(tmp_path: Path) -> None:
    entries = [{"repo": f"o/r{n}"} for n in range(5)]
    with pytest.raises(SyncError, match="r: lists more than 3 repositories"):
        publish.parse_repos(json.dumps(entries).encode(), "r", publish.Limits(repos=3))
    rows = [{"id": str(n), "repo": f"o/r{n}"} for n in range(5)]
    with pytest.raises(SyncError, match="i: names more than 3 repositories"):
        publish.read_index(json.dumps(rows).encode(), "i", NEW, limits=publish.Limits(repos=3))


def test_the_streamed_index_reads_every_shape(tmp_path: Path) -> None:
    rows = [{"id": f"id{n}", "repo": "o/x", "msg": "é" * 3000} for n in range(1000)]
    doc = {"errors": rows, "schemaVersion": 2, "datasetVersion": NEW, "extra": {"a": [1]}}
    text = json.dumps(doc, ensure_ascii=False, indent=1).encode()
    content = tmp_path / "i.json.gz"
    content.write_bytes(gzip.compress(text))
    # Rows of 6 KB straddle the 1 MiB window many times, multi-byte characters included.
    got = publish.read_index(publish.Content("i", content, gzip=True), "i", NEW).by_repo
    assert got == {"o/x": [f"id{n}" for n in range(1000)]}
    for bad, message in [
        (b'{"errors": [{"id": "a", "repo": "o/x"}', "expected ',' or ']'"),
        (b'{"errors": [{"id": "a", "repo": "o/x"}]} []', "extra data"),
        (b'{"errors": [{"id": "a", "repo": "o/x"}] "x": 1}', "expected ',' or '}'"),
        (b"", "the file is empty"),
        (
            b'{"errors": [], "datasetVersion": "2020-01-01T00:00:00Z"}',
            "index is for datasetVersion 2020",
        ),
    ]:
        with pytest.raises((IntegrityError, SyncError), match=message):
            publish.read_index(bad, "i", NEW)
    with pytest.raises(SyncError, match="no 'errors' array"):
        publish.read_index(b'{"errors": 3}', "i", NEW)


def test_a_400_megabyte_repository_file_is_refused_before_reading(tmp_path: Path) -> None:
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    repo_file = root / "data" / "repos" / "org" / "repo-0.json"
    with repo_file.open("r+b") as fh:
        fh.truncate(400 * MiB)  # sparse: costs no disk
    err = _sync_refused(db, root)
    assert "repo-0.json: 419430400 bytes is over the 67108864-byte cap" in err


def test_a_repository_file_over_the_cap_over_http_is_refused(tmp_path: Path) -> None:
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    repo_file = root / "data" / "repos" / "org" / "repo-0.json"
    with repo_file.open("r+b") as fh:
        fh.truncate(80 * MiB)
    with serve(root) as server:
        err = _sync_refused(db, server.base)
    assert "repo-0.json" in err and "67108864" in err


def test_a_gzip_repository_file_inflating_past_the_cap_is_refused(tmp_path: Path) -> None:
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    repo_file = root / "data" / "repos" / "org" / "repo-0.json"
    repo_file.write_bytes(_members((b" " * (64 * MiB), 16)))  # 1 GiB of blanks
    err = _sync_refused(db, root)
    assert "repo-0.json" in err and "more than 67108864 bytes" in err


@pytest.mark.parametrize("fill", [b"{},", b"0,"], ids=["dicts", "numbers"])
def test_a_repository_file_of_tiny_values_is_refused_in_bounded_memory(
    tmp_path: Path, fill: bytes
) -> None:
    # Under the 64 MiB byte cap, but 12 million values: parsed whole, the dictionaries alone
    # would take 0.8 GB and the reader's items (or problems) several more.
    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    repo_file = root / "data" / "repos" / "org" / "repo-0.json"
    repo_file.write_bytes(b"[" + fill * 12_000_000 + fill[:-1] + b"]")
    assert repo_file.stat().st_size < 40 * MiB
    err = _sync_refused(db, root)
    assert "repo-0.json: holds more than 2000000 JSON values (the repository file value limit)" in (
        err
    )


def test_the_value_bound_admits_real_records_and_counts_gzip(tmp_path: Path) -> None:
    records = make_records(40, repos=1)
    text = json.dumps(records).encode()
    values = 0

    def count(value: object) -> None:
        nonlocal values
        values += 1
        if isinstance(value, dict):
            for key, item in value.items():
                count(key)
                count(item)
        elif isinstance(value, list):
            for item in value:
                count(item)

    count(records)
    plain, packed = tmp_path / "r.json", tmp_path / "r.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        # An upper bound, never below the exact count ...
        with pytest.raises(SyncError, match=rf"r: holds more than {values - 1} JSON values"):
            publish.check_value_count(path, "r", values - 1, max_bytes=1 << 30)
        # ... and loose by a known factor: real records come to one per 17-24 bytes.
        publish.check_value_count(path, "r", len(text) // 12, max_bytes=1 << 30)
    # ... and past the byte cap it leaves the refusal to the reader, which names that cap.
    publish.check_value_count(plain, "r", 100, max_bytes=100)


# ---------------------------------------------------------------------------- the operator's limits
@pytest.mark.parametrize(
    ("option", "env", "value", "message"),
    [
        ("--max-index-rows", "ERRKB_SYNC_MAX_INDEX_ROWS", "5", "more than 5 (the index row limit)"),
        ("--max-repos", "ERRKB_SYNC_MAX_REPOS", "1", "more than 1 repositories"),
        ("--max-repo-file-values", "ERRKB_SYNC_MAX_REPO_FILE_VALUES", "50", "more than 50 JSON"),
        ("--max-repo-file-mib", "ERRKB_SYNC_MAX_REPO_FILE_MIB", "1", "over the 1048576-byte cap"),
        ("--max-row-mib", "ERRKB_SYNC_MAX_ROW_MIB", "1", "over 1048576 bytes (the per-row limit)"),
        ("--max-download-mib", "ERRKB_SYNC_MAX_DOWNLOAD_MIB", "1", "1048576-byte cap"),
    ],
)
def test_each_sync_limit_is_an_option_and_an_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, env: str, value: str, message: str
) -> None:
    from tests.cli import run

    db = _db_with_a_version(tmp_path)
    root = _hostile_tree(tmp_path)
    repo_file = root / "data" / "repos" / "org" / "repo-0.json"
    if option == "--max-repo-file-mib":
        with repo_file.open("r+b") as fh:
            fh.truncate(2 * MiB)
    elif option in ("--max-row-mib", "--max-download-mib"):
        rows = [{"id": "a", "repo": "org/repo-0", "pad": "x" * (2 * MiB)}]
        _replace_index(root, gzip.compress(json.dumps({"errors": rows}).encode()))
    for args, environ in (([option, value], {}), ([], {env: value})):
        for name, setting in environ.items():
            monkeypatch.setenv(name, setting)
        result = run(db, "sync", *args, str(root))
        monkeypatch.delenv(env, raising=False)
        assert result.exit_code == 2, result.output
        assert message in result.stderr, (args, environ, result.stderr)
    latest = open_kb(db, bundled=False).store.latest_version()
    assert latest is not None and latest.dataset_version == OLD


def test_the_defaults_are_the_documented_ones() -> None:
    from click.testing import CliRunner

    from errkb.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["sync", "--help"]).output.split())
    for option, default in [
        ("--max-download-mib", 512),
        ("--timeout", 3600.0),
        ("--max-index-rows", 2_000_000),
        ("--max-repos", 100_000),
        ("--max-repo-file-mib", 64),
        ("--max-repo-file-values", 2_000_000),
        ("--max-row-mib", 16),
    ]:
        assert option in text
        assert f"default: {default};" in text.split(option, 1)[1].split("]", 1)[0], option


# ---------------------------------------------------------------------------- names and URLs
def test_a_repository_name_with_a_trailing_newline_is_refused() -> None:
    # "$" matches before a final newline: org/repo-0\n was fetched as repo-0%0A.json.
    with pytest.raises(IntegrityError, match="invalid repository name"):
        publish.repo_file("org/repo-0\n")
    assert publish.repo_file("org/repo-0") == "data/repos/org/repo-0.json"
    sha = "0" * 64
    for bad in (sha + "\n", sha[:-1]):
        manifest = {
            "schemaVersion": 2,
            "datasetVersion": OLD,
            "files": {"index": {"path": "/data/index.json.gz", "sha256": bad}},
        }
        with pytest.raises(SyncError, match="sha256"):
            publish.parse_manifest(json.dumps(manifest).encode(), "m")


def test_an_unclosed_ipv6_host_is_a_clear_error(tmp_path: Path) -> None:
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "sync", "http://[::1"], timeout=60)
    assert out.returncode == 2, out
    assert out.stderr.strip() == "errkb: error: http://[::1: not a valid URL: Invalid IPv6 URL"


# ---------------------------------------------------------------------------- sockets
def test_a_closed_client_opens_no_socket_again(tmp_path: Path) -> None:
    # A failing sync closes its client while worker threads wind down; a worker's pooled
    # connection, reopened after the close, belonged to no list and leaked its socket.
    import gc
    import threading
    import warnings

    from errkb.errors import NetworkError
    from errkb.sync.transport import HttpClient

    root = build_tree(tmp_path / "tree", make_records(2, repos=1), OLD)
    with serve(root) as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        client = HttpClient()
        url = f"{server.base}/data/manifest.json"
        errors: list[BaseException] = []

        def worker() -> None:
            client.get(url, tmp_path / "a", max_bytes=1 << 20)  # pools a connection
            ready.set()
            closed.wait(30)
            try:
                client.get(url, tmp_path / "b", max_bytes=1 << 20)
            except NetworkError as exc:
                errors.append(exc)

        ready, closed = threading.Event(), threading.Event()
        thread = threading.Thread(target=worker)
        thread.start()
        assert ready.wait(30)
        client.close()
        closed.set()
        thread.join(30)
        gc.collect()
    assert [str(e) for e in errors] == [
        f"GET {url}: the download was stopped (the client is closed)"
    ]
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], caught


SPOOL_ON_A_FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from errkb.errors import SyncError
from errkb.sync import Spool
from tests.published import make_records

# A file-size limit is a full disk as write() sees it (EFBIG instead of ENOSPC), for one process.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
spool = Spool(Path(sys.argv[1]) / "incoming")
try:
    for record in make_records(4000, repos=2):
        spool.add(record, "2026-09-05T00:00:00.000Z")
    spool.close()
except SyncError as exc:
    print(exc)
    sys.exit(2)
"""


def test_a_full_disk_while_spooling_is_one_clear_error(tmp_path: Path) -> None:
    # It was "unexpected OSError" (exit 2, but naming nothing), and the spool's finalizer then
    # printed a second traceback at exit.
    done = run_python(SPOOL_ON_A_FULL_DISK, str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "cannot write validated records to the sync's spool (File too large)" in done.stdout
    assert str(tmp_path / "incoming") in done.stdout
    assert "Traceback" not in done.stderr


def test_a_sync_source_url_is_stored_and_shown_without_its_credentials(tmp_path: Path) -> None:
    from errkb.sync import shown_url

    assert shown_url("https://user:s3cret@mirror.example/d?token=X") == (
        "https://***@mirror.example/d?***"
    )
    assert shown_url("/srv/tree") == "/srv/tree"
    root = build_tree(tmp_path / "tree", make_records(3, repos=1), OLD)
    with serve(root) as server, open_kb(tmp_path / "kb.sqlite3", bundled=False) as kb:
        url = server.base.replace("http://", "http://reader:s3cret@")
        report = kb.sync(url)
        again = kb.sync(url)
        status = json.dumps(kb.stats().to_dict())
    for shown in (json.dumps(report.to_dict()), json.dumps(again.to_dict()), status):
        assert "s3cret" not in shown and "reader" not in shown, shown
    assert "***@127.0.0.1" in json.dumps(report.to_dict())


def test_transport_errors_and_stored_state_never_show_a_sources_secrets(tmp_path: Path) -> None:
    # Item 5's leftover: every NetworkError named the URL as requested, userinfo and token in.
    from errkb.errors import NetworkError
    from errkb.sync.update import check_for_update

    root = build_tree(tmp_path / "tree", make_records(3, repos=1), OLD)
    with serve(root) as server, open_kb(tmp_path / "kb.sqlite3", bundled=False) as kb:
        url = server.base.replace("http://", "http://reader:s3cret@") + "/?token=t0ken"
        repo = "/data/repos/org/repo-0.json"
        messages = []
        for fault in ("404", "500", "drop", "redirect:http://elsewhere.test/x?token=t0ken"):
            server.faults[repo] = fault
            with pytest.raises(NetworkError) as caught:
                kb.sync(url)
            messages.append(str(caught.value))
        server.faults.clear()
        kb.sync(url)
        state = kb.store.meta_value("sync_state") or ""
        checked = check_for_update(kb.store, url)
    assert all("GET http://***@127.0.0.1:" in m and "?***" in m for m in messages), messages
    for shown in (*messages, state, json.dumps(checked.to_dict()), checked.summary()):
        assert "s3cret" not in shown and "t0ken" not in shown and "reader" not in shown, shown


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/", "https://u:pw@[::1/?token=t0ken"])
def test_a_source_url_that_is_no_url_is_a_named_error(tmp_path: Path, url: str) -> None:
    # Item 5: "unexpected ValueError: Port out of range 0-65535", exit 2 with nothing named.
    from errkb.sync.update import check_for_update

    with open_kb(tmp_path / "kb.sqlite3", bundled=False) as kb:
        for attempt in (lambda: kb.sync(url), lambda: check_for_update(kb.store, url)):
            with pytest.raises(SyncError, match="not a valid URL") as caught:
                attempt()
            assert "pw" not in str(caught.value) and "t0ken" not in str(caught.value)


def test_a_redirect_to_a_port_out_of_range_is_a_named_error(tmp_path: Path) -> None:
    from errkb.errors import NetworkError

    root = build_tree(tmp_path / "tree", make_records(3, repos=1), OLD)
    with serve(root) as server, open_kb(tmp_path / "kb.sqlite3", bundled=False) as kb:
        for target, message in (
            ("http://127.0.0.1:99999/x", "not a valid URL: Port out of range"),
            ("http://[::1/x", "refused redirect: Invalid IPv6 URL"),
        ):
            server.faults["/data/manifest.json"] = f"redirect:{target}"
            with pytest.raises(NetworkError, match=message):
                kb.sync(server.base)
