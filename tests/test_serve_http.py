"""The HTTP API against a real uvicorn on 127.0.0.1, with a real HTTP client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    COMFY_ID,
    EXAMPLES,
    LINEAR_ID,
    LINEAR_MESSAGE,
    QUANTO_ID,
    ROOT,
    errkb_listening,
    free_port,
    make_record,
    require_extra,
)

require_extra("mcp.server.mcpserver")

import anyio  # noqa: E402
import uvicorn  # noqa: E402
from mcp import Client  # noqa: E402

import errkb  # noqa: E402
from errkb.records import schema_validator  # noqa: E402
from errkb.serve import MAX_TEXT_CHARS, Service  # noqa: E402
from errkb.serve.guard import Policy  # noqa: E402
from errkb.serve.http import MAX_BODY_BYTES, build_app  # noqa: E402
from errkb.serve.workers import WorkerPool  # noqa: E402


class Running:
    """A uvicorn server in a thread of this process, on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Running:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def request(
    base: str,
    path: str,
    *,
    data: bytes | None = None,
    content_type: str | None = None,
    method: str | None = None,
) -> tuple[int, Any]:
    headers = {"Content-Type": content_type} if content_type else {}
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return exc.code, json.loads(body) if body.startswith(b"{") else body


@pytest.fixture
def db(seeded_db: Path) -> Path:
    return seeded_db


@pytest.fixture
def server(db: Path) -> Iterator[Running]:
    with errkb.open(db) as kb, Running(build_app(Service.create(kb))) as running:
        yield running


def test_explain_text_plain_and_json(server: Running) -> None:
    log = (EXAMPLES / "comfy-int8-scale-shapes.log").read_bytes()
    status, plain = request(server.base, "/v1/explain", data=log, content_type="text/plain")
    assert status == 200
    schema_validator("explanation.schema.json").validate(plain)
    assert [m["id"] for m in plain["matches"] if m["confidence"] == "exact"] == [COMFY_ID]
    body = json.dumps({"text": log.decode()}).encode()
    status, as_json = request(
        server.base, "/v1/explain", data=body, content_type="application/json"
    )
    assert status == 200 and as_json == plain
    # Invalid UTF-8 in a text body is replaced, not an error.
    status, _ = request(
        server.base, "/v1/explain", data=b"\xff\xfe" + log, content_type="text/plain"
    )
    assert status == 200


def test_match_search_errors_status_health(server: Running, seed_records: dict[str, Any]) -> None:
    message = LINEAR_MESSAGE
    q = urllib.parse.quote(message)
    status, data = request(server.base, f"/v1/match?message={q}&class=ValueError")
    assert status == 200 and data["matches"][0]["id"] == LINEAR_ID
    status, found = request(server.base, "/v1/search?q=quanto+incompatible+scale&limit=2")
    assert status == 200 and found["results"][0]["id"] == QUANTO_ID and len(found["results"]) == 2
    schema_validator("search.schema.json").validate(found)
    status, tagged = request(server.base, "/v1/search?q=scale&tag=quanto")
    assert [r["id"] for r in tagged["results"]] == [QUANTO_ID]
    status, record = request(server.base, f"/v1/errors/{QUANTO_ID}")
    assert status == 200 and record["record"] == seed_records[QUANTO_ID]
    assert record["validator"] is True and record["history"]["changes"] == 1
    status, by_slug = request(server.base, f"/v1/errors/{seed_records[COMFY_ID]['slug']}")
    assert status == 200 and by_slug["id"] == COMFY_ID
    status, info = request(server.base, "/v1/status")
    assert status == 200 and info["records"] == 3 and info["datasetVersion"]
    assert request(server.base, "/healthz") == (200, {"ok": True})


@pytest.mark.parametrize(
    ("path", "kwargs", "status", "needle"),
    [
        ("/v1/match", {}, 400, "message"),
        ("/v1/search", {}, 400, "'q'"),
        ("/v1/search?q=x&limit=lots", {}, 400, "integer"),
        ("/v1/search?q=x&limit=0", {}, 400, "limit"),
        ("/v1/errors/ffffffffffffffff", {}, 404, "no record"),
        ("/v1/explain", {"data": b"{", "content_type": "application/json"}, 400, "JSON"),
        ("/v1/explain", {"data": b"[1]", "content_type": "application/json"}, 400, '"text"'),
        ("/v1/explain", {"data": b"x", "content_type": "image/png"}, 415, "content type"),
    ],
)
def test_bad_requests_get_clear_errors(
    server: Running, path: str, kwargs: dict[str, Any], status: int, needle: str
) -> None:
    got, body = request(server.base, path, **kwargs)
    assert got == status and needle in body["error"]
    assert request(server.base, "/healthz")[0] == 200  # still serving


