"""``errkb check``: pre-flight checkpoints with the reference validators.

Exit codes follow linters and come from the report: 0 clean, 1 findings, 2 an input could not
be read or checked (the other inputs are still checked).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from errkb.cli import cli, finish, format_option, open_kb
from errkb.report.check import CheckReport


@cli.command()
# Not exists=True: the library says why a path cannot be read (missing, a symlink loop, a FIFO).
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@format_option(CheckReport)
@click.option(
    "--all-layers",
    is_flag=True,
    help="Report every layer's first failure, not only upstream's first.",
)
@click.pass_context
def check(ctx: click.Context, paths: Sequence[str], fmt: str, all_layers: bool) -> None:
    """Pre-flight checkpoints (safetensors files, sharded indexes, model directories).

    Runs the reference validators of the records errkb ships. Exit 0 clean, 1 findings,
    2 a file could not be read or checked.
    """
    finish(ctx, open_kb(ctx).check(paths, all_layers=all_layers), fmt)
