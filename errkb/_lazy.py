"""What is made on first use, not at import: re-exported names and rarely used regexes.

A package whose ``__getattr__`` (PEP 562) calls :func:`load` lists, for each lazily exported
name, the module defining it; the first look-up imports that module and stores the value in the
package's namespace, so later look-ups never reach ``__getattr__`` again (``errkb``,
``errkb.report``). :func:`pattern` is a module-level regex that only some inputs need: compiling
a Python regex costs 0.1-1 ms, and a one-shot ``errkb explain`` is mostly import time.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import AnyStr


def load(
    package: str,
    namespace: MutableMapping[str, object],
    table: Mapping[str, tuple[str, str]],
    name: str,
) -> object:
    """The value ``table`` names for ``name`` (module, attribute), imported and kept."""
    if name not in table:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, attr = table[name]
    value: object = getattr(importlib.import_module(module), attr)
    namespace[name] = value  # later look-ups skip __getattr__
    return value


def pattern(source: AnyStr, flags: int = 0) -> Callable[[], re.Pattern[AnyStr]]:
    """A function returning ``re.compile(source, flags)``, compiled on its first call only.

    Call it once before a loop rather than per iteration where the loop is hot.
    """

    @functools.cache
    def compiled() -> re.Pattern[AnyStr]:
        return re.compile(source, flags)

    return compiled
