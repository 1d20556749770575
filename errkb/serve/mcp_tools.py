"""The MCP server: errkb's knowledge base as tools an assistant can call (``errkb mcp``).

Built on the official ``mcp`` SDK 2.x (``mcp.server.mcpserver.MCPServer``), from the optional
``errkb[mcp]`` extra. Each tool has a typed input schema (with size caps), a description that
tells an assistant when to call it, and structured output: the same JSON objects as the CLI's
``--format json``. Bad input is a tool error (``is_error``) with a message saying what was
wrong; the server itself never stops for it. Tools run the synchronous library on worker threads
(the SDK does this for sync functions), all sharing one ``KnowledgeBase``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler
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
)

INSTRUCTIONS = (
    "errkb explains Python errors from the ErrLookup error-knowledge dataset. When a user pastes "
    "a traceback or a log, call explain_log with the whole text: it finds every known error, with "
    "the values captured from the message, the failed condition, the record's documentation and "
    "fixes, and an honest confidence ('exact' = the record's pattern matched; 'similar' = only a "
    "suggestion). For one message call match_message; to look records up by words call "
    "search_errors; get_error gives a record in full. Quote the record's solutions; do not invent "
    "fixes for errors errkb lists as unmatched."
)


class _Output(BaseModel):
    """A tool's structured output: the operation's JSON object, published under its schema.

    The SDK derives a tool's ``outputSchema`` from its return type; a plain dict would publish
    a generic object. Each subclass publishes the shipped schema of what it returns, written
    out whole (``errkb.serve.schemas``) so that a client can validate the output against it.
    The object itself passes through as it is (every key kept).
    """

    model_config = ConfigDict(extra="allow")
    SCHEMA: ClassVar[str]

    @classmethod
    def __get_pydantic_json_schema__(
        cls, _core_schema: CoreSchema, _handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return schemas.bundled_schema(cls.SCHEMA)


class Explanation(_Output):
    SCHEMA = schemas.EXPLANATION


class SearchResults(_Output):
    SCHEMA = schemas.SEARCH


class RecordDetail(_Output):
    SCHEMA = schemas.RECORD_DETAIL


class CheckResult(_Output):
    SCHEMA = schemas.CHECK


class DatasetStatus(_Output):
    SCHEMA = schemas.STATUS


_O = TypeVar("_O", bound=_Output)

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def build_server(service: Service) -> MCPServer[Any]:
    """An MCP server whose tools answer from ``service`` (one knowledge base for all sessions)."""
    from errkb import __version__

    server: MCPServer[Any] = MCPServer(
        "errkb", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    @server.tool(annotations=_READ_ONLY)
    def explain_log(
        text: Annotated[
            str,
            Field(
                description="The raw text: a whole traceback, a log excerpt, or any pasted "
                "output (timestamps, rank prefixes, ANSI colours are fine).",
                max_length=MAX_TEXT_CHARS,
            ),
        ],
    ) -> Explanation:
        """Find and explain every known Python error in a log or traceback.

        Returns the `errkb explain --format json` object: `matches` (each with `confidence`
        exact or similar, `captures` = values taken from the message, `lines` in the input,
        `rootCause`, `diagnosis` from a reference validator when one exists, and the full
        `record` with documentation and solutions) and `unmatched` exceptions errkb does not know.
        """
        return _call(Explanation, lambda: service.explain(text))

    @server.tool(annotations=_READ_ONLY)
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
            Field(description="The exception class, e.g. ValueError, if known."),
        ] = None,
    ) -> Explanation:
        """Explain one exception message (what a bot has when it caught the error itself).

        Returns the same object as explain_log, for that one message.
        """
        return _call(Explanation, lambda: service.match(message, errorClass))

    @server.tool(annotations=_READ_ONLY)
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

    @server.tool(annotations=_READ_ONLY)
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

    @server.tool(annotations=_READ_ONLY)
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

    @server.tool(annotations=_READ_ONLY)
    def dataset_status() -> DatasetStatus:
        """Which dataset version errkb answers from, and how current it is.

        Returns datasetVersion, record and repository counts, and the last sync (when, from
        which source).
        """
        return _call(DatasetStatus, service.status)

    return server


def run_server(service: Service, address: tuple[str, int] | None) -> None:
    """Serve the tools until interrupted: over stdio, or streamable HTTP at ``address``."""
    server = build_server(service)
    with service.preparing():
        if address is None:
            server.run("stdio")
            return
        import uvicorn

        host, port = address
        app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
        uvicorn.run(app, host=host, port=port, log_level="warning")


def _call(output: type[_O], operation: Callable[[], dict[str, Any]]) -> _O:
    """Run one operation; an errkb error becomes a tool error the assistant can read."""
    try:
        result = operation()
    except ErrkbError as exc:
        raise ToolError(str(exc)) from exc
    return output.model_validate(result)
