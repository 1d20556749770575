"""``errkb triage PATH...``: many logs at once (files, directories, globs; .gz/.bz2/.xz too).

Exit 0 when every log was read and nothing unknown was found, 1 when unknown errors were found
(or, with ``--baseline``, known errors new since then), 3 when some logs could not be read
(each is one line in the report's errors; the rest were triaged), 2 on a bad option or an
unusable knowledge base.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

import click

from errkb.cli import cli, finish, format_option, out
from errkb.report.triage import TriageReport


def _progress(started: float):  # type: ignore[no-untyped-def]
    def show(done: int, total: int, nbytes: int) -> None:
        elapsed = max(time.monotonic() - started, 1e-6)
        rate = nbytes / elapsed / 1e6
        eta = (total - done) * elapsed / done if done else 0.0
        end = "\n" if done == total else ""
        out(f"\r  {done}/{total} logs  {rate:.1f} MB/s  ETA {eta:.0f} s  {end}", err=True)

    return show


@cli.command()
# Not exists=True: a path that names nothing is one line of the report's errors, not a usage error.
@click.argument("paths", nargs=-1, required=True)
@format_option(TriageReport)
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes [default: CPUs].")
@click.option("--baseline", type=click.Path(dir_okay=False), help="A previous --format json run.")
@click.option(
    "--dask",
    "dask_address",
    metavar="local|tcp://HOST:PORT",
    help="Run on Dask: a local cluster, or a scheduler's address (extra errkb[dask]).",
)
@click.option("--drafts", type=click.Path(dir_okay=False), help="Write draft records here.")
@click.option("--max-log-mib", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress on standard error.")
@click.pass_context
def triage(
    ctx: click.Context,
    paths: Sequence[str],
    fmt: str,
    jobs: int | None,
    baseline: str | None,
    dask_address: str | None,
    drafts: str | None,
    max_log_mib: int,
    quiet: bool,
) -> None:
    """Triage many logs: known errors counted, unknown ones grouped into templates.

    Exit 0 nothing unknown, 1 unknown (or new) errors found, 3 some logs unreadable, 2 error.
    """
    from errkb import triage as lib

    show = not quiet and sys.stderr is not None and sys.stderr.isatty()
    progress = _progress(time.monotonic()) if show else None
    limit = max_log_mib << 20
    if dask_address is not None:
        from errkb.triage.dask import triage_dask

        report = triage_dask(
            paths, address=dask_address, db=ctx.obj["db"], baseline=baseline, limit=limit
        )
    else:
        report = lib.triage(
            paths, db=ctx.obj["db"], jobs=jobs, baseline=baseline, limit=limit, progress=progress
        )
    if drafts is not None:
        count = lib.write_drafts(report, drafts)
        out(f"wrote {count} draft record(s) to {drafts}\n", err=True)
    finish(ctx, report, fmt)
