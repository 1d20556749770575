"""Dataset sync: bring the knowledge base to one dataset version, whole or not at all.

1. Plan: read the source (record files, a local published tree or its http(s) URL), verify
   every published hash, cross-check each repository file against the hashed index, validate
   every record. Anything wrong stops here: nothing has changed.
2. Apply: one transaction upserts the records, retires those a full snapshot no longer lists,
   writes history and the version row, and bumps the state counter. A crash leaves the
   previous version intact.

Repositories whose fingerprint (``analyzedSha``, ids, ``contentChangedAt``) is unchanged are
only revalidated (a conditional request; a 304 or the body applied last time keeps their
stored records). The validators are kept in ``meta`` with the version they describe and
trusted only while it is the latest. One sync at a time per database (``Store.sync_lock``).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import shutil
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from errkb import records as rec
from errkb.errors import (
    IntegrityError,
    Problem,
    RecordError,
    SyncError,
    SyncInterruptedError,
)
from errkb.match.feed import FEED, derive
from errkb.report.sync import Revalidation, SyncReport, SyncStatus, parse_version
from errkb.store import Incoming, Keep, Store, VersionInfo, VersionKind, WriteTx
from errkb.store.interface import Ending
from errkb.store.values import ApplyCounts
from errkb.sync import fetch as fetching
from errkb.sync import publish, stream, transport
from errkb.sync import workers as checking
from errkb.sync.ranking import COUNTING_FEED
from errkb.sync.repofile import (
    Listed,
    RepoFile,
    check_repo,
    derived_from,
    read_repo,
    spool_line,
)
from errkb.sync.stream import StreamedApply
from errkb.sync.transport import shown_url

_STATE_KEY = "sync_state"


class Stage(enum.StrEnum):
    """The steps a sync reports progress for, in order."""

    MANIFEST = "manifest"
    INDEX = "index"
    REPOS = "repos"  #: download, cross-check and validate each repository file
    VALIDATE = "validate"  #: plain record files
    APPLY = "apply"


@dataclass(frozen=True)
class Progress:
    """One progress report: ``done`` of ``total`` units of ``stage`` (files for REPOS)."""

    stage: Stage
    done: int
    total: int
    bytes: int = 0  #: downloaded so far in this stage


ProgressCallback = Callable[[Progress], None]


class Spool(Collection[Incoming]):
    """Validated records on their way to the transaction, one JSON line each in a file.

    Iterating yields packed ``Incoming`` records in id order (stable), a bucket of one id
    prefix at a time, so the transaction's id-keyed B-trees grow by appending.
    """

    PREFIX = 2  #: id characters naming a bucket

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids: list[str] = []
        self.changed = 0  #: records spooled with their ``Derived``: content the store lacks
        path.mkdir()
        self._keys: set[str] = set()
        self._out: dict[str, IO[str]] = {}
        self._hashes_path = path / "hashes"  # (id, content hash) lines: ``content_hashes``
        # The buckets are closed however the spool goes.
        weakref.finalize(self, _close_quietly, self._out)

    def _file(self, key: str) -> Path:
        return self.path / (key.encode("utf-8").hex() or "_")

    def _bucket(self, rid: str) -> IO[str]:
        key = rid[: self.PREFIX]
        out = self._out.get(key)
        if out is None:
            out = self._out[key] = self._file(key).open("a", encoding="utf-8", newline="\n")
            self._keys.add(key)
        return out

    def _failed(self, exc: OSError) -> SyncError:
        return SyncError(
            f"{self.path}: cannot write validated records to the sync's spool "
            f"({exc.strerror or exc}); free some space there; nothing was changed"
        )

    def add(self, obj: Mapping[str, Any], version: str | None) -> None:
        """Append one record (a ``validate_sources`` sink)."""
        rid = str(obj["id"])
        text = rec.verbatim_json(obj)
        self.add_line(rid, spool_line(rid, rec.content_hash(obj), text, version, derive(obj)))

    def add_line(self, rid: str, line: str) -> None:
        """Append one record already encoded by ``spool_line`` (by a planning worker, say)."""
        first = line.index("\t")
        second = line.index("\t", first + 1)
        third = line.index("\t", second + 1)
        try:
            self._bucket(rid).write(line)
            self._hash_file().write(f"{rid}\t{line[second + 1 : third]}\n")
        except OSError as exc:
            raise self._failed(exc) from exc
        self.ids.append(rid)
        if line[third + 1] != "\t":
            self.changed += 1

    def _hash_file(self) -> IO[str]:
        out = self._out.get("hashes")  # longer than any bucket's key (``PREFIX``)
        if out is None:
            out = self._out["hashes"] = self._hashes_path.open("a", encoding="utf-8", newline="\n")
        return out

    def content_hashes(self) -> Iterator[tuple[str, str]]:
        """(id, content hash) of every spooled record, in the order they were added."""
        self.close()
        if not self._hashes_path.exists():
            return
        with self._hashes_path.open(encoding="utf-8", newline="\n") as fh:
            for line in fh:
                rid, _, chash = line.rstrip("\n").partition("\t")
                yield rid, chash

    def distinct(self) -> bool:
        """No id was spooled twice."""
        return len(set(self.ids)) == len(self.ids)

    def extend(self, objs: Iterable[Mapping[str, Any]], version: str | None) -> None:
        """Append records (one repository's, say)."""
        for obj in objs:
            self.add(obj, version)

    def close(self) -> None:
        """Flush and close the buckets (iterating does it too)."""
        try:
            _close_all(self._out)
        except OSError as exc:  # the last buffered lines did not fit
            raise self._failed(exc) from exc

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, Incoming) and item.id in set(self.ids)

    def __iter__(self) -> Iterator[Incoming]:
        self.close()
        versions: dict[str, str | None] = {}  # each distinct version text decoded once
        for key in sorted(self._keys):
            with self._file(key).open(encoding="utf-8", newline="\n") as fh:
                lines = fh.read().split("\n")  # not splitlines(): U+2028 is not escaped
            lines.pop()  # after the last newline
            lines.sort(key=lambda line: line[: line.index("\t")])
            for line in lines:
                rid, _, rest = line.partition("\t")
                version, _, rest = rest.partition("\t")
                chash, _, rest = rest.partition("\t")
                derived, _, text = rest.partition("\t")
                if version not in versions:
                    versions[version] = json.loads(version)
                yield Incoming(
                    text,
                    versions[version],
                    rid,
                    content_hash=chash,
                    derived=derived_from(derived),
                )


