"""``errkb triage``: thousands of logs at once, known errors counted, unknown ones grouped.

:func:`triage_log` is the per-log function (a path and a knowledge base in, a plain-JSON
:class:`~errkb.report.triage.LogResult` out); :func:`reduce` folds any number of results into
one :class:`~errkb.report.triage.TriageReport`, depending only on their set, never their order.
:func:`triage` runs in local processes, :func:`errkb.triage.dask.triage_dask` on Dask. A log
that cannot be triaged is one line in ``errors``; the run goes on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from errkb.report.triage import TriageReport
from errkb.triage.core import (
    MAX_LOG_BYTES,
    Progress,
    draft_record,
    expand,
    iter_results,
    load_baseline,
    log_times,
    read_log,
    reduce,
    result_text,
    triage_log,
)


def triage(
    paths: Iterable[str],
    *,
    db: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    baseline: str | None = None,
    limit: int = MAX_LOG_BYTES,
    progress: Progress | None = None,
) -> TriageReport:
    """Triage every log under ``paths`` with ``jobs`` worker processes (default: CPU count)."""
    from errkb.triage.pool import run_local

    if baseline is not None:
        load_baseline(baseline)  # a bad baseline is refused before any log is read
    files, errors = expand(paths)
    results, lost = run_local(
        files, db=db, jobs=jobs or os.cpu_count() or 1, limit=limit, progress=progress
    )
    return reduce(results, errors, baseline=baseline, workers_lost=lost)


def write_drafts(report: TriageReport, path: str) -> int:
    """Write a draft record per unknown group to ``path`` (JSON Lines, atomically); count."""
    from errkb.atomic import atomic_write_text
    from errkb.maint.extract import write_jsonl

    with atomic_write_text(path) as fh:
        return write_jsonl((draft_record(g) for g in report.unknown), fh)


__all__ = [
    "MAX_LOG_BYTES",
    "Progress",
    "draft_record",
    "expand",
    "iter_results",
    "load_baseline",
    "log_times",
    "read_log",
    "reduce",
    "result_text",
    "triage",
    "triage_log",
    "write_drafts",
]
