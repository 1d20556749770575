"""``errkb mcp`` and ``errkb serve``: the knowledge base for assistants and other programs.

Both need ``errkb[mcp]`` (exit 2 without it). Over HTTP, explain/match/search run in worker
processes a deadline can stop, behind the guard, served by ``errkb.serve.runner``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from errkb.cli import cli, open_kb
from errkb.errors import UsageError
from errkb.serve import Service, require_extra

_F = TypeVar("_F", bound=Callable[..., Any])

_ALLOW = click.option(
    "--allow-path",
    "allow_paths",
    multiple=True,
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False),
    help="Let check_checkpoint read checkpoints under DIR (repeatable; default: none).",
)


def _http_options(command: _F) -> _F:
    """The options every HTTP server of errkb takes."""
    for option in reversed(
        [
            click.option(
                "--token",
                envvar="ERRKB_SERVE_TOKEN",
                metavar="TOKEN",
                help="Require Authorization: Bearer TOKEN on every route but /healthz "
                "(default: $ERRKB_SERVE_TOKEN; set it for any non-loopback bind).",
            ),
            click.option(
                "--allow-host",
                "allow_hosts",
                multiple=True,
                metavar="NAME",
                help="Also accept requests whose Host header names NAME (repeatable; "
                "'*' accepts any, behind a proxy that checks it). Loopback names always.",
            ),
            click.option(
                "--allow-origin",
                "allow_origins",
                multiple=True,
                metavar="ORIGIN",
                help="Also accept browser requests from ORIGIN, e.g. https://bot.example "
                "(repeatable). Other cross-origin requests are refused.",
            ),
            click.option(
                "--workers",
                type=click.IntRange(1, 64),
                default=2,
                show_default=True,
                help="Worker processes for explain, match and search (concurrent explains).",
            ),
            click.option(
                "--request-timeout",
                type=click.FloatRange(0.1, 3600),
                default=10.0,
                show_default=True,
                metavar="SECONDS",
                help="Stop a request's work after SECONDS (504).",
            ),
            click.option("--quiet", is_flag=True, help="No access log."),
        ]
    ):
        command = option(command)
    return command


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def _run_http(
    ctx: click.Context,
    what: str,
    host: str,
    port: int,
    allow_paths: Sequence[str],
    settings: dict[str, Any],
) -> None:
    from errkb.serve.guard import Policy
    from errkb.serve.runner import ServeOptions, bind
    from errkb.serve.workers import WorkerPool

    bind(host, port).close()  # a busy port fails now, in one line, before workers start
    options = ServeOptions(host=host, port=port, quiet=settings["quiet"], what=what)
    policy = Policy.for_bind(
        host,
        allow_hosts=settings["allow_hosts"],
        allow_origins=settings["allow_origins"],
        token=settings["token"],
    )
    kb = open_kb(ctx)
    pool = WorkerPool(ctx.obj["db"], size=settings["workers"], seconds=settings["request_timeout"])
    with pool:
        service = Service.create(kb, allow_paths, pool)
        if what == "mcp":
            from errkb.serve.mcp_tools import run_server as run_mcp

            run_mcp(service, options, policy)
        else:
            from errkb.serve.http import run_server

            run_server(service, options, policy)


@cli.command("mcp")
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP, not stdio.")
@_ALLOW
@_http_options
@click.pass_context
def mcp_command(
    ctx: click.Context, /, http: str | None, allow_paths: Sequence[str], **settings: Any
) -> None:
    """Run the MCP server (stdio by default) with errkb's tools for assistants.

    Tools: explain_log, match_message, search_errors (alias search_error), get_error,
    check_checkpoint, dataset_status; resources errkb://records/{id} and errkb://status.
    Over stdio as over HTTP, a call past --request-timeout is stopped (a tool error).
    Needs the errkb[mcp] extra; exit 2 without it.
    """
    address = _host_port(http) if http else None
    require_extra("mcp")
    if address is not None:
        _run_http(ctx, "mcp", *address, allow_paths, settings)
        return
    from errkb.serve.mcp_tools import run_server
    from errkb.serve.workers import WorkerPool

    # Over stdio too, explain/match/search run in worker processes the deadline stops.
    kb = open_kb(ctx)
    with WorkerPool(
        ctx.obj["db"], size=settings["workers"], seconds=settings["request_timeout"]
    ) as pool:
        run_server(Service.create(kb, allow_paths, pool), None)


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@_ALLOW
@_http_options
@click.pass_context
def serve_command(
    ctx: click.Context, /, host: str, port: int, allow_paths: Sequence[str], **settings: Any
) -> None:
    """Serve the read-only HTTP API (and MCP at /mcp). Needs the errkb[mcp] extra.

    Routes: POST /v1/explain, GET /v1/match, /v1/search, /v1/errors/{id}, /v1/status,
    /healthz, /openapi.json. Prints "listening on URL" on stderr once ready; SIGTERM, SIGINT
    or SIGHUP stop it gracefully (exit 0).
    """
    require_extra("serve")
    _run_http(ctx, "serve", host, port, allow_paths, settings)