def _close_all(files: dict[str, IO[str]]) -> None:
    # Every file is closed even when one fails to flush; the first failure is raised after.
    failure: OSError | None = None
    for out in files.values():
        try:
            out.close()
        except OSError as exc:
            failure = failure or exc
    files.clear()
    if failure is not None:
        raise failure


def _close_quietly(files: dict[str, IO[str]]) -> None:
    # The finalizer's: a spool that failed to write has already said so, once.
    with contextlib.suppress(OSError):
        _close_all(files)


@dataclass(frozen=True)
class _Plan:
    """Everything a sync will write, computed (and validated) before the database is touched."""

    source: str
    dataset_version: str | None
    previous_version: str | None
    full: bool
    incoming: Collection[Incoming]
    problems: tuple[Problem, ...]
    rejected: int
    keep_repos: frozenset[str]  #: unchanged repositories: their live records stay as they are
    keep_ids: frozenset[str]  #: rejected records whose stored content stays
    hashes: tuple[tuple[str, str], ...] = ()
    state: Mapping[str, Any] | None = None  #: the sync state to record with the version
    repos_fetched: int = 0
    repos_skipped: int = 0
    repos_cached: int = 0
    bytes_downloaded: int = 0
    other_files: tuple[tuple[str, str | None], ...] = ()
    revalidation: Revalidation = field(default_factory=Revalidation)
    warnings: tuple[str, ...] = ()


def sync(
    store: Store,
    source: str | os.PathLike[str] | None = None,
    *,
    dry_run: bool = False,
    full: bool | None = None,
    allow_downgrade: bool = False,
    skip_invalid: bool = False,
    reject_report: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    max_bytes: int = publish.DEFAULT_MAX_BYTES,
    limits: publish.Limits = publish.DEFAULT_LIMITS,
    timeout: float = publish.DEFAULT_TIMEOUT,
    deadline: float | None = transport.DEFAULT_DEADLINE,
    workers: int = fetching.DEFAULT_WORKERS,
    cache_dir: str | os.PathLike[str] | None = None,
    cache_max_bytes: int = fetching.DEFAULT_CACHE_MAX_BYTES,
    plan_workers: int | None = None,
    allow_redirect_hosts: Collection[str] = (),
) -> SyncReport:
    """Bring the knowledge base to the dataset version ``source`` holds, in one transaction.

    ``source``: a record file or directory (partial unless ``full``), a local published tree
    (root, ``data/`` or manifest) or an http(s) URL of one (full unless ``full=False``);
    default ``$ERRKB_SOURCE``, else ``publish.default_source``. Invalid records refuse the
    version (``RecordError``) unless ``skip_invalid``: the rest applied, the rejects written
    to ``reject_report`` (default ``<db>.rejects.jsonl``), the version partial. An older
    version is refused unless ``allow_downgrade``.

    Over http(s): ``workers`` download threads; verified files kept in ``cache_dir`` (at most
    ``cache_max_bytes``) until an apply succeeds; ``timeout`` per read, ``deadline`` for the
    sync; redirects to another host only to ``allow_redirect_hosts``, never https to http.
    ``plan_workers`` processes check repository files (``sync.workers``; None: by machine and
    size; 0: none), with the same result. ``max_bytes`` caps any one file, ``limits`` what a
    tree may hold. Ctrl-C after the commit raises ``SyncInterruptedError``.
    """
    store.ensure_schema()
    started = time.monotonic()
    notify = progress or (lambda _p: None)
    limit = transport.Deadline(deadline)
    applied: list[SyncReport] = []  # set the moment the transaction commits
    streams: list[StreamedApply] = []  # a streamed apply's writer, rolled back unless committed
    with (
        _interrupt_says(applied),
        store.sync_lock(),
        _workdir(store.path) as tmp,
        limit.watch(),
        _aborting(streams),
    ):
        resolved = publish.resolve_source(source)
        tree = publish.locate(resolved)
        planned: _Plan | SyncReport
        client: transport.HttpClient | None = None
        cache: fetching.RepoCache | None = None
        try:
            if tree is None:
                planned = _plan_records(store, Path(resolved), tmp, full=bool(full), notify=notify)
            else:
                if isinstance(tree, publish.HttpTree):
                    client = transport.HttpClient(
                        read_timeout=timeout, deadline=limit, allow_hosts=allow_redirect_hosts
                    )
                    tree = replace(tree, timeout=timeout, client=client)
                    root = fetching.cache_dir_for(
                        store.path, Path(cache_dir) if cache_dir is not None else None
                    )
                    cache = fetching.RepoCache(root, cache_max_bytes)
                planned = _plan_published(
                    store,
                    tree,
                    tmp,
                    full=True if full is None else full,
                    allow_downgrade=allow_downgrade,
                    max_bytes=max_bytes,
                    notify=notify,
                    fetch_options=_FetchOptions(cache, workers, limit, plan_workers),
                    limits=limits,
                    streams=None if dry_run else streams,
                )
        finally:
            if client is not None:
                client.close()
        if isinstance(planned, SyncReport):
            if cache is not None:
                cache.clear()
            # Records an older errkb compiled are compiled again.
            recompiled = 0 if dry_run else store.recompile(FEED)
            return replace(planned, recompiled=recompiled, elapsed=time.monotonic() - started)
        if tree is None:
            _check_downgrade(planned, allow_downgrade)
        limit.check(planned.source)
        report = _execute(
            store,
            planned,
            dry_run=dry_run,
            skip_invalid=skip_invalid,
            reject_report=reject_report,
            notify=notify,
            started=started,
            applied=applied,
            rebuild=full is True,
        )
        if cache is not None and not dry_run:
            cache.clear()  # applied: nothing in it is needed again
        return report


@contextlib.contextmanager
def _aborting(streams: list[StreamedApply]) -> Iterator[None]:
    """On the way out, roll back the writer of a streamed apply that did not commit."""
    try:
        yield
    finally:
        for stream in streams:
            stream.abort()


@contextlib.contextmanager
def _interrupt_says(applied: list[SyncReport]) -> Iterator[None]:
    """Ctrl-C once ``applied`` holds the committed report: ``SyncInterruptedError`` naming it."""
    try:
        yield
    except KeyboardInterrupt:
        if not applied:
            raise
        raise SyncInterruptedError(interrupted_message(applied[0])) from None


