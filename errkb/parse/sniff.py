"""What every input needs from the container rules, cheaply: a look and undoing entities.

``looks_like_container`` tells JSON, JSON Lines and markup from plain text by a look at the
first characters and one substring search; ``unescape_markup`` undoes HTML/XML character
references, which the message spans apply to any text (a junit message quoted in a plain log).
The decoder itself (``errkb.parse.containers``: its values and patterns) is imported only for
input that looks like a container, so a one-shot ``errkb explain`` of a plain log never pays
for it.
"""

from __future__ import annotations

import re
from typing import TypeVar

from errkb import _lazy

__all__ = [
    "JSON_START",
    "MAX_UNESCAPES",
    "looks_like_container",
    "starts_like_container",
    "unescape_markup",
]

_T = TypeVar("_T", str, bytes)

#: Entities are undone at most this many times (an escaped page saved inside another page).
MAX_UNESCAPES = 3

#: How a JSON document begins (``errkb.parse.containers`` finds documents by it).
JSON_START = (
    r'\{\s{0,32}["}]'
    r"|\[\s{0,32}(?:[\[{\"\]]|true|false|null|-?\d{1,32}(?:\.\d{1,32})?(?:[eE][+-]?\d{1,4})?\s{0,32}[,\]])"
)
# How a JSON document or a markup document begins.
_START_RE = re.compile(f"(?:{JSON_START})|<[A-Za-z!?]")
# Bytes input is rarer (library callers): compiled on first use.
_start_bytes_re = _lazy.pattern(_START_RE.pattern.encode())
_entity_re = _lazy.pattern(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def looks_like_container(head: str | bytes) -> bool:
    """Tell cheaply whether input starts like JSON or markup, or holds a JSON object per line.

    ``[2026-08-28 05:10:05] ...`` and ``<frozen ...>`` start plenty of plain logs, so the
    character after the opener must fit too.
    """
    if isinstance(head, bytes):
        start = head[:4096].lstrip(b" \t\r\n\xef\xbb\xbf")[:64]
        return _start_bytes_re().match(start) is not None or _has_object_line(head, b"{", b'"\n')
    first = head[:4096].lstrip(" \t\r\n\ufeff")[:64]
    return _START_RE.match(first) is not None or _has_object_line(head, "{", '"\n')


def starts_like_container(head: bytes) -> bool:
    """Whether ``head`` begins like a JSON document or markup (not just holds JSON lines)."""
    start = head[:4096].lstrip(b" \t\r\n\xef\xbb\xbf")[:64]
    return _start_bytes_re().match(start) is not None


def _has_object_line(data: _T, brace: _T, marks: _T) -> bool:
    """Tell whether a line starts with ``{"``.

    A one-byte search jumps between braces at memchr speed (a two-byte needle is searched many
    times slower), and plain text has few braces.
    """
    quote, newline = marks[:1], marks[1:]
    pos = data.find(brace)
    checked = 0
    while pos >= 0:
        if data[pos + 1 : pos + 2] == quote and (pos == 0 or data[pos - 1 : pos] == newline):
            return True
        checked += 1
        if checked > 4096:  # brace-heavy text: one plain substring search instead
            return (newline + brace + quote) in data
        pos = data.find(brace, pos + 1)
    return False


def unescape_markup(text: str) -> str:
    """Undo HTML/XML character references, also when the text was escaped twice."""
    for _ in range(MAX_UNESCAPES):
        if "&" not in text or _entity_re().search(text) is None:
            break
        import html  # ~1.5 ms at import (its entity table); only text with an entity needs it

        text = html.unescape(text)
    return text
