"""``errkb triage``'s values: what many logs held, known errors counted, unknown ones grouped.

A :class:`LogResult` is one log's share (plain JSON across processes); the reduce folds them
into one :class:`TriageReport` (``schemas/triage.schema.json``). Every collection is sorted by
its own content, so the report does not depend on arrival order. Exit codes: 1 unknown (or
new) errors, else 3 unreadable logs, else 0 (an empty log is clean); 2 for errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Report-level exit code when some logs could not be read (the rest were triaged).
EXIT_LOG_ERRORS = 3


@dataclass(frozen=True)
class Example:
    """One occurrence shown as an example: the file, its line, the message printed there."""

    file: str
    line: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class KnownGroup:
    """One record's occurrences across the logs."""

    id: str
    slug: str
    error_class: str | None
    logs: int
    occurrences: int
    files: tuple[str, ...]  #: every log it was seen in, sorted
    first_seen: str | None  #: ISO 8601: the earliest timestamp of a log it is in
    last_seen: str | None
    captures: tuple[tuple[str, tuple[str, ...]], ...]  #: each capture's distinct values, sorted
    diagnoses: tuple[str, ...]  #: the distinct diagnoses of the reference validator
    examples: tuple[Example, ...]
    new: bool = False  #: not in the baseline run
    fix: str | None = None  #: the record's first solution, on one line
    link: str | None = None  #: where the record's message is raised (its GitHub URL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "slug": self.slug,
            "class": self.error_class,
            "logs": self.logs,
            "occurrences": self.occurrences,
            "files": list(self.files),
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
            "captures": {name: list(vals) for name, vals in self.captures},
            "diagnoses": list(self.diagnoses),
            "examples": [e.to_dict() for e in self.examples],
            "new": self.new,
            "fix": self.fix,
            "link": self.link,
        }


@dataclass(frozen=True)
class UnknownGroup:
    """Exception messages no record explains, of one template."""

    cluster: str
    error_class: str | None
    template: str
    count: int  #: occurrences
    logs: int
    first_seen: str | None
    last_seen: str | None
    values: tuple[tuple[str, ...], ...]  #: per varying slot, its distinct values (sorted, capped)
    examples: tuple[Example, ...]
    new: bool = False
    #: The baseline's clusters this group was recognised as, sorted (empty: none, or new).
    baseline_clusters: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "class": self.error_class,
            "template": self.template,
            "count": self.count,
            "logs": self.logs,
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
            "values": [list(v) for v in self.values],
            "examples": [e.to_dict() for e in self.examples],
            "new": self.new,
            "baselineClusters": list(self.baseline_clusters),
        }


@dataclass(frozen=True)
class LogError:
    """A log that could not be triaged, and why, in one line."""

    file: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "reason": self.reason}


@dataclass(frozen=True)
class Row:
    """One occurrence, for ``--format jsonl`` / ``csv`` (a warehouse's rows)."""

    file: str
    line: int
    kind: str  #: ``known`` or ``unknown``
    id: str  #: the record id or the cluster id
    error_class: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "kind": self.kind,
            "id": self.id,
            "class": self.error_class,
            "message": self.message,
        }


@dataclass(frozen=True)
class TriageReport:
    """What triage found in many logs: ``to_dict()`` is the ``--format json`` object."""

    errkb_version: str
    dataset_version: str | None
    logs: int  #: logs read (errors included)
    bytes: int  #: bytes read, as stored (compressed logs count their compressed size)
    known: tuple[KnownGroup, ...]
    unknown: tuple[UnknownGroup, ...]
    errors: tuple[LogError, ...]
    rows: tuple[Row, ...] = field(default=(), repr=False)
    baseline: str | None = None  #: the baseline file compared against
    workers_lost: int = 0  #: worker processes that died (their logs were retried once)
    empty: tuple[str, ...] = ()  #: logs that hold nothing (read, and clean), sorted

    @property
    def found(self) -> bool:
        """Unknown errors were found, or (with a baseline) errors new since then."""
        if self.baseline is not None:
            return any(k.new for k in self.known) or any(u.new for u in self.unknown)
        return bool(self.unknown)

    @property
    def exit_code(self) -> int:
        """1 when something unknown or new was found, else 3 for an unreadable log, else 0."""
        if self.found:
            return 1
        if self.errors:
            return EXIT_LOG_ERRORS
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "errkb": self.errkb_version,
            "datasetVersion": self.dataset_version,
            "logs": self.logs,
            "bytes": self.bytes,
            "baseline": self.baseline,
            "workersLost": self.workers_lost,
            "known": [k.to_dict() for k in self.known],
            "unknown": [u.to_dict() for u in self.unknown],
            "errors": [e.to_dict() for e in self.errors],
            "empty": list(self.empty),
        }


@dataclass(frozen=True)
class KnownHit:
    """One record matched in one log (with one set of captured values)."""

    id: str
    slug: str
    error_class: str | None
    occurrences: int
    lines: tuple[int, ...]
    captures: tuple[tuple[str, str], ...]
    message: str
    diagnosis: str | None
    fix: str | None = None  #: the record's first solution, on one line
    link: str | None = None  #: the record's GitHub URL

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "slug": self.slug,
            "class": self.error_class,
            "occurrences": self.occurrences,
            "lines": list(self.lines),
            "captures": [list(c) for c in self.captures],
            "message": self.message,
            "diagnosis": self.diagnosis,
            "fix": self.fix,
            "link": self.link,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KnownHit:
        return cls(
            str(d["id"]),
            str(d["slug"]),
            d["class"],
            int(d["occurrences"]),
            tuple(int(n) for n in d["lines"]),
            tuple((str(k), str(v)) for k, v in d["captures"]),
            str(d["message"]),
            d["diagnosis"],
            d.get("fix"),
            d.get("link"),
        )


@dataclass(frozen=True)
class UnknownHit:
    """One exception no record explains, in one log."""

    error_class: str | None
    message: str
    occurrences: int
    lines: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.error_class,
            "message": self.message,
            "occurrences": self.occurrences,
            "lines": list(self.lines),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UnknownHit:
        return cls(d["class"], str(d["message"]), int(d["occurrences"]), tuple(d["lines"]))


@dataclass(frozen=True)
class LogResult:
    """What one log held: the per-log function's output, JSON in and out."""

    file: str
    bytes: int
    first: str | None  #: the log's first timestamp (ISO 8601, UTC), else its mtime
    last: str | None
    known: tuple[KnownHit, ...] = ()
    unknown: tuple[UnknownHit, ...] = ()
    error: str | None = None  #: why the log could not be triaged (one line)
    dataset_version: str | None = None
    empty: bool = False  #: the log holds nothing but white space: read, and clean

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "bytes": self.bytes,
            "first": self.first,
            "last": self.last,
            "known": [k.to_dict() for k in self.known],
            "unknown": [u.to_dict() for u in self.unknown],
            "error": self.error,
            "datasetVersion": self.dataset_version,
            "empty": self.empty,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogResult:
        return cls(
            str(d["file"]),
            int(d["bytes"]),
            d["first"],
            d["last"],
            tuple(KnownHit.from_dict(k) for k in d["known"]),
            tuple(UnknownHit.from_dict(u) for u in d["unknown"]),
            d["error"],
            d.get("datasetVersion"),
            bool(d.get("empty", False)),
        )
