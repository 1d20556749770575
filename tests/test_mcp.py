"""The MCP server: every tool and every error in-process, and one real stdio session."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
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
    require_extra,
)

require_extra("mcp.server.mcpserver")

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402

import errkb  # noqa: E402
from errkb.records import schema_validator  # noqa: E402
from errkb.serve import MAX_TEXT_CHARS, Service  # noqa: E402
from errkb.serve.mcp_tools import INSTRUCTIONS, build_server  # noqa: E402

TOOLS = {
    "explain_log",
    "match_message",
    "search_errors",
    "search_error",  # ErrLookup's name, an alias
    "get_error",
    "check_checkpoint",
    "dataset_status",
}
QUANTO_CKPT = EXAMPLES / "checkpoints" / "quanto-text-encoder.safetensors"


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    root = tmp_path / "allowed"
    root.mkdir()
    shutil.copy(QUANTO_CKPT, root / "model.safetensors")
    return root


@pytest.fixture
def kb_path(seeded_db: Path) -> Iterator[Path]:
    yield seeded_db


def call(service: Service, tool: str, args: dict[str, Any]) -> Any:
    """Call one tool through a real in-process MCP client session."""

    async def go() -> Any:
        async with Client(build_server(service)) as client:
            return await client.call_tool(tool, args)

    return anyio.run(go)


@pytest.fixture
def service(kb: errkb.KnowledgeBase, allowed: Path) -> Service:
    return Service.create(kb, [allowed])


VIEW_TOOLS = {"explain_log", "match_message"}


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    text = result.content[0].text
    if "detail" in data:
        # An explanation's text is a short summary for clients that read only text, not a
        # second copy of the JSON (issue 25: the copy doubled what a client had to receive).
        assert text.startswith("errkb found") and len(text) < 2_000
        assert all(m["id"] in text for m in data["matches"][:10])
    else:
        assert json.loads(text) == data
    return data


def error_text(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


def test_tools_have_typed_schemas_and_descriptions(service: Service) -> None:
    async def go() -> Any:
        async with Client(build_server(service)) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(go)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        published = tool.output_schema.get("properties") or tool.output_schema.get("oneOf")
        assert published, f"{tool.name}: a generic object schema"
        hints = tool.annotations
        assert hints is not None and hints.title, tool.name
        # Every hint given: a client assumes a tool without them destructive and open-world.
        assert (hints.read_only_hint, hints.destructive_hint) == (True, False), tool.name
        assert (hints.idempotent_hint, hints.open_world_hint) == (True, False), tool.name
    explain = tools["explain_log"].input_schema
    assert explain["required"] == ["text"]
    assert explain["properties"]["text"]["maxLength"] == MAX_TEXT_CHARS
    assert "errorClass" in tools["match_message"].input_schema["properties"]
    limit = tools["search_errors"].input_schema["properties"]["limit"]
    assert (limit["type"], limit["minimum"]) == ("integer", 1)
    assert tools["get_error"].input_schema["required"] == ["id"]


OUTPUT_SCHEMAS = {
    "explain_log": "explanation-view.schema.json",
    "match_message": "explanation-view.schema.json",
    "search_errors": "search.schema.json",
    "search_error": "search.schema.json",
    "get_error": "record-detail.schema.json",
    "check_checkpoint": "check.schema.json",
    "dataset_status": "status.schema.json",
}


def _refs(node: Any) -> list[Any]:
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_each_tool_declares_its_own_output_schema_and_its_output_validates(
    service: Service, allowed: Path, seed_records: dict[str, Any]
) -> None:
    from jsonschema import Draft202012Validator

    calls = {
        "explain_log": {"text": (EXAMPLES / "quanto-incompatible-scale.log").read_text()},
        "match_message": {"message": LINEAR_MESSAGE},
        "search_errors": {"query": "quanto incompatible scale"},
        "search_error": {"query": "quanto incompatible scale"},
        "get_error": {"id": QUANTO_ID},
        "check_checkpoint": {"path": str(allowed)},
        "dataset_status": {},
    }

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(build_server(service)) as client:
            tools = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            results = {name: await client.call_tool(name, args) for name, args in calls.items()}
            return tools, results

    published, results = anyio.run(go)
    assert set(published) == set(OUTPUT_SCHEMAS) == set(calls)
    record_fields = set(seed_records[QUANTO_ID])
    for name, filename in OUTPUT_SCHEMAS.items():
        schema = published[name]
        assert schema is not None
        shipped = json.loads((ROOT / "schemas" / filename).read_text())
        # The shipped schema, with the record schema it refers to written in: a client needs
        # nothing else to validate against it.
        assert schema["title"] == shipped["title"] and schema["required"] == shipped["required"]
        assert _refs(schema) == [], name
        Draft202012Validator.check_schema(schema)
        data = ok(results[name])
        Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(
            data
        )
        if name not in VIEW_TOOLS:  # the shipped file, references resolved
            schema_validator(filename).validate(data)
    compact, full = published["explain_log"]["oneOf"]
    assert compact["title"] == "errkb explanation, compact view"
    explained = full["allOf"][0]["properties"]["matches"]["items"]["properties"]
    assert record_fields <= set(explained["record"]["properties"])
    detail = published["get_error"]["properties"]["record"]
    assert detail["additionalProperties"] is not None and record_fields <= set(detail["properties"])
    # Not a rubber stamp: output the schema does not allow fails against it.
    bad = ok(results["dataset_status"]) | {"records": "three"}
    assert not Draft202012Validator(published["dataset_status"]).is_valid(bad)


def test_explain_log_full_is_the_explain_json(service: Service, kb: errkb.KnowledgeBase) -> None:
    text = (EXAMPLES / "comfy-int8-scale-shapes.log").read_text()
    data = ok(call(service, "explain_log", {"text": text, "detail": "full"}))
    whole = json.loads(json.dumps(kb.explain(text).to_dict()))
    assert data["matches"] == whole["matches"] and data["unmatched"] == whole["unmatched"]
    assert (data["truncated"], data["nextOffset"], data["detail"]) == (False, None, "full")
    schema_validator("explanation.schema.json").validate(data)
    assert [m["id"] for m in data["matches"] if m["confidence"] == "exact"] == [COMFY_ID]


def test_explain_log_compact_groups_one_records_occurrences(service: Service) -> None:
    """Five tracebacks of one record are one match with its occurrences, each with captures."""
    base = (EXAMPLES / "quanto-incompatible-scale.log").read_text()
    layers = [base.replace("encoder.block.0", f"encoder.block.{n}") for n in range(5)]
    assert len(set(layers)) == 5
    once = ok(call(service, "explain_log", {"text": base}))["matches"][0]["occurrenceCount"]
    data = ok(call(service, "explain_log", {"text": "\n".join(layers)}))
    exact = [m for m in data["matches"] if m["confidence"] == "exact"]
    assert [m["id"] for m in exact] == [QUANTO_ID]
    (match,) = exact
    assert match["occurrenceCount"] == 5 * once and len(match["occurrences"]) == 5
    assert len({json.dumps(o["captures"]) for o in match["occurrences"]}) == 5
    assert all(o["lines"] and o["diagnosis"] for o in match["occurrences"])
    assert match["solutions"] and match["link"] == f"errkb://records/{QUANTO_ID}"
    assert "record" not in match and data["truncated"] is False


def test_match_message(service: Service) -> None:
    message = LINEAR_MESSAGE
    data = ok(call(service, "match_message", {"message": message, "errorClass": "ValueError"}))
    assert data["matches"][0]["id"] == LINEAR_ID
    assert ok(call(service, "match_message", {"message": message}))["matches"][0]["id"] == LINEAR_ID
    nothing = ok(call(service, "match_message", {"message": "all is well"}))
    assert [m for m in nothing["matches"] if m["confidence"] == "exact"] == []


def test_search_errors(service: Service) -> None:
    data = ok(call(service, "search_errors", {"query": "quanto incompatible scale", "limit": 2}))
    schema_validator("search.schema.json").validate(data)
    assert data["results"][0]["id"] == QUANTO_ID and len(data["results"]) == 2
    none = ok(call(service, "search_errors", {"query": "x", "repo": "nobody/nothing"}))
    assert none["results"] == []
    nasty = ok(call(service, "search_errors", {"query": 'NEAR( "AND * ^ \x00 ))'}))
    assert "\x00" not in nasty["query"]


def test_get_error_by_id_and_slug(service: Service, seed_records: dict[str, Any]) -> None:
    data = ok(call(service, "get_error", {"id": QUANTO_ID}))
    assert data["record"] == seed_records[QUANTO_ID]  # every field, as ingested
    assert data["validator"] is True and data["retired"] is False
    assert data["history"]["changes"] == 1
    assert data["history"]["entries"][0]["change"] == "added"
    by_slug = ok(call(service, "get_error", {"id": seed_records[COMFY_ID]["slug"]}))
    assert by_slug["id"] == COMFY_ID


def test_dataset_status(service: Service) -> None:
    data = ok(call(service, "dataset_status", {}))
    assert data["datasetVersion"] == "2026-08-28T06:17:29.519Z"
    assert (data["records"], data["repos"]) == (3, 1)
    assert data["lastSync"]["kind"] == "ingest" and data["lastSync"]["source"].endswith("dataset")
    assert data["lastSync"]["at"]
    assert data["bundledSample"] is True  # only the bundled sample: explain's note says so


def test_dataset_status_after_an_ingest_is_not_the_bundled_sample(
    service: Service, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    service.kb.ingest([ROOT / "data" / "dataset"])  # nothing changes: the sample still
    assert ok(call(service, "dataset_status", {}))["bundledSample"] is True
    record = dict(next(iter(seed_records.values())))
    record["documentation"] = "A note of ours."
    (tmp_path / "ours.json").write_text(json.dumps(record))
    service.kb.ingest([tmp_path / "ours.json"])
    assert ok(call(service, "dataset_status", {}))["bundledSample"] is False


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"query": "scale", "limit": "many"}, "bad arguments to search_errors: limit: must be a "),
        ({"limit": 3}, "bad arguments to search_errors: query: is required"),
        ({"query": "q", "limit": 1000}, "limit: must be less than or equal to 100 (got 1000)"),
    ],
)
def test_argument_errors_are_errkb_messages_not_pydantic_text(
    service: Service, args: dict[str, Any], expected: str
) -> None:
    text = error_text(call(service, "search_errors", args))
    assert expected in text
    assert "pydantic" not in text and "http" not in text and "type=" not in text
    assert "\n" not in text  # one line


def test_check_checkpoint_under_an_allowed_root(service: Service, allowed: Path) -> None:
    data = ok(call(service, "check_checkpoint", {"path": str(allowed / "model.safetensors")}))
    assert {f["recordId"] for f in data["findings"]} == {QUANTO_ID}
    assert data["errors"] == []
    whole = ok(call(service, "check_checkpoint", {"path": str(allowed)}))
    assert whole["findings"] == data["findings"]


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("explain_log", {"text": "x" * (MAX_TEXT_CHARS + 1)}, "at most"),
        ("explain_log", {}, "text"),
        ("explain_log", {"text": 42}, "string"),
        ("match_message", {"message": "   "}, "message is empty"),
        ("search_errors", {"query": "scale", "limit": 0}, "limit"),
        ("search_errors", {"query": "scale", "limit": "many"}, "limit"),
        ("get_error", {"id": "0000000000000000"}, "no record with id or slug"),
        ("get_error", {"id": ""}, "give a record id"),
        ("check_checkpoint", {"path": "/etc/passwd"}, "outside the allowed directories"),
        ("check_checkpoint", {"path": "a\x00b"}, "NUL"),
        ("no_such_tool", {}, "no_such_tool"),
    ],
)
def test_bad_input_is_a_tool_error_not_a_crash(
    service: Service, tool: str, args: dict[str, Any], expected: str
) -> None:
    async def go() -> tuple[Any, Any]:
        async with Client(build_server(service)) as client:
            bad = await client.call_tool(tool, args)
            after = await client.call_tool("dataset_status", {})  # the server is still there
            return bad, after

    bad, after = anyio.run(go)
    assert expected in error_text(bad)
    assert not after.is_error


def test_check_checkpoint_refusals(kb: errkb.KnowledgeBase, allowed: Path, tmp_path: Path) -> None:
    target = allowed / "model.safetensors"
    # No --allow-path: the tool refuses everything.
    refused = call(Service.create(kb), "check_checkpoint", {"path": str(target)})
    assert "--allow-path" in error_text(refused)
    # A symlink inside the allowed root that points outside it is outside.
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(QUANTO_CKPT, outside / "secret.safetensors")
    (allowed / "link.safetensors").symlink_to(outside / "secret.safetensors")
    (allowed / "dirlink").symlink_to(outside)
    service = Service.create(kb, [allowed])
    for path in (allowed / "link.safetensors", allowed / "dirlink", allowed / ".." / "outside"):
        assert "outside the allowed" in error_text(
            call(service, "check_checkpoint", {"path": str(path)})
        )
    missing = call(service, "check_checkpoint", {"path": str(allowed / "nope.safetensors")})
    assert "no such file" in error_text(missing)
    # A malformed file is a finding-free report with the file's error, not a tool error.
    (allowed / "junk.safetensors").write_bytes(b"\xff" * 16)
    junk = ok(call(service, "check_checkpoint", {"path": str(allowed / "junk.safetensors")}))
    assert junk["errors"] and junk["findings"] == []


def test_allow_path_must_be_a_directory(kb: errkb.KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(errkb.UsageError, match="not a directory"):
        Service.create(kb, [tmp_path / "missing"])


def readme_mcp_config() -> dict[str, Any]:
    """errkb's entry in the README's MCP client configuration snippet."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    (config,) = [json.loads(b) for b in blocks if '"mcpServers"' in b]
    entry: dict[str, Any] = config["mcpServers"]["errkb"]
    return entry


