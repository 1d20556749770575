"""Worker processes for the text operations, so that a request's deadline stops its work.

explain, match and search run in ``size`` worker processes, each with its own
``KnowledgeBase``. A call past its deadline kills its worker (a fresh one starts in the
background); past ``size + queue`` admitted calls a call is refused at once (``BusyError``, a
503 with ``Retry-After``). The pipe carries one JSON object per line each way; nothing is
unpickled.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from errkb.errors import ErrkbError, NotFoundError, StoreError, UsageError

#: Worker processes by default: two, so one hostile request leaves one serving.
DEFAULT_WORKERS = 2
#: Calls waiting for a worker beyond those running, before new ones are refused (503).
DEFAULT_QUEUE = 16
#: Seconds one call may take, waiting included, before its worker is killed.
DEFAULT_SECONDS = 10.0
#: Seconds a new worker may take to open the knowledge base and say it is ready.
START_SECONDS = 120.0

READY = "errkb-worker-ready"
#: How a worker's answer line starts when the call succeeded: the result's JSON follows.
OK = "ok\t"


class BusyError(ErrkbError):
    """Every worker is busy and the queue is full: try again shortly (HTTP 503)."""

    retry_after = 1


class DeadlineError(ErrkbError):
    """A call ran past its deadline; its work was stopped (HTTP 504)."""


class WorkerError(ErrkbError):
    """A worker failed in a way that is errkb's fault, not the request's (HTTP 500)."""


_KINDS: dict[str, type[ErrkbError]] = {
    "notfound": NotFoundError,
    "usage": UsageError,
    "store": StoreError,
    "internal": WorkerError,
}


class _Worker:
    def __init__(self, argv: list[str], env: Mapping[str, str]) -> None:
        # errkb's own module, run by this interpreter: argv is built here, not from a request.
        self.proc = subprocess.Popen(  # noqa: S603
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
            bufsize=0,
        )
        self._buffer = b""
        if self.proc.stdin is None or self.proc.stdout is None:  # pragma: no cover - PIPE given
            raise WorkerError("an errkb worker started without its pipes")
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        # One selector for the worker's life.
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout.fileno(), selectors.EVENT_READ)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, message: Mapping[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode("ascii") + b"\n")

    def receive(self, deadline: float) -> str | None:
        """One line, or None when the deadline passes or the worker ends first."""
        fd = self._stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8")

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        self._selector.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def stop(self) -> None:
        """End normally: closing its input ends the worker's loop."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self._selector.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class WorkerPool:
    """``size`` worker processes over the database ``target`` (None: ``$ERRKB_DB``/default)."""

    def __init__(
        self,
        target: str | None,
        *,
        size: int = DEFAULT_WORKERS,
        queue_limit: int = DEFAULT_QUEUE,
        seconds: float = DEFAULT_SECONDS,
    ) -> None:
        if size < 1:
            raise UsageError(f"--workers must be at least 1, not {size}")
        self.size = size
        self.seconds = seconds
        self._argv = [sys.executable, "-m", "errkb.serve.worker"]
        if target is not None:
            self._argv.append(target)
        self._env = dict(os.environ)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._slots = threading.BoundedSemaphore(size + queue_limit)
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.killed = 0  #: workers killed at their deadline (a figure for tests and logs)
        self._admitted = 0

    def start(self) -> None:
        """Start every worker and wait until each has opened the knowledge base."""
        # Launched together, awaited in turn: each opens the knowledge base in parallel.
        for worker in [self._launch() for _ in range(self.size)]:
            self._idle.put(self._ready(worker))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._all)
        for worker in workers:
            worker.stop()

    def __enter__(self) -> WorkerPool:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def admitted(self) -> int:
        """Calls running or waiting for a worker now."""
        with self._lock:
            return self._admitted

    def pids(self) -> list[int]:
        with self._lock:
            return sorted(w.pid for w in self._all)

    def _spawn(self) -> _Worker:
        return self._ready(self._launch())

    def _launch(self) -> _Worker:
        worker = _Worker(self._argv, self._env)
        with self._lock:
            self._all.add(worker)
        return worker

    def _ready(self, worker: _Worker) -> _Worker:
        line = worker.receive(time.monotonic() + START_SECONDS)
        if line != READY:
            self._discard(worker)
            raise WorkerError(f"an errkb worker did not start (it said {line!r})")
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker`` and start another in the background (requests keep flowing)."""
        self._discard(worker)

        def start() -> None:
            with self._lock:
                if self._closed:
                    return
            try:
                fresh = self._spawn()
            except ErrkbError:
                return  # the next call waits on the remaining workers; its deadline reports it
            self._idle.put(fresh)

        threading.Thread(target=start, name="errkb-worker-start", daemon=True).start()

    def call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Run ``op`` in a worker; its result, or the error the worker raised, here."""
        result: dict[str, Any] = json.loads(self.call_json(op, args))
        return result

    def call_json(self, op: str, args: Mapping[str, Any]) -> str:
        """``call``'s result as the worker wrote it, JSON text (an HTTP body as it is)."""
        if not self._slots.acquire(blocking=False):
            raise BusyError(
                f"errkb is busy: {self.size} workers are running and the queue is full; "
                "try again shortly"
            )
        with self._lock:
            self._admitted += 1
        try:
            deadline = time.monotonic() + self.seconds
            try:
                worker = self._idle.get(timeout=self.seconds)
            except queue.Empty:
                raise DeadlineError(
                    f"no worker was free within {self.seconds:g} s; try again shortly"
                ) from None
            try:
                worker.send({"op": op, "args": dict(args)})
            except OSError:
                self._replace(worker)
                raise WorkerError("an errkb worker ended unexpectedly") from None
            line = worker.receive(deadline)
            if line is None:
                ended = worker.proc.poll() is not None
                self._replace(worker)
                if ended:
                    raise WorkerError("an errkb worker ended unexpectedly")
                self.killed += 1
                raise DeadlineError(
                    f"the request took longer than {self.seconds:g} s and was stopped"
                )
            self._idle.put(worker)
        finally:
            with self._lock:
                self._admitted -= 1
            self._slots.release()
        if line.startswith(OK):
            return line[len(OK) :]
        answer = json.loads(line)
        kind, message = answer["error"]["kind"], answer["error"]["message"]
        if kind == "access":
            from errkb.serve import AccessError

            raise AccessError(message)
        raise _KINDS.get(kind, WorkerError)(message)


def error_kind(exc: BaseException) -> str:
    """The wire name of an error raised in a worker (``WorkerPool.call`` raises it again)."""
    from errkb.serve import AccessError

    if isinstance(exc, AccessError):
        return "access"
    if isinstance(exc, NotFoundError):
        return "notfound"
    if isinstance(exc, StoreError):
        return "store"
    if isinstance(exc, ErrkbError):
        return "usage"
    return "internal"