def test_body_cap_refuses_a_declared_length_before_reading(server: Running) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/explain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            + f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
        )  # and no body: the answer must not wait for it
        reply = b""
        while b"body over" not in reply and (chunk := sock.recv(65536)):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413") and b"body over" in reply


def test_body_cap_counts_a_chunked_body(db: Path) -> None:
    import http.client

    with errkb.open(db) as kb, Running(build_app(Service.create(kb), max_body_bytes=1000)) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        chunks = iter([b"x" * 600, b"y" * 600])
        conn.request("POST", "/v1/explain", body=chunks, encode_chunked=True,
                     headers={"Content-Type": "text/plain"})  # fmt: skip
        resp = conn.getresponse()
        assert resp.status == 413 and b"1,000 bytes" in resp.read()
        conn.close()
        small = request(srv.base, "/v1/explain", data=b"x" * 900, content_type="text/plain")
        assert small[0] == 200


def test_read_only(server: Running) -> None:
    for method, path in (("DELETE", f"/v1/errors/{QUANTO_ID}"), ("PUT", "/v1/explain")):
        status, _ = request(server.base, path, data=b"" if method == "PUT" else None, method=method)
        assert status == 405


def test_openapi_document_lists_every_route(server: Running) -> None:
    status, doc = request(server.base, "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {
        "/v1/explain", "/v1/match", "/v1/search", "/v1/errors/{id}", "/v1/status", "/healthz"
    }  # fmt: skip
    assert doc["components"]["schemas"]["SearchReport"]["required"] == [
        "query", "datasetVersion", "results"
    ]  # fmt: skip
    # Each documented 200 schema is the one its answer validates against.
    from jsonschema import Draft202012Validator

    text = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes()
    answers = {
        "/v1/explain": request(server.base, "/v1/explain", data=text, content_type="text/plain"),
        "/v1/errors/{id}": request(server.base, f"/v1/errors/{QUANTO_ID}"),
        "/v1/status": request(server.base, "/v1/status"),
        "/v1/search": request(server.base, "/v1/search?q=quanto"),
    }
    for path, (code, body) in answers.items():
        assert code == 200
        (operation,) = doc["paths"][path].values()
        ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
        Draft202012Validator(schema).validate(body)
    # Client generators need an operationId on every operation, and a valid document.
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)) == 6
    from openapi_spec_validator import validate

    validate(doc)


def test_a_deadline_stops_the_work_and_the_pool_keeps_serving(db: Path) -> None:
    """Past its deadline a request's worker is killed (its CPU stops), and a fresh one serves."""
    # 1 MiB of log takes far longer than 50 ms to explain, even in linear time.
    big = ((EXAMPLES / "quanto-incompatible-scale.log").read_text() * 700)[: MAX_TEXT_CHARS - 1]
    with WorkerPool(str(db), size=1, seconds=0.05) as pool, errkb.open(db) as kb:
        before = pool.pids()
        service = Service.create(kb, pool=pool)
        with Running(build_app(service, request_seconds=0.05)) as srv:
            status, body = request(
                srv.base, "/v1/explain", data=big.encode(), content_type="text/plain"
            )
            assert status == 504 and "longer than" in body["error"]
            assert pool.killed == 1
            (killed,) = before
            assert not Path(f"/proc/{killed}").exists() or _zombie(killed)
        pool.seconds = 30.0
        small = (EXAMPLES / "quanto-incompatible-scale.log").read_text()
        assert service.explain(small)["matches"][0]["id"] == QUANTO_ID  # a fresh worker
        assert pool.pids() != before


