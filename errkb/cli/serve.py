"""``errkb mcp`` and ``errkb serve``: the knowledge base for assistants and other programs.

Both need the ``errkb[mcp]`` extra (the official MCP SDK, which brings Starlette and uvicorn);
without it they say how to install it and exit 2. Thin like every command: parse options, build
the server from the library, run it.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from errkb.cli import cli, open_kb
from errkb.errors import UsageError
from errkb.serve import Service, require_extra

_ALLOW = click.option(
    "--allow-path",
    "allow_paths",
    multiple=True,
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False),
    help="Let check_checkpoint read checkpoints under DIR (repeatable; default: none).",
)


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


@cli.command("mcp")
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP, not stdio.")
@_ALLOW
@click.pass_context
def mcp_command(ctx: click.Context, http: str | None, allow_paths: Sequence[str]) -> None:
    """Run the MCP server (stdio by default) with errkb's tools for assistants.

    Tools: explain_log, match_message, search_errors, get_error, check_checkpoint,
    dataset_status. Needs the errkb[mcp] extra; exit 2 without it.
    """
    address = _host_port(http) if http else None
    require_extra("mcp")
    from errkb.serve.mcp_tools import run_server

    run_server(Service.create(open_kb(ctx), allow_paths), address)


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@_ALLOW
@click.pass_context
def serve_command(ctx: click.Context, host: str, port: int, allow_paths: Sequence[str]) -> None:
    """Serve the read-only HTTP API (and MCP at /mcp). Needs the errkb[mcp] extra.

    Routes: POST /v1/explain, GET /v1/match, /v1/search, /v1/errors/{id}, /v1/status,
    /healthz, /openapi.json.
    """
    require_extra("serve")
    from errkb.serve.http import run_server

    run_server(Service.create(open_kb(ctx), allow_paths), host, port)
