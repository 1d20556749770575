"""``errkb triage`` on Dask (extra ``errkb[dask]``): the same per-log work as a Dask bag.

Each partition runs :func:`errkb.triage.pool.triage_batch` in a worker that opens the knowledge
base once (a path every worker reads, or a PostgreSQL URL); the client runs the same
:func:`errkb.triage.reduce`, so the report is byte for byte the local run's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from errkb.errors import UsageError
from errkb.report.triage import LogResult, TriageReport

#: Logs per partition (a task): as the local pool's batches, a little larger to pay the scheduler.
PARTITION_LOGS = 16


def _import_dask() -> None:
    try:
        import dask.bag  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(
            "errkb triage --dask needs the errkb[dask] extra: pip install 'errkb[dask]'"
        ) from None


def _partition(paths: Sequence[str], db: str | None, limit: int) -> list[str]:
    from errkb.triage.pool import triage_batch

    return triage_batch(list(paths), db, limit)


def run_bag(files: Sequence[str], *, db: str | None, limit: int) -> list[LogResult]:
    """Every file's result through a Dask bag on the current client (or Dask's scheduler)."""
    _import_dask()
    import dask.bag as bag

    from errkb.triage.core import iter_results

    if not files:
        return []
    parts = max(1, -(-len(files) // PARTITION_LOGS))
    texts = (
        bag.from_sequence(list(files), npartitions=parts)
        .map_partitions(_partition, db, limit)
        .compute()
    )
    return list(iter_results(texts))


def triage_dask(
    paths: Iterable[str],
    *,
    address: str = "local",
    db: str | os.PathLike[str] | None = None,
    baseline: str | None = None,
    limit: int | None = None,
    workers: int = 2,
) -> TriageReport:
    """Triage on a Dask cluster (``local``, or a scheduler's address), reduced as locally."""
    _import_dask()
    from distributed import Client, LocalCluster

    from errkb.triage.core import MAX_LOG_BYTES, expand, reduce
    from errkb.triage.pool import worker_kb

    files, errors = expand(paths)
    target = os.fspath(db) if db is not None else None
    worker_kb(target)  # a new database is created and seeded once, here, not by each worker
    cap = MAX_LOG_BYTES if limit is None else limit
    if address == "local":
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            results = _on(client, files, target, cap)
    else:
        with Client(address) as client:
            results = _on(client, files, target, cap)
    return reduce(results, errors, baseline=baseline)


def _on(client: object, files: Sequence[str], db: str | None, limit: int) -> list[LogResult]:
    import dask

    with dask.config.set(scheduler=client):
        return run_bag(files, db=db, limit=limit)
