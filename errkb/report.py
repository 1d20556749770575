"""Report values: what each command found, as frozen values whose ``to_dict()`` is the JSON.

Every command's library call returns one of these, and each carries its own ``exit_code`` (the
README's "Exit codes" table), so the CLI decides no exit code itself. ``Report.to_dict()`` is
exactly the ``errkb explain --format json`` object described by
``schemas/explanation.schema.json`` (changes are additive only). The validators' vocabulary of
results (:class:`Finding`, :class:`Diagnosis`, :class:`Condition`) lives here too, so that both
``errkb.validators`` and the report can use it without an import cycle. So do the sync family's
results (:class:`SyncReport`, :class:`UpdateCheck`, :class:`HistoryEntry`): ``errkb.sync``
produces them and ``errkb.render`` renders them without importing the sync machinery. At run
time this module imports only ``errkb.store``'s driver-free values (``ApplyCounts``) and, when
a history entry's digest is asked for, ``errkb.records``.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from errkb.store import ApplyCounts

if TYPE_CHECKING:
    from errkb.checkpoint.inputs import FileError
    from errkb.errors import Problem
    from errkb.records import Record
    from errkb.store import ChangeKind, Diff, RecordJSON, VersionInfo, VersionKind


class Confidence(enum.StrEnum):
    """How sure errkb is that a match explains the exception."""

    EXACT = "exact"  #: the record's full pattern matched the message
    SIMILAR = "similar"  #: a suggestion: the closest templates to an unmatched message


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
    line: int  #: the first line it is at (``lines[0]``)
    source: str | None = None  #: the input file, when several were explained together
    lines: tuple[int, ...] = ()  #: every line the same class and message are at, in order
    occurrences: int = 1

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

    @property
    def exact(self) -> tuple[Match, ...]:
        return tuple(m for m in self.matches if m.confidence is Confidence.EXACT)

    @property
    def explained(self) -> bool:
        """At least one known error was explained (exit code 0 of ``errkb explain``)."""
        return bool(self.exact)

    @property
    def exit_code(self) -> int:
        """Return 0 when a known error was explained, 1 when none was (grep's convention)."""
        return 0 if self.explained else 1

    @classmethod
    def merge(cls, named: Sequence[tuple[str, Report]]) -> Report:
        """One report for several inputs; each match and exception says which file it is from."""
        first = named[0][1]
        return cls(
            first.errkb_version,
            first.dataset_version,
            tuple(replace(m, source=name) for name, r in named for m in r.matches),
            tuple(replace(u, source=name) for name, r in named for u in r.unmatched),
            first.knowledge_base,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "errkb": self.errkb_version,
            "datasetVersion": self.dataset_version,
            "matches": [m.to_dict() for m in self.matches],
            "unmatched": [u.to_dict() for u in self.unmatched],
            **({"knowledgeBase": self.knowledge_base.to_dict()} if self.knowledge_base else {}),
        }


@dataclass(frozen=True)
class RecordView:
    """One record as ``errkb show`` presents it."""

    record: Mapping[str, Any] = field(repr=False)  #: the record's JSON object, exactly
    validated: bool = False  #: the record is backed by a reference validator
    retired: bool = False

    exit_code = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


@dataclass(frozen=True)
class RecordSummary:
    """One line of ``errkb list``."""

    id: str
    repo: str
    error_class: str | None
    slug: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "repo": self.repo, "errorClass": self.error_class, "slug": self.slug}


@dataclass(frozen=True)
class RecordList:
    """The live records ``errkb list`` selected, in id order."""

    records: tuple[RecordSummary, ...]

    exit_code = 0

    @classmethod
    def of(cls, records: Iterable[Record]) -> RecordList:
        """Summarise records (``KnowledgeBase.records()``) as list's lines."""
        return cls(tuple(RecordSummary(r.id, r.repo, r.error_class, r.slug) for r in records))

    def to_dict(self) -> dict[str, Any]:
        return {"records": [r.to_dict() for r in self.records]}


@dataclass(frozen=True)
class Stats:
    """Counts describing the knowledge base."""

    path: str
    records: int
    retired: int
    repos: int
    versions: int
    dataset_version: str | None
    by_class: tuple[tuple[str, int], ...]

    exit_code = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "retired": self.retired,
            "repos": self.repos,
            "versions": self.versions,
            "datasetVersion": self.dataset_version,
            "byClass": dict(self.by_class),
        }


