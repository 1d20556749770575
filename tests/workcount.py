"""Linear-time checks that count work instead of reading a clock.

A timed assertion fails on a loaded machine and passes a quadratic algorithm on a fast one, so
the default tier measures *work*: the Python line events (``sys.settrace``) a call executes. A
loop that rescans what it already read shows up as lines executed per input line growing with
the input; ``assert_linear`` runs the same code on an input and on one ``factor`` times larger
and fails when the work grows by more than ``factor * slack``. A quadratic rescan at 4x the size
costs 16x the work, a linear one at most 4x (fixed start-up costs make it less).

What it cannot see: a quadratic loop entirely inside C (``str.find`` from the start in a loop
is still a Python loop, so it counts; one C call that is itself quadratic does not). Those are
covered by the full tier's ratio tests on CPU time (``cpu_ratio``), which run only under
``pytest --full`` with a generous bound.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


def count_work(run: Callable[[], object]) -> int:
    """Python line and call events ``run()`` executes, in this thread."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return local

    previous = sys.gettrace()
    if previous is not None or threading.gettrace() is not None:  # pragma: no cover
        raise RuntimeError("count_work needs the tracer to itself (coverage or a debugger is on)")
    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


def assert_linear(
    build: Callable[[int], T],
    run: Callable[[T], object],
    size: int,
    *,
    factor: int = 4,
    slack: float = 1.5,
) -> tuple[int, int]:
    """Fail unless ``run(build(size * factor))`` costs at most ``factor * slack`` times the work
    of ``run(build(size))``. Returns both counts (for a message or a further check)."""
    small_input = build(size)
    large_input = build(size * factor)
    small = count_work(lambda: run(small_input))
    large = count_work(lambda: run(large_input))
    assert small > 0
    assert large <= factor * slack * small, (
        f"work grew {large / small:.1f}x for {factor}x the input "
        f"({small:,} -> {large:,} line events): not linear"
    )
    return small, large


def cpu_ratio(
    build: Callable[[int], T], run: Callable[[T], object], size: int, factor: int
) -> float:
    """CPU seconds of ``run`` at ``size * factor`` over those at ``size`` (full tier only)."""

    def cost(n: int) -> float:
        data = build(n)
        start = time.process_time()
        run(data)
        return max(time.process_time() - start, 1e-3)

    cost(size)  # warm caches and lazy imports, so the first measurement is not inflated
    return cost(size * factor) / cost(size)
