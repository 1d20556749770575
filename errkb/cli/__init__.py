"""The ``errkb`` command line: parse options, call one library function, render.

Every command body stays small; the work happens in the library (``errkb``). Errors are turned
into a message and an exit code in one place, ``main``: ``ErrkbError`` subclasses carry their
exit code (2 = error), and each command's own results pick 0 or 1 as documented in the README
(explain: 0 explained, 1 nothing known found; check and lint: 0 clean, 1 findings).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn, TypeVar

import click

import errkb
from errkb.errors import ErrkbError
from errkb.render.explain import OutputFormat, render_record, render_report

_F = TypeVar("_F", bound=Callable[..., Any])

#: Input larger than this is refused rather than read: errkb answers within bounded memory.
MAX_INPUT_BYTES = 1 << 30


def _color(stream: IO[str]) -> bool:
    return "NO_COLOR" not in os.environ and stream.isatty()


def _open_kb(ctx: click.Context) -> errkb.KnowledgeBase:
    db: str | None = ctx.obj["db"]
    kb = errkb.open(db)
    ctx.call_on_close(kb.close)
    return kb


def _format_option(*choices: str) -> Callable[[_F], _F]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices or [f.value for f in OutputFormat]),
        default="text",
        show_default=True,
        help="Output format.",
    )


class _Failure(click.ClickException):
    """An ErrkbError on its way out: its message on stderr, its exit code."""

    def __init__(self, error: ErrkbError) -> None:
        super().__init__(str(error))
        # click declares exit_code a ClassVar; each ErrkbError carries its own code.
        self.exit_code = error.exit_code  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"errkb: error: {self.message}", err=True)


#: Commands defined in their own modules (they register on ``cli`` when imported). They are
#: imported only when asked for, so ``errkb explain`` never pays for the ORM or the downloader.
_COMMAND_MODULES = {
    "lint": "errkb.cli.maint",
    "extract": "errkb.cli.maint",
    "sync": "errkb.cli.sync",
    "versions": "errkb.cli.sync",
    "history": "errkb.cli.sync",
    "rollback": "errkb.cli.sync",
}


class _Group(click.Group):
    """Lazy command modules, and the one place where library errors become exit codes."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _COMMAND_MODULES:
            importlib.import_module(_COMMAND_MODULES[cmd_name])
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in sorted(set(_COMMAND_MODULES.values())):
            importlib.import_module(module)
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ErrkbError as exc:
            raise _Failure(exc) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(errkb.__version__, prog_name="errkb")