#: Problems listed on standard error beside a report; the rest are counted ("... and N more")
#: and are all in the reject report or the JSON output.
MAX_SHOWN_PROBLEMS = 20


@dataclass(frozen=True)
class Diagnostics:
    """What a command writes on standard error beside its report: notes, problems, warnings.

    Rendered through the registry like any report (text only), so record text quoted in a
    problem is escaped like every human-facing output.
    """

    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    limit: int | None = None  #: at most this many problems shown
    before: tuple[str, ...] = ()  #: lines before the problems (``sync --verbose``)
    after: tuple[str, ...] = ()  #: lines after them (where the rejects were written)

    exit_code = 0


@dataclass(frozen=True)
class IngestReport:
    """What ``ingest`` did: counts, and every rejected record with its reason."""

    counts: ApplyCounts
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...]
    version_id: int | None
    dataset_version: str | None

    @property
    def exit_code(self) -> int:
        """Return 0 when every record was applied, 1 when some were rejected."""
        return 1 if self.counts.rejected else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.counts.to_dict(),
            "datasetVersion": self.dataset_version,
            "problems": [str(p) for p in self.problems],
            "warnings": [str(p) for p in self.warnings],
        }

    def diagnostics(self) -> Diagnostics:
        """Standard error's lines: every rejected record, then every warning."""
        return Diagnostics(tuple(map(str, self.problems)), tuple(map(str, self.warnings)))


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found: findings, the files it read, and the inputs it could not check."""

    findings: tuple[Finding, ...]
    checked: tuple[str, ...]  #: safetensors files whose headers were read and checked
    errors: tuple[FileError, ...]

    @property
    def exit_code(self) -> int:
        """Return 0 when clean, 1 when there are findings, 2 when any input could not be read."""
        if self.errors:
            return 2
        return 1 if self.findings else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [finding.to_dict() for finding in self.findings],
            "checked": list(self.checked),
            "errors": [error.to_dict() for error in self.errors],
        }


class Severity(enum.StrEnum):
    """How bad a lint finding is. Both make ``lint`` exit 1; errors should block a release."""

    ERROR = "error"
    WARNING = "warning"


class LintRule(enum.StrEnum):
    """The stable id of each lint check (used in output and by ``--ignore``)."""

    UNREADABLE = "unreadable"  #: the source item is not JSON, or not a record object
    SCHEMA = "schema"  #: the record (or its envelope) breaks the schemaVersion-2 contract
    DUPLICATE_ID = "duplicate-id"  #: another record read earlier has the same id
    ID_FORMULA = "id-formula"  #: id is not upstream's sha256 formula of repo/message/file
    SLUG_FORMULA = "slug-formula"  #: slug is not upstream's formula of errorCode/errorMessage
    UNKNOWN_FIELD = "unknown-field"  #: fields the contract does not know (kept verbatim)
    PATTERN_RE2 = "pattern-re2"  #: messagePattern does not compile under RE2
    PATTERN_MISMATCH = "pattern-mismatch"  #: messagePattern disagrees with errorMessage
    LAZY_CAPTURE = "lazy-capture"  #: unanchored, the pattern captures the wrong extent
    LOW_SPECIFICITY = "low-specificity"  #: too little literal text to be selective
    AMBIGUOUS = "ambiguous"  #: another record's pattern matches this record's message
    GITHUB_URL = "github-url"  #: githubUrl disagrees with repo/analyzedSha/filePath/lineNumber


#: The severity of every rule: a rule always reports at the same level.
RULE_SEVERITY: Mapping[LintRule, Severity] = {
    LintRule.UNREADABLE: Severity.ERROR,
    LintRule.SCHEMA: Severity.ERROR,
    LintRule.DUPLICATE_ID: Severity.ERROR,
    # Matches records.check_record, which warns: a drifting id duplicates rather than breaks.
    LintRule.ID_FORMULA: Severity.WARNING,
    LintRule.SLUG_FORMULA: Severity.WARNING,
    LintRule.UNKNOWN_FIELD: Severity.WARNING,
    LintRule.PATTERN_RE2: Severity.ERROR,
    LintRule.PATTERN_MISMATCH: Severity.ERROR,
    # errkb anchors every regex it runs, so it is not misled; upstream's own search is.
    LintRule.LAZY_CAPTURE: Severity.WARNING,
    LintRule.LOW_SPECIFICITY: Severity.WARNING,
    LintRule.AMBIGUOUS: Severity.WARNING,
    LintRule.GITHUB_URL: Severity.ERROR,
}


@dataclass(frozen=True)
class LintFinding:
    """One problem with one record (or one unreadable item)."""

    source: str  #: the file the record was read from
    location: str  #: "line 3", "index 12", or "" for a whole-file object
    record_id: str | None  #: None when the item has no string id
    rule: LintRule
    message: str

    @property
    def severity(self) -> Severity:
        return RULE_SEVERITY[self.rule]

    def to_dict(self) -> dict[str, str | None]:
        return {
            "source": self.source,
            "location": self.location,
            "recordId": self.record_id,
            "rule": self.rule.value,
            "severity": self.severity.value,
            "message": self.message,
        }

    def __str__(self) -> str:
        where = self.source + (f" {self.location}" if self.location else "")
        rid = f" [{self.record_id}]" if self.record_id else ""
        return f"{where}{rid} {self.rule.value}: {self.message}"


@dataclass(frozen=True)
class LintReport:
    """Every finding of one lint run, in source order."""

    findings: tuple[LintFinding, ...]
    records: int  #: items read (records and unreadable items)

    @property
    def exit_code(self) -> int:
        """Return 0 when clean, 1 when there are findings (errors raised mean 2, in the CLI)."""
        return 1 if self.findings else 0

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class VersionList:
    """The applied versions, oldest first (``errkb versions``)."""

    versions: tuple[VersionInfo, ...]

    exit_code = 0

    def to_json(self) -> list[dict[str, Any]]:
        """The JSON output: a list (not an object), as ``errkb versions`` has always printed."""
        return [v.to_dict() for v in self.versions]


@dataclass(frozen=True)
class RecordHistory:
    """How one record changed across versions, oldest first (``errkb history``)."""

    key: str  #: the id or slug asked for
    entries: tuple[HistoryEntry, ...]

    exit_code = 0

    def to_json(self) -> list[dict[str, Any]]:
        """The JSON output: a list (not an object), as ``errkb history`` has always printed."""
        return [e.to_dict() for e in self.entries]


# ------------------------------------------------------------------ the sync family's values
def parse_version(text: str) -> dt.datetime | None:
    """Parse a datasetVersion (an ISO timestamp); None when it is not one."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


