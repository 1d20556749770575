"""``errkb search``: records by words, message or a whole pasted traceback.

Thin like every command: parse options, call ``kb.search``, render, exit 0 when something was
found, 1 when nothing was, 2 on error (raised as ``ErrkbError`` and mapped in ``errkb.cli``).
"""

from __future__ import annotations

import click

from errkb.cli import _open_kb, _read_input, cli
from errkb.render.search import SearchFormat, render_search
from errkb.search import MAX_LIMIT


@cli.command("search")
@click.argument("query")
@click.option("--repo", metavar="OWNER/NAME", help="Only records of this repository.")
@click.option("--tag", metavar="TAG", help="Only records with this tag.")
@click.option("--class", "error_class", metavar="NAME", help="Only records of this error class.")
@click.option("--severity", metavar="LEVEL", help="Only records of this severity.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=10,
    show_default=True,
    help="At most this many records.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([f.value for f in SearchFormat]),
    default=SearchFormat.TEXT.value,
    show_default=True,
    help="Output format.",
)
@click.pass_context
def search_command(
    ctx: click.Context,
    query: str,
    repo: str | None,
    tag: str | None,
    error_class: str | None,
    severity: str | None,
    limit: int,
    fmt: str,
) -> None:
    """Find records by QUERY: words, an exception message, or a whole traceback or log.

    QUERY "-" reads the query from standard input. Exit 0 when records were found, 1 when none
    were, 2 on error.
    """
    text: str | bytes = _read_input("-") if query == "-" else query
    report = _open_kb(ctx).search(
        text, repo=repo, tag=tag, error_class=error_class, severity=severity, limit=limit
    )
    click.echo(render_search(report, SearchFormat(fmt)), nl=False)
    ctx.exit(0 if report.found else 1)
