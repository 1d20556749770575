"""What is made on first use, not at import: re-exported names and rarely used regexes.

:func:`load` serves a package's ``__getattr__`` (PEP 562), storing each value on first look-up;
:func:`pattern` is a regex compiled on its first call.
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
    """A function returning ``re.compile(source, flags)``, compiled on its first call only."""

    @functools.cache
    def compiled() -> re.Pattern[AnyStr]:
        return re.compile(source, flags)

    return compiled
