"""``CheckReport``: what ``errkb check`` found in checkpoints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errkb.checkpoint.inputs import FileError
    from errkb.report import Finding


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found: findings, the files it read, and the inputs it could not check.

    ``records``: each named record's JSON by id, for the fixes (not in ``to_dict()``).
    """

    findings: tuple[Finding, ...]
    checked: tuple[str, ...]  #: safetensors files whose headers were read and checked
    errors: tuple[FileError, ...]
    records: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def record_ids(self) -> tuple[str, ...]:
        """The ids of the records the findings name, in order, each once."""
        return tuple(dict.fromkeys(f.record_id for f in self.findings if f.record_id is not None))

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
