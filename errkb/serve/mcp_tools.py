"""The MCP server: errkb's knowledge base as tools an assistant can call (``errkb mcp``).

On the ``mcp`` SDK 2.x (``errkb[mcp]``). Each tool has a capped, typed input schema, a
description saying when to call it, and the CLI's ``--format json`` objects as structured
output. Bad input is a tool error saying what was wrong (:func:`invalid_arguments`); tools run
on worker threads sharing one ``KnowledgeBase``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from errkb.errors import ErrkbError
from errkb.search import MAX_LIMIT
from errkb.serve import (
    MAX_KEY_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_PATH_CHARS,
    MAX_TEXT_CHARS,
    Service,
    schemas,
    views,
)
from errkb.serve.guard import Guard, Policy

if TYPE_CHECKING:
    from errkb.serve.runner import ServeOptions

#: What an assistant reads first. At most 512 characters (Codex reads no more) and the rule that
#: matters most first: the old text was 585, and its last rule was the one cut.
INSTRUCTIONS = (
    "Quote the record's solutions; never invent fixes for errors errkb lists as unmatched. "
    "errkb explains Python errors from the ErrLookup dataset. For a pasted traceback or log, "
    "call explain_log with the whole text: each known error once, with its occurrences, "
    "values, diagnosis and solutions; 'exact' = the answer, 'possible' = too little "
    "evidence, 'similar' = a suggestion. One message: match_message. Words: search_errors. "
    "A record in full: get_error. Results too long say truncated: pass nextOffset as offset."
)


class _Output(BaseModel):
    """A tool's structured output: the operation's JSON object, under its shipped schema."""

    model_config = ConfigDict(extra="allow")
    SCHEMA: ClassVar[str]

    @classmethod
    def __get_pydantic_json_schema__(
        cls, _core_schema: CoreSchema, _handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return schemas.bundled_schema(cls.SCHEMA)


class Explanation(_Output):
    SCHEMA = schemas.EXPLANATION_VIEW


class SearchResults(_Output):
    SCHEMA = schemas.SEARCH


class RecordDetail(_Output):
    SCHEMA = schemas.RECORD_DETAIL


class CheckResult(_Output):
    SCHEMA = schemas.CHECK


class DatasetStatus(_Output):
    SCHEMA = schemas.STATUS


_O = TypeVar("_O", bound=_Output)
#: A tool result built here (the summary as its text) whose structured content is validated
#: against, and published as, the explanation view's schema.
ExplanationResult = Annotated[CallToolResult, Explanation]


def _annotations(title: str) -> ToolAnnotations:
    """Every hint given: a tool without them is assumed destructive and open-world."""
    return ToolAnnotations(
        title=title,
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    )


Detail = Annotated[
    Literal["compact", "full"],
    Field(
        description="compact (default): each record once, its occurrences, diagnosis and "
        "solutions in short; full: every match with the whole record, in pages."
    ),
]
Offset = Annotated[
    int, Field(description="Start at this match: the nextOffset of a truncated result.", ge=0)
]


def invalid_arguments(tool: str, exc: ValidationError) -> str:
    """Arguments that do not fit a tool's input schema, one line each (name, expected, got)."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        what = str(err.get("msg", "invalid")).replace("Input should be", "must be")
        if err.get("type") == "missing":
            what = "is required"
        else:
            given = repr(err.get("input"))
            what += f" (got {given if len(given) <= 60 else given[:59] + '…'})"
        parts.append(f"{where}: {what}")
    return f"bad arguments to {tool}: " + "; ".join(parts)


