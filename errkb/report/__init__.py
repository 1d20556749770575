"""Report values: what each command found, as frozen values whose ``to_dict()`` is the JSON.

Each carries its own ``exit_code`` (the README's table). ``Report.to_dict()`` is the
``errkb explain --format json`` object (``schemas/explanation.schema.json``, additive changes
only). This module holds explain's values and the validators' (:class:`Finding`,
:class:`Diagnosis`, :class:`Condition`); every other family is a submodule imported only by
its users (so a cold explain creates none), re-exported here on first use (PEP 562).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from errkb import _lazy

if TYPE_CHECKING:
    from errkb.report.check import CheckReport
    from errkb.report.diagnostics import MAX_SHOWN_PROBLEMS, Diagnostics
    from errkb.report.ingest import IngestReport
    from errkb.report.limits import Truncation
    from errkb.report.lint import RULE_SEVERITY, LintFinding, LintReport, LintRule, Severity
    from errkb.report.records import RecordList, RecordSummary, Stats
    from errkb.report.sync import (
        HistoryEntry,
        RecordHistory,
        SyncReport,
        SyncStatus,
        UpdateCheck,
        UpdateStatus,
        VersionList,
        parse_version,
    )


class Confidence(enum.StrEnum):
    """How sure errkb is that a match explains the exception."""

    #: the record's pattern matched, with the evidence its template's specificity needs
    EXACT = "exact"
    #: the pattern matched, but the evidence falls short (a generic template without its class
    #: and frame, a contradicting class): shown after the answers, never counted as known
    POSSIBLE = "possible"
    SIMILAR = "similar"  #: a suggestion: the closest templates to an unmatched message


class DecisionRule(enum.StrEnum):
    """Which rule of ``errkb.match.decide`` made a match exact or only possible."""

    SPECIFIC = "specific"  #: a specific template: its match alone is the answer
    #: a generic template backed by the record's class and a frame in its file
    GENERIC_WITH_CLASS_AND_FRAME = "generic-with-class-and-frame"
    CLASS_CONTRADICTS = "class-contradicts"  #: the printed class is not the record's
    GENERIC_WITHOUT_CLASS = "generic-without-class"  #: generic, and no class agrees
    GENERIC_WITHOUT_FRAME = "generic-without-frame"  #: generic, and no frame in its file
    #: generic, and it matched only part of a longer message (or one embedded in another)
    GENERIC_INSIDE_LONGER_MESSAGE = "generic-inside-longer-message"


class FoundBy(enum.StrEnum):
    """Which pass found a matched message."""

    PARSER = "parser"  #: an exception, traceback or error record the parser read
    MESSAGE_FIRST = "message-first"  #: the message-first pass, at a message boundary of a line
    CONTAINER = "container"  #: a string decoded from a container (JSON, markup, YAML)


@dataclass(frozen=True)
class Decision:
    """The evidence one match was decided on, and the rule that decided it."""

    rule: DecisionRule
    specificity: float  #: ``errkb.records.specificity`` of the record's template
    generic: bool  #: below the specificity line
    class_agrees: bool | None  #: None: no class to compare
    frame: bool  #: a traceback frame is in the record's file
    whole: bool  #: the pattern covered the whole message
    found: FoundBy

    @property
    def confidence(self) -> Confidence:
        exact = self.rule in (DecisionRule.SPECIFIC, DecisionRule.GENERIC_WITH_CLASS_AND_FRAME)
        return Confidence.EXACT if exact else Confidence.POSSIBLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.value,
            "specificity": self.specificity,
            "generic": self.generic,
            "classAgrees": self.class_agrees,
            "frame": self.frame,
            "whole": self.whole,
            "found": self.found.value,
        }


class Condition(enum.StrEnum):
    """What a diagnosis concluded about a message's values."""

    SCALE_COLUMNWISE = "scale-columnwise"  #: (1, out): saved as a row; transpose it
    SCALE_FLATTENED = "scale-flattened"  #: (out,): lost its trailing 1
    SCALE_PER_GROUP = "scale-per-group"  #: (out, groups): several scales per row
    SCALE_TRANSPOSED = "scale-transposed"  #: one scale per input feature instead of per row
    SCALE_PER_COLUMN = "scale-per-column"  #: (1, in): one scale per input column
    SCALE_ROWS_MISMATCH = "scale-rows-mismatch"  #: (n, 1) with n != out
    SCALE_EXTRA_DIMS = "scale-extra-dims"  #: right number of values, extra dimensions
    SCALE_SCALAR = "scale-scalar"  #: a () scale where one per row is needed
    SCALE_ONE_ELEMENT = "scale-one-element"  #: (1,): a scalar with an extra dimension
    SCALE_DTYPE = "scale-dtype"  #: only the dtype is wrong
    SCALE_OTHER = "scale-other"  #: wrong in a way no named pattern covers
    WEIGHT_NOT_2D = "weight-not-2d"  #: the weight is not a 2-D matrix (e.g. a 4-D conv kernel)
    NOT_PER_TENSOR = "not-per-tensor"  #: a per-tensor slot got a tensor of several values
    EMPTY_SCALE = "empty-scale"  #: a scale with 0 elements
    NOT_THIS_CHECK = "not-this-check"  #: these values pass the check: the message is not from it
    UNPARSED = "unparsed"  #: a captured value is missing or could not be read


