"""``errkb serve`` under idle connections (issue 50, row 16): what a client gets meanwhile.

    python -m bench.idle_connections --db KB [--idle 256] [--requests 200]

Starts ``errkb serve`` on 127.0.0.1, opens ``--idle`` connections that send half a request line
and nothing more, re-opens each as soon as the server closes it, and meanwhile sends
``--requests`` sequential ``GET /healthz`` from another client. Prints the statuses counted,
the client's latencies (median, 99th percentile, max) and how many idle connections the server
closed. Every loop is bounded by a count; every socket read by a timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serving(db: str, port: int) -> Iterator[None]:
    """``errkb serve`` on 127.0.0.1:``port``, until its "listening on" line, stopped after."""
    env = {**os.environ, "ERRKB_DB": db}
    proc = subprocess.Popen(
        [sys.executable, "-m", "errkb", "serve", "--port", str(port), "--quiet"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        for _ in range(100):  # a few lines at most before it listens
            line = proc.stderr.readline().decode()
            if not line or "listening on " in line:
                break
        assert proc.poll() is None, "errkb serve did not start"
        yield
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127")
    return sock


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--idle", type=int, default=256)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args(argv)
    port = _free_port()
    with _serving(args.db, port):
        selector = selectors.DefaultSelector()
        for _ in range(args.idle):
            selector.register(_connect(port), selectors.EVENT_READ)
        statuses: Counter[int] = Counter()
        latencies: list[float] = []
        closed = 0
        for _ in range(args.requests):
            start = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            conn.close()
            latencies.append(time.perf_counter() - start)
            statuses[response.status] += 1
            for key, _events in selector.select(timeout=0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                selector.unregister(sock)
                sock.close()
                closed += 1
                selector.register(_connect(port), selectors.EVENT_READ)
        for key in list(selector.get_map().values()):
            assert isinstance(key.fileobj, socket.socket)
            key.fileobj.close()
        selector.close()
    latencies.sort()
    print(
        f"{args.idle} idle connections (re-opened as closed), {args.requests} requests: "
        f"statuses {dict(sorted(statuses.items()))}; latency median "
        f"{statistics.median(latencies) * 1000:.1f} ms, p99 "
        f"{latencies[int(len(latencies) * 0.99) - 1] * 1000:.1f} ms, max "
        f"{latencies[-1] * 1000:.1f} ms; idle connections the server closed: {closed}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
