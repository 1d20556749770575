"""How much each property test does in this run's tier.

The default ``pytest`` tier runs every property test with a quarter of its examples (at least
ten): the property is exercised on every run, and the whole tier stays within its 90 s. The full
tier (``pytest --full``, or any ``-m`` selection such as CI's ``-m "slow or property"``) runs
each with the count written beside it. Measured: the property tests were 25 s of the default
tier's 161 s of in-process CPU.
"""

from __future__ import annotations

import os

#: Set by conftest's ``pytest_configure`` before any test module is imported.
TIER_ENV = "ERRKB_TEST_TIER"


def full() -> bool:
    """True in the full tier."""
    return os.environ.get(TIER_ENV) == "full"


def examples(n: int, default: int | None = None) -> int:
    """The number of Hypothesis examples for a property written with ``n``: ``n`` in the full
    tier; in the default one ``default`` where given (a property each of whose examples costs
    most of a second), else a quarter of ``n``, at least ten."""
    if full():
        return n
    return default if default is not None else max(10, n // 4)
