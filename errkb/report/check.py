"""``CheckReport``: what ``errkb check`` found in checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errkb.checkpoint.inputs import FileError
    from errkb.report import Finding


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