def interrupted_message(report: SyncReport) -> str:
    """What to say when Ctrl-C comes after ``report``'s transaction committed."""
    return (
        f"interrupted after the sync was applied: datasetVersion "
        f"{report.dataset_version or '(none)'} is in place as version {report.version_id} "
        f"({report.summary()}); nothing was undone"
    )


@dataclass(frozen=True)
class _FetchOptions:
    """How repository files are brought local: cache, concurrency and deadline."""

    cache: fetching.RepoCache | None = None
    workers: int = fetching.DEFAULT_WORKERS
    deadline: transport.Deadline = field(default_factory=lambda: transport.Deadline(None))
    #: processes checking repository files (``errkb.sync.workers``); None: by machine and size
    plan_workers: int | None = None


@contextlib.contextmanager
def _workdir(db_path: Path) -> Iterator[Path]:
    """Yield a temporary download directory beside the database, removed afterwards.

    Called with the lock held: a killed sync's leftovers (same prefix) are removed first.
    """
    prefix = f".{db_path.name}.sync-"
    for stale in db_path.parent.glob(prefix + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=db_path.parent) as tmp:
        yield Path(tmp)


def _plan_records(
    store: Store, path: Path, tmp: Path, *, full: bool, notify: ProgressCallback
) -> _Plan:
    from errkb.ingest import validate_sources

    notify(Progress(Stage.VALIDATE, 0, 1))
    incoming = Spool(tmp / "incoming")
    validated = validate_sources([path], sink=incoming.add)
    incoming.close()
    notify(Progress(Stage.VALIDATE, 1, 1))
    if not validated.accepted and not validated.problems:
        raise SyncError(f"{path}: holds no records; nothing to apply")
    kept = {p.record_id for p in validated.problems if p.record_id} if full else set()
    return _Plan(
        source=str(path),
        dataset_version=validated.dataset_version,
        previous_version=store.meta_value("dataset_version"),
        full=full,
        incoming=incoming,
        problems=validated.problems,
        rejected=validated.rejected,
        keep_repos=frozenset(),
        keep_ids=frozenset(kept),
    )