def _zombie(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_past_the_bound_on_concurrent_explains_is_503_with_retry_after(db: Path) -> None:
    big = ((EXAMPLES / "quanto-incompatible-scale.log").read_text() * 700)[: MAX_TEXT_CHARS - 1]
    with WorkerPool(str(db), size=1, queue_limit=0, seconds=30) as pool, errkb.open(db) as kb:
        service = Service.create(kb, pool=pool)
        with Running(build_app(service)) as srv:
            results: list[Any] = []
            first = threading.Thread(
                target=lambda: results.append(
                    request(srv.base, "/v1/explain", data=big.encode(), content_type="text/plain")
                )
            )
            first.start()
            # The first request holds the only slot until its answer; the pool says so.
            while pool._slots._value != 0:
                assert first.is_alive(), results
                time.sleep(0.01)
            req = urllib.request.Request(srv.base + "/v1/match?message=x")
            try:
                urllib.request.urlopen(req, timeout=30)
                raise AssertionError("a call past the bound was admitted")
            except urllib.error.HTTPError as exc:
                assert exc.code == 503 and exc.headers["Retry-After"] == "1"
                assert "busy" in json.loads(exc.read())["error"]
                exc.close()
            first.join()
            assert results[0][0] == 200


def test_host_origin_and_token_on_every_route(db: Path) -> None:
    every = "0.0.0.0"  # noqa: S104 - a policy for that bind, served on loopback here
    policy = Policy.for_bind(every, allow_hosts=["kb.example"], token="s3cret")  # noqa: S106
    with errkb.open(db) as kb, Running(build_app(Service.create(kb), policy=policy)) as srv:

        def status(path: str, method: str = "GET", **headers: str) -> tuple[int, Any]:
            req = urllib.request.Request(srv.base + path, headers=headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        auth = {"Authorization": "Bearer s3cret"}
        assert status("/v1/status", **auth)[0] == 200
        assert status("/v1/status", Host="kb.example", **auth)[0] == 200
        for path in ("/v1/status", "/mcp", "/nowhere", "/openapi.json"):
            code, body = status(path, Host="evil.example", **auth)  # DNS rebinding
            assert code == 403 and "Host 'evil.example'" in body["error"], path
            code, body = status(path, Origin="https://evil.example", **auth)
            assert code == 403 and "Origin" in body["error"], path
            code, body = status(path)  # no token
            assert code == 401 and "Bearer" in body["error"], path
            assert status(path, Authorization="Bearer wrong")[0] == 401
        # A browser's simple cross-origin POST never reaches the explain.
        code, _ = status("/v1/explain", "POST", Origin="http://attacker.test", **auth)
        assert code == 403
        assert status("/v1/status", **{"Sec-Fetch-Site": "cross-site"}, **auth)[0] == 403
        assert status("/v1/status", Origin="http://kb.example", **auth)[0] == 200
        assert status("/healthz")[0] == 200  # probes need no token


def test_loopback_default_refuses_foreign_host_and_origin(server: Running) -> None:
    req = urllib.request.Request(server.base + "/v1/status", headers={"Host": "rebind.test"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 403
    refused.value.close()
    ok = urllib.request.Request(server.base + "/v1/status", headers={"Origin": server.base})
    with urllib.request.urlopen(ok, timeout=30) as resp:
        assert resp.status == 200


def test_a_body_over_the_cap_is_a_json_413_on_mcp_too(db: Path) -> None:
    with errkb.open(db) as kb, Running(build_app(Service.create(kb), max_body_bytes=1000)) as srv:
        for path in ("/mcp", "/v1/explain"):
            code, body = request(srv.base, path, data=b"x" * 2000, content_type="application/json")
            assert code == 413 and body == {"error": "request body over 1,000 bytes"}, path


def test_a_chunked_body_over_the_cap_is_a_json_413_on_mcp_too(db: Path) -> None:
    import http.client

    with errkb.open(db) as kb, Running(build_app(Service.create(kb), max_body_bytes=1000)) as srv:
        for path in ("/mcp", "/v1/explain"):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            conn.request("POST", path, body=iter([b"x" * 600, b"y" * 600]), encode_chunked=True,
                         headers={"Content-Type": "application/json"})  # fmt: skip
            resp = conn.getresponse()
            got = resp.status, resp.getheader("Content-Type"), json.loads(resp.read())
            conn.close()
            assert got == (413, "application/json", {"error": "request body over 1,000 bytes"})
        # Under the cap, a chunked body reaches the route whole.
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("POST", "/v1/explain", body=iter([b"Value", b"Error: x"]),
                     encode_chunked=True, headers={"Content-Type": "text/plain"})  # fmt: skip
        resp = conn.getresponse()
        assert resp.status == 200 and "unmatched" in json.loads(resp.read())
        conn.close()


def test_plain_text_errors_from_inside_and_uvicorns_503_leave_as_json() -> None:
    """What the SDK or Starlette answer as text, and uvicorn past limit_concurrency, is JSON."""
    from uvicorn.protocols.http import h11_impl

    import errkb.serve.runner  # noqa: F401 - installs errkb's 503 in uvicorn
    from errkb.serve.guard import Guard, Policy, service_unavailable

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        status = int(scope["path"].strip("/"))
        kind = b"text/event-stream" if status == 200 else b"text/plain; charset=utf-8"
        headers = [(b"content-type", kind), (b"retry-after", b"7")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"Request body", "more_body": True})
        await send({"type": "http.response.body", "body": b" too large"})

    def call(app: Any, path: str) -> tuple[int, dict[bytes, bytes], bytes]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "path": path, "headers": [(b"host", b"127.0.0.1")]}
        anyio.run(app, scope, receive, send)
        return (
            sent[0]["status"],
            dict(sent[0]["headers"]),
            b"".join(m.get("body", b"") for m in sent[1:]),
        )

    guarded = Guard(inner, Policy.for_bind("127.0.0.1"))
    status, headers, body = call(guarded, "/413")
    assert (status, headers[b"content-type"]) == (413, b"application/json")
    assert (
        json.loads(body) == {"error": "Request body too large"} and headers[b"retry-after"] == b"7"
    )
    assert call(guarded, "/200")[2] == b"Request body too large"  # a stream passes untouched
    assert h11_impl.service_unavailable is service_unavailable  # type: ignore[attr-defined]
    status, headers, body = call(service_unavailable, "/")
    assert (status, headers[b"content-type"], headers[b"retry-after"]) == (
        503,
        b"application/json",
        b"1",
    )
    assert "busy" in json.loads(body)["error"]


def test_every_error_is_json(server: Running) -> None:
    assert request(server.base, "/no/such/route") == (404, {"error": "404 no such route"})
    code, body = request(server.base, "/v1/status", method="DELETE")
    assert code == 405 and "method not allowed" in body["error"]
    deep = b"[" * 100_000
    code, body = request(server.base, "/v1/explain", data=deep, content_type="application/json")
    assert code == 400 and "nested too deeply" in body["error"]
    code, body = request(
        server.base, "/v1/explain?detail=verbose", data=b"x", content_type="text/plain"
    )
    assert code == 400 and "detail must be one of" in body["error"]


def test_explain_detail_compact_and_full_pages(server: Running) -> None:
    text = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes()
    code, compact = request(
        server.base, "/v1/explain?detail=compact", data=text, content_type="text/plain"
    )
    assert code == 200 and compact["detail"] == "compact"
    schema_validator("explanation-compact.schema.json").validate(compact)
    code, full = request(
        server.base, "/v1/explain?detail=full&offset=0", data=text, content_type="text/plain"
    )
    assert code == 200 and full["matches"][0]["record"]["id"] == QUANTO_ID
    assert full["nextOffset"] is None


def test_status_redacts_a_sync_sources_credentials(db: Path) -> None:
    from errkb.serve import redact_url

    assert (
        redact_url("https://bob:pw@cdn.test/data/?token=X") == "https://cdn.test/data/?<redacted>"
    )
    assert redact_url("/srv/dataset") == "/srv/dataset"
    with errkb.open(db) as kb:
        raw = kb.store.latest_version()
        assert raw is not None
        shown = Service.create(kb).status()["lastSync"]["source"]
        assert shown == redact_url(raw.source or "")


def test_mcp_is_mounted_at_mcp(server: Running) -> None:
    async def go() -> Any:
        async with Client(f"{server.base}/mcp") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            found = await client.call_tool("search_errors", {"query": "comfy int8"})
            return names, found

    names, found = anyio.run(go)
    assert "explain_log" in names
    assert found.structured_content["results"][0]["id"] == COMFY_ID


def test_a_sync_by_another_process_is_seen_without_restart(
    server: Running, db: Path, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    added = make_record(seed_records[QUANTO_ID], "Zanzibar tensor {name!r} is sideways")
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"record": added, "datasetVersion": "2026-12-01T00:00:00.000Z"}))
    before = request(server.base, "/v1/status")[1]
    message = urllib.parse.quote("Zanzibar tensor 'w.0' is sideways")
    assert request(server.base, f"/v1/match?message={message}")[1]["matches"] == []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "errkb", "--db", str(db), "ingest", str(path)],
        check=True, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    after = request(server.base, "/v1/status")[1]
    assert after["records"] == before["records"] + 1
    assert after["datasetVersion"] == "2026-12-01T00:00:00.000Z"
    assert after["lastSync"]["versionId"] == before["lastSync"]["versionId"] + 1
    assert request(server.base, f"/v1/errors/{added['id']}")[0] == 200
    matched = request(server.base, f"/v1/match?message={message}")[1]
    assert [m["id"] for m in matched["matches"] if m["confidence"] == "exact"] == [added["id"]]
    assert request(server.base, "/v1/search?q=zanzibar")[1]["results"][0]["id"] == added["id"]


