"""The vocabulary every reference validator speaks: rules, findings, diagnoses and shapes.

A reference validator reproduces one upstream check function from a checkpoint's metadata. It
reports :class:`Finding` values (one per failed condition, with upstream's exact message) and
explains a message already seen in a log with a :class:`Diagnosis`. The lookup table that maps
record ids to validators lives in :mod:`errkb.validators`; this module only holds the values, so
the validator modules can import it without an import cycle.

Shapes in upstream messages are printed Python tuples (``(3072,)``, ``()``, ``(1, 3072)``).
:func:`parse_shape` reads them back with a small hand-written parser: the text comes from logs,
so it is never given to ``eval`` or ``ast.literal_eval``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass


class CheckName(enum.StrEnum):
    """Which upstream check function a finding reproduces."""

    QUANTO = "quanto"  #: sglang ``inspect_quanto_int8_checkpoint``
    COMFY = "comfy"  #: sglang ``inspect_comfy_quant_markers``
    LINEAR = "linear"  #: sglang ``MergedColumnParallelLinear.weight_loader_v2`` (predicted)


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
class Rule:
    """One condition of an upstream check: the record it maps to (if any) and its wording."""

    id: str  #: the record id, or a stable sibling id such as ``quanto.missing-tensors``
    name: str  #: a readable slug (equal to ``id`` for siblings)
    record_id: str | None  #: None for a sibling error that has no record yet
    check: CheckName
    template: str  #: upstream's message template, placeholders as in the source


@dataclass(frozen=True)
class Finding:
    """One failed upstream condition found in a checkpoint."""

    path: str  #: the file the condition was found in
    prefix: str | None  #: the layer prefix, or None for a file-level condition
    tensor: str | None  #: the tensor the condition is about, when there is one
    message: str  #: upstream's exact message
    record_id: str | None  #: the record this message maps to; None for a sibling without one
    check: CheckName
    rule: str  #: the stable rule id (the record id, or e.g. ``quanto.missing-tensors``)

    def to_dict(self) -> dict[str, str | None]:
        return {
            "path": self.path,
            "prefix": self.prefix,
            "tensor": self.tensor,
            "message": self.message,
            "recordId": self.record_id,
            "check": self.check.value,
            "rule": self.rule,
        }


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


#: Longest shape text we try to read; real shapes are a few dozen characters.
MAX_SHAPE_TEXT = 256
#: Most dimensions a parsed shape may have (safetensors has no limit; logs never need more).
MAX_SHAPE_DIMS = 16
#: Longest single dimension, in digits (a 64-bit count has at most 20).
_MAX_DIGITS = 20


def parse_shape(text: str) -> tuple[int, ...]:
    """Read a printed shape such as ``(3072,)``, ``()``, ``(1, 3072)`` or ``[1, 3072]``.

    Accepts a Python tuple or list of non-negative decimal integers, optional whitespace and a
    trailing comma, and (leniently) ``(3072)``, which a hand-written message might print for a
    one-dimensional shape. Raises ValueError for anything else.
    """
    s = text.strip()
    if len(s) > MAX_SHAPE_TEXT:
        raise ValueError(f"shape text is longer than {MAX_SHAPE_TEXT} characters")
    if s.startswith("torch.Size(") and s.endswith(")"):
        s = s[len("torch.Size(") : -1].strip()
    if len(s) < 2 or (s[0], s[-1]) not in {("(", ")"), ("[", "]")}:
        raise ValueError(f"not a shape: {text!r}")
    inner = s[1:-1].strip()
    if not inner:
        return ()
    parts = inner.split(",")
    if parts[-1].strip() == "":
        parts = parts[:-1]
    if len(parts) > MAX_SHAPE_DIMS:
        raise ValueError(f"shape has more than {MAX_SHAPE_DIMS} dimensions")
    dims: list[int] = []
    for part in parts:
        digits = part.strip()
        # isdigit() alone accepts characters such as '²'; a shape is plain ASCII decimal.
        if not (digits.isascii() and digits.isdigit()) or len(digits) > _MAX_DIGITS:
            raise ValueError(f"not a shape dimension: {part.strip()!r} in {text!r}")
        dims.append(int(digits))
    return tuple(dims)


def format_shape(shape: tuple[int, ...]) -> str:
    """Print a shape exactly as upstream's f-strings do (``repr`` of a tuple of ints)."""
    return repr(tuple(shape))


def numel(shape: tuple[int, ...]) -> int:
    """Return the number of elements of a tensor of this shape (1 for a scalar ``()``)."""
    return math.prod(shape)


def parse_capture(
    captures: Mapping[str, str], key: str, unknowns: list[str]
) -> tuple[int, ...] | None:
    """Parse the shape captured under ``key``; note ``key`` as unknown when absent or unreadable."""
    raw = captures.get(key)
    if raw is None:
        unknowns.append(key)
        return None
    try:
        return parse_shape(raw)
    except ValueError:
        unknowns.append(key)
        return None
