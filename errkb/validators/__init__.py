"""Reference validators: upstream check functions reproduced from checkpoint metadata.

Each reproduces one upstream function whole, in upstream's order and wording; :data:`VALIDATORS`
is the one list, read by ``check``, ``diagnose`` and the renderers.
"""

from __future__ import annotations

from collections.abc import Mapping

from errkb.validators import comfy, linear, quanto
from errkb.validators.base import (
    Condition,
    Diagnosis,
    Finding,
    Group,
    Rule,
    Validator,
    Vetoes,
    parse_shape,
)

#: Every reference validator, in the order ``errkb check`` runs them.
VALIDATORS: tuple[Validator, ...] = (
    quanto.VALIDATOR,
    comfy.VALIDATOR,
    linear.VALIDATOR,
)


def validator_for(record_id: str) -> Validator | None:
    """Return the reference validator for ``record_id``, or None if it has none."""
    return next((v for v in VALIDATORS if record_id in v.record_ids), None)


def records_with_validators() -> tuple[str, ...]:
    """Return the ids of the records that have a reference validator, sorted."""
    return tuple(sorted(rid for v in VALIDATORS for rid in v.record_ids))


def rule_for(rule_id: str) -> Rule | None:
    """Return the rule with this id (a record id or a sibling id), or None."""
    return next((r for v in VALIDATORS for r in v.rules if r.id == rule_id), None)


def diagnose(record_id: str, captures: Mapping[str, str]) -> Diagnosis | None:
    """Explain a record's message from its captured placeholder values.

    ``captures`` maps placeholder expressions as written in the template to their printed text
    (``!r`` values unquoted). None when the record has no validator; missing or unreadable values
    are listed in ``unknowns``.
    """
    validator = validator_for(record_id)
    return None if validator is None else validator.diagnose(record_id, captures)


def admits(record_id: str, captures: Mapping[str, str]) -> bool:
    """Whether ``captures`` can be ``record_id``'s values (True when it has no validator)."""
    validator = validator_for(record_id)
    # ``Vetoes`` is the optional ``admits`` method; asked by attribute, since an isinstance
    # check against a runtime Protocol walks its members on every call (twice per explain).
    veto = getattr(validator, "admits", None)
    return veto is None or bool(veto(record_id, captures))


__all__ = [
    "VALIDATORS",
    "Condition",
    "Diagnosis",
    "Finding",
    "Group",
    "Rule",
    "Validator",
    "Vetoes",
    "admits",
    "diagnose",
    "parse_shape",
    "records_with_validators",
    "rule_for",
    "validator_for",
]
