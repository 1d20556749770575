"""The HTTP API: ``errkb serve``, for bots in any language and teams sharing one knowledge base.

Read-only routes, bodies the CLI's ``--format json`` objects: ``POST /v1/explain`` (text or
``{"text": ...}``), ``GET /v1/match``, ``/v1/search``, ``/v1/errors/{id}``, ``/v1/status``,
``/healthz``, ``/openapi.json``, and ``/mcp``. One ``Service`` serves all; calls run on threads
under a time limit (504), bodies under a cap (413); a sync elsewhere is seen by the next
request. Loopback by default. Routes are added to the MCP SDK's own Starlette app.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from errkb.errors import ErrkbError, NotFoundError, StoreError
from errkb.search import MAX_LIMIT
from errkb.serve import MAX_TEXT_CHARS, AccessError, Service, schemas
from errkb.serve.guard import Guard, Policy
from errkb.serve.runner import ServeOptions
from errkb.serve.workers import BusyError, DeadlineError, WorkerError

log = logging.getLogger("errkb.serve")

#: A request body larger than this is refused (413) without being read further.
MAX_BODY_BYTES = 4 * MAX_TEXT_CHARS
#: Seconds one request's library call may take before the client gets a 504.
REQUEST_SECONDS = 10.0

Handler = Callable[[Request], Awaitable[Response]]


class HTTPError(Exception):
    """A request the API answers with a 4xx/5xx status and a JSON ``{"error": ...}`` body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def build_app(
    service: Service,
    *,
    host: str = "127.0.0.1",
    request_seconds: float = REQUEST_SECONDS,
    max_body_bytes: int = MAX_BODY_BYTES,
    policy: Policy | None = None,
) -> Guard:
    """The ASGI app: the REST routes and ``/mcp``, all behind ``errkb.serve.guard``."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.exceptions import HTTPException

    from errkb.serve.mcp_tools import build_server

    server = build_server(service)

    async def run(operation: Callable[[], dict[str, Any] | str]) -> Response:
        try:
            # The worker pool stops an explain at its deadline; this later one bounds in-process
            # calls.
            with anyio.fail_after(request_seconds + 1):
                result = await anyio.to_thread.run_sync(operation, abandon_on_cancel=True)
        except (TimeoutError, DeadlineError):
            return _error(504, f"the request took longer than {request_seconds:g} s")
        except BusyError as exc:
            return _error(503, str(exc), {"Retry-After": str(exc.retry_after)})
        except NotFoundError as exc:
            return _error(404, str(exc))
        except AccessError as exc:
            return _error(403, str(exc))
        except (StoreError, WorkerError) as exc:
            # The server's fault: its text may name the database, so only the log gets it.
            log.error("request failed: %s", exc)
            return _error(500, "the knowledge base could not answer; see the server's log")
        except ErrkbError as exc:
            return _error(400, str(exc))
        if isinstance(result, str):  # JSON text already (a worker's): forwarded as it is
            return Response(result, media_type="application/json")
        return JSONResponse(result)

    def route(path: str, method: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except HTTPError as exc:
                    return _error(exc.status, str(exc))

            server.custom_route(path, methods=[method])(guarded)
            return handler

        return register

    @route("/v1/explain", "POST")
    async def explain(request: Request) -> Response:
        text = await _explain_text(request, max_body_bytes)
        detail, offset = _param(request, "detail"), _int_param(request, "offset", 0)
        return await run(lambda: service.explain_json(text, detail, offset))

    @route("/v1/match", "GET")
    async def match(request: Request) -> Response:
        message = _param(request, "message", required=True) or ""
        error_class = _param(request, "class")
        detail, offset = _param(request, "detail"), _int_param(request, "offset", 0)
        return await run(lambda: service.match(message, error_class, detail, offset))

    @route("/v1/search", "GET")
    async def search(request: Request) -> Response:
        query = _param(request, "q", required=True) or ""
        limit = _int_param(request, "limit", 10)
        repo, tag = _param(request, "repo"), _param(request, "tag")
        error_class, severity = _param(request, "class"), _param(request, "severity")
        return await run(
            lambda: service.search(
                query, repo=repo, tag=tag, error_class=error_class, severity=severity, limit=limit
            )
        )

    @route("/v1/errors/{key}", "GET")
    async def get_error(request: Request) -> Response:
        key = str(request.path_params["key"])
        return await run(lambda: service.get_error(key))

    @route("/v1/status", "GET")
    async def status(_request: Request) -> Response:
        return await run(service.status)

    @route("/healthz", "GET")
    async def healthz(_request: Request) -> Response:
        return JSONResponse({"ok": True})

    @route("/openapi.json", "GET")
    async def openapi(_request: Request) -> Response:
        return JSONResponse(openapi_document())

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        max_request_body_size=max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def http_error(_request: Request, exc: Exception) -> Response:
        # Unknown routes and wrong methods answer JSON like every other error.
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else None
        return _error(status, f"{status} {_REASONS.get(status, 'error')}", headers)

    app.add_exception_handler(HTTPException, http_error)
    return Guard(app, policy or Policy.for_bind(host), max_body_bytes=max_body_bytes)


_REASONS = {404: "no such route", 405: "method not allowed for this route"}


async def _explain_text(request: Request, cap: int) -> str:
    # A declared length over the cap is refused before reading; a chunked body is counted.
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise HTTPError(413, f"request body over {cap:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise HTTPError(413, f"request body over {cap:,} bytes")
    kind = request.headers.get("content-type", "text/plain").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HTTPError(400, f"body is not valid JSON: {exc}") from exc
        except RecursionError:
            # 100,000 "[" made the parser recurse past Python's limit (issue 27, item 5).
            raise HTTPError(400, "body is not valid JSON: nested too deeply") from None
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise HTTPError(400, 'a JSON body must be an object with a string "text"')
        return str(data["text"])
    if kind.startswith("text/") or kind in ("", "application/octet-stream"):
        return bytes(body).decode("utf-8", "replace")
    raise HTTPError(415, f"unsupported content type {kind!r}: send text/plain or application/json")


def _param(request: Request, name: str, *, required: bool = False) -> str | None:
    value = request.query_params.get(name)
    if value is None and required:
        raise HTTPError(400, f"missing query parameter {name!r}")
    return value


def _int_param(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise HTTPError(
            400, f"query parameter {name!r} must be an integer, not {value!r}"
        ) from None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def run_server(service: Service, options: ServeOptions, policy: Policy) -> None:
    """Serve until SIGTERM/SIGINT/SIGHUP, then stop gracefully (the ``errkb serve`` command)."""
    from errkb.serve.runner import serve

    with service.preparing():
        serve(build_app(service, host=options.host, policy=policy), options, policy)


def openapi_document() -> dict[str, Any]:
    """An OpenAPI 3.1 description of the REST routes (the MCP endpoint speaks MCP)."""
    from errkb import __version__

    def ok(description: str, ref: str | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"$ref": ref} if ref else {"type": "object"}
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    error = {
        "description": "bad request (400), no or wrong token (401), refused Host/Origin or "
        "path (403), unknown record or route (404), wrong method (405), body too large (413), "
        "unsupported media type (415), the server's fault (500), busy: retry after "
        "Retry-After seconds (503), or over the time limit (504)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }

    def query(name: str, description: str, *, required: bool = False, kind: str = "string") -> Any:
        schema: dict[str, Any] = {"type": kind}
        if name == "limit":
            schema |= {"minimum": 1, "maximum": MAX_LIMIT, "default": 10}
        return {
            "name": name,
            "in": "query",
            "required": required,
            "description": description,
            "schema": schema,
        }

    view_params = [
        {
            "name": "detail",
            "in": "query",
            "required": False,
            "description": "compact: one entry per record (explanation-compact.schema.json); "
            "full: pages of the full object; absent: the whole explain --format json object",
            "schema": {"enum": ["compact", "full"]},
        },
        query("offset", "with detail: start at this match (a page's nextOffset)", kind="integer"),
    ]

    def operation(
        op_id: str, summary: str, answer: dict[str, Any], *, errors: bool = True, **fields: Any
    ) -> dict[str, Any]:
        responses = {"200": answer, "default": error} if errors else {"200": answer}
        return {"operationId": op_id, "summary": summary, **fields, "responses": responses}

    explanation = "#/components/schemas/Explanation"
    text_body = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    record_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "record id or slug",
        "schema": {"type": "string"},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "errkb",
            "version": __version__,
            "description": "Explain Python errors in logs from the ErrLookup error-knowledge "
            "dataset. Read-only. The MCP server is at /mcp (streamable HTTP).",
        },
        "paths": {
            "/v1/explain": {
                "post": operation(
                    "explainLog",
                    "Explain every known error in a log or traceback",
                    ok(
                        "the errkb explain --format json object (explanation.schema.json)",
                        explanation,
                    ),
                    description='The body (text/plain, or JSON {"text": ...}) is at most '
                    f"{MAX_TEXT_CHARS:,} characters and {MAX_BODY_BYTES:,} bytes.",
                    parameters=view_params,
                    requestBody={
                        "required": True,
                        "content": {
                            "text/plain": {"schema": {"type": "string"}},
                            "application/json": {"schema": text_body},
                        },
                    },
                )
            },
            "/v1/match": {
                "get": operation(
                    "matchMessage",
                    "Explain one exception message",
                    ok("as /v1/explain, for one message", explanation),
                    parameters=[
                        query("message", "the exception message", required=True),
                        query("class", "the exception class, if known"),
                        *view_params,
                    ],
                )
            },
            "/v1/search": {
                "get": operation(
                    "searchErrors",
                    "Find records by words, a message or a whole traceback",
                    ok("the search report", "#/components/schemas/SearchReport"),
                    parameters=[
                        query("q", "the query", required=True),
                        query("repo", "only records of this repository"),
                        query("tag", "only records with this tag"),
                        query("class", "only records of this error class"),
                        query("severity", "only records of this severity"),
                        query("limit", "at most this many records", kind="integer"),
                    ],
                )
            },
            "/v1/errors/{id}": {
                "get": operation(
                    "getError",
                    "One record in full, its validator backing and history",
                    ok("the record", "#/components/schemas/RecordDetail"),
                    parameters=[record_id],
                )
            },
            "/v1/status": {
                "get": operation(
                    "datasetStatus",
                    "Dataset version, counts and the last sync",
                    ok("the status", "#/components/schemas/Status"),
                )
            },
            "/healthz": {"get": operation("health", "Liveness", ok('{"ok": true}'), errors=False)},
        },
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "string"}},
                },
                "Explanation": _component(schemas.EXPLANATION),
                "SearchReport": _component(schemas.SEARCH),
                "RecordDetail": _component(schemas.RECORD_DETAIL),
                "Status": _component(schemas.STATUS),
            }
        },
    }


def _component(filename: str) -> dict[str, Any]:
    schema = schemas.bundled_schema(filename)
    return {k: v for k, v in schema.items() if k not in ("$schema", "$id")}
