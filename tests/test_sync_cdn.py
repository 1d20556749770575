"""Syncing from ErrLookup's site as it really serves: behind a CDN, at scale, interrupted.

Against ``cdn.serve_cdn`` (a real HTTP server on 127.0.0.1 that answers like stale CDN edges):
cache-busting ``?v=``, the retry past caches, a version published mid-download, bounded
concurrency over 2,000 repository files, a sync SIGKILLed halfway and resumed from the
download cache (requests counted server-side), ``--check``, the default source and
``$ERRKB_SOURCE``, the overall deadline against a trickling server, and non-regular files
in local trees.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdn import Cdn, Request, serve_cdn
from click.testing import CliRunner
from published import build_tree, download, hashes, make_record, make_records

import errkb
import errkb.cli.sync  # registers the sync commands
from errkb.cli import cli
from errkb.errors import IntegrityError, NetworkError, SyncError
from errkb.report import SyncStatus
from errkb.store.sqlite import SqliteStore as Store
from errkb.sync import fetch, publish, sync

V1 = "2026-09-01T00:00:00.000Z"
V2 = "2026-09-02T00:00:00.000Z"


def records(version: str, count: int = 24, repos: int = 6) -> list[dict[str, Any]]:
    """``count`` records over ``repos`` repositories; V2 changes every record's content and
    adds one record to each repository.

    Repository files carry no hash: a stale copy is detectable only by the ids the hashed
    index lists, so every V2 repository file differs from V1's in its ids too.
    """
    if version == V1:
        return [make_record(n, f"org/repo-{n % repos}") for n in range(count)]
    return [make_record(n, f"org/repo-{n % repos}", marker="v2") for n in range(count + repos)]


def live(store: Store) -> dict[str, str]:
    rows = store.reader().execute("SELECT id, content_hash FROM records WHERE retired = 0")
    return dict(rows.fetchall())


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cdn-trees")
    return {v: build_tree(root / v, records(v), v) for v in (V1, V2)}


@pytest.fixture
def cdn(trees: dict[str, Path]) -> Iterator[Cdn]:
    """The site a week after V2 was published over V1: edges still hold V1's bytes."""
    with serve_cdn() as server:
        server.publish(V1, trees[V1])
        server.publish(V2, trees[V2])
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "kb.sqlite3")
    yield s
    s.close()


def cache_files(store: Store) -> list[Path]:
    root = fetch.cache_dir_for(store.path)
    return sorted(root.glob("*")) if root.exists() else []


# ---------------------------------------------------------------------------- stale edges
def test_the_emulator_serves_stale_bytes_without_the_right_v(cdn: Cdn, tmp_path: Path) -> None:
    url = f"{cdn.base}/data/index.json.gz"
    old = download(url, tmp_path / "a").path
    new = download(f"{url}?v={V2}", tmp_path / "b").path
    assert old is not None and new is not None
    assert old.read_bytes() == (cdn.versions[V1] / "data" / "index.json.gz").read_bytes()
    assert new.read_bytes() == (cdn.versions[V2] / "data" / "index.json.gz").read_bytes()


def test_sync_through_stale_edges_applies_the_new_version(cdn: Cdn, store: Store) -> None:
    report = sync(store, cdn.base)
    assert report.status is SyncStatus.APPLIED and report.dataset_version == V2
    assert live(store) == hashes(records(V2))
    (manifest,) = [r for r in cdn.requests if r.path == "/data/manifest.json"][:1]
    assert manifest.headers.get("cache-control") == "no-cache"
    data = [r for r in cdn.requests if r.path != "/data/manifest.json"]
    assert data and all(r.query.get("v") == V2 for r in data)
    assert cache_files(store) == []  # emptied after the apply


def test_v_is_url_encoded_like_encode_uri_component(cdn: Cdn) -> None:
    tree = publish.HttpTree(cdn.base, version="2026-09-02T00:00:00.000+02:00")
    assert tree.url("/data/repos.json").endswith("?v=2026-09-02T00%3A00%3A00.000%2B02%3A00")
    assert tree.url("data/manifest.json") == f"{cdn.base}/data/manifest.json"


