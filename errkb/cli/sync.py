"""The ``sync``, ``versions``, ``history`` and ``rollback`` commands of the ``errkb`` CLI.

They register themselves on ``errkb.cli.cli`` when this module is imported (``errkb.cli``
imports it once ``cli`` exists). Like every command, each body parses options, calls one library
function (``errkb.sync``, ``errkb.sync.history``) and renders; library errors propagate as
``ErrkbError`` and ``errkb.cli.main`` turns them into a message and exit code 2.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from errkb.cli import _open_kb, cli
from errkb.sync import Progress, ProgressCallback, Stage, history, sync

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

#: Problems listed on standard error; the reject report has them all.
_MAX_SHOWN = 20

_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)


@cli.command("sync")
@click.argument("source")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--full/--partial",
    "full",
    default=None,
    help="Retire records SOURCE does not list (default: --full for a published tree, "
    "--partial for record files).",
)
@click.option("--allow-downgrade", is_flag=True, help="Accept an older dataset version.")
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Apply the valid records and write the invalid ones to --reject-report "
    "(the version is marked partial).",
)
@click.option(
    "--reject-report",
    type=click.Path(dir_okay=False, writable=True),
    help="JSON Lines file for --skip-invalid's rejects (default: <db>.rejects.jsonl).",
)
@click.option(
    "--max-download-mib",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Size cap of any one downloaded file.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary line.")
@_format_option
@click.pass_context
def sync_command(
    ctx: click.Context,
    source: str,
    dry_run: bool,
    full: bool | None,
    allow_downgrade: bool,
    skip_invalid: bool,
    reject_report: str | None,
    max_download_mib: int,
    quiet: bool,
    fmt: str,
) -> None:
    """Bring the knowledge base to the dataset version SOURCE holds, in one transaction.

    SOURCE is a record file or directory, a published tree (its root, its data/ directory or
    data/manifest.json), or an http(s) URL of one (the site's base URL or the manifest's).
    Exit 0 when applied or already current, 1 when --skip-invalid rejected records, 2 on
    error (nothing changed).
    """
    kb = _open_kb(ctx)
    with _progress(enabled=not quiet and sys.stderr.isatty()) as progress:
        report = sync(
            kb,
            source,
            dry_run=dry_run,
            full=full,
            allow_downgrade=allow_downgrade,
            skip_invalid=skip_invalid,
            reject_report=reject_report,
            progress=progress,
            max_bytes=max_download_mib * 1024 * 1024,
        )
    for problem in report.problems[:_MAX_SHOWN]:
        click.echo(f"rejected: {problem}", err=True)
    if len(report.problems) > _MAX_SHOWN:
        click.echo(f"... and {len(report.problems) - _MAX_SHOWN} more", err=True)
    if report.reject_report:
        click.echo(f"rejected records written to {report.reject_report}", err=True)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif not quiet:
        click.echo(report.summary())
    ctx.exit(1 if report.counts.rejected else 0)


@cli.command("versions")
@_format_option
@click.pass_context
def versions_command(ctx: click.Context, fmt: str) -> None:
    """List the applied versions, oldest first (ids are what rollback takes)."""
    rows = history.versions(_open_kb(ctx))
    if fmt == "json":
        click.echo(json.dumps([v.to_dict() for v in rows], indent=2))
        return
    click.echo(
        f"{'id':>4}  {'kind':<8}  {'datasetVersion':<24}  {'added':>7} {'updated':>7} "
        f"{'unchanged':>9} {'retired':>7} {'rejected':>8}  applied"
    )
    for v in rows:
        c = v.counts
        notes = " partial" if v.partial else ""
        notes += f" (restores {v.restores})" if v.restores is not None else ""
        click.echo(
            f"{v.id:>4}  {v.kind.value:<8}  {v.dataset_version or '-':<24}  {c.added:>7} "
            f"{c.updated:>7} {c.unchanged:>9} {c.retired:>7} {c.rejected:>8}  "
            f"{v.finished_at}{notes}"
        )


@cli.command("history")
@click.argument("key", metavar="ID|SLUG")
@_format_option
@click.pass_context
def history_command(ctx: click.Context, key: str, fmt: str) -> None:
    """Show how one record changed across versions, oldest first (JSON has the content)."""
    entries = history.record_history(_open_kb(ctx), key)
    if fmt == "json":
        click.echo(json.dumps([e.to_dict() for e in entries], indent=2, ensure_ascii=False))
        return
    for e in entries:
        digest = e.content_hash[:12]  # the stored content_hash's function, not a look-alike
        state = "retired" if e.retired else "live"
        click.echo(
            f"version {e.version_id:>4}  {e.kind.value:<8}  {e.dataset_version or '-':<24}  "
            f"{e.change.value:<8}  {state:<7}  content {digest}"
        )


@cli.command("rollback")
@click.argument("version")
@_format_option
@click.pass_context
def rollback_command(ctx: click.Context, version: str, fmt: str) -> None:
    """Make the knowledge base what it was right after VERSION (an id or a datasetVersion).

    Recorded as a new version of kind "rollback"; nothing is deleted, so it can be undone.
    """
    kb = _open_kb(ctx)
    report = history.rollback(kb, history.resolve_version(kb, version))
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(f"{report.source}: {report.summary()}")


@contextlib.contextmanager
def _progress(*, enabled: bool) -> Iterator[ProgressCallback | None]:
    """Yield a callback drawing one click progress bar per stage on stderr, or None."""
    if not enabled:
        yield None
        return
    bars = _StageBars()
    try:
        yield bars
    finally:
        bars.close()


class _StageBars:
    """Turns ``Progress`` reports into click progress bars, one per stage."""

    def __init__(self) -> None:
        self._bar: ProgressBar[int] | None = None
        self._stage: Stage | None = None
        self._done = 0

    def __call__(self, progress: Progress) -> None:
        if progress.stage is not self._stage:
            self.close()
            self._bar = click.progressbar(
                length=max(progress.total, 1), label=progress.stage.value, file=sys.stderr
            )
            self._bar.__enter__()
            self._stage, self._done = progress.stage, 0
        if self._bar is not None and progress.done > self._done:
            self._bar.update(progress.done - self._done)
            self._done = progress.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
