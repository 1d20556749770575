"""``errkb search``: records by words, message or a whole pasted traceback.

Thin like every command: open the knowledge base, call ``kb.search``, hand the report to
:func:`errkb.cli.finish` (exit 0 when something was found, 1 when nothing was, 2 on error).
"""

from __future__ import annotations

import click

from errkb.cli import cli, finish, format_option, open_kb, read_input
from errkb.search import MAX_LIMIT, SEVERITIES, SearchReport


@cli.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--repo", metavar="OWNER/NAME", help="Only records of this repository.")
@click.option("--tag", metavar="TAG", help="Only records with this tag.")
@click.option("--class", "error_class", metavar="NAME", help="Only records of this error class.")
@click.option("--severity", type=click.Choice(SEVERITIES), help="Only records of this severity.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=10,
    show_default=True,
    help="At most this many records.",
)
@format_option(SearchReport)
@click.pass_context
def search_command(
    ctx: click.Context,
    query: tuple[str, ...],
    repo: str | None,
    tag: str | None,
    error_class: str | None,
    severity: str | None,
    limit: int,
    fmt: str,
) -> None:
    """Find records by QUERY: words, an exception message, or a whole traceback or log.

    QUERY may be several words, quoted or not (``errkb search incompatible scale``); "-" reads
    the query from standard input. Exit 0 when records were found, 1 when none were, 2 on
    error.
    """
    text: str | bytes = read_input("-") if query == ("-",) else " ".join(query)
    report = open_kb(ctx).search(
        text, repo=repo, tag=tag, error_class=error_class, severity=severity, limit=limit
    )
    finish(ctx, report, fmt)