@pytest.mark.parametrize("path", ["/data/index.json.gz", "/data/repos/org/repo-3.json"])
def test_a_stale_copy_despite_v_is_fetched_again_past_caches(
    cdn: Cdn, store: Store, path: str
) -> None:
    cdn.poisoned.add(path)  # one edge holds V1's bytes for this file, whatever v= says
    report = sync(store, cdn.base)
    assert report.dataset_version == V2 and live(store) == hashes(records(V2))
    tries = [r for r in cdn.requests if r.path == path]
    assert len(tries) == 2 and "r" not in tries[0].query and tries[1].query["r"]
    assert tries[1].headers.get("cache-control") == "no-cache"


def test_corrupt_origin_is_refused_as_stale_or_corrupt(
    cdn: Cdn, store: Store, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(cdn.versions[V2], broken)
    (broken / "data" / "repos.json").write_bytes(b"[]")
    cdn.publish(V2, broken)
    with pytest.raises(IntegrityError, match="server served stale or corrupt data"):
        sync(store, cdn.base)
    assert store.is_empty() or live(store) == {}
    assert len([r for r in cdn.requests if r.path == "/data/repos.json"]) == 2


# ---------------------------------------------------------------------------- mid-sync publish
def test_a_version_published_while_downloading_is_refused_then_applied(
    trees: dict[str, Path], store: Store
) -> None:
    with serve_cdn() as server:
        server.publish(V1, trees[V1])
        server.stale = False
        seen = threading.Event()

        def publish_v2_midway(req: Request) -> None:
            if len(server.repo_requests()) == 3 and not seen.is_set():
                seen.set()
                server.publish(V2, trees[V2])  # the origin flips; ?v=V1 now gets V2's bytes

        server.on_repo = publish_v2_midway
        with pytest.raises(SyncError, match=f"{V2} was published while this sync was downloading"):
            sync(store, server.base, workers=1)
        assert live(store) == {}  # nothing of either version
        server.on_repo = None
        report = sync(store, server.base)
        assert report.dataset_version == V2 and live(store) == hashes(records(V2))


# ---------------------------------------------------------------------------- scale
@pytest.mark.slow
def test_two_thousand_repository_files_with_bounded_concurrency(
    tmp_path: Path, store: Store
) -> None:
    recs = make_records(2000, repos=2000)
    tree = build_tree(tmp_path / "big", recs, V1)
    with serve_cdn() as server:
        server.publish(V1, tree)
        server.repo_delay = 0.002
        report = sync(store, server.base, workers=4)
        assert report.repos_fetched == 2000 and live(store) == hashes(recs)
        repo_reqs = server.repo_requests()
        assert len(repo_reqs) == 2000
        assert 2 <= server.max_active <= 4 + 1  # the workers, plus the main thread's request
        # Keep-alive: a handful of connections for 2,000 files.
        assert len({r.port for r in server.requests}) <= 4 + 1


# ---------------------------------------------------------------------------- resumable
def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ERRKB_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(Path(errkb.__file__).resolve().parent.parent)
    return env


@pytest.mark.slow
def test_a_killed_sync_resumes_from_the_cache(tmp_path: Path) -> None:
    total = 120
    recs = make_records(total, repos=total)
    tree = build_tree(tmp_path / "site", recs, V1)
    db = tmp_path / "kb.sqlite3"
    env = _cli_env(tmp_path)
    cmd = [sys.executable, "-m", "errkb", "--db", str(db), "sync", "--jobs", "2", "-q"]
    with serve_cdn() as server:
        server.publish(V1, tree)
        server.repo_delay = 0.05
        proc = subprocess.Popen([*cmd, server.base], env=env)
        deadline = time.monotonic() + 120
        while len(server.repo_requests()) < total // 2 and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the sync ended before it was killed: {proc.returncode}")
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        first = {r.path for r in server.repo_requests()}
        assert total // 2 <= len(first) < total
        cached = list((tmp_path / "cache").rglob("*.json"))
        assert len(cached) >= total // 4  # verified before the kill (a few were in flight)
        server.reset()
        done = subprocess.run(
            [*cmd, "--format", "json", server.base],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        again = [r.path for r in server.repo_requests()]
    # Only the rest was fetched: what the cache did not hold, each file once.
    assert report["reposCached"] == len(cached)
    assert len(again) == len(set(again)) == total - len(cached) == report["reposFetched"]
    with errkb.open(db) as kb:
        assert {r.id for r in kb.records()} == set(hashes(recs))
    assert list((tmp_path / "cache").rglob("*.json")) == []  # cleaned after the apply


def test_a_damaged_cache_entry_is_fetched_again(
    cdn: Cdn, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sync that fails after the downloads (here: the apply refuses) leaves the cache.
    original = errkb.sync._execute
    monkeypatch.setattr(errkb.sync, "_execute", _refuse)
    with pytest.raises(SyncError, match="refused for the test"):
        sync(store, cdn.base)
    monkeypatch.setattr(errkb.sync, "_execute", original)
    files = [p for p in cache_files(store) if p.suffix == ".json"]
    assert len(files) == 6
    files[0].write_bytes(b"[]")  # damaged: its sha256 no longer matches its name
    cdn.reset()
    report = sync(store, cdn.base)
    assert (report.repos_cached, report.repos_fetched) == (5, 1)
    assert len(cdn.repo_requests()) == 1 and live(store) == hashes(records(V2))


def _refuse(*_a: Any, **_k: Any) -> Any:
    raise SyncError("refused for the test")


def test_the_cache_budget_is_respected(
    cdn: Cdn, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(errkb.sync, "_execute", _refuse)
    one = (cdn.versions[V2] / "data" / "repos" / "org" / "repo-0.json").stat().st_size
    with pytest.raises(SyncError, match="refused for the test"):
        sync(store, cdn.base, cache_max_bytes=int(one * 2.5))
    kept = [p for p in cache_files(store) if p.suffix == ".json"]
    assert len(kept) == 2 and sum(p.stat().st_size for p in kept) <= one * 2.5


# ---------------------------------------------------------------------------- --check
def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_check_exit_codes(cdn: Cdn, tmp_path: Path, trees: dict[str, Path]) -> None:
    db = str(tmp_path / "kb.sqlite3")
    with errkb.open(db, bundled=False) as kb:
        kb.sync(trees[V1])
        found = kb.check_for_update(cdn.base)
        assert (found.current, found.available, found.update_available) == (V1, V2, True)
    before = len(cdn.requests)
    result = _run("--db", db, "sync", "--check", cdn.base)
    assert result.exit_code == 1 and result.stdout == (
        f"current {V1}, available {V2}: newer version available\n"
    )
    # A newer version is out: its hashed repos.json tells whether any commit moved.
    assert [r.path for r in cdn.requests[before:]] == ["/data/manifest.json", "/data/repos.json"]
    assert _run("--db", db, "sync", "-q", cdn.base).exit_code == 0
    result = _run("--db", db, "sync", "--check", "--format", "json", cdn.base)
    assert result.exit_code == 0 and json.loads(result.stdout)["status"] == "current"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _run("--db", db, "sync", "--check", f"http://127.0.0.1:{port}")
    assert result.exit_code == 2 and "connection refused" in result.stderr


# ---------------------------------------------------------------------------- default source
def test_errkb_source_is_the_default(cdn: Cdn, tmp_path: Path) -> None:
    db = str(tmp_path / "kb.sqlite3")
    result = _run("--db", db, "sync", "-q", env={"ERRKB_SOURCE": cdn.base})
    assert result.exit_code == 0
    assert any(r.path == "/data/manifest.json" for r in cdn.requests)
    with errkb.open(db) as kb:
        assert kb.stats().dataset_version == V2


def test_without_errkb_source_the_site_is_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ERRKB_SOURCE")
    assert publish.resolve_source(None) == publish.DEFAULT_SOURCE
    assert publish.DEFAULT_SOURCE == "https://errors.standardbeagle.com"
    assert publish.DEFAULT_SOURCE in _run("sync", "--help").stdout
    asked: list[str] = []

    def blocked(host: Any, *_a: Any, **_k: Any) -> Any:
        asked.append(str(host))  # the resolver is blocked: nothing leaves this machine
        raise socket.gaierror(socket.EAI_NONAME, "blocked by the test")

    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    db = str(tmp_path / "kb.sqlite3")
    for args in (["sync", "--dry-run"], ["sync", "--check"]):
        result = _run("--db", db, *args)
        assert result.exit_code == 2
        assert "https://errors.standardbeagle.com/data/manifest.json" in result.stderr
        assert "cannot resolve the host name" in result.stderr
    assert set(asked) == {"errors.standardbeagle.com"}


# ---------------------------------------------------------------------------- deadlines
@pytest.mark.parametrize("mode", ["body", "headers"])
def test_a_trickling_server_hits_the_deadline(cdn: Cdn, store: Store, mode: str) -> None:
    cdn.trickle["/data/index.json.gz"] = mode
    cdn.trickle_delay = 0.05  # never long enough to trip the 10 s read timeout
    # The error names the whole-sync deadline, not the 10 s read timeout: the deadline fired.
    with pytest.raises(NetworkError, match=r"deadline of 0.5s passed; nothing changed"):
        sync(store, cdn.base, timeout=10, deadline=0.5)
    with store.sync_lock():
        pass  # released


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_non_regular_files_in_a_local_tree_are_refused(
    store: Store, trees: dict[str, Path], tmp_path: Path, target: str
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(trees[V1], tree)
    if target == "fifo":
        victim = tree / "data" / "repos" / "org" / "repo-2.json"
        victim.unlink()
        os.mkfifo(victim)
        expected = "not a regular file (a FIFO)"
    else:
        victim = tree / "data" / "index.json.gz"
        victim.unlink()
        victim.symlink_to(target)
        expected = "not a regular file (a character device)"
    with pytest.raises(SyncError, match=re.escape(expected)):
        sync(store, tree)
    assert live(store) == {}


# ---------------------------------------------------------------------------- other files
def test_other_manifest_entries_are_listed_and_never_break_a_sync(
    cdn: Cdn, trees: dict[str, Path], tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(trees[V2], tree)
    manifest_path = tree / "data" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["search"] = {"path": "/data/search.bin", "sha256": "not-a-hash"}
    manifest["files"]["odd"] = "not even an object"
    manifest["files"]["title\x1b]0;pwned\x07"] = {"path": "/data/x"}  # a terminal escape
    manifest_path.write_text(json.dumps(manifest))
    cdn.publish(V2, tree)
    db = str(tmp_path / "kb.sqlite3")
    result = _run("--db", db, "sync", "--verbose", cdn.base)
    assert result.exit_code == 0, result.stderr
    assert "manifest also lists search: /data/search.bin (not used)" in result.stderr
    assert "manifest also lists odd: (no path) (not used)" in result.stderr
    assert "manifest also lists title" in result.stderr and "\x1b" not in result.stderr
    assert not any(r.path == "/data/search.bin" for r in cdn.requests)


# ---------------------------------------------------------------------------- first run
def test_explain_says_when_only_the_bundled_sample_is_installed(
    tmp_path: Path, trees: dict[str, Path]
) -> None:
    log = "Traceback (most recent call last):\nValueError: nothing known\n"
    db = str(tmp_path / "kb.sqlite3")
    with errkb.open(db) as kb:
        report = kb.explain(log)
        assert report.to_dict()["knowledgeBase"] == {"records": 3, "bundledSample": True}
    for fmt in ("text", "markdown"):
        out = CliRunner().invoke(cli, ["--db", db, "explain", "--format", fmt], input=log).stdout
        last = out.rstrip("\n").splitlines()[-1]
        assert "only the bundled sample (3 records)" in last and "`errkb sync`" in last
    with errkb.open(db) as kb:
        kb.sync(trees[V1], full=False)
        kb.refresh()
        assert "knowledgeBase" not in kb.explain(log).to_dict()
    out = CliRunner().invoke(cli, ["--db", db, "explain"], input=log).stdout
    assert "bundled sample" not in out


def test_the_progress_bar_shows_files_bytes_and_eta() -> None:
    from errkb.cli.sync import _StageBars
    from errkb.sync import Progress, Stage

    bars = _StageBars()
    bars(Progress(Stage.REPOS, 0, 4))
    bars(Progress(Stage.REPOS, 2, 4, bytes=5 * 1024 * 1024))
    # Off a terminal click draws only the label, so the line a terminal would see is asked for.
    assert bars._bar is not None
    line = bars._bar.format_progress_line()
    bars.close()
    assert "repos" in line and "2/4" in line and "5.0 MiB" in line


def test_http_proxy_from_the_environment(
    cdn: Cdn, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The emulator doubles as a forward proxy: it answers absolute-form request lines. The
    # site's name is never resolved (.invalid), so only the proxy can have answered.
    for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", cdn.base)
    report = sync(store, "http://errkb-site.invalid")
    assert report.dataset_version == V2 and live(store) == hashes(records(V2))
    assert {r.path for r in cdn.requests} >= {"/data/manifest.json", "/data/index.json.gz"}
