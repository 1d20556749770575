"""Pre-flight checks (``errkb check``): every reference validator run over checkpoints.

:func:`check` takes files, sharded-checkpoint indexes and model directories, reads only safetensors
headers (plus Comfy's tiny JSON markers) and returns a :class:`CheckReport`. It never raises for a
bad input: a malformed file, a missing shard or an unreadable config becomes an entry in
``errors`` and everything else is still checked. Exit codes follow linters: 0 clean, 1 findings,
2 errors (an error wins over findings, because an unread file may hide more findings).

Which checks run on a group of files:

* Quanto, per file, when ``__metadata__["quantization_format"] == "quanto"`` (upstream's own gate);
* Comfy, per group, when the group carries Comfy markers (``.comfy_quant`` tensors or
  ``_quantization_metadata``);
* the fused per-tensor scale check, per group, when the group's config declares a per-tensor
  scheme.

Each check keeps upstream's "first failure wins" unless ``all_layers=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from errkb.checkpoint.inputs import CheckpointGroup, FileError, QuantScheme, resolve_inputs
from errkb.checkpoint.safetensors import SafetensorsHeader, read_header
from errkb.errors import CheckpointError, UsageError
from errkb.validators import comfy, linear, quanto
from errkb.validators.registry import Finding

__all__ = ["CheckReport", "FileError", "Finding", "QuantScheme", "check"]


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


def _error(path: Path, error: CheckpointError) -> FileError:
    return FileError(str(path), str(error).removeprefix(f"{path}: "))


def _index_error(group: CheckpointGroup, headers: Sequence[SafetensorsHeader]) -> FileError | None:
    """Report the first weight_map entry whose shard does not hold the tensor it names."""
    if group.index is None or group.weight_map is None:
        return None
    by_path = {header.path: header for header in headers}
    for tensor, shard in group.weight_map.items():
        header = by_path.get(group.index.parent / shard)
        if header is not None and tensor not in header:
            return FileError(
                str(group.index),
                f"weight_map puts tensor {tensor!r} in {shard!r}, which does not contain it",
            )
    return None


def _check_group(
    group: CheckpointGroup, all_layers: bool, findings: list[Finding], errors: list[FileError]
) -> list[str]:
    headers: list[SafetensorsHeader] = []
    for path in group.files:
        try:
            headers.append(read_header(path))
        except CheckpointError as error:
            errors.append(_error(path, error))
    index_error = _index_error(group, headers)
    if index_error is not None:
        errors.append(index_error)

    for header in headers:
        findings.extend(quanto.check_quanto(header, all_layers=all_layers))
    if comfy.is_comfy_checkpoint(headers):
        try:
            findings.extend(comfy.check_comfy(headers, all_layers=all_layers))
        except CheckpointError as error:
            # Only a marker read fails here; its message starts with the file it was read from.
            text = str(error)
            culprit = next((h.path for h in headers if text.startswith(f"{h.path}: ")), None)
            errors.append(_error(culprit, error) if culprit else FileError("", text))
    if group.scheme is not None:
        findings.extend(linear.check_linear(headers, group.scheme, all_layers=all_layers))
    return [str(header.path) for header in headers]


def check(paths: Sequence[str | Path], *, all_layers: bool = False) -> CheckReport:
    """Check safetensors files, sharded indexes and model directories against the validators.

    ``all_layers=False`` reproduces upstream exactly: each check stops at its first failure.
    ``all_layers=True`` keeps going and reports the first failure of every layer.
    Raises UsageError only when ``paths`` is empty.
    """
    if not paths:
        raise UsageError("check needs at least one file or directory")
    groups, resolve_errors = resolve_inputs(paths)
    findings: list[Finding] = []
    errors: list[FileError] = list(resolve_errors)
    checked: list[str] = []
    for group in groups:
        checked.extend(_check_group(group, all_layers, findings, errors))
    return CheckReport(tuple(findings), tuple(checked), tuple(errors))
