"""What a bot receives for an explanation: a compact view, or the full one in pages.

``compact`` (MCP's default): one entry per record with its occurrences, solutions in short and
the record's link (``schemas/explanation-compact.schema.json``). ``full``: the ``--format json``
object, its matches in pages. Both stay under a ceiling on their encoded size
(``COMPACT_BYTES``, ``FULL_BYTES``); the rest is the next page (``truncated``, ``nextOffset``).
A single full match over the ceiling travels alone on its page.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from errkb.report import Match, Report, Unmatched

#: A compact view's ceiling: a few dozen records with their occurrences.
COMPACT_BYTES = 64_000
#: A full page's ceiling: half the SDK client's 1 MiB limit on one server-sent event.
FULL_BYTES = 512 * 1024
#: Occurrences listed per record in a compact view (the count covers all of them).
MAX_OCCURRENCES = 20
#: Line numbers listed per occurrence in a compact view.
MAX_LINES = 20
#: Unmatched exceptions listed in a view (``unmatchedCount`` counts all of them).
MAX_UNMATCHED = 20
#: Characters kept of a message, a solution or the documentation's summary in a compact view.
SHORT_CHARS = 300
#: Solutions kept per record in a compact view.
MAX_SOLUTIONS = 3


class Detail(enum.StrEnum):
    """How much of each match a view carries."""

    COMPACT = "compact"
    FULL = "full"


def record_link(record_id: str) -> str:
    """The MCP resource URI of one record (also what ``get_error`` takes: its id)."""
    return f"errkb://records/{record_id}"


@dataclass(frozen=True)
class ExplanationView:
    """One page of an explanation, ready to send: ``to_dict()`` is the JSON."""

    detail: Detail
    header: Mapping[str, Any]  #: errkb, datasetVersion, knowledgeBase (as in the full report)
    matches: tuple[Mapping[str, Any], ...]
    unmatched: tuple[Mapping[str, Any], ...]
    offset: int  #: index of this page's first match among all of the view's matches
    total: int  #: all matches (compact: records) of the explanation
    occurrences: int  #: all exceptions matched, over every page
    unmatched_count: int

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.matches)
        return end if end < self.total else None

    @property
    def truncated(self) -> bool:
        return self.next_offset is not None or len(self.unmatched) < self.unmatched_count

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.header,
            "detail": self.detail.value,
            "matches": [dict(m) for m in self.matches],
            "unmatched": [dict(u) for u in self.unmatched],
            "offset": self.offset,
            "total": self.total,
            "occurrences": self.occurrences,
            "unmatchedCount": self.unmatched_count,
            "truncated": self.truncated,
            "nextOffset": self.next_offset,
        }


def summary(view: Mapping[str, Any]) -> str:
    """A few lines for a client that reads only text: not a second copy of the JSON."""
    total, occurrences = int(view.get("total", len(view["matches"]))), view.get("occurrences")
    unmatched = int(view.get("unmatchedCount", len(view["unmatched"])))
    if not total and not unmatched:
        return "errkb found no exception in the text."
    lines = [
        f"errkb found {total} known error(s) ({occurrences} occurrence(s)) and {unmatched} "
        "unmatched exception(s)."
    ]
    for m in view["matches"][:10]:
        count = m.get("occurrenceCount", m.get("occurrences"))
        lines.append(f"- {m['id']} {m['slug']} ({m['confidence']}, {count}x)")
    if len(view["matches"]) > 10:
        lines.append(f"- ... {len(view['matches']) - 10} more on this page (structured content)")
    if view.get("nextOffset") is not None:
        lines.append(f"More: call again with offset={view['nextOffset']}.")
    if view["matches"]:
        lines.append("Full record: get_error with the id. Quote the record's solutions.")
    return "\n".join(lines)


def explanation_view(
    report: Report,
    detail: Detail = Detail.COMPACT,
    *,
    offset: int = 0,
    max_bytes: int | None = None,
) -> ExplanationView:
    """One page of ``report`` at ``detail``, from match ``offset``, under ``max_bytes``."""
    if offset < 0:
        raise ValueError(f"offset must be >= 0, not {offset}")
    if detail is Detail.COMPACT:
        items = compact_matches(report.matches)
        unmatched = [_compact_unmatched(u) for u in report.unmatched[:MAX_UNMATCHED]]
        budget = COMPACT_BYTES if max_bytes is None else max_bytes
    else:
        items = [m.to_dict() for m in report.matches]
        unmatched = [u.to_dict() for u in report.unmatched[:MAX_UNMATCHED]]
        budget = FULL_BYTES if max_bytes is None else max_bytes
    full = report.to_dict()
    header: dict[str, Any] = {
        k: full[k] for k in ("errkb", "datasetVersion", "knowledgeBase") if k in full
    }
    # The envelope (header, counts, unmatched) first; matches fill what is left.
    used = _size(header) + 200 + sum(_size(u) + 1 for u in unmatched)
    while unmatched and used > budget // 2:
        used -= _size(unmatched.pop()) + 1
    page: list[Mapping[str, Any]] = []
    for item in items[offset:]:
        size = _size(item) + 1
        if page and used + size > budget:
            break
        page.append(item)
        used += size
    return ExplanationView(
        detail=detail,
        header=header,
        matches=tuple(page),
        unmatched=tuple(unmatched),
        offset=offset,
        total=len(items),
        occurrences=sum(m.occurrences for m in report.matches),
        unmatched_count=len(report.unmatched),
    )


def compact_matches(matches: Sequence[Match]) -> list[dict[str, Any]]:
    """One entry per record and confidence, in ``decide``'s order, captures per occurrence."""
    grouped: dict[tuple[str, str], list[Match]] = {}
    for m in matches:
        grouped.setdefault((m.id, m.confidence.value), []).append(m)
    return [_compact(group) for group in grouped.values()]


