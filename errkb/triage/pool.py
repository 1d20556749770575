"""Running the per-log function in worker processes on this machine (``errkb triage -j N``).

Each ``spawn``ed worker opens the knowledge base once (:func:`worker_kb`) and returns each
log's result as JSON text. A pool broken by a dying worker has its missing logs retried once
each in a fresh pool; one that kills its worker again is an error line. ``-j 1`` runs
in-process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from errkb.report.triage import LogResult

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase
    from errkb.triage.core import Progress

#: Logs per task: enough to amortise a round trip, few enough that a lost worker costs little.
BATCH = 8

_KBS: dict[str, KnowledgeBase] = {}


def worker_kb(db: str | None) -> KnowledgeBase:
    """The knowledge base of ``db`` in this process, opened on first use and kept (read only)."""
    key = db or ""
    kb = _KBS.get(key)
    if kb is None:
        from errkb.kb import open_kb

        kb = _KBS[key] = open_kb(db)
    return kb


def triage_batch(paths: Sequence[str], db: str | None, limit: int) -> list[str]:
    """The per-log function over a batch, results as JSON texts (a worker's task)."""
    from errkb.triage.core import result_text, triage_log

    kb = worker_kb(db)
    return [result_text(triage_log(kb, path, limit)) for path in paths]


#: What a worker runs on a batch: :func:`triage_batch`'s shape (paths, database, size cap).
Task = Callable[[Sequence[str], str | None, int], list[str]]


def _fail(path: str, reason: str) -> LogResult:
    return LogResult(path, 0, None, None, error=reason)


def run_local(
    files: Sequence[str],
    *,
    db: str | os.PathLike[str] | None,
    jobs: int,
    limit: int,
    progress: Progress | None = None,
    task: Task = triage_batch,
) -> tuple[list[LogResult], int]:
    """Every file's result (in no particular order) and how many workers were lost."""
    from errkb.triage.core import triage_log

    target = os.fspath(db) if db is not None else None
    done: list[LogResult] = []
    total = len(files)
    seen_bytes = 0

    def tick(result: LogResult) -> None:
        nonlocal seen_bytes
        done.append(result)
        seen_bytes += result.bytes
        if progress is not None:
            progress(len(done), total, seen_bytes)

    if jobs <= 1 or total <= 1:
        kb = worker_kb(target)
        for path in files:
            tick(triage_log(kb, path, limit))
        return done, 0
    # The parent opens the knowledge base first: a new database is created and seeded once,
    # not by every worker at the same time.
    worker_kb(target)
    batches = [list(files[i : i + BATCH]) for i in range(0, total, BATCH)]
    retry = _run(batches, target, jobs, limit, tick, task)
    lost = 1 if retry else 0
    if retry:
        # Each lost log once more; if the pool breaks again, the rest go through one worker in
        # order, so only the log that killed it is an error line.
        pending = sorted(_run([[p] for p in sorted(retry)], target, jobs, limit, tick, task))
        lost += 1 if pending else 0
        while pending:
            rest = sorted(_run([[p] for p in pending], target, 1, limit, tick, task))
            if not rest:
                break
            lost += 1
            tick(
                _fail(
                    rest[0], "worker process died twice while reading this log (killed or crashed)"
                )
            )
            pending = rest[1:]
    return done, lost


def _run(
    batches: list[list[str]],
    target: str | None,
    jobs: int,
    limit: int,
    tick: Callable[[LogResult], None],
    task: Task,
) -> list[str]:
    """Run ``batches``; return the paths of batches lost with a dead worker."""
    from errkb.triage.core import iter_results

    context = multiprocessing.get_context("spawn")
    lost: list[str] = []
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(batches)), mp_context=context)
    try:
        pending: dict[Future[list[str]], list[str]] = {
            pool.submit(task, batch, target, limit): batch for batch in batches
        }
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = False
            for future in finished:
                batch = pending.pop(future)
                try:
                    texts = future.result()
                except BrokenProcessPool:
                    lost.extend(batch)
                    broken = True
                    continue
                except Exception as exc:  # a bug in a worker: these logs' error lines, not a crash
                    for path in batch:
                        tick(_fail(path, f"worker failed: {type(exc).__name__}: {exc}"))
                    continue
                for result in iter_results(texts):
                    tick(result)
            if broken:
                # A worker killed mid-task can leave the pool's queues locked: every batch not
                # back yet is lost with it, and the survivors are stopped, not waited for.
                for batch in pending.values():
                    lost.extend(batch)
                pending.clear()
                for process in list(pool._processes.values()):
                    process.kill()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return lost
