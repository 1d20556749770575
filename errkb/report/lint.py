"""The values of ``errkb lint``: rules, their severity, findings and the report."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
    #: a placeholder whose slot kind cannot be inferred: it matches anything, as upstream's (.+?)
    GENERIC_SLOT = "generic-slot"
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
    # The record still matches (as upstream's pattern does); a sibling's words may fill the slot.
    LintRule.GENERIC_SLOT: Severity.WARNING,
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
