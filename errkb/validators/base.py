"""The vocabulary every reference validator speaks: the protocol, rules, groups and shapes.

A reference validator reproduces one upstream check function from a checkpoint's metadata:
:class:`~errkb.report.Finding` values with upstream's exact messages, and a
:class:`~errkb.report.Diagnosis` of a message seen in a log. The one list is
``errkb.validators.VALIDATORS``. :func:`parse_shape` reads printed shapes by hand (never
``eval``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from errkb.report import Condition, Diagnosis, Finding

if TYPE_CHECKING:
    from errkb.checkpoint.inputs import QuantScheme
    from errkb.checkpoint.safetensors import SafetensorsHeader

__all__ = [
    "Condition",
    "Diagnosis",
    "Finding",
    "FunctionValidator",
    "Group",
    "Rule",
    "Validator",
    "Vetoes",
    "format_shape",
    "is_safetensors_dtype",
    "is_shape",
    "numel",
    "parse_capture",
    "parse_shape",
]


@dataclass(frozen=True)
class Rule:
    """One condition of an upstream check: the record it maps to (if any) and its wording."""

    id: str  #: the record id, or a stable sibling id such as ``quanto.missing-tensors``
    name: str  #: a readable slug (equal to ``id`` for siblings)
    record_id: str | None  #: None for a sibling error that has no record yet
    check: str  #: the name of the validator the rule belongs to
    template: str  #: upstream's message template, placeholders as in the source


@dataclass(frozen=True)
class Group:
    """Safetensors headers checked together (one file, a sharded index or a model directory)."""

    headers: tuple[SafetensorsHeader, ...]
    scheme: QuantScheme | None = None  #: the per-tensor scheme the group's config declares
    #: False reproduces upstream (first failure wins); True reports every layer's first failure
    all_layers: bool = False


@runtime_checkable
class Validator(Protocol):
    """A reference validator: one upstream check function, reproduced from checkpoint metadata."""

    @property
    def name(self) -> str:
        """Stable name (``Finding.check``, SARIF's ``check`` property)."""

    @property
    def upstream(self) -> str:
        """The upstream function reproduced."""

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every condition, in upstream order (records and siblings)."""

    @property
    def record_ids(self) -> tuple[str, ...]:
        """The records this validator backs."""

    @property
    def captures(self) -> tuple[str, ...]:
        """The placeholders ``diagnose`` reads, named exactly as in the records' templates."""

    def applies_to(self, group: Group) -> bool:
        """Whether upstream would run this check on ``group`` at all (its own gate)."""

    def check(self, group: Group) -> tuple[Finding, ...]:
        """Every failed condition in ``group``; raises CheckpointError if a file cannot be read."""

    def diagnose(self, record_id: str, captures: Mapping[str, str]) -> Diagnosis | None:
        """Explain ``record_id``'s message from its captured values (None: not one of ours)."""


@runtime_checkable
class Vetoes(Protocol):
    """A validator that may veto a match whose captures cannot be its records' values (optional)."""

    def admits(self, record_id: str, captures: Mapping[str, str]) -> bool:
        """Whether ``captures`` can be ``record_id``'s values at all (False vetoes the match)."""


@dataclass(frozen=True)
class FunctionValidator:
    """A :class:`Validator` made of a validator module's functions (the three built-ins)."""

    name: str
    upstream: str
    rules: tuple[Rule, ...]
    captures: tuple[str, ...]
    gate: Callable[[Group], bool]
    run: Callable[[Group], tuple[Finding, ...]]
    explain: Callable[[Mapping[str, str]], Diagnosis]
    #: Per captured placeholder, what its value must be for the message to be the record's.
    values: Mapping[str, Callable[[str], bool]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    @property
    def record_ids(self) -> tuple[str, ...]:
        return tuple(rule.record_id for rule in self.rules if rule.record_id is not None)

    def applies_to(self, group: Group) -> bool:
        return self.gate(group)

    def check(self, group: Group) -> tuple[Finding, ...]:
        return self.run(group)

    def diagnose(self, record_id: str, captures: Mapping[str, str]) -> Diagnosis | None:
        return self.explain(captures) if record_id in self.record_ids else None

    def admits(self, record_id: str, captures: Mapping[str, str]) -> bool:
        if record_id not in self.record_ids:
            return True
        return all(ok(captures[name]) for name, ok in self.values.items() if name in captures)


#: The form of every dtype name safetensors writes (``F32``, ``BF16``, ``F8_E4M3``, ``BOOL``).
_SAFETENSORS_DTYPE = re.compile(r"BOOL|BF16|[UIFC](?:4|8|16|32|64)|F[468]_E\dM\d(?:FN|FNUZ)?")


def is_safetensors_dtype(text: str) -> bool:
    """Tell whether ``text`` is a safetensors dtype name (``get_dtype()``'s vocabulary)."""
    return _SAFETENSORS_DTYPE.fullmatch(text) is not None


def is_shape(text: str) -> bool:
    """Tell whether ``text`` is a printed shape :func:`parse_shape` reads."""
    try:
        parse_shape(text)
    except ValueError:
        return False
    return True


#: Longest shape text we try to read; real shapes are a few dozen characters.
MAX_SHAPE_TEXT = 256
#: Most dimensions a parsed shape may have (safetensors has no limit; logs never need more).
MAX_SHAPE_DIMS = 16
#: Longest single dimension, in digits (a 64-bit count has at most 20).
_MAX_DIGITS = 20


def parse_shape(text: str) -> tuple[int, ...]:
    """Read a printed shape such as ``(3072,)``, ``()`` or ``[1, 3072]``; ValueError otherwise."""
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