class SyncStatus(enum.StrEnum):
    """What a sync (or rollback) ended up doing."""

    APPLIED = "applied"  #: a new version row was written
    UP_TO_DATE = "up-to-date"  #: the source is the version we have: nothing to do
    DRY_RUN = "dry-run"  #: the diff was computed; nothing was written


@dataclass(frozen=True)
class SyncReport:
    """What a sync or rollback did (or, for a dry run, would do)."""

    status: SyncStatus
    kind: VersionKind
    source: str
    dataset_version: str | None  #: the version the source holds (or the rollback restored)
    previous_version: str | None  #: the knowledge base's dataset version before
    counts: ApplyCounts = field(default_factory=ApplyCounts)
    version_id: int | None = None  #: the dataset_versions row written
    full: bool = False
    partial: bool = False  #: some records were rejected (``skip_invalid``)
    elapsed: float = 0.0
    problems: tuple[Problem, ...] = ()
    reject_report: str | None = None
    diff: Diff | None = None  #: set for dry runs
    repos_fetched: int = 0
    repos_skipped: int = 0  #: unchanged since the last sync: not downloaded
    hashes: tuple[tuple[str, str], ...] = ()
    repos_cached: int = 0  #: verified by an earlier, interrupted sync: taken from the cache
    bytes_downloaded: int = 0
    #: manifest ``files`` entries errkb does not read: (name, path)
    other_files: tuple[tuple[str, str | None], ...] = ()

    @property
    def changed(self) -> bool:
        return self.status is SyncStatus.APPLIED

    @property
    def exit_code(self) -> int:
        """Return 0 when applied or already current, 1 when ``skip_invalid`` rejected records."""
        return 1 if self.counts.rejected else 0

    def summary(self) -> str:
        """Return the one line the CLI prints at the end."""
        if self.status is SyncStatus.UP_TO_DATE:
            return f"already at {self.dataset_version or 'that version'}: nothing to do"
        c = self.counts
        line = (
            f"added {c.added}, updated {c.updated}, unchanged {c.unchanged}, "
            f"retired {c.retired}, rejected {c.rejected} in {self.elapsed:.1f}s"
        )
        return f"dry run, nothing changed: {line}" if self.status is SyncStatus.DRY_RUN else line

    def diagnostics(self, *, verbose: bool = False) -> Diagnostics:
        """Standard error's lines: the first problems and where the rejects went.

        With ``verbose``, also the source, what was fetched and the manifest entries not used.
        """
        before: list[str] = []
        if verbose:
            before.append(f"source: {self.source}")
            before.append(
                f"repositories: {self.repos_fetched} downloaded "
                f"({self.bytes_downloaded} bytes), {self.repos_cached} from the cache, "
                f"{self.repos_skipped} unchanged"
            )
            before += [
                f"manifest also lists {name}: {path or '(no path)'} (not used)"
                for name, path in self.other_files
            ]
        after = (f"rejected records written to {self.reject_report}",) if self.reject_report else ()
        return Diagnostics(
            tuple(map(str, self.problems)),
            limit=MAX_SHOWN_PROBLEMS,
            before=tuple(before),
            after=after,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "kind": self.kind.value,
            "source": self.source,
            "datasetVersion": self.dataset_version,
            "previousVersion": self.previous_version,
            **self.counts.to_dict(),
            "versionId": self.version_id,
            "full": self.full,
            "partial": self.partial,
            "elapsed": round(self.elapsed, 3),
            "problems": [str(p) for p in self.problems],
            "rejectReport": self.reject_report,
            "diff": self.diff.to_dict() if self.diff is not None else None,
            "reposFetched": self.repos_fetched,
            "reposSkipped": self.repos_skipped,
            "reposCached": self.repos_cached,
            "bytesDownloaded": self.bytes_downloaded,
            "hashes": dict(self.hashes),
            "otherFiles": [{"name": n, "path": p} for n, p in self.other_files],
        }


