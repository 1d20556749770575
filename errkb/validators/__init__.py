"""Reference validators: upstream check functions reproduced from checkpoint metadata.

Each validator reproduces one upstream function as a whole, every condition in upstream's order
with upstream's exact wording, including the sibling errors that have no record yet. This module
is the registry: which records have a validator (:func:`records_with_validators`), the validator
for a record (:func:`validator_for`), and :func:`diagnose`, which explains a record's message from
the values captured out of a log line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from errkb.validators import comfy, linear, quanto
from errkb.validators.registry import (
    CheckName,
    Condition,
    Diagnosis,
    Finding,
    Rule,
    parse_shape,
)


@dataclass(frozen=True)
class Validator:
    """One reference validator: the record it covers, its upstream function and its rules."""

    record_id: str
    check: CheckName
    upstream: str  #: the upstream function reproduced
    rules: tuple[Rule, ...]  #: every condition, in upstream order (record and siblings)
    #: the captured placeholders :func:`diagnose` reads, named exactly as in the template
    captures: tuple[str, ...]
    diagnose: Callable[[Mapping[str, str]], Diagnosis]


_VALIDATORS: Mapping[str, Validator] = MappingProxyType(
    {
        quanto.RECORD_ID: Validator(
            quanto.RECORD_ID,
            CheckName.QUANTO,
            quanto.UPSTREAM,
            quanto.RULES,
            (quanto.CAPTURE_PREFIX, quanto.CAPTURE_DTYPE, quanto.CAPTURE_SHAPE),
            quanto.diagnose,
        ),
        comfy.RECORD_ID: Validator(
            comfy.RECORD_ID,
            CheckName.COMFY,
            comfy.UPSTREAM,
            comfy.RULES,
            (comfy.CAPTURE_PREFIX, comfy.CAPTURE_WEIGHT, comfy.CAPTURE_SCALE),
            comfy.diagnose,
        ),
        linear.RECORD_ID: Validator(
            linear.RECORD_ID,
            CheckName.LINEAR,
            linear.UPSTREAM,
            linear.RULES,
            (linear.CAPTURE_SHAPE,),
            linear.diagnose,
        ),
    }
)

#: Every rule of every validator, by rule id (record ids and sibling ids such as
#: ``quanto.missing-tensors``).
RULES: Mapping[str, Rule] = MappingProxyType(
    {rule.id: rule for validator in _VALIDATORS.values() for rule in validator.rules}
)


def validator_for(record_id: str) -> Validator | None:
    """Return the reference validator for ``record_id``, or None if it has none."""
    return _VALIDATORS.get(record_id)


def records_with_validators() -> tuple[str, ...]:
    """Return the ids of the records that have a reference validator, sorted."""
    return tuple(sorted(_VALIDATORS))


def rule_for(rule_id: str) -> Rule | None:
    """Return the rule with this id (a record id or a sibling id), or None."""
    return RULES.get(rule_id)


def diagnose(record_id: str, captures: Mapping[str, str]) -> Diagnosis | None:
    """Explain a record's message from its captured placeholder values.

    ``captures`` maps placeholder expressions exactly as written in the record's template
    (``"prefix"``, ``"scale_slice.get_dtype()"``, ``"tuple(loaded_weight.shape)"``, ...) to the
    text printed in their place; a ``{prefix!r}`` value arrives without its quotes. Returns None
    when the record has no reference validator. Values that are missing or unreadable are
    listed in the diagnosis's ``unknowns`` rather than raising.
    """
    validator = _VALIDATORS.get(record_id)
    return None if validator is None else validator.diagnose(captures)


__all__ = [
    "RULES",
    "CheckName",
    "Condition",
    "Diagnosis",
    "Finding",
    "Rule",
    "Validator",
    "diagnose",
    "parse_shape",
    "records_with_validators",
    "rule_for",
    "validator_for",
]
