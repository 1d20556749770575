"""Fuzzing in CI: ~100 Hypothesis examples each of explain input, record JSON and safetensors
headers (``bench/fuzz.py``), every one deadline-bounded; only ErrkbError may escape.

The long run is ``python -m bench.fuzz --examples 20000``.
"""

from __future__ import annotations

import pytest

from bench.fuzz import TARGETS, Target, fuzz


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_fuzz_target_never_crashes(target: Target) -> None:
    outcome = fuzz(target, examples=100)
    assert outcome.crash is None, outcome.crash
    assert outcome.examples >= 50  # Hypothesis may stop early on a small space, not this early
