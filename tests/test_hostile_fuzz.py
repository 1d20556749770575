"""Fuzzing in CI: Hypothesis examples of explain input, record JSON and safetensors headers
(``bench/fuzz.py``; 100 each in the full tier, 25 in the default one), every one
deadline-bounded; only ErrkbError may escape.

The long run is ``python -m bench.fuzz --examples 20000``.
"""

from __future__ import annotations

import pytest

from bench.fuzz import TARGETS, Target, fuzz
from tests.tiers import examples


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_fuzz_target_never_crashes(target: Target) -> None:
    wanted = examples(100)
    outcome = fuzz(target, examples=wanted)
    assert outcome.crash is None, outcome.crash
    assert (
        outcome.examples >= wanted // 2
    )  # Hypothesis may stop early on a small space, not so early
