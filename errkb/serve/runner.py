"""Running an ASGI app as a service: ``errkb serve`` and ``errkb mcp --http`` share this.

What uvicorn alone did wrong here (issues 25 and 27): it printed nothing on start; a busy port
exited 3 with its own text; SIGTERM and SIGHUP ended the process by the signal (exit -15/-1,
which systemd and Docker report as a failure) since uvicorn re-raises a captured signal after
its graceful stop; and a connection that sent no request (or sent its headers a byte at a time)
was held open forever, 1,214 of them in one attack. Here:

* the socket is bound before uvicorn starts, so a busy port or a bad address is one line and
  exit 2 (``BindError``);
* once the app's startup has run, one line on stderr says ``errkb: listening on URL`` (tests
  and supervisors wait for it, never for a clock), then an access log line per request unless
  ``quiet``;
* SIGTERM, SIGINT and SIGHUP stop accepting, let in-flight requests finish for up to
  ``graceful_seconds``, and return normally (exit 0);
* ``limit_concurrency`` bounds open connections and requests (past it uvicorn answers 503,
  JSON with ``Retry-After`` like every errkb error), but idle connections never fill it: a
  new connection that would reach it closes the oldest idle ones (``_Protocol``), so only
  requests in progress can make a client wait;
  idle keep-alive connections close after ``keep_alive_seconds``, and a connection whose
  request headers are not complete ``header_seconds`` after it opened (or after its last
  response) is closed.
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

# uvicorn answers past ``limit_concurrency`` with this module-level app, plain text
# "Service Unavailable": errkb's every error is JSON, so its own (with Retry-After) stands in.
# Only the h11 protocol is used (``serve`` passes ``http=``), and only in errkb's server process.
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

    Idle connections are closed, oldest first, when a new one would reach
    ``limit_concurrency``. uvicorn counts every open connection against that limit and answers
    503 once they reach it, idle ones included: 256 connections that never sent a request made
    every client's request a 503 until the header deadline closed them, and again as they were
    re-opened. A connection is idle while no request of it is in progress (its headers not yet
    complete, or between keep-alive requests); closing one loses nothing a client does not
    retry. So open connections stay below the limit while any of them is idle, and only
    requests in progress can fill it.
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
        """Close idle connections but this one, oldest first, until ``most`` are open.

        Or until none is idle. Connections already closing count as gone.
        """
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
        # uvicorn's own re-raises the signal after the graceful stop (the process then dies by
        # it); here the stop is the end: serve returns and errkb exits 0.
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