def _plan_published(
    store: Store,
    tree: publish.Tree,
    tmp: Path,
    *,
    full: bool,
    allow_downgrade: bool,
    max_bytes: int,
    notify: ProgressCallback,
    fetch_options: _FetchOptions | None = None,
    limits: publish.Limits = publish.DEFAULT_LIMITS,
    streams: list[StreamedApply] | None = None,
) -> _Plan | SyncReport:
    """Read, cross-check and validate what the tree's version changes (see the module doc).

    ``streams``: receives a plan's ``StreamedApply``, for the caller to roll back on failure.
    """
    options = fetch_options or _FetchOptions()
    latest = store.latest_version()
    current = store.meta_value("dataset_version")
    state = _load_state(store, latest)
    etags: Mapping[str, str] = state.get("etags", {}) if state else {}

    # 1. The manifest: stop early when it names the version we have.
    notify(Progress(Stage.MANIFEST, 0, 1))
    where = tree.where(tree.manifest_path)
    fetched = tree.fetch(
        tree.manifest_path,
        tmp / "manifest.json",
        max_bytes=publish.MANIFEST_MAX_BYTES,
        etag=etags.get(where),
    )
    if fetched.not_modified:
        version = state.get("datasetVersion") if state else None
        return _up_to_date(tree.location, version if isinstance(version, str) else current)
    assert fetched.path is not None  # noqa: S101 - not_modified covers None
    manifest = publish.parse_manifest(fetched.path.read_bytes(), where)
    notify(Progress(Stage.MANIFEST, 1, 1))
    version = manifest.dataset_version
    if (
        latest is not None
        and latest.dataset_version == version
        and latest.full
        and latest.kind in (VersionKind.SYNC.value, VersionKind.ROLLBACK.value)
    ):
        return _up_to_date(tree.location, version, current)
    _refuse_downgrade(where, version, current, allow_downgrade)
    tree = tree.for_version(version)  # every data file requested with ?v=<version>

    # 2. The hashed metadata files.
    notify(Progress(Stage.INDEX, 0, 2))
    errors_count = manifest.counts.get("errors")
    if isinstance(errors_count, int) and errors_count > limits.index_rows:
        raise SyncError(
            f"{where}: counts {errors_count} errors, more than {limits.index_rows} "
            "(the index row limit); nothing changed"
        )
    repos_entry = manifest.entry("repos", where)
    repos_file, repos_raw = _fetch_verified(tree, repos_entry, tmp / "repos.json", max_bytes)
    repos = publish.parse_repos(repos_raw, repos_file.where, limits)
    notify(Progress(Stage.INDEX, 1, 2))
    # Row digests summed only for repositories whose fingerprint changed (``_Digests``).
    previous: Mapping[str, Any] = state.get("repos", {}) if state else {}

    def fetched_by_fingerprint(repo: str) -> bool:
        info = repos.get(repo)
        return not (
            info is not None
            and info.analyzed_sha is not None
            and previous.get(repo) == list(info.fingerprint)
        )

    read = _read_index(tree, manifest, tmp, max_bytes, limits, fetched_by_fingerprint)
    notify(Progress(Stage.INDEX, 2, 2))
    warnings = _schema_warnings(tree, tmp)
    inventory = store.inventory()
    live, stored = inventory.live_by_repo, inventory.hashes
    unindexed: _Unindexed | None = None
    if read is None:
        # No index: files cross-checked against repos.json (``_Unindexed``), ids as stored.
        index = publish.IndexRows({r: sorted(live.get(r, ())) for r in sorted(repos)}, {})
        index_where, index_hashes = repos_file.where, list[tuple[str, str]]()
        unindexed = _Unindexed(repos_file.where, errors_count)
        warnings = (*warnings, unindexed.warning(where))
        digests = _Digests(index, None)
    else:
        index, index_where, index_hashes, reread = read
        digests = _Digests(index, reread)
        indexed = sum(len(ids) for ids in index.by_repo.values())
        if isinstance(errors_count, int) and errors_count != indexed:
            raise IntegrityError(
                f"{index_where}: {indexed} ids, but the manifest counts {errors_count} errors; "
                "nothing changed"
            )
    by_repo = index.by_repo
    hashes = [("manifest", manifest.sha256), *index_hashes]
    if repos_entry.sha256 is not None:
        hashes.append(("repos", repos_entry.sha256))

    # 3. Which repositories to fetch: those whose fingerprint changed since our last sync.
    # Fingerprint-kept repositories are revalidated (upstream rewrites records in place).
    fetch: list[str] = []
    revalidate: set[str] = set()
    for repo in sorted(by_repo):
        same_ids = live.get(repo, frozenset()) == frozenset(by_repo[repo])
        if same_ids and not fetched_by_fingerprint(repo):
            revalidate.add(repo)
        else:
            fetch.append(repo)

    # 4. Fetch, cross-check and validate each of them (validated records wait on disk).
    streamed: StreamedApply | None = None
    if streams is not None and full:
        streamed = _streamed(
            store, fetch, revalidate_pending=bool(revalidate), by_repo=by_repo, stored=stored
        )
    incoming: Spool | StreamedApply
    if streamed is None:
        incoming = Spool(tmp / "incoming")
    else:
        incoming = streamed
        assert streams is not None  # noqa: S101 - asked for by the caller
        streams.append(streamed)
        streamed.start(stream.Begin(shown_url(tree.location), version, full, dict(hashes) or None))
    # Repositories holding stored records first (``StreamedApply.overlap_done`` waits).
    holding = {
        r for r in fetch if streamed is not None and not streamed.overlap.isdisjoint(by_repo[r])
    }
    problems: list[Problem] = []
    rejected = 0
    kept_ids: set[str] = set()
    new_etags: dict[str, str] = {}
    if fetched.etag:
        new_etags[where] = fetched.etag
    validators = _Validators.load(state, local=isinstance(tree, publish.LocalTree))
    skipped: list[str] = []
    clean: list[str] = []  # repositories applied exactly as published
    tally = _Revalidation()
    fetched_count = 0
    cached_count = 0
    jobs: list[fetching.RepoJob] = []
    for repo in sorted([*fetch, *revalidate], key=lambda r: (r not in holding, r)):
        rel = publish.repo_file(repo)
        # A 304 is usable only while the stored records are exactly that file's.
        same_ids = live.get(repo, frozenset()) == frozenset(by_repo[repo])
        etag = etags.get(tree.where(rel)) if state and same_ids else None
        modified = validators.modified.get(tree.where(rel)) if state and same_ids else None
        key = fetching.cache_key(repo, by_repo[repo], repos.get(repo), version)
        body = validators.bodies.get(rel) if repo in revalidate else None
        jobs.append(fetching.RepoJob(repo, rel, key, etag, modified, repo in revalidate, body))
    cache = options.cache
    if cache is not None:
        cache.retain({job.key for job in jobs})
    downloaded = fetching.Counter()
    notify(Progress(Stage.REPOS, 0, len(jobs)))
    repo_max = min(max_bytes, limits.repo_file_bytes)
    files = fetching.fetch_all(
        tree,
        jobs,
        cache,
        scratch=tmp,
        max_bytes=repo_max,
        workers=options.workers,
        on_bytes=downloaded.add,
        cancel=options.deadline.cancel,
    )
    file_limits = replace(limits, repo_file_bytes=repo_max)
    spec_keys: dict[str, dict[str, str] | None] = {}

    def specs_of(repo: str, ids: Sequence[str]) -> dict[str, str] | None:
        # Asked once per file, whether a worker or this process checks it.
        if repo not in spec_keys:
            spec_keys[repo] = _spec_keys(store, ids, stored)
        return spec_keys[repo]

    def kept(repo: str, repo_where: str, got: fetching.Got, etag: str) -> None:
        # The repository's stored records stay as they are: the file applied is this one.
        skipped.append(repo)
        clean.append(repo)
        new_etags[repo_where] = etag
        validators.carry(repo_where, got)

    def collect(got: fetching.Got, pending: int | None) -> None:
        # One file's outcome, in the files' order whoever checked it.
        nonlocal fetched_count, cached_count, rejected
        repo, repo_where, ids = got.job.repo, tree.where(got.job.rel), by_repo[got.job.repo]
        listed = unindexed.listed(repos[repo]) if unindexed is not None else None
        same_body = pending == _SAME_BODY
        if got.fetched.not_modified or same_body:
            if unindexed is not None:
                unindexed.count(repo, ids)
            kept(repo, repo_where, got, got.fetched.etag or got.job.etag or "")
            if got.job.revalidate:
                tally.count(not_modified=got.fetched.not_modified)
            if same_body and got.fetched.path is not None and got.fetched.path.is_relative_to(tmp):
                got.fetched.path.unlink()
            return
        if got.cached:
            cached_count += 1
        elif not got.job.revalidate:
            fetched_count += 1
        done = checker.result(pending, got.fetched.where) if pending is not None else None
        if done is None:  # no worker, or the worker sent the file back: judge it here
            part, path = _parse_checked(
                tree,
                got,
                ids,
                stored,
                tmp,
                file_limits,
                downloaded,
                manifest,
                digests,
                listed,
                specs_of(repo, ids),
            )
            done = check_repo(part, ids, version)
        else:
            assert got.fetched.path is not None  # noqa: S101 - not_modified is handled above
            path = got.fetched.path
        if got.job.rel not in validators.hashed:  # before the file moves or goes
            with contextlib.suppress(OSError):
                validators.hash(got.job.rel, path)
        if cache is not None and path.parent == cache.root and not done.broken:
            cache.keep(got.job.key, path)  # verified: a rerun after a kill need not fetch it
        elif path.is_relative_to(tmp):
            path.unlink()  # keep disk use to a few repository files at a time
        if unindexed is not None:
            if done.broken:  # unreadable: its records are rejected, as many as repos.json says
                unindexed.unreadable = True
                held = listed.error_count if listed and listed.error_count is not None else 1
                rejected += max(held - len(done.bad), 0)
            unindexed.count(repo, ids if done.broken else [r for r, _ in done.lines] + [*done.bad])
        if got.job.revalidate and not done.bad and _same_content(done.lines, stored):
            # Another body, the same records (a re-serialised file): kept as stored, no write.
            kept(repo, repo_where, got, got.fetched.etag or "")
            tally.count(not_modified=False)
            return
        if got.job.revalidate:
            tally.rewritten += 1
        for rid, line in done.lines:
            incoming.add_line(rid, line)
        problems.extend(done.problems)
        rejected += len(done.bad)
        kept_ids.update(done.bad)
        if not done.bad:
            clean.append(repo)
            if got.fetched.etag:
                new_etags[repo_where] = got.fetched.etag
            validators.carry(repo_where, got)

    def collected(n: int, got: fetching.Got, pending: int | None) -> None:
        collect(got, pending)
        notify(Progress(Stage.REPOS, n + 1, len(jobs), downloaded.value))
        if streamed is not None and got.job.repo in holding:
            holding.discard(got.job.repo)
            if not holding:
                streamed.overlap_done()

    if streamed is not None and not holding:
        streamed.overlap_done()
    count = options.plan_workers
    if count is None:
        # Revalidated files mostly answer 304: only the files certain to be read count.
        count = checking.default_workers() if len(fetch) >= checking.MIN_FILES else 0
    with checking.Checker(count) as checker:
        # Up to ``checker.ahead`` files are with the workers while the next ones download.
        window: deque[tuple[int, fetching.Got, int | None]] = deque()
        for n, (got, same) in enumerate(_bodies_judged(files, validators)):
            options.deadline.check(tree.location)
            pending = None
            if same:
                pending = _SAME_BODY
            elif not got.fetched.not_modified and got.fetched.path is not None:
                ids = by_repo[got.job.repo]
                pending = checker.submit(
                    checking.Job(
                        got.fetched.path,
                        got.fetched.where,
                        got.job.repo,
                        ids,
                        {rid: stored[rid] for rid in ids if rid in stored},
                        file_limits.repo_file_bytes,
                        file_limits.repo_file_values,
                        version,
                        digests.get(got.job.repo),
                        unindexed.listed(repos[got.job.repo]) if unindexed else None,
                        # Stored records' spec keys: those whose inputs stay are not compiled.
                        specs_of(got.job.repo, ids),
                    )
                )
            window.append((n, got, pending))
            while len(window) > checker.ahead:
                collected(*window.popleft())
        while window:
            options.deadline.check(tree.location)
            collected(*window.popleft())
    if unindexed is not None:
        unindexed.check()
    _same_manifest(tree, manifest, tmp, jobs)

    fingerprints = {
        repo: list(repos[repo].fingerprint)
        for repo in clean
        if repo in repos and repos[repo].analyzed_sha is not None
    }
    new_state = {
        "datasetVersion": version,
        "source": shown_url(tree.location),
        "etags": new_etags,
        "repos": fingerprints,
        **validators.state(),
    }
    return _Plan(
        source=shown_url(tree.location),
        dataset_version=version,
        previous_version=current,
        full=full,
        incoming=incoming,
        problems=tuple(problems),
        rejected=rejected,
        keep_repos=frozenset(skipped),
        keep_ids=frozenset(kept_ids),
        hashes=tuple(hashes),
        state=new_state,
        repos_fetched=fetched_count,
        repos_skipped=len(skipped),
        repos_cached=cached_count,
        bytes_downloaded=downloaded.value,
        other_files=manifest.others,
        revalidation=tally.value(),
        warnings=warnings,
    )


