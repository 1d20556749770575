"""Test helper: generate valid records and publish them as upstream does, on disk and over HTTP.

``make_records`` copies the bundled seed records and changes errorMessage and filePath,
recomputing id, slug and messagePattern with upstream's formulas, so every generated record
passes validation. ``build_tree`` writes the published tree (manifest, gzip index, repos.json,
per-repo files) for one datasetVersion; ``serve`` serves a directory from a local HTTP server
on 127.0.0.1 with ETags and injectable faults (HTTP 500, dropped connection, truncated body).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import http.server
import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.publish_tree import write_tree
from errkb import records as rec
from errkb.records import upstream
from errkb.sync import publish
from errkb.sync.transport import HttpClient

REPO_ROOT = Path(__file__).resolve().parent.parent
SEED_DIR = REPO_ROOT / "data" / "dataset"


def seed_records() -> list[dict[str, Any]]:
    """The bundled seed records (bare record objects, envelopes unwrapped)."""
    out = []
    for path in sorted(SEED_DIR.glob("*.txt")):
        out.append(json.loads(path.read_text(encoding="utf-8"))["record"])
    return out


_SEEDS = seed_records()


def make_record(n: int, repo: str, *, marker: str = "") -> dict[str, Any]:
    """A valid record, unique for (n, repo), derived from a seed; ``marker`` changes content only.

    The message has a placeholder so messagePattern is a real template pattern.
    """
    obj = copy.deepcopy(_SEEDS[n % len(_SEEDS)])
    obj["repo"] = repo
    obj["errorCode"] = None
    obj["errorMessage"] = f"Generated failure number {n} in layer {{name!r}} of {repo}"
    obj["filePath"] = f"python/pkg/module_{n % 97}/file_{n}.py"
    obj["id"] = upstream.record_id(repo, None, obj["errorMessage"], obj["filePath"])
    obj["slug"] = upstream.slug(None, obj["errorMessage"])
    obj["messagePattern"] = upstream.message_pattern(obj["errorMessage"])
    if marker:
        obj["documentation"] = f"{obj['documentation']} [{marker}]"
    return obj


def make_records(count: int, *, repos: int, owner: str = "org", start: int = 0) -> list[dict]:
    """``count`` records spread round-robin over ``repos`` repositories ``owner/repo-K``."""
    return [make_record(n, f"{owner}/repo-{n % repos}") for n in range(start, start + count)]


def hashes(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """id -> content hash, as the store computes it: what a database must hold for a version."""
    return {r["id"]: rec.content_hash(r) for r in records}


def build_tree(
    root: Path,
    records: Iterable[Mapping[str, Any]],
    dataset_version: str,
    *,
    repo_meta: Mapping[str, Mapping[str, Any]] | None = None,
    extra_repos: Iterable[str] = (),
    index_parts: int = 0,
    parts_listing: str = "object",
) -> Path:
    """Write the published tree of ``records`` under ``root``; return ``root``.

    Each repository's ``analyzedSha`` in repos.json is the sha1 of its file, so it changes
    exactly when the file does (``repo_meta`` overrides entries, e.g. to lie about a change,
    or to keep a commit while records are rewritten in place). ``index_parts`` splits the index
    into that many ``index-N.json.gz`` parts, listed as ``parts_listing`` says (``write_tree``;
    "none": no index at all).
    """

    def fields(repo: str, body: bytes, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {
            "description": f"{repo} test repository",
            "language": "python",
            "stars": 1,
            "sourceFiles": len(items),
            "analyzedSha": hashlib.sha1(body).hexdigest(),  # noqa: S324 - a fingerprint
            "analyzedAt": dataset_version,
            **(repo_meta or {}).get(repo, {}),
        }

    return write_tree(
        root,
        records,
        dataset_version,
        repo_fields=fields,
        extra_repos=extra_repos,
        index_parts=index_parts,
        parts_listing=parts_listing,
    )


# ---------------------------------------------------------------------------- HTTP server
@dataclass
class Server:
    """A running test server: its base URL, the requests it saw, and faults to inject.

    ``faults`` maps a URL path ("/data/repos/org/repo-1.json") to "500", "404", "drop" (close
    the connection without a response), "truncate" (promise more bytes than are sent),
    "nolength" (no Content-Length: the body ends when the connection closes), or
    "redirect:<url>" (a 302 to that URL).
    ``root`` can be switched to serve another tree.
    """

    root: Path
    base: str = ""
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    faults: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _ in self.requests]


def _handler(server: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes: with Nagle's algorithm the body waits for
        # the client's delayed ACK of the headers, ~40 ms a response on the loopback (measured:
        # 2.3 s of a 5 s test_sync run waited in recv for it).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            with server.lock:
                server.requests.append((path, self.headers.get("If-None-Match")))
                fault = server.faults.get(path)
            if fault == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if fault in ("500", "404"):
                self.send_error(int(fault))
                return
            if fault is not None and fault.startswith("redirect:"):
                self.send_response(302)
                self.send_header("Location", fault.removeprefix("redirect:"))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            rel = path.lstrip("/")
            target = (server.root / rel).resolve()
            if ".." in rel.split("/") or not target.is_file():
                self.send_error(404)
                return
            body = target.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", etag)
            self.send_header("Content-Type", "application/octet-stream")
            if fault == "truncate":
                self.send_header("Content-Length", str(len(body) + 1000))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            if fault == "nolength":
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True
                return
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


#: How often the serving thread looks for shutdown(): the default 0.5 s was half a second at the
#: end of every ``with`` block.
POLL = 0.02


@contextlib.contextmanager
def serve(root: Path) -> Iterator[Server]:
    """Serve ``root`` on 127.0.0.1 (a free port) in a thread for the duration of the block."""
    server = Server(root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    server.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def download(
    url: str,
    dest: Path,
    *,
    max_bytes: int = publish.DEFAULT_MAX_BYTES,
    etag: str | None = None,
    timeout: float = publish.DEFAULT_TIMEOUT,
) -> publish.Fetched:
    """GET ``url`` into ``dest`` with errkb's client (streamed, capped); 304: ``not_modified``."""
    client = HttpClient(read_timeout=timeout)
    try:
        got = client.get(url, dest, max_bytes=max_bytes, etag=etag)
    finally:
        client.close()
    return publish.Fetched(url, got.path, got.etag, got.bytes)