@dataclass(frozen=True)
class Diagnosis:
    """What a record's message says about the checkpoint, read from the message's values."""

    record_id: str
    condition: Condition
    expected: str | None  #: what the value should have been, when the message lets us say
    explanation: str  #: one or two plain sentences: what is wrong and how to fix it
    unknowns: tuple[str, ...] = ()  #: values the fix needs that the message does not show

    def to_dict(self) -> dict[str, object]:
        return {
            "recordId": self.record_id,
            "condition": self.condition.value,
            "expected": self.expected,
            "explanation": self.explanation,
            "unknowns": list(self.unknowns),
        }


@dataclass(frozen=True)
class Finding:
    """One failed upstream condition found in a checkpoint."""

    path: str  #: the file the condition was found in
    prefix: str | None  #: the layer prefix, or None for a file-level condition
    tensor: str | None  #: the tensor the condition is about, when there is one
    message: str  #: upstream's exact message
    record_id: str | None  #: the record this message maps to; None for a sibling without one
    check: str  #: the name of the validator that found it (``quanto``, ``comfy``, ``linear``)
    rule: str  #: the stable rule id (the record id, or e.g. ``quanto.missing-tensors``)

    def to_dict(self) -> dict[str, str | None]:
        return {
            "path": self.path,
            "prefix": self.prefix,
            "tensor": self.tensor,
            "message": self.message,
            "recordId": self.record_id,
            "check": self.check,
            "rule": self.rule,
        }


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
    diagnosis: Diagnosis | None = None  #: when the record has a reference validator
    validated: bool = False  #: the record is backed by a reference validator
    source: str | None = None  #: the input file, when several were explained together
    #: Why an exact or possible match is what it is (None on similar suggestions).
    decision: Decision | None = None

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
        if self.decision is not None:
            out["decision"] = self.decision.to_dict()
        return out


@dataclass(frozen=True)
class Unmatched:
    """An exception found in the input that no record's pattern matched."""

    cls: str | None
    message: str
    line: int  #: the first line it is at (``lines[0]``)
    source: str | None = None  #: the input file, when several were explained together
    lines: tuple[int, ...] = ()  #: every line the same class and message are at, in order
    occurrences: int = 1
    #: Only possible matches explain it: they stand in place of suggestions (not serialized).
    possible: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "class": self.cls,
            "message": self.message,
            "line": self.line,
            "lines": list(self.lines or (self.line,)),
            "occurrences": self.occurrences,
        }
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass(frozen=True)
class InputFile:
    """One input of a several-file explain: its name and, when it could not be read, why."""

    source: str  #: the name as given (``-`` for standard input)
    error: str | None = None  #: one line: why it could not be read; None when it was explained

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "error": self.error}


@dataclass(frozen=True)
class KnowledgeBaseInfo:
    """What the knowledge base held: set on a report only while it is the bundled sample."""

    records: int
    bundled_sample: bool

    def note(self) -> str | None:
        """The one line explain ends with while only the bundled sample is installed."""
        if not self.bundled_sample:
            return None
        return (
            f"Note: this knowledge base holds only the bundled sample ({self.records} records); "
            "run `errkb sync` to fetch the full ErrLookup dataset."
        )

    def to_dict(self) -> dict[str, Any]:
        return {"records": self.records, "bundledSample": self.bundled_sample}


