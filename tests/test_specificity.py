"""``errkb.records.specificity``: which templates are generic, measured from the template alone."""

from __future__ import annotations

import pytest

from errkb.records.patterns import compile_record, specificity_of
from errkb.records.specificity import (
    COMMON_WORDS,
    SPECIFIC_LINE,
    informative_words,
    interpreter_message,
    is_generic,
    specificity,
)
from errkb.records.template import parse_template

GENERIC = [
    "Expected {predicate_err}",  # pydantic
    "error: {msg}",  # setuptools
    "Unknown {} {}",  # mypy
    "no %s found in %s",  # distlib
    "Invalid {name}={value!r}",  # hypothesis
    "name {col!r} is not defined",  # numpy: the interpreter's own NameError text
    "Python {version}",
    "Request URL: {url}",
    "display: {}",
    "Uvicorn {}",
    "{k} not in {actual}",
    "function",  # a fixed one-word message
    "CUDA out of memory",
]
SPECIFIC = [
    "Quanto layer {prefix!r} has incompatible scale {scale_slice.get_dtype()} {scale_shape}",
    "Comfy INT8 layer {prefix!r} has incompatible weight/scale shapes: {a} and {b}",
    "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape {s}",
    "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
]


@pytest.mark.parametrize("template", GENERIC)
def test_generic_templates_fall_below_the_line(template: str) -> None:
    assert is_generic(specificity(template)), specificity(template)


@pytest.mark.parametrize("template", SPECIFIC)
def test_specific_templates_stand_above_it(template: str) -> None:
    assert specificity(template) >= SPECIFIC_LINE


def test_more_uncommon_words_make_a_template_more_specific() -> None:
    one = specificity("Quanto layer {p}")
    two = specificity("Quanto layer {p} has incompatible scale {s}")
    assert 0 <= one < two <= 1


def test_common_words_carry_no_weight_and_placeholders_none() -> None:
    template = parse_template("Expected {x} for the checkpoint of {y}")
    assert informative_words(template.literals) == ("checkpoint",)
    assert "expected" in COMMON_WORDS


@pytest.mark.parametrize(
    ("template", "interpreter"),
    [
        ("name {col!r} is not defined", True),
        ("'{}' object has no attribute '{}'", True),
        ("{fn}() got an unexpected keyword argument {kw!r}", True),
        ("list index out of range", True),
        ("name {col!r} is not a column of {table}", False),
    ],
)
def test_the_interpreters_own_messages(template: str, interpreter: bool) -> None:
    assert interpreter_message(parse_template(template)) is interpreter


def test_the_spec_carries_it_and_a_stored_row_without_it_computes_the_same() -> None:
    spec = compile_record("0" * 16, "Expected {x}", "Expected (.+?)", error_class="ValueError")
    assert spec.specificity == specificity("Expected {x}")
    from dataclasses import replace

    assert specificity_of(replace(spec, specificity=None)) == spec.specificity
