"""The ``sync``, ``versions``, ``history`` and ``rollback`` commands of the ``errkb`` CLI.

They register themselves on ``errkb.cli.cli`` when this module is imported (``errkb.cli``
imports it when one of them is asked for). Like every command, each body parses options, calls
one ``KnowledgeBase`` method (``sync``, ``versions``, ``history``, ``rollback``), renders the
report and exits with its exit code (:func:`errkb.cli.finish`); library errors propagate as
``ErrkbError`` and the group turns them into a message and exit code 2.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import click

from errkb.cli import cli, finish, format_option, open_kb
from errkb.errors import SyncInterruptedError
from errkb.report.sync import RecordHistory, SyncReport, VersionList
from errkb.sync import Progress, ProgressCallback, Stage, interrupted_message, publish, transport

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar
    from click.decorators import FC


def _limit_option(flag: str, default: int, help: str) -> Callable[[FC], FC]:
    """A sync limit: a positive number with its default.

    Its environment variable is named after the flag: ``--max-repos`` is ``ERRKB_SYNC_MAX_REPOS``.
    """
    return click.option(
        flag,
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        show_envvar=True,
        envvar="ERRKB_SYNC_" + flag.removeprefix("--").replace("-", "_").upper(),
        help=help,
    )


@cli.command("sync")
@click.argument("source", required=False)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="Only compare the current dataset version with the one SOURCE publishes: "
    "exit 0 when current, 1 when a newer version is available, 2 on error.",
)
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
@_limit_option(
    "--max-download-mib",
    publish.DEFAULT_MAX_BYTES >> 20,
    "Size cap of any one downloaded file, and of what the gzip index decompresses to.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=transport.DEFAULT_DEADLINE,
    show_default=True,
    show_envvar=True,
    envvar="ERRKB_SYNC_TIMEOUT",
    help="Give up (nothing changed) after this many seconds in all; each read also times out "
    f"after {transport.DEFAULT_READ_TIMEOUT:g}s without data.",
)
@_limit_option(
    "--max-index-rows",
    publish.DEFAULT_MAX_INDEX_ROWS,
    "Most rows a published index (and the manifest's counts.errors) may list.",
)
@_limit_option(
    "--max-repos",
    publish.DEFAULT_MAX_REPOS,
    "Most repositories an index or repos.json may name.",
)
@_limit_option(
    "--max-repo-file-mib",
    publish.DEFAULT_MAX_REPO_FILE_BYTES >> 20,
    "Most one repository's records file may hold or decompress to.",
)
@_limit_option(
    "--max-repo-file-values",
    publish.DEFAULT_MAX_REPO_FILE_VALUES,
    "Most JSON values one repository's records file may hold.",
)
@_limit_option(
    "--max-row-mib",
    publish.MAX_ROW_BYTES >> 20,
    "Most one index row or repos.json entry may take.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 16),
    default=4,
    show_default=True,
    help="Repository files downloaded at once (one keep-alive connection each).",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="ERRKB_CACHE_DIR",
    help="Where verified downloads wait until applied, so an interrupted sync resumes "
    "(default: the user cache dir; emptied after a successful sync).",
)
@click.option(
    "--cache-max-mib",
    type=click.IntRange(min=0),
    default=4096,
    show_default=True,
    help="Disk budget of the download cache.",
)
@click.option(
    "--allow-redirect-host",
    "redirect_hosts",
    multiple=True,
    metavar="HOST",
    help="Follow redirects to this host (a mirror you trust; repeatable). Redirects to any "
    "other host, and from https to http, are refused.",
)
@click.option("--verbose", "-v", is_flag=True, help="Also list what was fetched and skipped.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary line.")
@format_option(SyncReport)
@click.pass_context
def sync_command(
    ctx: click.Context,
    source: str | None,
    check_only: bool,
    dry_run: bool,
    full: bool | None,
    allow_downgrade: bool,
    skip_invalid: bool,
    reject_report: str | None,
    max_download_mib: int,
    timeout_s: float,
    max_index_rows: int,
    max_repos: int,
    max_repo_file_mib: int,
    max_repo_file_values: int,
    max_row_mib: int,
    jobs: int,
    cache_dir: str | None,
    cache_max_mib: int,
    redirect_hosts: tuple[str, ...],
    verbose: bool,
    quiet: bool,
    fmt: str,
) -> None:
    """Bring the knowledge base to the dataset version SOURCE holds, in one transaction.

    SOURCE is a record file or directory, a published tree (its root, its data/ directory or
    data/manifest.json), or an http(s) URL of one (the site's base URL or the manifest's).
    Without SOURCE: $ERRKB_SOURCE, else ErrLookup's site, https://errors.standardbeagle.com.
    Exit 0 when applied or already current, 1 when --skip-invalid rejected records, 2 on
    error (nothing changed), 130 on Ctrl-C (after the commit: a line says what was applied).
    """
    kb = open_kb(ctx)
    if check_only:
        found = kb.check_for_update(source, deadline=timeout_s, allow_redirect_hosts=redirect_hosts)
        finish(ctx, found, fmt, show=fmt != "text" or not quiet)
    with _progress(enabled=not quiet and sys.stderr.isatty()) as progress:
        report = kb.sync(
            source,
            dry_run=dry_run,
            full=full,
            allow_downgrade=allow_downgrade,
            skip_invalid=skip_invalid,
            reject_report=reject_report,
            progress=progress,
            max_bytes=max_download_mib * 1024 * 1024,
            limits=publish.Limits(
                index_rows=max_index_rows,
                repos=max_repos,
                repo_file_bytes=max_repo_file_mib * 1024 * 1024,
                repo_file_values=max_repo_file_values,
                row_bytes=max_row_mib * 1024 * 1024,
            ),
            deadline=timeout_s,
            workers=jobs,
            cache_dir=cache_dir,
            cache_max_bytes=cache_max_mib * 1024 * 1024,
            allow_redirect_hosts=redirect_hosts,
        )
    shown = fmt != "text" or not quiet
    try:
        finish(ctx, report, fmt, show=shown, diagnostics=report.diagnostics(verbose=verbose))
    except KeyboardInterrupt:
        if not report.changed:
            raise
        raise SyncInterruptedError(interrupted_message(report)) from None


@cli.command("versions")
@format_option(VersionList)
@click.pass_context
def versions_command(ctx: click.Context, fmt: str) -> None:
    """List the applied versions, oldest first (ids are what rollback takes)."""
    finish(ctx, open_kb(ctx).versions(), fmt)


@cli.command("history")
@click.argument("key", metavar="ID|SLUG")
@format_option(RecordHistory)
@click.pass_context
def history_command(ctx: click.Context, key: str, fmt: str) -> None:
    """Show how one record changed across versions, oldest first (JSON has the content)."""
    finish(ctx, open_kb(ctx).history(key), fmt)


@cli.command("rollback")
@click.argument("version")
@format_option(SyncReport)
@click.pass_context
def rollback_command(ctx: click.Context, version: str, fmt: str) -> None:
    """Make the knowledge base what it was right after VERSION (an id or a datasetVersion).

    Recorded as a new version of kind "rollback"; nothing is deleted, so it can be undone.
    """
    finish(ctx, open_kb(ctx).rollback(version), fmt)


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
    """Turns ``Progress`` reports into click progress bars, one per stage.

    The repositories stage shows files done of all, bytes downloaded and an ETA.
    """

    def __init__(self) -> None:
        self._bar: ProgressBar[int] | None = None
        self._stage: Stage | None = None
        self._done = 0
        self._bytes = 0

    def __call__(self, progress: Progress) -> None:
        if progress.stage is not self._stage:
            self.close()
            self._bytes = 0
            self._bar = click.progressbar(
                length=max(progress.total, 1),
                label=progress.stage.value,
                file=sys.stderr,
                show_eta=True,
                show_pos=True,
                item_show_func=self._show,
            )
            self._bar.__enter__()
            self._stage, self._done = progress.stage, 0
        self._bytes = progress.bytes
        if self._bar is not None and progress.done > self._done:
            self._bar.update(progress.done - self._done, progress.done)
            self._done = progress.done

    def _show(self, _item: int | None) -> str | None:
        return _mib(self._bytes) if self._bytes else None

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"
