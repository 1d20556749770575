"""Running an ASGI app as a service: ``errkb serve`` and ``errkb mcp --http`` share this.

The socket is bound before uvicorn starts (a busy port: one line, exit 2, ``BindError``); once
started, one stderr line says ``errkb: listening on URL``, then an access line per request
unless ``quiet``; SIGTERM, SIGINT and SIGHUP stop gracefully within ``graceful_seconds`` and
return (exit 0); ``limit_concurrency`` bounds connections (past it a JSON 503 with
``Retry-After``) but idle ones are closed to make room (``_Protocol``); idle keep-alive closes
after ``keep_alive_seconds``, and incomplete headers after ``header_seconds``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import sys
import threading
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http import h11_impl
from uvicorn.protocols.http.h11_impl import H11Protocol

from errkb.errors import UsageError
from errkb.serve.guard import Policy, is_loopback, service_unavailable

# uvicorn's plain-text 503 app past ``limit_concurrency`` is replaced by errkb's JSON one (h11
# only, errkb's server process only).
h11_impl.service_unavailable = service_unavailable  # type: ignore[attr-defined,assignment]

#: The signals that stop the server gracefully.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class BindError(UsageError):
    """The address cannot be bound: the port is busy, out of range, or the host unknown."""


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    quiet: bool = False  #: no access log
    graceful_seconds: int = 10  #: in-flight requests may finish for this long after a signal
    limit_concurrency: int = 256  #: open connections + tasks before uvicorn answers 503
    keep_alive_seconds: int = 5
    header_seconds: float = 10.0  #: a request's headers must be complete within this
    what: str = "errkb serve"


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, or ``BindError`` naming what is wrong."""
    if not 0 <= port <= 65535:
        raise BindError(f"port {port} is out of range (0-65535)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError, OverflowError) as exc:
        raise BindError(f"cannot bind {host!r}: {exc}") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"port {port} on {host} is already in use") from None
        raise BindError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def warnings_for(options: ServeOptions, policy: Policy) -> list[str]:
    """What the operator must hear before anything is served."""
    if is_loopback(options.host) or policy.token is not None:
        return []
    return [
        f"errkb: WARNING: {options.host} is reachable from other machines and no token is "
        "set: anyone who can reach it can use it. Set --token (or ERRKB_SERVE_TOKEN), and put "
        "a reverse proxy with TLS in front (README, Security model)."
    ]


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol: a deadline on headers, idle connections closed to make room.

    When a new connection would reach ``limit_concurrency``, idle ones (no request in progress)
    are closed oldest first, so only requests in progress can fill the limit.
    """

    header_seconds = ServeOptions.header_seconds
    #: When the connection last became idle (opened, or its last response sent).
    idle_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.idle_since = self.loop.time()
        self._arm_header_timer()
        if self.limit_concurrency is not None and len(self.connections) >= self.limit_concurrency:
            self._make_room(self.limit_concurrency - 1)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.idle_since = self.loop.time()
        self._arm_header_timer()

    def _idle(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _make_room(self, most: int) -> None:
        """Close idle connections, oldest first, until ``most`` are open or none is idle."""
        others = [c for c in self.connections if c is not self]
        going = {c for c in others if c.transport.is_closing()}
        for conn in going:
            self.connections.discard(conn)  # its connection_lost discards it again
        idle = sorted(
            (c for c in others if isinstance(c, _Protocol) and c not in going and c._idle()),
            key=lambda c: c.idle_since,
        )
        for conn in idle[: max(0, len(self.connections) - most)]:
            self.connections.discard(conn)
            conn.transport.close()

    def _arm_header_timer(self) -> None:
        self.loop.call_later(self.header_seconds, self._header_deadline, self.cycle)

    def _header_deadline(self, cycle_then: Any) -> None:
        # Still the cycle of when the timer was armed (or none): no new request's headers came.
        if self.cycle is cycle_then and not self.transport.is_closing():
            self.transport.close()


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, url: str) -> None:
        super().__init__(config)
        self._url = url

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # uvicorn's own re-raises the signal after the graceful stop; here serve returns (exit 0).
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only (a server run in a test's thread)
            return
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig: int, _frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for in-flight requests
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.should_exit:
            print(f"errkb: listening on {self._url}", file=sys.stderr, flush=True)


def serve(app: Any, options: ServeOptions, policy: Policy) -> None:
    """Serve ``app`` until SIGTERM/SIGINT/SIGHUP, then stop gracefully and return."""
    sock = bind(options.host, options.port)
    for line in warnings_for(options, policy):
        print(line, file=sys.stderr, flush=True)
    _configure_logging(options.quiet)
    protocol = type("ErrkbH11Protocol", (_Protocol,), {"header_seconds": options.header_seconds})
    config = uvicorn.Config(
        app,
        http=protocol,
        lifespan="on",
        log_config=None,
        access_log=not options.quiet,
        limit_concurrency=options.limit_concurrency,
        timeout_keep_alive=options.keep_alive_seconds,
        timeout_graceful_shutdown=options.graceful_seconds,
        server_header=False,
        h11_max_incomplete_event_size=64 * 1024,
    )
    try:
        _Server(config, url_of(sock)).run(sockets=[sock])
    finally:
        sock.close()


def _configure_logging(quiet: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("errkb: %(message)s"))
    for name, level in (
        ("uvicorn.error", logging.WARNING),
        ("uvicorn.access", logging.WARNING if quiet else logging.INFO),
        ("errkb.serve", logging.INFO),
    ):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
