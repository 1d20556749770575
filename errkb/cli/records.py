"""Reading the knowledge base: ``explain``, ``match``, ``show``, ``list`` and ``stats``.

Each body opens the knowledge base, makes one library call and hands the report to
:func:`errkb.cli.finish`, which renders it and exits with its exit code (explain and match
follow grep: 0 explained, 1 nothing known found).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from errkb.cli import cli, finish, format_option, open_kb, read_input
from errkb.report import RecordList, RecordView, Report, Stats


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@format_option(Report)
@click.pass_context
def explain(ctx: click.Context, files: Sequence[str], fmt: str) -> None:
    """Find known errors in FILES (or standard input) and explain them.

    Exit 0 when at least one known error was explained, 1 when none was found, 2 on error.
    """
    finish(ctx, open_kb(ctx).explain_files(files or ("-",), read_input), fmt)


@cli.command()
@click.argument("message")
@click.option("--class", "exc_class", metavar="NAME", help="The exception class, if known.")
@format_option(Report)
@click.pass_context
def match(ctx: click.Context, message: str, exc_class: str | None, fmt: str) -> None:
    """Explain a single exception MESSAGE. Exit codes as for explain."""
    finish(ctx, open_kb(ctx).match_message(message, exc_class), fmt)


@cli.command()
@click.argument("key", metavar="ID|SLUG")
@format_option(RecordView)
@click.pass_context
def show(ctx: click.Context, key: str, fmt: str) -> None:
    """Show one record, rendered like an explanation."""
    finish(ctx, open_kb(ctx).view(key), fmt)


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
