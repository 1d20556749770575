"""The work counter the linear-time tests rely on (tests/workcount.py): it must tell a
quadratic loop from a linear one, or those tests prove nothing."""

from __future__ import annotations

import pytest

from tests.workcount import assert_linear, count_work


def _linear(items: list[int]) -> int:
    total = 0
    for item in items:
        total += item
    return total


def _quadratic(items: list[int]) -> int:
    total = 0
    for i in range(len(items)):
        for item in items[:i]:
            total += item
    return total


def test_counts_grow_with_the_work() -> None:
    assert count_work(lambda: _linear(list(range(100)))) > count_work(lambda: _linear([1]))


def test_a_linear_loop_passes() -> None:
    small, large = assert_linear(lambda n: list(range(n)), _linear, 200)
    assert 3 * small < large <= 4 * small + 10


def test_a_quadratic_loop_fails() -> None:
    with pytest.raises(AssertionError, match="not linear"):
        assert_linear(lambda n: list(range(n)), _quadratic, 50)