class UpdateStatus(enum.StrEnum):
    """What the source holds compared with the knowledge base."""

    CURRENT = "current"  #: the same version (or an older one): nothing to sync
    AVAILABLE = "available"  #: a newer version: ``errkb sync`` would apply it


@dataclass(frozen=True)
class UpdateCheck:
    """The knowledge base's dataset version and the one the source publishes."""

    source: str
    current: str | None  #: None: the knowledge base has no dataset version yet
    available: str

    @property
    def status(self) -> UpdateStatus:
        new = parse_version(self.available)
        old = parse_version(self.current) if self.current is not None else None
        if old is None or (new is not None and new > old):
            return UpdateStatus.AVAILABLE
        return UpdateStatus.CURRENT

    @property
    def update_available(self) -> bool:
        return self.status is UpdateStatus.AVAILABLE

    @property
    def exit_code(self) -> int:
        """0 when current, 1 when a newer version is available (2, an error, is raised)."""
        return 1 if self.update_available else 0

    def summary(self) -> str:
        state = "newer version available" if self.update_available else "up to date"
        return f"current {self.current or '(none)'}, available {self.available}: {state}"

    def to_dict(self) -> dict[str, str | bool | None]:
        return {
            "source": self.source,
            "current": self.current,
            "available": self.available,
            "status": self.status.value,
            "updateAvailable": self.update_available,
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One change to a record: the version that made it, and the record right after it."""

    version_id: int
    dataset_version: str | None  #: of the version row that made the change
    kind: VersionKind  #: how that version came to be (ingest, sync, rollback)
    change: ChangeKind
    at: str  #: when the version was applied
    content: RecordJSON  #: the record right after the change
    retired: bool  #: whether the record was retired right after the change

    @property
    def content_hash(self) -> str:
        """The content's hash, by the function that computes the stored ``content_hash``."""
        from errkb.records import content_hash

        return content_hash(self.content)

    def to_dict(self) -> dict[str, Any]:
        return {
            "versionId": self.version_id,
            "datasetVersion": self.dataset_version,
            "kind": self.kind.value,
            "change": self.change.value,
            "at": self.at,
            "retired": self.retired,
            "record": dict(self.content),
        }