_SAME_BODY = -1  #: in place of a worker's ticket: a revalidated file's body is the one applied


class _Unindexed:
    """A tree whose manifest lists no index: its repository files checked against repos.json.

    Each file holds ``errorCount`` records of its repository (``Listed``); no id in two files;
    the total is the manifest's ``counts.errors`` when given and every file was readable.
    """

    def __init__(self, where: str, errors: object) -> None:
        self.where = where
        self.errors = errors if isinstance(errors, int) and not isinstance(errors, bool) else None
        self.owner: dict[str, str] = {}
        self.twice: list[str] = []
        self.unreadable = False  #: a file could not be read as records (``skip_invalid``)

    @staticmethod
    def listed(info: publish.RepoInfo) -> Listed:
        return Listed(info.error_count)

    def warning(self, manifest_where: str) -> str:
        return (
            f"{manifest_where}: the manifest lists no index (neither index.json.gz nor "
            "index-N parts); repository files were cross-checked against repos.json only "
            "(repositories, record counts, unique ids), not against hashed index rows"
        )

    def count(self, repo: str, ids: Iterable[str]) -> None:
        for rid in ids:
            other = self.owner.setdefault(rid, repo)
            if other != repo:
                self.twice.append(f"{rid} ({other}, {repo})")

    def check(self) -> None:
        if self.twice:
            raise IntegrityError(
                f"{self.where}: ids in more than one repository file: "
                f"{publish.some_ids(self.twice)}; nothing changed"
            )
        if self.errors is not None and not self.unreadable and self.errors != len(self.owner):
            raise IntegrityError(
                f"{self.where}: the repository files hold {len(self.owner)} records, but the "
                f"manifest counts {self.errors} errors; nothing changed"
            )


class _Revalidation:
    """Counts of the repositories revalidated because their fingerprint did not change."""

    def __init__(self) -> None:
        self.not_modified = self.same_body = self.rewritten = 0

    def count(self, *, not_modified: bool) -> None:
        if not_modified:
            self.not_modified += 1
        else:
            self.same_body += 1

    def value(self) -> Revalidation:
        return Revalidation(
            checked=self.not_modified + self.same_body + self.rewritten,
            not_modified=self.not_modified,
            same_body=self.same_body,
            rewritten=self.rewritten,
        )


def _streamed(
    store: Store,
    fetch: Sequence[str],
    *,
    revalidate_pending: bool,
    by_repo: Mapping[str, Sequence[str]],
    stored: Mapping[str, str],
) -> StreamedApply | None:
    """A ``StreamedApply`` for ``fetch``'s records when sound and worth it (``stream``'s limits).

    Each id once, and no repository to revalidate (it may turn out rewritten).
    """
    if revalidate_pending:
        return None
    ids = [rid for repo in fetch for rid in by_repo[repo]]
    distinct = set(ids)
    if len(ids) < stream.MIN_RECORDS or len(distinct) != len(ids):
        return None
    overlap = frozenset(rid for rid in distinct if rid in stored)
    if len(overlap) > stream.MAX_OVERLAP * len(ids):
        return None
    return StreamedApply(store, len(ids), overlap)


