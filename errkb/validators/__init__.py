"""Reference validators: upstream check functions reproduced from checkpoint metadata.

Each validator reproduces one upstream function as a whole, every condition in upstream's order
with upstream's exact wording, including the sibling errors that have no record yet. Each is a
:class:`~errkb.validators.base.Validator` defined in its own module, which owns its rules and its
gate; :data:`VALIDATORS` is the one list of them. Adding a validator is one new module and one
line here: ``errkb check`` (:mod:`errkb.validators.preflight`), ``diagnose`` and the renderers
all read this tuple when they run, never a copy of it.
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

    ``captures`` maps placeholder expressions exactly as written in the record's template
    (``"prefix"``, ``"scale_slice.get_dtype()"``, ``"tuple(loaded_weight.shape)"``, ...) to the
    text printed in their place; a ``{prefix!r}`` value arrives without its quotes. Returns None
    when the record has no reference validator. Values that are missing or unreadable are
    listed in the diagnosis's ``unknowns`` rather than raising.
    """
    validator = validator_for(record_id)
    return None if validator is None else validator.diagnose(record_id, captures)


def admits(record_id: str, captures: Mapping[str, str]) -> bool:
    """Whether ``captures`` can be ``record_id``'s values (True when it has no validator).

    The matcher asks before it reports a hit: a validator that knows the form of a record's
    values (safetensors dtype names, shapes) vetoes a capture that cannot be one, so a
    sibling message's words never get the record's diagnosis.
    """
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
