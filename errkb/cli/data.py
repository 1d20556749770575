"""Moving records in and out: ``ingest`` and ``export``.

``ingest`` exits with its report's code (0 every record applied, 1 some rejected, listed on
standard error). ``export`` streams JSON Lines; a reader that goes away early (``| head``) ends
it quietly with exit 0.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from errkb.cli import cli, finish, open_kb, out
from errkb.errors import InputError


@cli.command()
# Not exists=True: the library says why a path cannot be read (missing, a symlink loop, a FIFO).
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.pass_context
def ingest(ctx: click.Context, paths: Sequence[str]) -> None:
    """Validate records in PATHS and upsert the valid ones in one transaction.

    Exit 0 when every record was applied, 1 when some were rejected (listed on stderr).
    """
    report = open_kb(ctx).ingest(paths)
    finish(ctx, report, "text", diagnostics=report.diagnostics())


@cli.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="File.")
@click.option("--include-retired", is_flag=True, help="Also export retired records.")
@click.pass_context
def export(ctx: click.Context, output: str | None, include_retired: bool) -> None:
    """Export records as JSON Lines of {"record", "datasetVersion"} envelopes.

    NaN and Infinity in a record's unknown fields are written as null (they are not JSON).
    """
    kb = open_kb(ctx)
    if output is None:
        try:
            kb.export(sys.stdout, include_retired=include_retired)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise InputError(f"cannot write to standard output: {exc.strerror or exc}") from exc
        return
    from errkb.atomic import atomic_write_text

    with atomic_write_text(output) as fh:
        count = kb.export(fh, include_retired=include_retired)
    out(f"exported {count} record(s) to {output}\n", err=True)
