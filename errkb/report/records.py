"""The values of ``errkb list`` and ``errkb stats``: ``RecordList``, ``Stats``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errkb.records import Record


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