@click.option(
    "--db",
    envvar="ERRKB_DB",
    metavar="PATH",
    help="Knowledge-base database: a file path or sqlite:/// URL (default: the user data dir).",
)
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """Explain Python errors in logs from the ErrLookup error-knowledge dataset."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@_format_option()
@click.pass_context
def explain(ctx: click.Context, files: Sequence[str], fmt: str) -> None:
    """Find known errors in FILES (or standard input) and explain them.

    Exit 0 when at least one known error was explained, 1 when none was found, 2 on error.
    """
    kb = _open_kb(ctx)
    names = files or ("-",)
    if len(names) == 1:
        report = kb.explain(_read_input(names[0]))
    else:  # each file keeps its own line numbers
        report = errkb.Report.merge([(name, kb.explain(_read_input(name))) for name in names])
    click.echo(render_report(report, OutputFormat(fmt), color=_color(sys.stdout)), nl=False)
    ctx.exit(0 if report.explained else 1)


@cli.command()
@click.argument("message")
@click.option("--class", "exc_class", metavar="NAME", help="The exception class, if known.")
@_format_option()
@click.pass_context
def match(ctx: click.Context, message: str, exc_class: str | None, fmt: str) -> None:
    """Explain a single exception MESSAGE. Exit codes as for explain."""
    report = _open_kb(ctx).match_message(message, exc_class)
    click.echo(render_report(report, OutputFormat(fmt), color=_color(sys.stdout)), nl=False)
    ctx.exit(0 if report.explained else 1)


@cli.command()
@click.argument("key", metavar="ID|SLUG")
@_format_option()
@click.pass_context
def show(ctx: click.Context, key: str, fmt: str) -> None:
    """Show one record, rendered like an explanation."""
    from errkb.validators import validator_for

    kb = _open_kb(ctx)
    record = kb.get(key)
    text = render_record(
        record.to_json(),
        OutputFormat(fmt),
        color=_color(sys.stdout),
        validated=validator_for(record.id) is not None,
        retired=kb.is_retired(record.id),
    )
    click.echo(text, nl=False)


@cli.command("list")
@click.option("--repo", metavar="OWNER/NAME", help="Only records of this repository.")
@click.option("--tag", metavar="TAG", help="Only records with this tag.")
@click.option("--class", "error_class", metavar="NAME", help="Only records of this error class.")
@click.pass_context
def list_(ctx: click.Context, repo: str | None, tag: str | None, error_class: str | None) -> None:
    """List live records: id, repo, class and slug, one per line."""
    for r in _open_kb(ctx).records(repo=repo, tag=tag, error_class=error_class):
        click.echo(f"{r.id}  {r.repo}  {r.error_class or '-'}  {r.slug}")


@cli.command()
@_format_option("text", "json")
@click.pass_context
def stats(ctx: click.Context, fmt: str) -> None:
    """Counts of records, repositories and applied versions."""
    s = _open_kb(ctx).stats()
    if fmt == "json":
        import json

        click.echo(json.dumps(s.to_dict(), indent=2))
        return
    click.echo(f"database:        {s.path}")
    click.echo(f"dataset version: {s.dataset_version or '-'}")
    click.echo(f"records:         {s.records} live, {s.retired} retired, {s.repos} repositories")
    click.echo(f"versions:        {s.versions} applied")
    for cls, n in s.by_class:
        click.echo(f"  {n:>7}  {cls}")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.pass_context
def ingest(ctx: click.Context, paths: Sequence[str]) -> None:
    """Validate records in PATHS and upsert the valid ones in one transaction.

    Exit 0 when every record was applied, 1 when some were rejected (listed on stderr).
    """
    report = _open_kb(ctx).ingest(paths)
    for problem in report.problems:
        click.echo(f"rejected: {problem}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    c = report.counts
    click.echo(
        f"added {c.added}, updated {c.updated}, unchanged {c.unchanged}, rejected {c.rejected}"
    )
    ctx.exit(1 if c.rejected else 0)


@cli.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="File.")
@click.option("--include-retired", is_flag=True, help="Also export retired records.")
@click.pass_context
def export(ctx: click.Context, output: str | None, include_retired: bool) -> None:
    """Export records as JSON Lines of {"record", "datasetVersion"} envelopes."""
    kb = _open_kb(ctx)
    if output is None:
        kb.export(sys.stdout, include_retired=include_retired)
        return
    from errkb.atomic import atomic_write_text

    with atomic_write_text(output) as fh:
        count = kb.export(fh, include_retired=include_retired)
    click.echo(f"exported {count} record(s) to {output}", err=True)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@_format_option("text", "json", "sarif", "github")
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
    from errkb.render.check import render

    report = errkb.check(paths, all_layers=all_layers)
    kb = _open_kb(ctx)
    click.echo(render(report, fmt, kb.store.raw_record), nl=False)
    ctx.exit(report.exit_code)


def _read_input(name: str) -> bytes:
    """Read one input (``-`` = standard input) as bytes; decoding happens in the library."""
    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(name, "rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise errkb.InputError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_INPUT_BYTES:
        raise errkb.InputError(f"{name}: input larger than {MAX_INPUT_BYTES} bytes")
    return data


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the ``errkb`` script."""
    try:
        cli.main(args=argv, prog_name="errkb")
    except BrokenPipeError:
        # `errkb explain log | head`: the reader went away; that is not an error of ours.
        sys.stderr.close()
        sys.exit(0)
    sys.exit(0)  # pragma: no cover - click's main always exits
