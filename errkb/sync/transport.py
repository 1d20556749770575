"""HTTP downloads for sync: keep-alive connections, size caps and one overall deadline.

Each worker thread keeps one connection per host. Downloads stream to files under a size cap.
A ``Deadline`` bounds the whole sync (a watchdog shuts every socket open past it). Redirects
are followed by hand: http(s) only, the same host (or ``allow_hosts``), never https to http.
Proxies from the environment as urllib reads them. Every failure is one ``NetworkError``
naming the URL as ``shown_url`` shows it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from errkb import __version__
from errkb.errors import NetworkError

#: Per-read (socket) timeout: how long one read may wait for the next bytes.
DEFAULT_READ_TIMEOUT = 60.0
#: Overall deadline of one sync, downloads and all.
DEFAULT_DEADLINE = 60 * 60.0
_CHUNK = 1 << 16
_MAX_REDIRECTS = 5


def shown_url(url: str) -> str:
    """``url`` as it may be stored or shown: userinfo and query string redacted (a path as is)."""
    if "://" not in url:
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": shown without what may be its userinfo
        return url.rpartition("@")[2].partition("?")[0]
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "***" if parts.query else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


class Deadline:
    """The moment a sync must give up, with a watchdog unblocking reads past it (None: no limit)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._expired = False
        self._timer: threading.Timer | None = None

    @property
    def expired(self) -> bool:
        return self._expired or (self.end is not None and time.monotonic() >= self.end)

    def remaining(self) -> float | None:
        return None if self.end is None else max(self.end - time.monotonic(), 0.0)

    def message(self, what: str) -> str:
        return (
            f"{what}: the sync's deadline of {self.seconds:g}s passed; nothing changed "
            "(allow more with --timeout)"
        )

    def check(self, what: str) -> None:
        """Raise ``NetworkError`` if the deadline has passed."""
        if self.expired:
            raise NetworkError(self.message(what))

    def check_url(self, url: str) -> None:
        """``check`` for a GET of ``url``, its message built (and the URL redacted) only then."""
        if self.expired:
            raise NetworkError(self.message(f"GET {shown_url(url)}"))

    def read_timeout(self, per_read: float) -> float:
        left = self.remaining()
        return per_read if left is None else max(min(per_read, left), 0.001)

    @contextlib.contextmanager
    def watch(self) -> Iterator[Deadline]:
        """Run the watchdog for the duration of the block."""
        left = self.remaining()
        if left is not None:
            self._timer = threading.Timer(left, self._expire)
            self._timer.daemon = True
            self._timer.start()
        try:
            yield self
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    @contextlib.contextmanager
    def guard(self, sock: socket.socket | None) -> Iterator[None]:
        """Register ``sock`` so the watchdog can shut it down while it is in use."""
        if sock is None:
            yield
            return
        with self._lock:
            self._sockets.add(sock)
        try:
            yield
        finally:
            with self._lock:
                self._sockets.discard(sock)

    def cancel(self) -> None:
        """Unblock every read in progress (the sync is failing anyway: stop downloading)."""
        self._shutdown_all()

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
        self._shutdown_all()

    def _shutdown_all(self) -> None:
        with self._lock:
            for sock in self._sockets:
                # shutdown, not close: the owning thread closes it; this only wakes its read.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@dataclass(frozen=True)
class Response:
    """A completed download: where the body went (None for 304) and the validators."""

    url: str
    path: Path | None
    etag: str | None
    bytes: int = 0
    last_modified: str | None = None


