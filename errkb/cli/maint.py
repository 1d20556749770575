"""Maintainers' commands: ``errkb lint``, ``errkb extract``, ``errkb maint compact``; thin."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from errkb.cli import cli, finish, format_option, open_kb, out
from errkb.maint.extract import DEFAULT_SHA, extract, write_jsonl
from errkb.maint.lint import lint
from errkb.report.lint import LintReport, LintRule


@cli.command("lint")
# Not exists=True: the library says why a path cannot be read (missing, a symlink loop, a FIFO).
@click.argument("sources", nargs=-1, required=True, type=click.Path())
@format_option(LintReport)
@click.option(
    "--ignore",
    multiple=True,
    type=click.Choice([r.value for r in LintRule]),
    help="Do not run this rule (repeatable).",
)
@click.pass_context
def lint_command(
    ctx: click.Context, sources: Sequence[str], fmt: str, ignore: Sequence[str]
) -> None:
    """Check the records in SOURCES before a dataset version goes live.

    One line per finding: path, location, [record id], rule and message. Exit 0 when clean,
    1 when there are findings, 2 on error.
    """
    finish(ctx, lint(sources, ignore=[LintRule(r) for r in ignore]), fmt)


@cli.command("extract")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--repo", required=True, metavar="OWNER/NAME", help="Repository the source is from.")
@click.option(
    "--sha", default=DEFAULT_SHA, show_default="40 zeros", metavar="SHA", help="Commit scanned."
)
@click.option("--root", type=click.Path(file_okay=False), help="Make filePath relative to this.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files/directories.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to FILE (atomically).")
@click.option("--envelope", is_flag=True, help='Write {"record", "datasetVersion"} envelopes.')
def extract_command(
    paths: Sequence[str],
    repo: str,
    sha: str,
    root: str | None,
    exclude: Sequence[str],
    output: str | None,
    envelope: bool,
) -> None:
    """Write draft records for the raise sites in Python PATHS, as JSON Lines.

    Source is parsed, never imported or run. Files that do not parse are skipped with a warning.
    """

    def warn(path: str, reason: str) -> None:
        out(f"warning: skipped {path}: {reason}\n", err=True)

    records = extract(paths, repo=repo, sha=sha, root=root, exclude=exclude, on_skip=warn)
    if output is None:
        count = write_jsonl(records, sys.stdout, envelope=envelope)
    else:
        from errkb.atomic import atomic_write_text

        with atomic_write_text(output) as fh:
            count = write_jsonl(records, fh, envelope=envelope)
    out(f"extracted {count} record(s)" + (f" to {output}" if output else "") + "\n", err=True)


@cli.group("maint")
def maint_group() -> None:
    """Upkeep of a knowledge base's files."""


@maint_group.command("compact")
@click.pass_context
def compact_command(ctx: click.Context) -> None:
    """Compile every record's anchors again, folding in what syncs added since.

    A sync compiles only the records it added or changed, after the anchors it found; past
    10% of the anchors a sync compacts them itself. Exit 0, 2 on error.
    """
    built = open_kb(ctx).compact_anchor_files()
    what = f"{built.records} record(s) compiled" if built.records else "already compact"
    out(f"record anchors: {built.kind.value}, {what}\n")
