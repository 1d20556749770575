"""The ``errkb`` command line: the group, the one error translation, and shared options.

Each command family is a module (:data:`COMMAND_MODULES`) imported only when one of its
commands runs. A command opens the knowledge base, makes one library call, renders the report
and exits with its ``exit_code`` (:func:`finish`). Everything else is one line on stderr and
exit 2, only in ``_Group.invoke`` (``--debug`` / ``ERRKB_DEBUG=1`` for a traceback); Ctrl-C
exits 130 and a closed stdout pipe 0, quietly.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import click

from errkb import __version__, inputs
from errkb.errors import ErrkbError, InputError
from errkb.render import OutputFormat, RenderOptions, formats, render, sanitize_text

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase
    from errkb.report.diagnostics import Diagnostics

_F = TypeVar("_F", bound=Callable[..., Any])

#: Input larger than this is refused rather than read: errkb answers within bounded memory.
MAX_INPUT_BYTES = inputs.MAX_INPUT_BYTES

#: Each command family's module and the commands it registers on :data:`cli` when imported.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "errkb.cli.records": ("explain", "match", "show"),
    "errkb.cli.inventory": ("list", "stats"),
    "errkb.cli.data": ("ingest", "export"),
    "errkb.cli.check": ("check",),
    "errkb.cli.sync": ("sync", "versions", "history", "rollback"),
    "errkb.cli.maint": ("lint", "extract", "maint"),
    "errkb.cli.search": ("search",),
    "errkb.cli.serve": ("mcp", "serve"),
    "errkb.cli.triage": ("triage",),
}

_DEBUG_HINT = "rerun with --debug or ERRKB_DEBUG=1 for the traceback"


class Result(Protocol):
    """What every library call of a command returns: a report that knows its exit code."""

    @property
    def exit_code(self) -> int: ...


class _Exit(click.ClickException):
    """Leaving with ``exit_code`` and at most one line on standard error."""

    def __init__(self, message: str | None, exit_code: int) -> None:
        super().__init__(message or "")
        self.quiet = message is None
        # click declares exit_code a ClassVar; ours varies with the error.
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        if not self.quiet:
            click.echo(f"errkb: error: {sanitize_text(self.message)}", err=True)


def _debug(ctx: click.Context) -> bool:
    env = os.environ.get("ERRKB_DEBUG", "")
    return env not in ("", "0") or bool((ctx.obj or {}).get("debug"))


def _silence_stdout() -> None:
    """After a closed pipe: point standard output at /dev/null so the final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass  # not a real file (a test runner's buffer): nothing will be flushed to a pipe


#: Set by :func:`main` on the process's own command line: only then is the collector tuned.
_own_process = False


@contextlib.contextmanager
def _long_lived() -> Iterator[None]:
    """Make objects that live until the process exits: imported modules, the open store.

    In the command's own process, the collector is held off meanwhile and what was made frozen.
    """
    if not _own_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


class _Group(click.Group):
    """Lazy command modules, and the one place where errors become a line and exit code 2."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            for module, names in COMMAND_MODULES.items():
                if cmd_name in names:
                    with _long_lived():
                        importlib.import_module(module)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = {name for names in COMMAND_MODULES.values() for name in names}
        return sorted(names | set(self.commands))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own: usage errors exit 2, ctx.exit() keeps its code
        except ErrkbError as exc:
            raise _Exit(str(exc), exc.exit_code) from exc
        except KeyboardInterrupt:
            raise _Exit(None, 130) from None
        except BrokenPipeError:
            _silence_stdout()
            raise _Exit(None, 0) from None
        except Exception as exc:
            if _debug(ctx):
                import traceback  # only here: cold start does not pay for it

                traceback.print_exc()
            first = (str(exc).splitlines() or [""])[0]
            what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
            raise _Exit(f"unexpected {what} ({_DEBUG_HINT})", 2) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="errkb")
@click.option(
    "--db",
    envvar="ERRKB_DB",
    metavar="PATH",
    help=(
        "Knowledge-base database: a file path, a sqlite:/// URL, or a PostgreSQL URL "
        "(postgresql+psycopg://USER@HOST/DB; default: a file in the user data dir)."
    ),
)
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error.")
@click.pass_context
def cli(ctx: click.Context, db: str | None, debug: bool) -> None:
    """Explain Python errors in logs from the ErrLookup error-knowledge dataset."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    ctx.obj["debug"] = debug


