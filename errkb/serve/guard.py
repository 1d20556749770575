"""Who may ask: the Host, Origin and bearer-token checks in front of every HTTP route.

One ASGI layer wraps the whole app, whatever the bind: ``Host`` must be allowed (loopback
names, the bind address, ``--allow-host``; ``*`` any); a browser's ``Origin`` must be allowed
(``http(s)://`` an allowed host, or ``--allow-origin``) and ``Sec-Fetch-Site: cross-site`` is
refused; with a token every route but ``/healthz`` needs ``Authorization: Bearer <token>``
(constant-time compare). Refusals are JSON 403 (401 with ``WWW-Authenticate``) naming the
header; any other non-JSON error response leaves as JSON too (``_JsonErrors``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: Routes a load balancer or an orchestrator probes without credentials.
OPEN_PATHS = frozenset({"/healthz"})


def is_loopback(host: str) -> bool:
    """The bind address is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8000`` -> ``::1``), lower-cased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        return value.partition(":")[0]
    return value


@dataclass(frozen=True)
class Policy:
    """What the guard allows: hosts, origins and the token, fixed when the server starts."""

    hosts: frozenset[str]  #: host names without port, lower-case; "*" = any
    origins: frozenset[str]  #: full origins (scheme://host[:port]), lower-case
    token: str | None = None

    @classmethod
    def for_bind(
        cls,
        bind: str,
        *,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
        token: str | None = None,
    ) -> Policy:
        hosts = {*LOOPBACK_NAMES, _split_host(bind), *(_split_host(h) for h in allow_hosts)}
        hosts.discard("0.0.0.0")  # noqa: S104 - a bind address is no name a client may send
        hosts.discard("::")
        origins = {o.strip().rstrip("/").lower() for o in allow_origins}
        return cls(frozenset(hosts), frozenset(origins), token or None)

    def host_allowed(self, host: str | None) -> bool:
        if "*" in self.hosts:
            return True
        return host is not None and _split_host(host) in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.origins or "*" in self.origins:
            return True
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme in ("http", "https") and self.host_allowed(rest)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why the request is refused (status, message), or None when it may pass."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host")
        if not self.host_allowed(host):
            return 403, (
                f"Host {host!r} is not allowed (start errkb with --allow-host NAME to allow it)"
            )
        origin = headers.get("origin")
        if origin is not None and origin != "null" and not self.origin_allowed(origin):
            return 403, (
                f"Origin {origin!r} is not allowed: errkb refuses cross-origin requests "
                "(--allow-origin ORIGIN allows one)"
            )
        if origin == "null" or headers.get("sec-fetch-site") == "cross-site":
            return 403, "cross-site requests are refused"
        if self.token is not None and scope.get("path") not in OPEN_PATHS:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            expected = self.token.encode("utf-8")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode("utf-8"), expected
            ):
                return 401, "this server needs Authorization: Bearer <token>"
        return None


class Guard:
    """An ASGI app that refuses what ``policy`` does not allow before ``app`` sees it."""

    def __init__(self, app: ASGIApp, policy: Policy, *, max_body_bytes: int | None = None) -> None:
        self.app = app
        self.policy = policy
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.policy.refusal(scope) or self._too_large(scope)
            if refused is not None:
                await _json(send, *refused)
                return
            send = _JsonErrors(send)
            if self.max_body_bytes is not None and _chunked(scope):
                # No declared length: the body is read here up to the cap and handed on whole.
                body = await _read_capped(receive, self.max_body_bytes)
                if body is None:
                    await _json(send, 413, f"request body over {self.max_body_bytes:,} bytes")
                    return
                receive = _replay(body, receive)
        await self.app(scope, receive, send)

    def _too_large(self, scope: Scope) -> tuple[int, str] | None:
        # A declared length over the cap is refused here as JSON, before any route.
        if self.max_body_bytes is None:
            return None
        for key, value in scope["headers"]:
            too_large = value.isdigit() and int(value) > self.max_body_bytes
            if key.lower() == b"content-length" and too_large:
                return 413, f"request body over {self.max_body_bytes:,} bytes"
        return None


def _chunked(scope: Scope) -> bool:
    """A request with a body but no ``Content-Length`` (``Transfer-Encoding: chunked``)."""
    names = {k.lower() for k, _v in scope["headers"]}
    return b"content-length" not in names and b"transfer-encoding" in names


async def _read_capped(receive: Receive, cap: int) -> bytes | None:
    """The whole request body, or None as soon as it grows past ``cap`` bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)  # the client went away: the app sees an empty body and its end
        body += message.get("body", b"")
        if len(body) > cap:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving ``body`` in one message, then the connection's own messages."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


#: Headers of an error response kept when its body is rewritten as JSON.
_KEPT = frozenset({b"retry-after", b"www-authenticate", b"allow", b"connection"})
#: Most bytes of a plain-text error body quoted in the JSON one (they are a phrase or a line).
_QUOTED = 4096


class _JsonErrors:
    """A ``send`` that turns a non-JSON error response (status >= 400) into ``{"error": text}``.

    Meaningful headers are kept; successes, JSON errors and event streams pass untouched.
    """

    def __init__(self, send: Send) -> None:
        self.send = send
        self.held: Message | None = None
        self.body = bytearray()

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and _plain_error(message):
            self.held = message
            return
        if kind == "http.response.body" and self.held is not None:
            if len(self.body) < _QUOTED:
                self.body += message.get("body", b"")[: _QUOTED - len(self.body)]
            if message.get("more_body", False):
                return
            start, self.held = self.held, None
            text = self.body.decode("utf-8", "replace").strip()
            extra = [(k, v) for k, v in start.get("headers", []) if k.lower() in _KEPT]
            await _json(self.send, start["status"], text or _phrase(start["status"]), extra)
            return
        await self.send(message)


def _plain_error(start: Message) -> bool:
    if int(start.get("status", 200)) < 400:
        return False
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return not value.lower().startswith(b"application/json")
    return True


def _phrase(status: int) -> str:
    import http

    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


async def _json(
    send: Send, status: int, message: str, extra: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="errkb"'))
    headers += [(k, v) for k, v in extra if k.lower() != b"www-authenticate" or status != 401]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def service_unavailable(_scope: Scope, _receive: Receive, send: Send) -> None:
    """The answer past uvicorn's ``limit_concurrency``: JSON with ``Retry-After``."""
    message = "errkb is busy: too many connections or requests at once; try again shortly"
    await _json(send, 503, message, [(b"retry-after", b"1"), (b"connection", b"close")])