async def session_checks(s: ClientSession, allowed: Path) -> tuple[set[str], Any, Any, Any]:
    """One real session's calls: the tools listed, an explain, a check, an unknown id."""
    await s.initialize()
    names = {t.name for t in (await s.list_tools()).tools}
    text = (EXAMPLES / "quanto-incompatible-scale.log").read_text()
    explained = await s.call_tool("explain_log", {"text": text})
    checked = await s.call_tool("check_checkpoint", {"path": str(allowed / "model.safetensors")})
    missing = await s.call_tool("get_error", {"id": "ffffffffffffffff"})
    return names, explained, checked, missing


def assert_session(results: tuple[set[str], Any, Any, Any]) -> None:
    names, explained, checked, missing = results
    assert names == TOOLS
    assert explained.structured_content["matches"][0]["id"] == QUANTO_ID
    assert checked.structured_content["findings"][0]["recordId"] == QUANTO_ID
    assert missing.is_error and "no record" in missing.content[0].text


def test_stdio_session_end_to_end_as_the_readme_configures_it(kb_path: Path, allowed: Path) -> None:
    """The README's client config, launched as a client does: ``errkb mcp`` on its stdio."""
    config = readme_mcp_config()
    assert config["command"] == "errkb" and config["args"][0] == "mcp"
    assert set(config["env"]) == {"ERRKB_DB"}
    # The README's example paths become this test's: its database, its allowed directory.
    args = [str(allowed) if a == "/data/checkpoints" else a for a in config["args"]]
    assert args != config["args"] and "--allow-path" in args
    script = Path(sys.executable).with_name("errkb")
    command, prefix = (str(script), []) if script.exists() else (sys.executable, ["-m", "errkb"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ERRKB_DB": str(kb_path)}
    params = StdioServerParameters(command=command, args=[*prefix, *args], env=env)

    async def go() -> tuple[set[str], Any, Any, Any]:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                return await session_checks(s, allowed)

    assert_session(anyio.run(go))


def test_streamable_http_session_end_to_end(kb_path: Path, allowed: Path) -> None:
    """``errkb mcp --http 127.0.0.1:PORT`` as a subprocess, and the SDK's HTTP client."""
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    env = {**os.environ, "ERRKB_DB": str(kb_path)}
    args = ("mcp", "--http", f"127.0.0.1:{port}", "--allow-path", str(allowed))
    with errkb_listening(port, *args, env=env) as proc:

        async def go() -> tuple[set[str], Any, Any, Any]:
            with anyio.fail_after(60):
                url = f"http://127.0.0.1:{port}/mcp"
                async with (
                    streamable_http_client(url) as (read, write),
                    ClientSession(read, write) as s,
                ):
                    return await session_checks(s, allowed)

        assert_session(anyio.run(go))
        assert proc.poll() is None  # still serving after the session ended


def test_instructions_fit_codex_and_put_the_critical_rule_first(service: Service) -> None:
    async def go() -> Any:
        async with Client(build_server(service), mode="legacy") as client:
            return client.instructions

    instructions = anyio.run(go)
    assert instructions == INSTRUCTIONS and len(instructions) <= 512
    assert instructions.startswith("Quote the record's solutions; never invent fixes")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_both_protocol_revisions_list_call_read_and_prompt(service: Service, mode: str) -> None:
    """The 2025 handshake and the stateless 2026-07-28 revision, through the SDK's client."""

    async def go() -> tuple[Any, ...]:
        async with Client(build_server(service), mode=mode) as client:
            tools = (await client.list_tools()).tools
            status = await client.call_tool("dataset_status", {})
            templates = (await client.list_resource_templates()).resource_templates
            record = await client.read_resource(f"errkb://records/{QUANTO_ID}")
            state = await client.read_resource("errkb://status")
            prompts = (await client.list_prompts()).prompts
            prompt = await client.get_prompt("explain_ci_log", {"log": "ValueError: boom"})
            return tools, status, templates, record, state, prompts, prompt, client.protocol_version

    tools, status, templates, record, state, prompts, prompt, version = anyio.run(go)
    assert {t.name for t in tools} == TOOLS
    assert ok(status)["records"] == 3
    assert [t.uri_template for t in templates] == ["errkb://records/{id}"]
    assert json.loads(record.contents[0].text)["record"]["id"] == QUANTO_ID
    assert json.loads(state.contents[0].text)["records"] == 3
    assert {p.name for p in prompts} == {"explain_ci_log", "triage_error"}
    text = prompt.messages[0].content.text
    assert "explain_log" in text and "ValueError: boom" in text
    assert (version == "2026-07-28") == (mode == "2026-07-28")


def big_log(tracebacks: int = 2000, layers: int = 300) -> str:
    """About 1 MiB: ``tracebacks`` tracebacks of one record over ``layers`` distinct layers."""
    parts = []
    for i in range(tracebacks):
        n = i % layers
        parts.append(
            f"2026-12-01 10:{i % 60:02d}:00 INFO step {i}: loading text encoder shard {n} of "
            f"{layers} from /srv/models/t5-xxl-int8 with the quanto int8 configuration\n"
            "Traceback (most recent call last):\n"
            '  File "/srv/app/loader/components.py", line 211, in load_component\n'
            "    config = inspect_quanto_int8_checkpoint(checkpoint, mapper)\n"
            '  File "/srv/app/loader/quanto.py", line 168, in inspect_quanto_int8_checkpoint\n'
            "    raise ValueError(message)\n"
            f"ValueError: Quanto layer 'encoder.block.{n}.layer.0.SelfAttention.q' has "
            "incompatible scale F32 (4096,)\n"
        )
    return "".join(parts)


async def receive_big_explanation(client: Client, text: str) -> tuple[int, int, int]:
    """Compact in one answer, then full page by page: (compact bytes, pages, matches)."""
    compact = await client.call_tool("explain_log", {"text": text})
    data = ok(compact)
    size = len(json.dumps(data))
    (match,) = data["matches"]
    assert match["id"] == QUANTO_ID and match["occurrenceCount"] == 2000
    assert data["truncated"] is False
    offset: int | None = 0
    pages, matches, occurrences = 0, 0, 0
    while offset is not None:
        page = ok(
            await client.call_tool(
                "explain_log", {"text": text, "detail": "full", "offset": offset}
            )
        )
        pages, matches = pages + 1, matches + len(page["matches"])
        occurrences += sum(m["occurrences"] for m in page["matches"])
        offset = page["nextOffset"]
    assert occurrences == 2000
    return size, pages, matches


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sdk_client_receives_a_1_mib_log_of_2000_tracebacks(
    kb_path: Path, mode: str, transport: str
) -> None:
    """Issue 25's done-when: compact <= 64 KB; full in pages under the client's 1 MiB limit."""
    text = big_log()
    assert 1_000_000 < len(text) <= MAX_TEXT_CHARS
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ERRKB_DB": str(kb_path)}

    async def go(server: Any) -> tuple[int, int, int]:
        with anyio.fail_after(300):
            async with Client(server, mode=mode) as client:
                return await receive_big_explanation(client, text)

    if transport == "stdio":
        args = ["-m", "errkb", "mcp", "--request-timeout", "120"]
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        size, pages, matches = anyio.run(go, params)
    else:
        port = free_port()
        args = ("mcp", "--http", f"127.0.0.1:{port}", "--request-timeout", "120")
        with errkb_listening(port, *args, env=env):
            size, pages, matches = anyio.run(go, f"http://127.0.0.1:{port}/mcp")
    assert size <= 64_000
    assert matches == 300 and pages >= 2  # 300 whole records do not fit one 1 MiB event


@pytest.mark.slow
def test_stdio_calls_have_the_http_deadline(kb_path: Path) -> None:
    """Issue 25: over stdio a call past --request-timeout is stopped (a tool error), as over HTTP.

    Before, stdio explained in the server's own threads with no deadline at all: a 1 MiB log
    held the session for as long as it took, and nothing could stop it.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ERRKB_DB": str(kb_path)}
    args = ["-m", "errkb", "mcp", "--request-timeout", "0.1", "--workers", "1"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    text = big_log()

    async def go() -> tuple[Any, Any]:
        with anyio.fail_after(120):
            async with Client(params, mode="legacy") as client:
                slow = await client.call_tool("explain_log", {"text": text})
                quick = await client.call_tool("get_error", {"id": QUANTO_ID})
                return slow, quick

    slow, quick = anyio.run(go)
    assert slow.is_error and "longer than 0.1 s" in slow.content[0].text, slow
    assert ok(quick)["id"] == QUANTO_ID  # the session goes on


def test_stdio_mcp_runs_its_calls_in_a_worker_pool_with_the_deadline(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    """The default tier's case of the test above: ``errkb mcp`` (stdio) wires the pool."""
    from click.testing import CliRunner

    import errkb.cli.serve  # noqa: F401 - registers the command
    import errkb.serve.mcp_tools as mcp_tools
    import errkb.serve.workers as workers
    from errkb.cli import cli

    seen: dict[str, Any] = {}

    class Pool:
        def __init__(self, target: str, *, size: int, seconds: float) -> None:
            seen.update(target=target, size=size, seconds=seconds)

        def __enter__(self) -> Pool:
            return self

        def __exit__(self, *_exc: object) -> None:
            seen["closed"] = True

    def run_server(service: Service, options: Any) -> None:
        seen.update(pool=service.pool, options=options)

    monkeypatch.setattr(workers, "WorkerPool", Pool)
    monkeypatch.setattr(mcp_tools, "run_server", run_server)
    args = ["--db", str(seeded_db), "mcp", "--request-timeout", "3", "--workers", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert isinstance(seen["pool"], Pool) and seen["options"] is None
    assert (seen["size"], seen["seconds"], seen["closed"]) == (2, 3.0, True)


def test_every_readme_client_snippet_launches_a_valid_errkb_mcp(allowed: Path) -> None:
    """Claude Desktop/Cursor, VS Code and Codex: each runs `errkb mcp` with options errkb takes."""
    import tomllib

    from errkb.cli import cli

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S)]
    entries = [b["mcpServers"]["errkb"] for b in blocks if "mcpServers" in b]
    entries += [b["servers"]["errkb"] for b in blocks if "servers" in b]
    (toml,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    entries.append(tomllib.loads(toml)["mcp_servers"]["errkb"])
    assert len(entries) == 3
    for entry in entries:
        assert entry["command"] == "errkb" and entry["args"][0] == "mcp", entry
        assert set(entry["env"]) == {"ERRKB_DB"}
        # The README's example directory becomes this test's (--allow-path must exist).
        args = [str(allowed) if a == "/data/checkpoints" else a for a in entry["args"]]
        with cli.make_context("errkb", args) as ctx:
            sub = cli.get_command(ctx, args[0])
            assert sub is not None
            sub.make_context("mcp", args[1:], parent=ctx)  # parses, or raises
