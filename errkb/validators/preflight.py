"""Pre-flight checks (``errkb check``): every reference validator run over checkpoints.

:func:`check` reads only headers (and Comfy markers) and returns a :class:`CheckReport`; a bad
input is an entry in ``errors``, never an exception. Exit 0 clean, 1 findings, 2 errors (an
error wins). Every member of ``VALIDATORS`` whose gate (``applies_to``) admits a group runs, in
order; each stops at its first failure unless ``all_layers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from errkb import validators
from errkb.checkpoint.inputs import CheckpointGroup, FileError, QuantScheme, resolve_inputs
from errkb.checkpoint.safetensors import SafetensorsHeader, read_header
from errkb.errors import CheckpointError, UsageError
from errkb.report import Finding
from errkb.report.check import CheckReport
from errkb.validators.base import Group

__all__ = ["CheckReport", "FileError", "Finding", "QuantScheme", "check"]


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

    run = Group(tuple(headers), group.scheme, all_layers)
    for validator in validators.VALIDATORS:  # read at run time: the one registry
        if not validator.applies_to(run):
            continue
        try:
            findings.extend(validator.check(run))
        except CheckpointError as error:
            # Only a marker read fails here; its message starts with the file it was read from.
            text = str(error)
            culprit = next((h.path for h in headers if text.startswith(f"{h.path}: ")), None)
            errors.append(_error(culprit, error) if culprit else FileError("", text))
    return [str(header.path) for header in headers]


def check(
    paths: Sequence[str | Path],
    *,
    all_layers: bool = False,
    within: Sequence[Path] | None = None,
) -> CheckReport:
    """Check safetensors files, sharded indexes and model directories against the validators.

    ``all_layers``: report every layer's first failure. ``within``: confine every read to those
    directories. UsageError only when ``paths`` is empty.
    """
    if not paths:
        raise UsageError("check needs at least one file or directory")
    groups, resolve_errors = resolve_inputs(paths, within=within)
    findings: list[Finding] = []
    errors: list[FileError] = list(resolve_errors)
    checked: list[str] = []
    for group in groups:
        checked.extend(_check_group(group, all_layers, findings, errors))
    return CheckReport(tuple(findings), tuple(checked), tuple(errors))