def open_kb(ctx: click.Context) -> KnowledgeBase:
    """Open the knowledge base ``--db`` names (closed when the command ends)."""
    with _long_lived():  # the library's rooms and the open store live as long as the command
        from errkb.kb import open_kb as open_

        kb = open_(ctx.obj["db"])
    ctx.call_on_close(kb.close)
    return kb


def format_option(report_type: type[Any]) -> Callable[[_F], _F]:
    """``--format``, offering exactly the formats registered for ``report_type``."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice([f.value for f in formats(report_type)]),
        default=OutputFormat.TEXT.value,
        show_default=True,
        help="Output format.",
    )


def use_color(stream: IO[str] | None) -> bool:
    """Colour only on a terminal, not with ``TERM=dumb``, and not when ``NO_COLOR`` is non-empty."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream is not None and stream.isatty()


def out(text: str, *, err: bool = False) -> None:
    """Write ``text`` to standard output (or error); a full disk is an error, not a traceback."""
    if not text:
        return
    try:
        click.echo(text, nl=False, err=err)
    except BrokenPipeError:
        raise
    except OSError as exc:
        stream = "standard error" if err else "standard output"
        if not err:
            # What the failed write left in the buffer would fail again at the exit's flush
            # and print this error a second time (with a buffered stdout, a user's default).
            _silence_stdout()
        raise InputError(f"cannot write to {stream}: {exc.strerror or exc}") from exc


def finish(
    ctx: click.Context,
    report: Result,
    fmt: str,
    *,
    show: bool = True,
    diagnostics: Diagnostics | None = None,
    sources: Mapping[str, str] | None = None,
    inputs: tuple[str, ...] = (),
) -> NoReturn:
    """Render ``report`` in ``fmt`` and exit with its exit code (diagnostics: stderr, first)."""
    if diagnostics is not None:
        out(render(diagnostics, OutputFormat.TEXT), err=True)
    if show:
        options = RenderOptions(color=use_color(sys.stdout), sources=sources, inputs=inputs)
        out(render(report, fmt, options))
    ctx.exit(report.exit_code)


def read_input(name: str) -> bytes:
    """Read one input (``-`` = standard input) as bytes, decompressed; decoding is the library's."""
    if name == "-" and sys.stdin is None:
        raise InputError("standard input is closed")
    stdin = sys.stdin.buffer if name == "-" else None
    data = inputs.read_input(name, stdin, MAX_INPUT_BYTES)
    return inputs.decompress_input(data, name, MAX_INPUT_BYTES)  # .gz, .bz2, .xz: by content


def _flush_stdout(code: int) -> int:
    """Flush standard output now, while a failure can still be reported (not at shutdown)."""
    if sys.stdout is None:
        return code
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return code
    except OSError as exc:
        _silence_stdout()
        if sys.stderr is not None:
            print(f"errkb: error: cannot write to standard output: {exc.strerror}", file=sys.stderr)
        return 2
    return code


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of the ``errkb`` script."""
    if argv is None:  # the process's own command line: the process is the command's
        global _own_process
        _own_process = True
        gc.freeze()  # what is imported so far lives until exit (see _long_lived)
    if sys.stdout is None:  # started with standard output closed (``errkb ... >&-``)
        if sys.stderr is not None:
            print("errkb: error: standard output is closed", file=sys.stderr)
        sys.exit(2)
    code: int
    try:
        cli.main(args=argv, prog_name="errkb")
        code = 0  # pragma: no cover - click's main always exits
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    except KeyboardInterrupt:  # between click's parsing and the command (rare)
        code = 130
    except BrokenPipeError:
        code = 0
    sys.exit(_flush_stdout(code))


__all__ = [
    "COMMAND_MODULES",
    "MAX_INPUT_BYTES",
    "cli",
    "finish",
    "format_option",
    "main",
    "open_kb",
    "out",
    "read_input",
    "use_color",
]
