"""Planning in worker processes: repository files read, cross-checked and validated in parallel.

``Checker`` hands repository files to a small pool of workers while the calling process keeps
downloading, spooling results in the files' order. A worker runs the very functions the
caller runs without workers (``errkb.sync.repofile``): the same records, order and problems.
Only text crosses the boundary: a job is a JSON object, a result a JSON header and the spool
lines, framed by its size (``serve``). A worker that dies stops the sync with one
``SyncError`` before anything is written; anything else unusual sends the file back to the
caller to judge itself. Workers are fresh interpreters (``python -c``) over pipes, not
``multiprocessing`` (a fork inherits the download threads' locks; a spawn re-runs the main
script), and end when their input ends.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from errkb.atomic import write_all
from errkb.errors import ErrkbError, Problem, SyncError
from errkb.sync.repofile import Checked, Listed, check_repo, read_repo

#: At most this many worker processes, whatever the machine has.
MAX_WORKERS = 4
#: Fewer repository files than this are checked in the calling process (a worker's start costs).
MIN_FILES = 32


def default_workers() -> int:
    """Workers for a large sync: one per usable CPU (up to ``MAX_WORKERS``); 0 on a single CPU."""
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
    digest: str | None = None  #: the index rows' digest of ``repo`` (``read_repo``)
    #: no index: what ``repos.json`` says instead (``read_repo``'s ``listed``)
    listed: Listed | None = None
    #: stored spec keys of those ids (``read_repo``'s ``specs``)
    specs: Mapping[str, str] | None = None


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
            "digest": job.digest,
            "listed": None if job.listed is None else [job.listed.error_count],
            "specs": dict(job.specs) if job.specs else None,
        }
    )


def check_job(text: str) -> str:
    """A worker's task on one file: a JSON header line, then spool lines (or ``fallback``)."""
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
            index_digest=spec.get("digest"),
            listed=None if spec.get("listed") is None else Listed(*spec["listed"]),
            specs=spec.get("specs"),
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


#: What a worker runs (not ``-m``: runpy would warn, the module being imported already).
_MAIN = "from errkb.sync.workers import main; main()"


class _Worker:
    """One worker process (``_MAIN``) and the thread feeding it jobs (so neither side blocks)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(  # noqa: S603 - this interpreter, our own code
            [sys.executable, "-c", _MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None  # noqa: S101
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.jobs: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.feeder = threading.Thread(target=self._feed, name="errkb-sync-feed", daemon=True)
        self.feeder.start()

    def _feed(self) -> None:
        stdin = self.stdin
        try:
            while (job := self.jobs.get()) is not None:
                write_all(stdin.fileno(), (job + "\n").encode("utf-8", "surrogatepass"))
            stdin.close()
        except (OSError, ValueError):
            return  # the worker is gone: reading its result says so

    def read(self) -> str | None:
        """The next result, or None when the worker has stopped."""
        stdout = self.stdout
        first = stdout.readline()
        if not first.endswith(b"\n"):
            return None
        size = int(first)
        body = stdout.read(size)  # a buffered read: until ``size`` bytes or the end
        if len(body) != size:
            return None
        return body.decode("utf-8", "surrogatepass")

    def stop(self) -> None:
        self.jobs.put(None)
        self.feeder.join(timeout=5)
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError, ValueError):
                stream.close()


class Checker:
    """``workers`` worker processes checking repository files (none when 0), a context manager.

    Job ``k`` goes to worker ``k % workers``; results come in submission order.
    """

    def __init__(self, workers: int) -> None:
        self.workers = max(0, workers)
        self._pool = [_Worker() for _ in range(self.workers)]
        self._submitted = 0
        self._collected = 0

    @property
    def ahead(self) -> int:
        """Files submitted but not yet collected: enough to keep every worker busy."""
        return 2 * self.workers

    @property
    def pids(self) -> tuple[int, ...]:
        """The worker processes' ids."""
        return tuple(w.proc.pid for w in self._pool)

    def submit(self, job: Job) -> int | None:
        """Start checking ``job`` in a worker (a ticket for ``result``); None without workers."""
        if not self._pool:
            return None
        ticket = self._submitted
        self._pool[ticket % self.workers].jobs.put(_encode(job))
        self._submitted += 1
        return ticket

    def result(self, ticket: int, where: str) -> Checked | None:
        """The result of ``ticket`` (the file ``where``), in order given; None: check it here."""
        assert ticket == self._collected  # noqa: S101 - the caller's order, not the data's
        worker = self._pool[ticket % self.workers]
        text = worker.read()
        if text is None:
            raise _died(where, worker.proc.poll())
        self._collected += 1
        return _decode(text)

    def close(self, *, failed: bool = False) -> None:
        """Stop the workers: let them finish, or (``failed``) kill them, their work unwanted."""
        for worker in self._pool:
            if failed and worker.proc.poll() is None:
                worker.proc.kill()
            worker.stop()
        self._pool = []

    def __enter__(self) -> Checker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(failed=exc is not None)


def serve(stdin: IO[str], stdout: IO[bytes]) -> None:
    """A worker's loop: one job per line in, one result out (its size line first), to the end."""
    out = stdout.fileno()
    for line in stdin:
        result = check_job(line).encode("utf-8", "surrogatepass")
        write_all(out, b"%d\n%s" % (len(result), result))


def _died(where: str, code: int | None) -> SyncError:
    how = (
        f"killed by signal {-code}"
        if code is not None and code < 0
        else f"exit code {code}"
        if code is not None
        else "its output ended"
    )
    return SyncError(
        f"{where}: a sync worker process checking repository files stopped unexpectedly "
        f"({how}); nothing changed"
    )


def _text(stream: IO[bytes]) -> io.TextIOWrapper:
    # "\n" only ends a line: JSON escapes it, but not U+2028 or U+0085.
    return io.TextIOWrapper(stream, encoding="utf-8", errors="surrogatepass", newline="\n")


def main() -> None:
    """A worker process's entry point (``_MAIN``): serve jobs on standard input and output."""
    # Ctrl-C reaches the whole process group: the sync decides, and closes our input.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        serve(_text(sys.stdin.buffer), sys.stdout.buffer)
    except BrokenPipeError:
        os._exit(0)  # the sync is gone: nobody wants the result, nothing to say