def test_errkb_serve_as_a_process_binds_loopback_and_answers(db: Path) -> None:
    port = free_port()
    with errkb_listening(
        port, "serve", "--port", str(port), env={**os.environ, "ERRKB_DB": str(db)}
    ):
        status, _ = request(f"http://127.0.0.1:{port}", "/healthz")
        assert status == 200
        # The real process answers the API and, at /mcp, the SDK's own HTTP client.
        base = f"http://127.0.0.1:{port}"
        text = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes()
        code, body = request(base, "/v1/explain", data=text, content_type="text/plain")
        assert code == 200 and body["matches"][0]["id"] == QUANTO_ID
        schema_validator("explanation.schema.json").validate(body)
        assert request(base, "/v1/search?q=quanto+scale")[1]["results"][0]["id"] == QUANTO_ID
        assert request(base, "/v1/errors/ffffffffffffffff")[0] == 404

        async def mcp_session() -> Any:
            from mcp.client.session import ClientSession
            from mcp.client.streamable_http import streamable_http_client

            with anyio.fail_after(60):
                async with (
                    streamable_http_client(f"{base}/mcp") as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    return await session.call_tool("dataset_status", {})

        assert anyio.run(mcp_session).structured_content["records"] == 3
        # Bound to 127.0.0.1 only: the socket's address in the kernel's table says so.
        listening = Path("/proc/net/tcp").read_text()
        assert f"0100007F:{port:04X}" in listening
        assert f"00000000:{port:04X}" not in listening


@pytest.mark.slow
def test_a_second_client_is_served_while_the_first_sends_the_worst_input(db: Path) -> None:
    """Issue 27 item 1, over HTTP: the worst body occupies one worker; the other keeps serving."""
    worst = ("ValueError: x\n" * 74_898)[: MAX_TEXT_CHARS - 1].encode()
    small = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes()
    with WorkerPool(str(db), size=2, seconds=5) as pool, errkb.open(db) as kb:
        service = Service.create(kb, pool=pool)
        with Running(build_app(service, request_seconds=5)) as srv:
            first: list[Any] = []
            thread = threading.Thread(
                target=lambda: first.append(
                    request(srv.base, "/v1/explain", data=worst, content_type="text/plain")
                )
            )
            thread.start()
            while pool.admitted == 0:  # until the worst input is in a worker's hands
                assert thread.is_alive()
                time.sleep(0.005)
            answers = [
                request(srv.base, "/v1/explain", data=small, content_type="text/plain")
                for _ in range(20)
            ]
            # All twenty answered while the worst input is still being worked on (or stopped).
            still_working = thread.is_alive()
            thread.join()
    assert all(code == 200 and body["matches"][0]["id"] == QUANTO_ID for code, body in answers)
    assert first[0][0] in (200, 504)
    if first[0][0] == 504:  # on a matcher still superlinear there: its worker was stopped
        assert still_working and pool.killed == 1


def test_a_postgresql_fault_is_a_500_that_names_nothing(pg_url: str) -> None:
    """``GET /v1/errors/%00`` on PostgreSQL: a server fault, without the database's URL or user."""
    from urllib.parse import urlsplit

    from tests.conftest import pg_server_url

    with errkb.open(pg_url) as kb, Running(build_app(Service.create(kb))) as srv:
        code, body = request(srv.base, "/v1/errors/%00")
        assert code == 500, body
        assert body == {"error": "the knowledge base could not answer; see the server's log"}
        assert request(srv.base, "/v1/status")[0] == 200  # and it keeps serving
    parts = urlsplit(pg_server_url())
    leaks = [p for p in (parts.username, parts.hostname, parts.path.strip("/")) if p]
    assert not any(leak in json.dumps(body) for leak in leaks)
