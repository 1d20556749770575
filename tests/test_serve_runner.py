"""``errkb.serve.runner`` under idle connections (issue 50, row 16), on real sockets.

Every server here listens on 127.0.0.1 only; every loop is bounded by a count, and every read by
a socket timeout. An idle connection (one that sends no request, or nothing after its last
response) must never make a request wait: uvicorn counted them against ``limit_concurrency`` and
answered 503 to every client until the header deadline closed them.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import errkb_listening, free_port, require_extra


def _connect(port: int, attempts: int = 600) -> socket.socket:
    for _ in range(attempts):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            threading.Event().wait(0.05)  # the server is not accepting yet
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def _status(port: int, path: str = "/healthz") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _closed_by_the_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""  # within the socket's timeout (30 s)
    except OSError:
        return True


@pytest.fixture
def small_server() -> Iterator[int]:
    """A server of ``limit_concurrency`` 8 in a daemon thread, as ``errkb serve`` runs one."""
    require_extra("uvicorn")
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from errkb.serve.guard import Policy
    from errkb.serve.runner import ServeOptions, serve

    app = Starlette(routes=[Route("/healthz", lambda _request: PlainTextResponse("ok"))])
    port = free_port()
    options = ServeOptions(port=port, quiet=True, limit_concurrency=8, graceful_seconds=1)
    threading.Thread(
        target=serve, args=(app, options, Policy.for_bind("127.0.0.1")), daemon=True
    ).start()
    _connect(port).close()
    yield port


def test_idle_connections_at_the_limit_never_starve_a_request(small_server: int) -> None:
    port = small_server
    # As many silent connections as the limit (each accepted before the next is opened).
    idle = []
    for _ in range(8):
        idle.append(_connect(port))
        idle[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: 127")  # headers never completed
    for _ in range(3):  # the attack re-opens what the server closes
        assert _status(port) == 200  # was 503 until the header deadline closed them (10 s)
        assert _closed_by_the_server(idle[0])  # the oldest idle one made room
        idle.pop(0).close()
        idle.append(_connect(port))
    for sock in idle:
        sock.close()


def test_an_idle_keep_alive_connection_is_closed_before_a_new_one_waits(small_server: int) -> None:
    port = small_server
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    kept.request("GET", "/healthz")
    assert kept.getresponse().read() == b"ok"  # then idle, kept alive
    silent = [_connect(port) for _ in range(7)]
    assert _status(port) == 200
    assert kept.sock is not None and _closed_by_the_server(kept.sock)  # idle the longest
    kept.close()
    for sock in silent:
        sock.close()


@pytest.mark.slow
def test_errkb_serve_answers_every_client_under_256_idle_connections_reopened(
    seeded_db: Path,
) -> None:
    """The row's attack on ``errkb serve`` itself: 256 idle connections (its limit), each
    re-opened as soon as the server closes it, while a client asks 20 times."""
    require_extra("mcp")
    import os
    import selectors

    port = free_port()
    env = {**os.environ, "ERRKB_DB": str(seeded_db)}
    with errkb_listening(port, "serve", "--port", str(port), "--quiet", env=env):
        idle = {_connect(port) for _ in range(256)}
        selector = selectors.DefaultSelector()
        for sock in idle:
            selector.register(sock, selectors.EVENT_READ)
        statuses = []
        for _ in range(20):
            statuses.append(_status(port))
            for key, _events in selector.select(timeout=0):
                closed = key.fileobj
                assert isinstance(closed, socket.socket)
                selector.unregister(closed)
                closed.close()
                fresh = _connect(port)
                selector.register(fresh, selectors.EVENT_READ)
        for key in list(selector.get_map().values()):
            assert isinstance(key.fileobj, socket.socket)
            key.fileobj.close()
        selector.close()
    assert statuses == [200] * 20
