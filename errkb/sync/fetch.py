"""Downloading a version's repository files: a few at a time, resumable through a cache.

A small pool of threads downloads while the caller checks in order. A file that passed the
cross-check is cached (``RepoCache``) under a key from what the index and ``repos.json`` say of
it, its name carrying its sha256 (checked on reuse); a rerun downloads only the rest. The
cache has a byte budget and is emptied after a successful apply.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from errkb.errors import SyncError
from errkb.sync import publish

#: Worker threads (connections) downloading repository files at once: a few, to be polite.
DEFAULT_WORKERS = 4
#: Default byte budget of the download cache (about 1.5x the real dataset's repository files).
DEFAULT_CACHE_MAX_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class RepoJob:
    """One repository file to bring local."""

    repo: str
    rel: str  #: ``data/repos/{owner}/{name}.json``
    key: str  #: cache key (see ``cache_key``)
    etag: str | None = None  #: the ETag applied last time, for a conditional GET
    last_modified: str | None = None  #: the Last-Modified applied last time (If-Modified-Since)
    #: fingerprint unchanged: asked again only to catch records rewritten in place
    revalidate: bool = False
    body: str | None = None  #: sha256 of the body applied last time (a 200 of it changes nothing)


@dataclass(frozen=True)
class Got:
    """A repository file, local: downloaded now, found in the cache, or not modified (304)."""

    job: RepoJob
    fetched: publish.Fetched
    cached: bool  #: found in the cache: not downloaded


def cache_key(
    repo: str, ids: Sequence[str], info: publish.RepoInfo | None, dataset_version: str
) -> str:
    """Name a repository file's content by what the hashed metadata says about it."""
    fingerprint: list[str | None] = (
        list(info.fingerprint) if info is not None and info.analyzed_sha else [dataset_version]
    )
    text = json.dumps([repo, sorted(ids), fingerprint], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def default_cache_root() -> Path:
    """``$ERRKB_CACHE_DIR``, else errkb's directory in the user cache dir (platformdirs)."""
    env = os.environ.get("ERRKB_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("errkb", appauthor=False))


def cache_dir_for(db_path: Path, root: Path | None = None) -> Path:
    """The download cache of one database: one per database, so two never share files."""
    digest = hashlib.sha256(os.fsencode(db_path.resolve())).hexdigest()[:16]
    return (root or default_cache_root()) / "sync" / digest


class RepoCache:
    """Verified repository files, named ``<key>.<sha256>.json``, within a byte budget."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SyncError(f"{root}: cannot create the download cache: {exc.strerror}") from exc
        for part in root.glob("*.part"):
            part.unlink(missing_ok=True)  # a killed sync's unfinished download
        self._entries = {p.name.split(".", 1)[0]: p for p in root.glob("*.json")}
        self.used = sum(_size(p) for p in self._entries.values())

    def retain(self, keys: set[str]) -> None:
        """Drop every entry this sync will not use (an older version's files)."""
        for key in set(self._entries) - keys:
            self._remove(key)

    def lookup(self, key: str) -> Path | None:
        """The cached file for ``key`` if its content still has the sha256 its name records."""
        path = self._entries.get(key)
        if path is None:
            return None
        expected = path.name.split(".")[1] if path.name.count(".") >= 2 else ""
        try:
            actual = _sha256(path)
        except OSError:
            actual = ""
        if actual != expected:
            self._remove(key)
            return None
        return path

    def part(self, key: str) -> Path:
        """A fresh path inside the cache for a download in progress."""
        return self.root / f"{key}.{secrets.token_hex(4)}.part"

    def keep(self, key: str, path: Path) -> Path:
        """Keep a verified download under its key; return where it is (over budget: not kept)."""
        size = _size(path)
        with self._lock:
            if key in self._entries or self.used + size > self.max_bytes:
                return path
            final = self.root / f"{key}.{_sha256(path)}.json"
            os.replace(path, final)
            self._entries[key] = final
            self.used += size
            return final

    def discard(self, path: Path) -> None:
        """Remove a download that is not (or could not be) kept."""
        if path.parent == self.root and path.suffix == ".part":
            path.unlink(missing_ok=True)

    def clear(self) -> None:
        """Empty the cache (after a successful apply: nothing in it is needed again)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self._entries.clear()
        self.used = 0

    def _remove(self, key: str) -> None:
        path = self._entries.pop(key, None)
        if path is not None:
            self.used -= _size(path)
            path.unlink(missing_ok=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read a chunk at a time."""
    return _sha256(path)


def _sha256(path: Path) -> str:
    # ``file_digest`` hashes without the GIL (not mmap: a truncated mapped file is SIGBUS).
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class Counter:
    """Bytes downloaded so far, added to by every worker thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


def fetch_all(
    tree: publish.Tree,
    jobs: Sequence[RepoJob],
    cache: RepoCache | None,
    *,
    scratch: Path,
    max_bytes: int,
    workers: int = DEFAULT_WORKERS,
    on_bytes: Callable[[int], None] | None = None,
    cancel: Callable[[], None] | None = None,
) -> Iterator[Got]:
    """Yield every job's file in ``jobs`` order, up to ``workers`` downloads at once."""

    def local(job: RepoJob) -> publish.Fetched | None:
        if cache is None or isinstance(tree, publish.LocalTree):
            return None
        path = cache.lookup(job.key)
        return publish.Fetched(tree.where(job.rel), path) if path is not None else None

    def download(job: RepoJob, n: int) -> publish.Fetched:
        dest = cache.part(job.key) if cache is not None else scratch / f"repo-{n}.json"
        return tree.fetch(
            job.rel,
            dest,
            max_bytes=max_bytes,
            etag=job.etag,
            on_bytes=on_bytes,
            last_modified=job.last_modified,
        )

    pool = cf.ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="errkb-fetch")
    pending: deque[tuple[RepoJob, cf.Future[publish.Fetched] | publish.Fetched]] = deque()
    queue = iter(enumerate(jobs))
    finished = False
    try:

        def top_up() -> None:
            while len(pending) < 2 * max(workers, 1):
                nxt = next(queue, None)
                if nxt is None:
                    return
                n, job = nxt
                hit = local(job)
                pending.append((job, hit if hit is not None else pool.submit(download, job, n)))

        top_up()
        while pending:
            job, slot = pending.popleft()
            if isinstance(slot, publish.Fetched):
                got = Got(job, slot, cached=True)
            else:
                got = Got(job, slot.result(), cached=False)
            top_up()
            yield got
        finished = True
    finally:
        if not finished and cancel is not None:
            cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        if not finished:
            for _job, slot in pending:
                if isinstance(slot, cf.Future) and slot.done() and not slot.cancelled():
                    with contextlib.suppress(Exception):
                        path = slot.result().path
                        if path is not None and cache is not None:
                            cache.discard(path)
