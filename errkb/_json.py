"""Writing JSON that every JSON parser accepts: no ``NaN`` or ``Infinity`` literals.

Python's ``json`` reads ``NaN``, ``Infinity`` and ``-Infinity`` and, by default, writes them back,
but they are not JSON (RFC 8259) and strict parsers (``jq``, JavaScript's ``JSON.parse``) refuse
the whole document. A record's unknown fields are kept verbatim, so such a value can reach
``errkb export`` and every ``--format json``. We keep the document exact whenever it is valid
JSON, and otherwise write each non-finite number as ``null``: the one JSON value that says "no
number here" without inventing a type (a string "NaN" would change the field's type).
"""

from __future__ import annotations

import json
import math


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
    try:
        return json.dumps(
            value,
            indent=indent,
            ensure_ascii=ensure_ascii,
            separators=separators,
            sort_keys=sort_keys,
            allow_nan=False,
        )
    except ValueError:
        # Only a non-finite float raises ValueError here (circular data cannot come from JSON).
        return json.dumps(
            _finite(value),
            indent=indent,
            ensure_ascii=ensure_ascii,
            separators=separators,
            sort_keys=sort_keys,
            allow_nan=False,
        )
