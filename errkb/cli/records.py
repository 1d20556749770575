"""Reading the knowledge base: ``explain``, ``match`` and ``show``.

``list`` and ``stats`` are in ``errkb.cli.inventory``: cold ``explain`` does not import their
values and renderers.

Each body opens the knowledge base, makes one library call and hands the report to
:func:`errkb.cli.finish`, which renders it and exits with its exit code (explain and match
follow grep: 0 explained, 1 nothing known found).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from errkb.cli import cli, finish, format_option, open_kb, read_input
from errkb.errors import InputError
from errkb.report import RecordView, Report

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="List every match and unmatched entry of a large input (by default a report keeps "
    "at most 200 matches per record and says what it cut).",
)
@format_option(Report)
@click.pass_context
def explain(ctx: click.Context, files: Sequence[str], everything: bool, fmt: str) -> None:
    """Find known errors in FILES (or standard input) and explain them.

    Exit 0 when at least one known error was explained, 1 when none was found, 2 on error.
    With several FILES, one that cannot be read is one line of the report, the others are
    explained, and the exit code is 2.
    """
    sources: dict[str, str] = {}

    def read(name: str) -> bytes:
        data = read_input(name)
        if fmt == "html":  # the page shows the log itself
            sources[name] = data.decode("utf-8", "replace")
        return data

    kb = open_kb(ctx)
    names = tuple(files) or ("-",)
    if len(names) == 1:  # one input: an unreadable one is the command's error (exit 2)
        report = kb.explain_files(names, read, everything=everything)
    else:  # several: each its answer, or its one line when it cannot be read (then exit 2)
        report = Report.of_inputs(
            [(name, _explained(kb, name, read, everything)) for name in names]
        )
    finish(ctx, report, fmt, sources=sources or None, inputs=names)


def _explained(
    kb: KnowledgeBase, name: str, read: Callable[[str], bytes], everything: bool
) -> Report | str:
    """One input's report, or the one line saying why it could not be read."""
    try:
        return kb.explain_files((name,), read, everything=everything)
    except InputError as exc:
        reason = str(exc)
        return reason[len(name) + 2 :] if reason.startswith(f"{name}: ") else reason


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
