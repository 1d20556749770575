"""Test helper: a loopback emulator of ErrLookup's site behind a CDN.

A real ``ThreadingHTTPServer`` on 127.0.0.1 serving published trees (``published.build_tree``)
the way the real site's CDN can: an origin holding the current version, and edges that, for
a week after a publish, answer any data-file request whose ``v=`` is not the current version
with the *previous* version's bytes (``stale``), and a manifest request without
``Cache-Control: no-cache`` with the previous manifest. ``poisoned`` paths answer with the
previous version's bytes whatever ``v=`` they carry, as one bad edge copy would; a request
with a fresh ``r=`` always reaches the origin. ``on_repo`` is called for every
repository-file request (to publish a version mid-sync, or to count); ``trickle`` sends a
path's response one byte every ``trickle_delay`` seconds (body or headers). Every request is
recorded: path, query, headers, the client's port (one per connection). ``etags`` off sends no
ETag (so no 304 by ETag); ``last_modified`` sends that Last-Modified and answers a matching
If-Modified-Since with 304, as an origin without ETags would.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Request:
    """One request the emulator answered."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]
    port: int  #: the client's port: one per connection

    @property
    def is_repo(self) -> bool:
        return self.path.startswith("/data/repos/")


@dataclass
class Cdn:
    """The emulator's state; tests change it while it runs."""

    versions: dict[str, Path] = field(default_factory=dict)  #: datasetVersion -> tree root
    current: str | None = None
    previous: str | None = None
    base: str = ""
    stale: bool = True
    poisoned: set[str] = field(default_factory=set)  #: paths an edge holds stale, v= or not
    trickle: dict[str, str] = field(default_factory=dict)  #: path -> "body" | "headers"
    trickle_delay: float = 0.5
    repo_delay: float = 0.0  #: seconds each repository file takes (to overlap downloads)
    on_repo: Callable[[Request], None] | None = None
    etags: bool = True
    last_modified: str | None = None
    requests: list[Request] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, version: str, root: Path) -> None:
        """Make ``version`` (published under ``root``) the origin's current version."""
        with self.lock:
            self.versions[version] = root
            self.previous, self.current = self.current, version

    def repo_requests(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.is_repo]

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.max_active = 0

    def _body(self, req: Request) -> bytes | None:
        with self.lock:
            current, previous = self.current, self.previous
            poisoned = req.path in self.poisoned
        if current is None:
            return None
        version = current
        if req.path == "/data/manifest.json":
            if self.stale and previous and req.headers.get("cache-control") != "no-cache":
                version = previous  # an edge's copy, still within max-age
        elif (
            "r" not in req.query
            and previous
            and (poisoned or (self.stale and req.query.get("v") != current))
        ):
            version = previous  # stale-while-revalidate: last week's bytes
        path = self.versions[version] / req.path.lstrip("/")
        if ".." in req.path.split("/") or not path.is_file():
            return None
        return path.read_bytes()


def _handler(cdn: Cdn) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes: with Nagle's algorithm the body waits for
        # the client's delayed ACK of the headers, ~40 ms a response on the loopback (measured:
        # 2.3 s of a 5 s test_sync run waited in recv for it).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            req = Request(
                parts.path,
                dict(urllib.parse.parse_qsl(parts.query)),
                {k.lower(): v for k, v in self.headers.items()},
                self.client_address[1],
            )
            with cdn.lock:
                cdn.requests.append(req)
                cdn.active += 1
                cdn.max_active = max(cdn.max_active, cdn.active)
            try:
                if req.is_repo:
                    if cdn.on_repo is not None:
                        cdn.on_repo(req)
                    if cdn.repo_delay:
                        time.sleep(cdn.repo_delay)
                self._answer(req)
            finally:
                with cdn.lock:
                    cdn.active -= 1

        def _answer(self, req: Request) -> None:
            body = cdn._body(req)
            if body is None:
                self.send_error(404)
                return
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            modified = cdn.last_modified
            if (cdn.etags and req.headers.get("if-none-match") == etag) or (
                modified and req.headers.get("if-modified-since") == modified
            ):
                self.send_response(304)
                if cdn.etags:
                    self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            validators = f"ETag: {etag}\r\n" if cdn.etags else ""
            validators += f"Last-Modified: {modified}\r\n" if modified else ""
            head = (
                f"HTTP/1.1 200 OK\r\n{validators}Content-Length: {len(body)}\r\n"
                "Cache-Control: max-age=86400, stale-while-revalidate=604800\r\n\r\n"
            ).encode()
            mode = cdn.trickle.get(req.path)
            if mode is not None:
                # One byte at a time, forever as far as the client can tell.
                data = head + body if mode == "headers" else body
                if mode == "body":
                    self.wfile.write(head)
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(cdn.trickle_delay)
                return
            self.wfile.write(head + body)

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up mid-response on purpose (deadlines, kills): not worth a traceback.
        pass


#: How often the serving thread looks for shutdown(): the default 0.5 s was half a second at the
#: end of every ``with`` block.
POLL = 0.02


@contextlib.contextmanager
def serve_cdn() -> Iterator[Cdn]:
    """Run the emulator on 127.0.0.1 (a free port) for the duration of the block."""
    cdn = Cdn()
    httpd = _Server(("127.0.0.1", 0), _handler(cdn))
    cdn.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield cdn
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