def _spec_keys(
    store: Store, ids: Sequence[str], stored: Mapping[str, str]
) -> dict[str, str] | None:
    """The stored spec keys of those of ``ids`` that are stored (None: none is)."""
    known = [rid for rid in ids if rid in stored]
    return store.spec_keys(known) if known else None


#: Threads hashing revalidated files ahead of the loop that judges them (``_bodies_judged``).
_HASH_THREADS = 2
#: Files judged ahead of that loop at most: a few per thread keep both busy.
_HASH_AHEAD = 8


def _bodies_judged(
    files: Iterable[fetching.Got], validators: _Validators
) -> Iterator[tuple[fetching.Got, bool]]:
    """Each file, in order, with whether it is the body applied last time (hashed in threads)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    ahead: deque[tuple[fetching.Got, Future[bool] | None]] = deque()
    with ThreadPoolExecutor(_HASH_THREADS, thread_name_prefix="errkb-hash") as pool:
        try:
            for got in files:
                judged = pool.submit(validators.same_body, got) if got.job.revalidate else None
                ahead.append((got, judged))
                while len(ahead) > _HASH_AHEAD:
                    first, result = ahead.popleft()
                    yield first, result is not None and result.result()
            while ahead:
                first, result = ahead.popleft()
                yield first, result is not None and result.result()
        finally:
            for _got, result in ahead:  # the caller stopped (an error, a deadline)
                if result is not None:
                    result.cancel()


@dataclass
class _Validators:
    """What tells a repository file applied last time from a rewritten one.

    In the sync state: each file's ``Last-Modified`` (by URL or path) and the sha256 of the
    body applied (by ``RepoJob.rel``). Only files applied exactly as published are carried.
    """

    modified: dict[str, str] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)
    new_modified: dict[str, str] = field(default_factory=dict)
    new_bodies: dict[str, str] = field(default_factory=dict)
    hashed: dict[str, str] = field(default_factory=dict)  #: rel -> sha256 of a body just read
    #: A local tree's files: rel -> ``_signature`` when hashed (unchanged: not hashed again).
    stats: dict[str, list[int]] = field(default_factory=dict)
    new_stats: dict[str, list[int]] = field(default_factory=dict)
    signed: dict[str, list[int]] = field(default_factory=dict)  #: rel -> signature just taken
    local: bool = False  #: the tree is a local folder: its files are the ones read next time

    @classmethod
    def load(cls, state: Mapping[str, Any] | None, *, local: bool = False) -> _Validators:
        def strings(key: str) -> dict[str, str]:
            found = state.get(key) if state else None
            if not isinstance(found, dict):
                return {}
            return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}

        stats: dict[str, list[int]] = {}
        found = state.get("stats") if state and local else None
        if isinstance(found, dict):
            for rel, sig in found.items():
                if isinstance(sig, list) and len(sig) == 5 and all(type(n) is int for n in sig):
                    stats[str(rel)] = sig
        return cls(strings("lastModified"), strings("bodies"), stats=stats, local=local)

    def same_body(self, got: fetching.Got) -> bool:
        """A revalidated file came back whole (200) with the very bytes applied last time."""
        path, known = got.fetched.path, got.job.body
        if path is None or known is None:
            return False
        rel = got.job.rel
        if self.local and (sig := self.stats.get(rel)) is not None and sig == _signature(path):
            self.hashed[rel], self.signed[rel] = known, sig
            return True
        return self.hash(rel, path) == known

    def hash(self, rel: str, path: Path) -> str:
        """The sha256 of ``path`` (the file at ``rel``), its signature noted when it is safe."""
        started = time.time_ns()
        before = _signature(path) if self.local else None
        sha = self.hashed[rel] = fetching.file_sha256(path)
        # Noted only for a file unchanged while read and last changed well before (``_RACY_NS``).
        if before is not None and before[2] < started - _RACY_NS and before == _signature(path):
            self.signed[rel] = before
        return sha

    def carry(self, where: str, got: fetching.Got) -> None:
        """Record ``got``'s validators as those of the file now applied."""
        modified = got.fetched.last_modified or got.job.last_modified
        if modified:
            self.new_modified[where] = modified
        body = self.hashed.pop(got.job.rel, None)
        if body is None and got.fetched.path is not None:
            with contextlib.suppress(OSError):
                body = fetching.file_sha256(got.fetched.path)
        if body is None and got.fetched.not_modified:
            body = got.job.body
        if body is not None:
            self.new_bodies[got.job.rel] = body
            sig = self.signed.pop(got.job.rel, None)
            if sig is not None:  # taken with the sha256 just popped from ``hashed``
                self.new_stats[got.job.rel] = sig

    def state(self) -> dict[str, Any]:
        found: dict[str, Any] = {"lastModified": self.new_modified, "bodies": self.new_bodies}
        if self.new_stats:
            found["stats"] = self.new_stats
        return found


#: A file changed less than this before its sha256 was taken is hashed again next time.
_RACY_NS = 2_000_000_000


def _signature(path: Path) -> list[int] | None:
    """What tells a local file unwritten since: size, mtime and ctime (ns), inode, device."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _same_content(lines: Sequence[tuple[str, str]], stored: Mapping[str, str]) -> bool:
    """Every spool line holds the content hash already stored for its id."""
    for rid, line in lines:
        chash = line.split("\t", 3)[2]
        if stored.get(rid) != chash:
            return False
    return True


def _schema_warnings(tree: publish.Tree, tmp: Path) -> tuple[str, ...]:
    """Compare the site's ``schema.json``, when it serves one, with the fields errkb knows."""
    try:
        got = tree.fetch(
            publish.SCHEMA_PATH, tmp / "schema.json", max_bytes=publish.SCHEMA_MAX_BYTES
        )
    except (SyncError, OSError):  # NetworkError is a SyncError: absent or unreachable
        return ()
    if got.path is None:
        return ()
    from errkb.records.fields import KNOWN_FIELDS

    return publish.schema_warnings(got.path.read_bytes(), got.where, KNOWN_FIELDS)


class _Digests(Mapping[str, str]):
    """The index's row digests by repository; the ones its first read left out on first use.

    The first of those asked reads the index again once, for every one left out.
    """

    def __init__(self, rows: publish.IndexRows, reread: Reread | None) -> None:
        self._known = dict(rows.digests)
        self._left = set(rows.undigested) if reread is not None else set()
        self._reread = reread
        self.rereads = 0  #: reads of the index after the first (counted, for the tests)

    def __getitem__(self, repo: str) -> str:
        if repo in self._left and self._reread is not None:
            left, self._left = frozenset(self._left), set()
            self.rereads += 1
            self._known.update(self._reread(left.__contains__).digests)
        return self._known[repo]

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