class HttpClient:
    """GETs over reused connections: one per (thread, host), so workers never share one."""

    def __init__(
        self,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        deadline: Deadline | None = None,
        allow_hosts: Iterable[str] = (),
    ) -> None:
        self.read_timeout = read_timeout
        self.allow_hosts = frozenset(h.lower().rstrip(".") for h in allow_hosts)
        self.deadline = deadline or Deadline(None)
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False
        self.connections_opened = 0

    def get(
        self,
        url: str,
        dest: Path,
        *,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        etag: str | None = None,
        on_bytes: Callable[[int], None] | None = None,
        last_modified: str | None = None,
    ) -> Response:
        """GET ``url`` into ``dest`` (streamed, capped, conditional); 304 gives path None."""
        first = url  # messages show it as shown_url does: no userinfo, no query
        for _ in range(_MAX_REDIRECTS + 1):
            if self.deadline.expired:
                raise NetworkError(self.deadline.message(f"GET {shown_url(first)}"))
            try:
                parts = urllib.parse.urlsplit(url)
                parts.port  # noqa: B018 - a redirect may name a port out of range
            except ValueError as exc:
                raise NetworkError(f"GET {shown_url(url)}: not a valid URL: {exc}") from None
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise NetworkError(f"GET {shown_url(url)}: only http and https URLs are supported")
            target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
            sent = {
                "User-Agent": f"errkb/{__version__}",
                "Accept-Encoding": "identity",
                **(headers or {}),
            }
            if etag:
                sent["If-None-Match"] = etag
            if last_modified:
                sent["If-Modified-Since"] = last_modified
            conn, response = self._request(parts, target, sent, url)
            try:
                location = response.getheader("Location")
                if response.status in (301, 302, 303, 307, 308) and location:
                    response.read(_CHUNK)  # a redirect's body is small; drain it to reuse
                    try:
                        newurl = urllib.parse.urljoin(url, location)
                        scheme = urllib.parse.urlsplit(newurl).scheme
                    except ValueError as exc:  # "Invalid IPv6 URL" in a Location header
                        raise NetworkError(
                            f"GET {shown_url(first)}: refused redirect: {exc}"
                        ) from None
                    why = (
                        redirect_problem(url, newurl, self.allow_hosts)
                        if scheme in ("http", "https")
                        else "not http(s)"
                    )
                    if why is not None:
                        shown = f"GET {shown_url(first)}: refused redirect to {shown_url(newurl)!r}"
                        raise NetworkError(f"{shown}: {why}")
                    url = newurl
                    continue
                if response.status == 304 and (etag or last_modified):
                    response.read(_CHUNK)
                    return Response(
                        url,
                        None,
                        response.getheader("ETag") or etag,
                        last_modified=response.getheader("Last-Modified") or last_modified,
                    )
                if response.status != 200:
                    raise NetworkError(
                        f"GET {shown_url(url)}: HTTP {response.status} {response.reason}"
                    )
                total = self._body(conn, response, url, dest, max_bytes, on_bytes)
                return Response(
                    url,
                    dest,
                    response.getheader("ETag"),
                    total,
                    response.getheader("Last-Modified"),
                )
            except BaseException:
                self._drop(conn)
                raise
            finally:
                will_close = response.will_close
                response.close()  # releases the socket a closing response still holds
                if will_close:
                    self._drop(conn)
        raise NetworkError(f"GET {shown_url(first)}: more than {_MAX_REDIRECTS} redirects")

    def _request(
        self,
        parts: urllib.parse.SplitResult,
        target: str,
        headers: Mapping[str, str],
        url: str,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        # A reused connection's first failure is retried once on a fresh one.
        for attempt in (0, 1):
            conn, reused = self._connection(parts)
            if getattr(conn, "errkb_via_proxy", False):
                target = urllib.parse.urlunsplit(parts._replace(fragment=""))  # absolute-form
            try:
                conn.timeout = self.deadline.read_timeout(self.read_timeout)
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                else:
                    self._connect(conn, url)
                with self.deadline.guard(conn.sock):
                    conn.request("GET", target, headers=dict(headers))
                    return conn, conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                self._drop(conn)
                if self.deadline.expired:
                    raise NetworkError(self.deadline.message(f"GET {shown_url(url)}")) from None
                if reused and attempt == 0:
                    continue
                raise NetworkError(f"GET {shown_url(url)}: {reason(exc)}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _body(
        self,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        url: str,
        dest: Path,
        max_bytes: int,
        on_bytes: Callable[[int], None] | None,
    ) -> int:
        length = response.getheader("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        if expected is not None and expected > max_bytes:
            raise NetworkError(
                f"GET {shown_url(url)}: {expected} bytes is over the {max_bytes}-byte cap"
            )
        total = 0
        try:
            with dest.open("wb") as out, self.deadline.guard(conn.sock):
                while True:
                    self.deadline.check_url(url)
                    if conn.sock is not None:
                        conn.sock.settimeout(self.deadline.read_timeout(self.read_timeout))
                    # read1: return what one read brings, so the deadline is checked often.
                    chunk = response.read1(_CHUNK)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > max_bytes:
                        raise NetworkError(
                            f"GET {shown_url(url)}: body is over the {max_bytes}-byte cap"
                        )
                    out.write(chunk)
                    if on_bytes is not None:
                        on_bytes(len(chunk))
        except (OSError, http.client.HTTPException) as exc:
            if self.deadline.expired:
                raise NetworkError(self.deadline.message(f"GET {shown_url(url)}")) from None
            if isinstance(exc, http.client.IncompleteRead) and expected is not None:
                raise NetworkError(
                    f"GET {shown_url(url)}: truncated body ({total} of {expected} bytes)"
                ) from None
            raise NetworkError(
                f"GET {shown_url(url)}: connection lost after {total} bytes: {exc!r}"
            ) from exc
        if expected is not None and total != expected:
            # Past the deadline, an early end of the body is the watchdog's, not a truncating
            # server's.
            if self.deadline.expired:
                raise NetworkError(self.deadline.message(f"GET {shown_url(url)}"))
            raise NetworkError(
                f"GET {shown_url(url)}: truncated body ({total} of {expected} bytes)"
            )
        return total

    def _connect(self, conn: http.client.HTTPConnection, url: str) -> None:
        """Open ``conn``'s socket, unless (or closing it at once if) the client was closed."""
        with self._lock:
            closed = self._closed
        if not closed:
            conn.connect()
            with self._lock:
                closed = self._closed
                if not closed and conn not in self._all:
                    self._all.append(conn)  # a pooled connection reopened after a drop
        if closed:
            conn.close()
            raise NetworkError(
                f"GET {shown_url(url)}: the download was stopped (the client is closed)"
            )

    def _connection(
        self, parts: urllib.parse.SplitResult
    ) -> tuple[http.client.HTTPConnection, bool]:
        key = (parts.scheme, parts.hostname, parts.port)
        pool: dict[tuple[object, ...], http.client.HTTPConnection] = (
            getattr(self._local, "pool", None) or {}
        )
        self._local.pool = pool
        conn = pool.get(key)
        if conn is not None:
            return conn, conn.sock is not None
        timeout = self.deadline.read_timeout(self.read_timeout)
        host = parts.hostname or ""
        proxy = _proxy_for(parts)
        if proxy is not None and parts.scheme == "https":
            # CONNECT through the proxy; TLS (and its certificate check) is end to end.
            conn = http.client.HTTPSConnection(proxy.hostname or "", proxy.port, timeout=timeout)
            conn.set_tunnel(host, parts.port)
        elif proxy is not None:
            conn = http.client.HTTPConnection(proxy.hostname or "", proxy.port, timeout=timeout)
            conn.errkb_via_proxy = True  # type: ignore[attr-defined]
        elif parts.scheme == "https":
            conn = http.client.HTTPSConnection(host, parts.port, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
        pool[key] = conn
        with self._lock:
            self._all.append(conn)
            self.connections_opened += 1
        return conn, False

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()

    def close(self) -> None:
        """Close every connection any thread opened; later requests fail at once."""
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                # Wake a worker still blocked reading it; closing alone would not.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            conn.close()


def redirect_problem(url: str, target: str, allow_hosts: Collection[str] = ()) -> str | None:
    """Why a redirect from ``url`` to ``target`` is refused (a downgrade, another host), or None."""
    old, new = urllib.parse.urlsplit(url), urllib.parse.urlsplit(target)
    if old.scheme == "https" and new.scheme != "https":
        return "a downgrade from https to http"
    host = (new.hostname or "").lower().rstrip(".")
    if host != (old.hostname or "").lower().rstrip(".") and host not in allow_hosts:
        return f"another host ({host}); allow a mirror you trust with --allow-redirect-host {host}"
    return None


def _proxy_for(parts: urllib.parse.SplitResult) -> urllib.parse.SplitResult | None:
    """The proxy ``$http_proxy`` / ``$https_proxy`` name for this URL (``$no_proxy`` honoured)."""
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    found = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if found.scheme != "http" or not found.hostname:
        return None  # only plain http proxies (the common case); others are not supported
    return found


def reason(exc: BaseException) -> str:
    """A short human reason for a connection failure."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without a response"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
