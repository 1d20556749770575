"""Counting the knowledge base: ``list`` and ``stats``.

Each body opens the knowledge base, makes one library call and hands the report to
:func:`errkb.cli.finish`. They live apart from ``explain`` (``errkb.cli.records``): registering a
command computes its ``--format`` choices, which imports its report type's renderers, and cold
``explain`` must not pay for those.
"""

from __future__ import annotations

import click

from errkb.cli import cli, finish, format_option, open_kb
from errkb.report.records import RecordList, Stats


@cli.command("list")
@click.option("--repo", metavar="OWNER/NAME", help="Only records of this repository.")
@click.option("--tag", metavar="TAG", help="Only records with this tag.")
@click.option("--class", "error_class", metavar="NAME", help="Only records of this error class.")
@format_option(RecordList)
@click.pass_context
def list_(
    ctx: click.Context, repo: str | None, tag: str | None, error_class: str | None, fmt: str
) -> None:
    """List live records: id, repo, class and slug, one per line."""
    records = open_kb(ctx).records(repo=repo, tag=tag, error_class=error_class)
    finish(ctx, RecordList.of(records), fmt)


@cli.command()
@format_option(Stats)
@click.pass_context
def stats(ctx: click.Context, fmt: str) -> None:
    """Counts of records, repositories and applied versions."""
    finish(ctx, open_kb(ctx).stats(), fmt)
