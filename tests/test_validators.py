"""The validator plug point: one module and one line in VALIDATORS make a new validator run.

A test-only validator is registered the way a real one is (an entry in
``errkb.validators.VALIDATORS``) and, with no other edit, ``check`` runs it with its own gate,
``diagnose`` and the record lookups (which explain uses) find it, and SARIF names its rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkpoints import T, write

import errkb.validators
from errkb.render import OutputFormat, RenderOptions, render
from errkb.report import Condition, Diagnosis, Finding
from errkb.validators import (
    VALIDATORS,
    Validator,
    diagnose,
    records_with_validators,
    rule_for,
    validator_for,
)
from errkb.validators.base import Group, Rule
from errkb.validators.preflight import check

RECORD = "00000000deadbeef"


@dataclass(frozen=True)
class OddShapes:
    """Flags every tensor with an odd first dimension, in files whose metadata asks for it."""

    name: str = "odd"
    upstream: str = "tests: an imaginary loader"
    rules: tuple[Rule, ...] = (
        Rule(RECORD, "odd-first-dimension", RECORD, "odd", "tensor {name} has odd rows {n}"),
        Rule("odd.sibling", "odd.sibling", None, "odd", "never reported"),
    )
    captures: tuple[str, ...] = ("n",)

    @property
    def record_ids(self) -> tuple[str, ...]:
        return (RECORD,)

    def applies_to(self, group: Group) -> bool:
        return any((h.metadata or {}).get("odd") == "yes" for h in group.headers)

    def check(self, group: Group) -> tuple[Finding, ...]:
        found = [
            Finding(str(h.path), None, name, f"tensor {name} has odd rows", RECORD, "odd", RECORD)
            for h in group.headers
            for name in h.names()
            if h.tensors[name].shape and h.tensors[name].shape[0] % 2
        ]
        return tuple(found if group.all_layers else found[:1])

    def diagnose(self, record_id: str, captures: Mapping[str, str]) -> Diagnosis | None:
        if record_id != RECORD:
            return None
        return Diagnosis(RECORD, Condition.SCALE_OTHER, "even", f"{captures.get('n')} is odd")


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> OddShapes:
    odd = OddShapes()
    monkeypatch.setattr(errkb.validators, "VALIDATORS", (*VALIDATORS, odd))
    return odd


def test_the_builtins_satisfy_the_protocol() -> None:
    assert [v.name for v in VALIDATORS] == ["quanto", "comfy", "linear"]
    for validator in VALIDATORS:
        assert isinstance(validator, Validator)
        assert validator.record_ids and all(r.check == validator.name for r in validator.rules)
    assert isinstance(OddShapes(), Validator)


def test_a_registered_validator_is_checked_with_its_own_gate(
    tmp_path: Path, registered: OddShapes
) -> None:
    asked = write(tmp_path / "asked.safetensors", {"w": T("F32", (3, 2))}, {"odd": "yes"})
    not_asked = write(tmp_path / "other.safetensors", {"w": T("F32", (3, 2))})
    report = check([asked, not_asked])
    assert [(f.path, f.check, f.rule) for f in report.findings] == [(str(asked), "odd", RECORD)]
    assert report.exit_code == 1


def test_a_registered_validator_diagnoses_and_is_found(registered: OddShapes) -> None:
    assert validator_for(RECORD) is registered
    assert RECORD in records_with_validators()
    rule = rule_for("odd.sibling")
    assert rule is not None and rule.check == "odd"
    diagnosis = diagnose(RECORD, {"n": "3"})
    assert diagnosis is not None and diagnosis.explanation == "3 is odd"


def test_sarif_names_the_new_validator_s_rule(tmp_path: Path, registered: OddShapes) -> None:
    path = write(tmp_path / "a.safetensors", {"w": T("F32", (5,))}, {"odd": "yes"})
    sarif = json.loads(render(check([path]), OutputFormat.SARIF, RenderOptions()))
    (rule,) = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rule["id"] == RECORD and rule["name"] == "odd-first-dimension"
    assert rule["properties"] == {"check": "odd"}


def test_without_the_line_nothing_knows_it(tmp_path: Path) -> None:
    path = write(tmp_path / "a.safetensors", {"w": T("F32", (5,))}, {"odd": "yes"})
    assert check([path]).findings == ()
    assert validator_for(RECORD) is None and diagnose(RECORD, {"n": "3"}) is None
