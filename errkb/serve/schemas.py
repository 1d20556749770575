"""The JSON Schemas of what a bot gets back, each self-contained (MCP ``outputSchema``, OpenAPI).

Every whole-file ``$ref`` between shipped schemas is replaced by the schema it names (its
``$schema``/``$id`` dropped); any other ``$ref`` is refused.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

#: What each bot-facing operation returns, by its shipped schema.
EXPLANATION = "explanation.schema.json"
EXPLANATION_VIEW = "explanation-view.schema.json"  #: compact, or a page of the full one
EXPLANATION_COMPACT = "explanation-compact.schema.json"
SEARCH = "search.schema.json"
RECORD_DETAIL = "record-detail.schema.json"
CHECK = "check.schema.json"
STATUS = "status.schema.json"


def bundled_schema(filename: str) -> dict[str, Any]:
    """The shipped schema ``filename`` with every reference to another shipped file inlined."""
    return copy.deepcopy(_bundled(filename))


@functools.cache
def _bundled(filename: str) -> dict[str, Any]:
    schema: dict[str, Any] = _inline(_load(filename), (filename,))
    return schema


def _load(filename: str) -> dict[str, Any]:
    """A shipped schema, without the ``$defs`` copies of files it embeds (all inlined)."""
    from errkb._resources import schema_path

    schema: dict[str, Any] = json.loads(schema_path(filename).read_text(encoding="utf-8"))
    defs = schema.get("$defs")
    if isinstance(defs, dict):
        kept = {k: v for k, v in defs.items() if not (isinstance(v, dict) and "$id" in v)}
        if kept:
            schema["$defs"] = kept
        else:
            del schema["$defs"]
    return schema


def _inline(node: Any, seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if ref is None:
        return {key: _inline(value, seen) for key, value in node.items()}
    if not isinstance(ref, str) or not ref.endswith(".schema.json") or "/" in ref:
        raise ValueError(f"{seen[-1]}: $ref {ref!r} is not a shipped schema file")
    if ref in seen:
        raise ValueError(f"{seen[-1]}: $ref {ref!r} refers back to itself ({' -> '.join(seen)})")
    target = {k: v for k, v in _load(ref).items() if k not in ("$schema", "$id")}
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    return _inline({**target, **siblings}, (*seen, ref))