#: Reads the index again, summing the digests of the repositories named (``_Digests``).
Reread = Callable[[Callable[[str], bool]], publish.IndexRows]


def _read_index(
    tree: publish.Tree,
    manifest: publish.Manifest,
    tmp: Path,
    max_bytes: int,
    limits: publish.Limits,
    digest: Callable[[str], bool] | None = None,
) -> tuple[publish.IndexRows, str, list[tuple[str, str]], Reread] | None:
    """Fetch, verify and read the index (one file or every part): rows, where, hashes, reread.

    ``digest``: the repositories whose digests are summed; the reread sums others'. None when
    the manifest lists no index. A split index is read whole (``publish.read_index_parts``).
    """
    where = tree.where(tree.manifest_path)
    files = manifest.index_files()
    if not files:
        return None
    hashes: list[tuple[str, str]] = []
    if not manifest.index_parts:
        entry = files[0]
        got, raw = _fetch_verified(tree, entry, tmp / "index.json.gz", max_bytes, streamed=True)

        def one(wanted: Callable[[str], bool] | None) -> publish.IndexRows:
            return publish.read_index(
                raw, got.where, manifest.dataset_version, limits=limits, digest=wanted
            )

        if entry.sha256 is not None:
            hashes.append(("index", entry.sha256))
        if entry.raw_sha256:
            hashes.append(("indexRaw", entry.raw_sha256))
        return one(digest), got.where, hashes, one
    contents = []
    for n, entry in enumerate(files, 1):
        _got, raw = _fetch_verified(
            tree, entry, tmp / f"index-part-{n}.json.gz", max_bytes, streamed=True
        )
        contents.append(raw)
        if entry.sha256 is not None:
            hashes.append((f"index.{publish.clean_rel(entry.path)}", entry.sha256))

    def parts(wanted: Callable[[str], bool] | None) -> publish.IndexRows:
        return publish.read_index_parts(
            contents, where, manifest.dataset_version, limits=limits, digest=wanted
        )

    return parts(digest), where, hashes, parts


def _fetch_verified(
    tree: publish.Tree,
    entry: publish.FileEntry,
    dest: Path,
    max_bytes: int,
    *,
    streamed: bool = False,
) -> tuple[publish.Fetched, publish.Content]:
    """Fetch a hashed file and verify it; on a mismatch over http, once more past every cache.

    ``streamed``: a gzip file's decompressed checks may run as it is parsed (``verify_file``).
    """
    got = tree.fetch(entry.path, dest, max_bytes=max_bytes)
    try:
        return got, publish.verify_file(got, entry, max_bytes=max_bytes, streamed=streamed)
    except IntegrityError:
        if not isinstance(tree, publish.HttpTree):
            raise
    got = tree.fetch(entry.path, dest, max_bytes=max_bytes, fresh=True)
    try:
        return got, publish.verify_file(got, entry, max_bytes=max_bytes, streamed=streamed)
    except IntegrityError as exc:
        raise IntegrityError(_stale(str(exc))) from None


def _stale(message: str) -> str:
    return (
        message.removesuffix("; nothing changed")
        + "; the same after a second request that bypassed caches: the server served stale "
        "or corrupt data; nothing changed"
    )


def _parse_checked(
    tree: publish.Tree,
    got: fetching.Got,
    ids: Sequence[str],
    stored: Mapping[str, str],
    tmp: Path,
    limits: publish.Limits,
    downloaded: fetching.Counter,
    manifest: publish.Manifest,
    digests: Mapping[str, str] | None = None,
    listed: Listed | None = None,
    specs: Mapping[str, str] | None = None,
) -> tuple[RepoFile, Path]:
    """Parse and cross-check one repository file; on a mismatch over http, fetch it again fresh."""
    path = got.fetched.path
    assert path is not None  # noqa: S101 - not_modified is handled by the caller
    try:
        part = _parse_repo(got.fetched, got.job.repo, ids, stored, limits, digests, listed, specs)
        return part, path
    except IntegrityError:
        if not isinstance(tree, publish.HttpTree):
            raise
        if got.cached or path.is_relative_to(tmp) or path.suffix == ".part":
            path.unlink(missing_ok=True)  # never reuse what failed the cross-check
    again = tree.fetch(
        got.job.rel,
        tmp / "retry.json",
        max_bytes=limits.repo_file_bytes,
        fresh=True,
        on_bytes=downloaded.add,
    )
    try:
        found = _parse_repo(again, got.job.repo, ids, stored, limits, digests, listed, specs)
        return found, tmp / "retry.json"
    except IntegrityError as exc:
        _same_manifest(tree, manifest, tmp, [got.job])  # a new version explains it better
        raise IntegrityError(_stale(str(exc))) from None


def _same_manifest(
    tree: publish.Tree, manifest: publish.Manifest, tmp: Path, jobs: Sequence[fetching.RepoJob]
) -> None:
    """Refuse if the manifest changed while the (unhashed) repository files downloaded."""
    if not isinstance(tree, publish.HttpTree) or not jobs:
        return
    where = tree.where(tree.manifest_path)
    got = tree.fetch(
        tree.manifest_path, tmp / "manifest-after.json", max_bytes=publish.MANIFEST_MAX_BYTES
    )
    assert got.path is not None  # noqa: S101 - fetched without an ETag: never a 304
    after = publish.parse_manifest(got.path.read_bytes(), where)
    if after.sha256 != manifest.sha256:
        raise SyncError(
            f"{where}: datasetVersion {after.dataset_version} was published while this sync "
            f"was downloading {manifest.dataset_version}; nothing changed (run errkb sync "
            "again: the files already verified are cached)"
        )


def _parse_repo(
    fetched: publish.Fetched,
    repo: str,
    index_ids: Sequence[str],
    stored: Mapping[str, str],
    limits: publish.Limits,
    digests: Mapping[str, str] | None = None,
    listed: Listed | None = None,
    specs: Mapping[str, str] | None = None,
) -> RepoFile:
    """Read one repository file and cross-check it against the index (see ``read_repo``)."""
    assert fetched.path is not None  # noqa: S101
    return read_repo(
        fetched.path,
        fetched.where,
        repo,
        index_ids,
        stored,
        max_bytes=limits.repo_file_bytes,
        max_values=limits.repo_file_values,
        index_digest=(digests or {}).get(repo),
        listed=listed,
        specs=specs,
    )