class _Server(MCPServer[Any]):
    """The SDK's server, with argument validation errors in errkb's words."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(invalid_arguments(name, exc.__cause__)) from None
            raise


def build_server(service: Service) -> MCPServer[Any]:
    """An MCP server whose tools answer from ``service`` (one knowledge base for all sessions)."""
    from errkb import __version__

    server: MCPServer[Any] = _Server(
        "errkb", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    @server.tool(annotations=_annotations("Explain a log or traceback"))
    def explain_log(
        text: Annotated[
            str,
            Field(
                description="The raw text: a whole traceback, a log excerpt, or any pasted "
                "output (timestamps, rank prefixes, ANSI colours are fine).",
                max_length=MAX_TEXT_CHARS,
            ),
        ],
        detail: Detail = "compact",
        offset: Offset = 0,
    ) -> ExplanationResult:
        """Find and explain every known Python error in a log or traceback.

        compact (default): `matches` has each record once, with `occurrences` (captured values,
        line numbers, the validator's `diagnosis`), `solutions` in short and `link` (get_error
        gives the full record); `unmatched` lists exceptions errkb does not know. full: the
        `errkb explain --format json` matches with whole records. A result is at most 64 KB
        (compact) or 512 KB (full): `truncated` and `nextOffset` say what to ask for next.
        """
        return _view_call(lambda: service.explain(text, detail, offset))

    @server.tool(annotations=_annotations("Explain one exception message"))
    def match_message(
        message: Annotated[
            str,
            Field(
                description="One exception message as printed, without the class prefix.",
                max_length=MAX_MESSAGE_CHARS,
            ),
        ],
        errorClass: Annotated[
            str | None,
            Field(description="The exception class, e.g. ValueError, if known.", max_length=256),
        ] = None,
        detail: Detail = "compact",
        offset: Offset = 0,
    ) -> ExplanationResult:
        """Explain one exception message (what a bot has when it caught the error itself).

        Returns the same object as explain_log, for that one message.
        """
        return _view_call(lambda: service.match(message, errorClass, detail, offset))

    @server.tool(annotations=_annotations("Search error records"))
    def search_errors(
        query: Annotated[
            str,
            Field(
                description="Words, an exception message, or a whole traceback.",
                max_length=MAX_TEXT_CHARS,
            ),
        ],
        repo: Annotated[
            str | None, Field(description="Only records of this repository (owner/name).")
        ] = None,
        limit: Annotated[
            int, Field(description="At most this many records.", ge=1, le=MAX_LIMIT)
        ] = 10,
    ) -> SearchResults:
        """Look records up by words when there is no exact message to match.

        Returns `{query, datasetVersion, results: [{id, slug, repo, errorClass, errorMessage,
        severity, score}]}`, best first; score 1.0 means the record's pattern matches a message
        in the query, lower scores are full-text suggestions. Call get_error for a result's
        documentation and fixes.
        """
        return _call(SearchResults, lambda: service.search(query, repo=repo, limit=limit))

    # ErrLookup's own MCP server calls its search tool search_error: the same tool under that
    # name costs one registration, and a prompt written for ErrLookup works unchanged.
    server.tool(
        name="search_error",
        description="Look error records up by words, a message or a traceback: the same "
        "tool as search_errors, under the name ErrLookup's own MCP server gives it.",
        annotations=_annotations("Search error records"),
    )(search_errors)

    @server.tool(annotations=_annotations("Get one error record"))
    def get_error(
        id: Annotated[
            str,
            Field(
                description="A record id (16 hex digits) or slug, as search_errors or "
                "explain_log returned it.",
                max_length=MAX_KEY_CHARS,
            ),
        ],
    ) -> RecordDetail:
        """One record in full, whether a reference validator backs it, and its history.

        `record` has every field (documentation, trigger scenarios, common situations,
        solutions, example fix, prevention tips, source excerpt, tags); `validator` is true when
        errkb can check checkpoints for this error; `retired` when the dataset dropped it.
        """
        return _call(RecordDetail, lambda: service.get_error(id))

    @server.tool(annotations=_annotations("Pre-flight a checkpoint"))
    def check_checkpoint(
        path: Annotated[
            str,
            Field(
                description="A .safetensors file, a *.safetensors.index.json, or a model "
                "directory, on the server's machine, under a directory the operator allowed.",
                max_length=MAX_PATH_CHARS,
            ),
        ],
    ) -> CheckResult:
        """Pre-flight a checkpoint with errkb's reference validators before anyone loads it.

        Returns the `errkb check --format json` object: `findings` (tensor, record id, message,
        fix), `checked` files and `errors`. Refused unless the server was started with
        --allow-path covering the path.
        """
        return _call(CheckResult, lambda: service.check_checkpoint(path))

    @server.tool(annotations=_annotations("Dataset status"))
    def dataset_status() -> DatasetStatus:
        """Which dataset version errkb answers from, and how current it is.

        Returns datasetVersion, record and repository counts, and the last sync (when, from
        which source).
        """
        return _call(DatasetStatus, service.status)

    @server.resource(
        "errkb://records/{id}",
        name="record",
        title="An error record",
        description="One record in full (as get_error returns it), by id or slug.",
        mime_type="application/json",
    )
    def record_resource(id: str) -> str:
        return json.dumps(_resource(lambda: service.get_error(id)), ensure_ascii=False)

    @server.resource(
        "errkb://status",
        name="status",
        title="Dataset status",
        description="Which dataset version errkb answers from (as dataset_status returns it).",
        mime_type="application/json",
    )
    def status_resource() -> str:
        return json.dumps(_resource(service.status), ensure_ascii=False)

    @server.prompt(
        name="explain_ci_log",
        title="Explain this CI log",
        description="Explain every known Python error in a pasted CI log, with the fixes "
        "the records give.",
    )
    def explain_ci_log(log: str) -> str:
        return (
            "Call the explain_log tool with the whole log below. For each match, say which "
            "error it is, where it occurs (line numbers, captured values), what the diagnosis "
            "says, and quote the record's solutions; call get_error for a record's full "
            "documentation. Say plainly which exceptions errkb lists as unmatched and do not "
            "invent fixes for them. If the result is truncated, call again with nextOffset.\n\n"
            f"<log>\n{log}\n</log>"
        )

    @server.prompt(
        name="triage_error",
        title="Triage one exception",
        description="Explain one exception message and what to do about it.",
    )
    def triage_error(message: str, error_class: str = "") -> str:
        cls = f" (class {error_class})" if error_class else ""
        return (
            f"Call match_message with this message{cls} and explain the result: the record, "
            "the captured values, the diagnosis, and the record's solutions quoted. If nothing "
            "matches, call search_errors with the message and say the results are only "
            f"suggestions.\n\n<message>\n{message}\n</message>"
        )

    return server


def run_server(
    service: Service, options: ServeOptions | None, policy: Policy | None = None
) -> None:
    """Serve the tools: over stdio (``options`` None), or streamable HTTP at ``/mcp``."""
    server = build_server(service)
    with service.preparing():
        if options is None:
            server.run("stdio")
            return
        from mcp.server.transport_security import TransportSecuritySettings

        from errkb.serve.runner import serve

        policy = policy or Policy.for_bind(options.host)
        app = server.streamable_http_app(
            streamable_http_path="/mcp",
            host=options.host,
            # errkb's guard checks Host, Origin and the token on every route, whatever the bind.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        serve(Guard(app, policy, max_body_bytes=4 * MAX_TEXT_CHARS), options, policy)


def _view_call(operation: Callable[[], dict[str, Any]]) -> CallToolResult:
    """An explanation view: the JSON as structured content, a short summary as the text."""
    try:
        result = operation()
    except ErrkbError as exc:
        raise ToolError(str(exc)) from exc
    return CallToolResult(
        content=[TextContent(type="text", text=views.summary(result))],
        structured_content=result,
    )


def _resource(operation: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return operation()
    except ErrkbError as exc:
        raise ResourceError(str(exc)) from exc


def _call(output: type[_O], operation: Callable[[], dict[str, Any]]) -> _O:
    """Run one operation; an errkb error becomes a tool error the assistant can read."""
    try:
        result = operation()
    except ErrkbError as exc:
        raise ToolError(str(exc)) from exc
    return output.model_validate(result)