@dataclass(frozen=True)
class Report:
    """What explain found: ``to_dict()`` is exactly the ``--format json`` object."""

    errkb_version: str
    dataset_version: str | None
    matches: tuple[Match, ...]
    unmatched: tuple[Unmatched, ...]
    knowledge_base: KnowledgeBaseInfo | None = None
    #: What a large input's report left out (``errkb.report.limits``); None: nothing was cut.
    omitted: Truncation | None = None
    #: Several inputs: each one in order, those that could not be read with why (else empty).
    files: tuple[InputFile, ...] = ()

    @property
    def unreadable(self) -> tuple[InputFile, ...]:
        """The inputs that could not be read (each is one line of the report)."""
        return tuple(f for f in self.files if f.error is not None)

    @property
    def exact(self) -> tuple[Match, ...]:
        return tuple(m for m in self.matches if m.confidence is Confidence.EXACT)

    @property
    def explained(self) -> bool:
        """At least one known error was explained (exit code 0 of ``errkb explain``)."""
        return bool(self.exact)

    @property
    def exit_code(self) -> int:
        """0 when a known error was explained, 1 when none was, 2 when an input was unreadable."""
        if self.unreadable:
            return 2
        return 0 if self.explained else 1

    @classmethod
    def merge(cls, named: Sequence[tuple[str, Report]]) -> Report:
        """One report for several inputs; each match and exception says which file it is from."""
        return cls.of_inputs(named)

    @classmethod
    def of_inputs(cls, inputs: Sequence[tuple[str, Report | str]]) -> Report:
        """One report for several inputs, in order (each a report, or why it could not be read)."""
        named = [(name, r) for name, r in inputs if isinstance(r, Report)]
        files = tuple(InputFile(name, None if isinstance(r, Report) else r) for name, r in inputs)
        if not named:
            return cls(_version(), None, (), (), None, None, files)
        first = named[0][1]
        cuts = [r.omitted for _name, r in named if r.omitted is not None]
        omitted = None
        if cuts:
            from errkb.report.limits import Truncation

            omitted = Truncation.combine(cuts)
        return cls(
            first.errkb_version,
            first.dataset_version,
            tuple(replace(m, source=name) for name, r in named for m in r.matches),
            tuple(replace(u, source=name) for name, r in named for u in r.unmatched),
            first.knowledge_base,
            omitted,
            files,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "errkb": self.errkb_version,
            "datasetVersion": self.dataset_version,
            "matches": [m.to_dict() for m in self.matches],
            "unmatched": [u.to_dict() for u in self.unmatched],
            **({"knowledgeBase": self.knowledge_base.to_dict()} if self.knowledge_base else {}),
            **({"omitted": self.omitted.to_dict()} if self.omitted else {}),
            **({"files": [f.to_dict() for f in self.files]} if self.files else {}),
        }


def _version() -> str:
    from errkb import __version__

    return __version__


@dataclass(frozen=True)
class RecordView:
    """One record as ``errkb show`` presents it."""

    record: Mapping[str, Any] = field(repr=False)  #: the record's JSON object, exactly
    validated: bool = False  #: the record is backed by a reference validator
    retired: bool = False

    exit_code = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


#: The other families' names, by the submodule defining each: imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "CheckReport": ("errkb.report.check", "CheckReport"),
    "MAX_SHOWN_PROBLEMS": ("errkb.report.diagnostics", "MAX_SHOWN_PROBLEMS"),
    "Diagnostics": ("errkb.report.diagnostics", "Diagnostics"),
    "IngestReport": ("errkb.report.ingest", "IngestReport"),
    "Truncation": ("errkb.report.limits", "Truncation"),
    "RULE_SEVERITY": ("errkb.report.lint", "RULE_SEVERITY"),
    "LintFinding": ("errkb.report.lint", "LintFinding"),
    "LintReport": ("errkb.report.lint", "LintReport"),
    "LintRule": ("errkb.report.lint", "LintRule"),
    "Severity": ("errkb.report.lint", "Severity"),
    "RecordList": ("errkb.report.records", "RecordList"),
    "RecordSummary": ("errkb.report.records", "RecordSummary"),
    "Stats": ("errkb.report.records", "Stats"),
    "HistoryEntry": ("errkb.report.sync", "HistoryEntry"),
    "RecordHistory": ("errkb.report.sync", "RecordHistory"),
    "SyncReport": ("errkb.report.sync", "SyncReport"),
    "SyncStatus": ("errkb.report.sync", "SyncStatus"),
    "UpdateCheck": ("errkb.report.sync", "UpdateCheck"),
    "UpdateStatus": ("errkb.report.sync", "UpdateStatus"),
    "VersionList": ("errkb.report.sync", "VersionList"),
    "parse_version": ("errkb.report.sync", "parse_version"),
}


def __getattr__(name: str) -> object:
    return _lazy.load(__name__, globals(), _LAZY, name)


__all__ = [
    "MAX_SHOWN_PROBLEMS",
    "RULE_SEVERITY",
    "Alternative",
    "CheckReport",
    "Condition",
    "Confidence",
    "Decision",
    "DecisionRule",
    "Diagnosis",
    "Diagnostics",
    "ExceptionInfo",
    "Finding",
    "FoundBy",
    "HistoryEntry",
    "IngestReport",
    "InputFile",
    "KnowledgeBaseInfo",
    "LintFinding",
    "LintReport",
    "LintRule",
    "Match",
    "RecordHistory",
    "RecordList",
    "RecordSummary",
    "RecordView",
    "Report",
    "Severity",
    "Stats",
    "SyncReport",
    "SyncStatus",
    "Truncation",
    "Unmatched",
    "UpdateCheck",
    "UpdateStatus",
    "VersionList",
    "parse_version",
]
