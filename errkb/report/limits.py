"""What a large explain left out of its report (issue 21): counts of what was cut.

The record-driven scan keeps at most ``Limits`` entries and counts the rest exactly; this
value says what was cut and how to get it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: How to get what was cut, as the JSON says it.
HOW = (
    "counts are exact; to list every entry run `errkb explain --all` (or "
    "KnowledgeBase.explain(text, limits=None)), or explain a part of the input"
)


@dataclass(frozen=True)
class Truncation:
    """Entries a report does not list, by kind; every count is exact."""

    matches: int  #: distinct (record, captures) matches not listed
    match_occurrences: int  #: their occurrences
    records: tuple[tuple[str, int], ...]  #: (record id, matches not listed), most first
    unmatched: int  #: distinct unmatched (class, message) entries not listed
    unmatched_occurrences: int  #: their occurrences
    lines: int  #: line numbers left out of listed entries' ``lines`` (occurrences stay exact)

    @classmethod
    def combine(cls, cuts: Sequence[Truncation]) -> Truncation:
        """What several reports (one per input file) cut, together."""
        records: dict[str, int] = {}
        for cut in cuts:
            for rid, n in cut.records:
                records[rid] = records.get(rid, 0) + n
        return cls(
            matches=sum(c.matches for c in cuts),
            match_occurrences=sum(c.match_occurrences for c in cuts),
            records=tuple(sorted(records.items(), key=lambda kv: (-kv[1], kv[0]))),
            unmatched=sum(c.unmatched for c in cuts),
            unmatched_occurrences=sum(c.unmatched_occurrences for c in cuts),
            lines=sum(c.lines for c in cuts),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "matches": self.matches,
            "matchOccurrences": self.match_occurrences,
            "records": [{"id": rid, "matches": n} for rid, n in self.records],
            "unmatched": self.unmatched,
            "unmatchedOccurrences": self.unmatched_occurrences,
            "lines": self.lines,
            "how": HOW,
        }
