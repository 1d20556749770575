"""Names a package re-exports on first use (PEP 562), shared by ``errkb`` and ``errkb.report``.

A package whose ``__getattr__`` calls :func:`load` lists, for each lazily exported name, the
module defining it; the first look-up imports that module and stores the value in the package's
namespace, so later look-ups never reach ``__getattr__`` again.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping


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
