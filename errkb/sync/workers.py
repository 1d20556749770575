"""Planning in worker processes: repository files read, cross-checked and validated in parallel.

A full sync of the real dataset reads about 1,800 repository files (500,000 records); reading,
validating and encoding them for the spool is a third of the sync's time, and each file is
independent of the others. ``Checker`` hands them to a small pool of worker processes while
the calling process keeps downloading, spooling the results in the files' order. A worker
runs the very functions the calling process runs without workers (``read_repo`` and
``check_repo`` in ``errkb.sync.repofile``), so both give the same records, in the same order,
with the same problems naming the file, line, record id and JSON path.

Only text crosses the process boundary: a job is a JSON object (the file's path and what the
hashed index says about it), a result a JSON header (problems, rejected ids) followed by the
spool lines. Nothing here touches the database: the plan is applied once every file is
checked, in one transaction. A worker that dies (killed, out of memory) stops the sync with
one ``SyncError`` before anything is written. Anything else unusual a worker meets (a file that
fails the cross-check, a file it cannot read) sends the file back to the calling process,
which judges it itself, so each such error reads exactly as it does without workers (and, over
http, a file failing the cross-check is fetched once more, as always).

Workers are fresh interpreters (``spawn``): the calling process runs download threads, and a
forked child would inherit whatever locks they held.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from errkb.errors import ErrkbError, Problem, SyncError
from errkb.sync.repofile import Checked, check_repo, read_repo

#: At most this many worker processes, whatever the machine has.
MAX_WORKERS = 4
#: Fewer repository files than this are checked in the calling process: starting a worker
#: (an interpreter importing errkb) costs more than it saves on a small sync.
MIN_FILES = 32


def default_workers() -> int:
    """Workers for a large sync: one per CPU this process may use (up to ``MAX_WORKERS``).

    0 (check in the calling process) on a single CPU, where workers would only add work.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return min(cpus, MAX_WORKERS) if cpus > 1 else 0


@dataclass(frozen=True)
class Job:
    """One repository file to check: where it is and what the hashed index says about it."""

    path: Path
    where: str  #: URL or path, for messages
    repo: str
    ids: Sequence[str]  #: the ids the index lists for ``repo``
    stored: Mapping[str, str]  #: stored content hashes of those ids
    max_bytes: int
    max_values: int
    version: str | None  #: the datasetVersion the records are spooled with


#: How often a worker looks whether the sync that started it is still alive (seconds).
_WATCH_SECONDS = 0.5


def _watch_parent(parent: int) -> None:
    """A worker's initializer: exit as soon as the sync that started it is gone.

    A worker waits for jobs on a queue whose writing end it holds itself, so a sync killed
    with SIGKILL would leave its workers waiting forever; a daemon thread notices the parent
    is gone (the worker is re-parented) and ends the worker.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="errkb-sync-parent-watch", daemon=True).start()


def _encode(job: Job) -> str:
    return json.dumps(
        {
            "path": os.fspath(job.path),
            "where": job.where,
            "repo": job.repo,
            "ids": list(job.ids),
            "stored": dict(job.stored),
            "maxBytes": job.max_bytes,
            "maxValues": job.max_values,
            "version": job.version,
        }
    )


def check_job(text: str) -> str:
    """A worker's task: read, cross-check and validate one file (``_encode``'s JSON).

    Returns a JSON header line, then the spool lines; a header ``{"fallback": true}`` alone
    when the calling process should judge the file itself.
    """
    spec = json.loads(text)
    try:
        part = read_repo(
            Path(spec["path"]),
            spec["where"],
            spec["repo"],
            spec["ids"],
            spec["stored"],
            max_bytes=spec["maxBytes"],
            max_values=spec["maxValues"],
        )
    except (ErrkbError, OSError):
        return json.dumps({"fallback": True}) + "\n"
    checked = check_repo(part, spec["ids"], spec["version"])
    header = {
        "problems": [
            [p.source, p.location, p.record_id, p.json_path, p.rule] for p in checked.problems
        ],
        "bad": sorted(checked.bad),
        "broken": checked.broken,
    }
    return json.dumps(header) + "\n" + "".join(line for _rid, line in checked.lines)


def _decode(text: str) -> Checked | None:
    head, _, body = text.partition("\n")
    header = json.loads(head)
    if header.get("fallback"):
        return None
    lines = body.split("\n")
    lines.pop()  # after the last newline (or the empty body)
    return Checked(
        tuple((line[: line.index("\t")], line + "\n") for line in lines),
        tuple(Problem(*fields) for fields in header["problems"]),
        frozenset(header["bad"]),
        bool(header["broken"]),
    )


class Checker:
    """A pool of ``workers`` processes checking repository files (none when 0).

    Use it as a context manager: leaving it stops the workers, whichever way it is left.
    """

    def __init__(self, workers: int) -> None:
        self.workers = max(0, workers)
        self._pool: cf.ProcessPoolExecutor | None = None
        if self.workers:
            self._pool = cf.ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_watch_parent,
                initargs=(os.getpid(),),
            )

    @property
    def ahead(self) -> int:
        """Files submitted but not yet collected: enough to keep every worker busy."""
        return 2 * self.workers

    def submit(self, job: Job) -> cf.Future[str] | None:
        """Start checking ``job`` in a worker; None without workers (check it in process)."""
        if self._pool is None:
            return None
        try:
            return self._pool.submit(check_job, _encode(job))
        except BrokenProcessPool as exc:
            raise _died(job.where, exc) from None

    def result(self, future: cf.Future[str], where: str) -> Checked | None:
        """The worker's result for the file named ``where``; None: check it in this process."""
        try:
            return _decode(future.result())
        except BrokenProcessPool as exc:
            raise _died(where, exc) from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Checker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _died(where: str, exc: BaseException) -> SyncError:
    return SyncError(
        f"{where}: a sync worker process checking repository files stopped unexpectedly "
        f"({exc or 'killed'}); nothing changed"
    )