def _compact(group: list[Match]) -> dict[str, Any]:
    first = group[0]
    record = first.record
    solutions = record.get("solutions")
    documentation = record.get("documentation")
    return {
        "id": first.id,
        "slug": first.slug,
        "title": _short(str(record.get("errorMessage") or first.exception.message)),
        "repo": record.get("repo"),
        "errorClass": record.get("errorClass"),
        "severity": record.get("severity"),
        "confidence": first.confidence.value,
        "rootCause": any(m.root_cause for m in group),
        "validator": first.validated,
        "occurrenceCount": sum(m.occurrences for m in group),
        "occurrences": [_occurrence(m) for m in group[:MAX_OCCURRENCES]],
        "omittedOccurrences": max(0, len(group) - MAX_OCCURRENCES),
        "summary": _short(str(documentation)) if isinstance(documentation, str) else None,
        "solutions": [_short(str(s)) for s in solutions[:MAX_SOLUTIONS]]
        if isinstance(solutions, list)
        else [],
        "link": record_link(first.id),
    }


def _occurrence(m: Match) -> dict[str, Any]:
    out: dict[str, Any] = {
        "captures": {k: _short(v) for k, v in m.captures},
        "count": m.occurrences,
        "lines": list(m.lines[:MAX_LINES]),
        "message": _short(m.exception.message),
        "diagnosis": m.diagnosis.explanation if m.diagnosis is not None else None,
    }
    if m.source is not None:
        out["source"] = m.source
    return out


def _compact_unmatched(u: Unmatched) -> dict[str, Any]:
    d = u.to_dict()
    d["message"] = _short(u.message)
    d["lines"] = d["lines"][:MAX_LINES]
    return d


def _short(text: str) -> str:
    return text if len(text) <= SHORT_CHARS else text[: SHORT_CHARS - 1] + "…"


def _size(value: object) -> int:
    # ASCII-escaped, the larger of the two encodings a transport may use.
    return len(json.dumps(value))
