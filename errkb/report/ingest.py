"""``IngestReport``: what ``errkb ingest`` did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from errkb.report.diagnostics import Diagnostics

if TYPE_CHECKING:
    from errkb.errors import Problem
    from errkb.store.interface import ApplyCounts


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
