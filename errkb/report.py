"""Report values: what explain found, as frozen values whose ``to_dict()`` is the JSON contract.

``Report.to_dict()`` is exactly the ``errkb explain --format json`` object described by
``schemas/explanation.schema.json`` (changes are additive only).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any


class Confidence(enum.StrEnum):
    """How sure errkb is that a match explains the exception."""

    EXACT = "exact"  #: the record's full pattern matched the message
    SIMILAR = "similar"  #: a suggestion: the closest templates to an unmatched message


@dataclass(frozen=True)
class ExceptionInfo:
    """The exception as it appeared in the input."""

    cls: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "message": self.message}


@dataclass(frozen=True)
class Alternative:
    """Another record whose pattern matched the same message but lost to a more specific one."""

    id: str
    slug: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "slug": self.slug, "score": self.score}


@dataclass(frozen=True)
class Match:
    """A known error found in the input (or, with SIMILAR confidence, a suggestion)."""

    id: str
    slug: str
    confidence: Confidence
    score: float
    captures: tuple[tuple[str, str], ...]
    occurrences: int
    lines: tuple[int, ...]
    exception: ExceptionInfo
    record: Mapping[str, Any] = field(repr=False)
    root_cause: bool = False
    alternatives: tuple[Alternative, ...] = ()
    evidence: tuple[str, ...] = ()  #: why the score is what it is, in words
    diagnosis: Any = None  #: a validators.Diagnosis when the record has a reference validator
    validated: bool = False  #: the record is backed by a reference validator
    source: str | None = None  #: the input file, when several were explained together

    @property
    def capture_dict(self) -> dict[str, str]:
        return dict(self.captures)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "slug": self.slug,
            "confidence": self.confidence.value,
            "score": self.score,
            "captures": dict(self.captures),
            "occurrences": self.occurrences,
            "lines": list(self.lines),
            "exception": self.exception.to_dict(),
            "rootCause": self.root_cause,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "evidence": list(self.evidence),
            "validator": self.validated,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis is not None else None,
            "record": dict(self.record),
        }
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass(frozen=True)
class Unmatched:
    """An exception found in the input that no record's pattern matched."""

    cls: str | None
    message: str
    line: int
    source: str | None = None  #: the input file, when several were explained together

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.cls, "message": self.message, "line": self.line}
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass(frozen=True)
class Report:
    """What explain found: ``to_dict()`` is exactly the ``--format json`` object."""

    errkb_version: str
    dataset_version: str | None
    matches: tuple[Match, ...]
    unmatched: tuple[Unmatched, ...]

    @property
    def exact(self) -> tuple[Match, ...]:
        return tuple(m for m in self.matches if m.confidence is Confidence.EXACT)

    @property
    def explained(self) -> bool:
        """At least one known error was explained (exit code 0 of ``errkb explain``)."""
        return bool(self.exact)

    @classmethod
    def merge(cls, named: Sequence[tuple[str, Report]]) -> Report:
        """One report for several inputs; each match and exception says which file it is from."""
        first = named[0][1]
        return cls(
            first.errkb_version,
            first.dataset_version,
            tuple(replace(m, source=name) for name, r in named for m in r.matches),
            tuple(replace(u, source=name) for name, r in named for u in r.unmatched),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "errkb": self.errkb_version,
            "datasetVersion": self.dataset_version,
            "matches": [m.to_dict() for m in self.matches],
            "unmatched": [u.to_dict() for u in self.unmatched],
        }