def _up_to_date(source: str, version: str | None, previous: str | None = None) -> SyncReport:
    return SyncReport(
        SyncStatus.UP_TO_DATE, VersionKind.SYNC, shown_url(source), version, previous or version
    )


def _refuse_downgrade(where: str, version: str, current: str | None, allow: bool) -> None:
    if allow or current is None:
        return
    new, old = parse_version(version), parse_version(current)
    if new is not None and old is not None and new < old:
        raise SyncError(
            f"{where}: datasetVersion {version} is older than the current {current}; "
            "refusing to downgrade (allow it with --allow-downgrade)"
        )


def _check_downgrade(plan: _Plan, allow: bool) -> None:
    if plan.dataset_version is not None:
        _refuse_downgrade(plan.source, plan.dataset_version, plan.previous_version, allow)


def _load_state(store: Store, latest: VersionInfo | None) -> dict[str, Any] | None:
    """Return the last sync's state if that sync is still the latest change to the database."""
    text = store.meta_value(_STATE_KEY)
    if text is None or latest is None:
        return None
    try:
        state = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(state, dict) or state.get("versionId") != latest.id:
        return None
    if not isinstance(state.get("etags"), dict) or not isinstance(state.get("repos"), dict):
        return None
    return state


def sync_state(store: Store) -> Mapping[str, Any] | None:
    """The last sync's state (fingerprints, validators) while it is the latest change, else None."""
    return _load_state(store, store.latest_version())


def _execute(
    store: Store,
    plan: _Plan,
    *,
    dry_run: bool,
    skip_invalid: bool,
    reject_report: str | os.PathLike[str] | None,
    notify: ProgressCallback,
    started: float,
    applied: list[SyncReport] | None = None,
    rebuild: bool = False,
) -> SyncReport:
    if plan.problems and not skip_invalid:
        raise RecordError(
            plan.problems,
            summary=(
                f"{plan.source}: {plan.rejected} invalid record(s) in datasetVersion "
                f"{plan.dataset_version or '(none)'}; nothing was changed "
                "(--skip-invalid applies the rest)"
            ),
        )
    report = SyncReport(
        SyncStatus.DRY_RUN if dry_run else SyncStatus.APPLIED,
        VersionKind.SYNC,
        plan.source,
        plan.dataset_version,
        plan.previous_version,
        full=plan.full,
        partial=plan.rejected > 0,
        problems=plan.problems,
        repos_fetched=plan.repos_fetched,
        repos_skipped=plan.repos_skipped,
        hashes=plan.hashes,
        repos_cached=plan.repos_cached,
        bytes_downloaded=plan.bytes_downloaded,
        other_files=plan.other_files,
        revalidation=plan.revalidation,
        warnings=plan.warnings,
    )
    keep = Keep(plan.keep_repos, plan.keep_ids)
    if dry_run:
        found = store.classify(plan.incoming, full=plan.full, keep=keep)
        return replace(
            report,
            counts=found.counts(plan.rejected),
            diff=found,
            elapsed=time.monotonic() - started,
        )

    report_path: str | None = None
    if plan.problems:
        # Written before the transaction: if it cannot be written, nothing has changed yet.
        target = reject_report or store.path.with_name(store.path.name + ".rejects.jsonl")
        write_rejects(target, plan.problems, plan.dataset_version)
        report_path = os.fspath(target)

    notify(Progress(Stage.APPLY, 0, 1))
    if isinstance(plan.incoming, StreamedApply):
        # Written as they were checked: the writer finishes, records the state and commits.
        version_id, counts = plan.incoming.finish(
            Ending(keep, plan.rejected > 0, plan.rejected),
            stream.stream_state(plan.state),
            _STATE_KEY,
        )
    else:
        version_id, counts = _apply(store, plan, keep, rebuild=rebuild)
    done = replace(
        report,
        counts=counts,
        version_id=version_id,
        reject_report=report_path,
        elapsed=time.monotonic() - started,
    )
    if applied is not None:
        applied.append(done)  # committed: an interrupt from here on must say so
    notify(Progress(Stage.APPLY, 1, 1))
    return done


def _apply(store: Store, plan: _Plan, keep: Keep, *, rebuild: bool) -> tuple[int, ApplyCounts]:
    """Apply a spooled plan in one transaction (or SQLite's fresh build); (version id, counts)."""
    fresh = _fresh_build(store, plan, rebuild=rebuild)
    with fresh if fresh is not None else store.write() as tx:
        version_id, counts = tx.apply(
            plan.incoming,
            keep=keep,
            kind=VersionKind.SYNC,
            source=plan.source,
            dataset_version=plan.dataset_version,
            feed=COUNTING_FEED,
            full=plan.full,
            partial=plan.rejected > 0,
            rejected=plan.rejected,
            hashes=dict(plan.hashes) or None,
        )
        if plan.state is not None:
            value = json.dumps({**plan.state, "versionId": version_id}, sort_keys=True)
            tx.set_meta(_STATE_KEY, value)
    return version_id, counts


def _fresh_build(
    store: Store, plan: _Plan, *, rebuild: bool
) -> AbstractContextManager[WriteTx] | None:
    """A large sync's new file put in place whole (SQLite), or None: one transaction.

    Only for spooled records with distinct ids; the store decides whether it pays.
    """
    incoming = plan.incoming
    if not isinstance(incoming, Spool) or not incoming.distinct():
        return None
    return store.fresh_build(len(incoming), changed=None if rebuild else incoming.changed)


def write_rejects(
    path: str | os.PathLike[str], problems: Iterable[Problem], dataset_version: str | None
) -> None:
    """Write rejected records' problems as JSON Lines, atomically (old file or complete new)."""
    from errkb.atomic import atomic_write_text

    try:
        with atomic_write_text(path) as fh:
            for p in problems:
                line = {
                    "source": p.source,
                    "location": p.location,
                    "id": p.record_id,
                    "path": p.json_path,
                    "rule": p.rule,
                    "datasetVersion": dataset_version,
                }
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise SyncError(f"{path}: cannot write the reject report: {exc.strerror or exc}") from exc
