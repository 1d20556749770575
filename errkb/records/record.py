"""A validated record as a typed value (``Record``), re-exported by ``errkb.records``.

Its own module, imported on first use: explaining reads records as JSON and never builds one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from errkb.records import verbatim_json

__all__ = ["Record"]


@dataclass(frozen=True)
class Record:
    """A validated record. ``raw`` is the record exactly as it came in, unknown fields included."""

    id: str
    repo: str
    slug: str
    error_code: str | None
    error_message: str
    message_pattern: str
    error_type: str
    error_class: str | None
    http_status: int | None
    severity: str
    file_path: str
    line_number: int | None
    github_url: str
    documentation: str
    trigger_scenarios: str
    common_situations: str
    solutions: tuple[str, ...]
    example_fix: str | None
    prevention_tips: tuple[str, ...]
    tags: tuple[str, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Record:
        """Build from a record object that passed ``check_record``."""
        return cls(
            id=obj["id"],
            repo=obj["repo"],
            slug=obj["slug"],
            error_code=obj["errorCode"],
            error_message=obj["errorMessage"],
            message_pattern=obj["messagePattern"],
            error_type=obj["errorType"],
            error_class=obj["errorClass"],
            http_status=obj["httpStatus"],
            severity=obj["severity"],
            file_path=obj["filePath"],
            line_number=obj["lineNumber"],
            github_url=obj["githubUrl"],
            documentation=obj["documentation"],
            trigger_scenarios=obj["triggerScenarios"],
            common_situations=obj["commonSituations"],
            solutions=tuple(obj["solutions"]),
            example_fix=obj["exampleFix"],
            prevention_tips=tuple(obj["preventionTips"]),
            tags=tuple(obj["tags"]),
            raw=obj,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as it came in (a copy)."""
        return json.loads(verbatim_json(self.raw))  # type: ignore[no-any-return]
