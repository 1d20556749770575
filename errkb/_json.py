"""Writing JSON that every JSON parser accepts: no ``NaN`` or ``Infinity`` literals.

A document is kept exact whenever it is valid JSON; otherwise each non-finite number (from a
record's verbatim unknown fields) is written as ``null``, which changes no field's type.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dumps(
    value: object,
    *,
    indent: int | None = None,
    ensure_ascii: bool = False,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """``json.dumps`` that never writes ``NaN``/``Infinity``: those become ``null``."""
    options: dict[str, Any] = {
        "indent": indent,
        "ensure_ascii": ensure_ascii,
        "sort_keys": sort_keys,
    }
    try:
        return json.dumps(value, separators=separators, allow_nan=False, **options)
    except ValueError:
        # Only a non-finite float raises ValueError here (circular data cannot come from JSON).
        return json.dumps(_finite(value), separators=separators, allow_nan=False, **options)
