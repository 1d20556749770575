r"""Message spans: the places inside one exception message where a known message may sit.

Wrappers prefix a message, other exceptions quote its repr, JSON replies escape it, messages
span lines: this module lists those candidate texts, innermost first. Escapes are undone by
hand (never ``eval``); only a message's head is searched, and spans are capped in number and
size. Character references left in a message give one more candidate.
"""

from __future__ import annotations

import enum
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from errkb import _lazy
from errkb.parse.sniff import unescape_markup

__all__ = ["MAX_SPANS", "MessageSpan", "SpanVia", "decode_string_literal", "message_spans"]

#: At most this many spans per message (the message itself included).
MAX_SPANS = 64
#: Embedded spans stop being added once their texts add up to this many characters.
MAX_TOTAL_CHARS = 1 << 18
#: Only this head of a message is searched for embedded messages.
SCAN_CHARS = 1 << 16
#: Wrapper suffixes offered per text.
MAX_WRAPPERS = 16
#: How deep embeddings are followed (a repr in a JSON string in a wrapper is depth 3).
MAX_DEPTH = 6
#: A quoted string shorter than this (or without a space) is a name, not a message.
MIN_LITERAL_CHARS = 12


class SpanVia(enum.StrEnum):
    """How a span was found inside the message."""

    MESSAGE = "message"  #: the message itself
    WRAPPER = "wrapper"  #: the text after a wrapper's ": "
    REPR = "repr"  #: a Python string literal (an exception repr, a dict repr), unescaped
    JSON = "json"  #: a JSON string value, unescaped
    LINE = "line"  #: one line of a multi-line text
    ENTITY = "entity"  #: the text with its HTML/XML character references undone


@dataclass(frozen=True)
class MessageSpan:
    """One candidate text in which a known message may be found."""

    text: str
    #: Where ``text`` starts in the message; None when it was decoded (unescaped).
    offset: int | None
    embedded: bool  #: False only for the message itself
    via: SpanVia


#: ``add(text, offset, depth, via)``: offer one candidate.
_Adder = Callable[[str, "int | None", int, SpanVia], None]

# A quote opens a string literal only at the start or after "(" "[" "{" "," ":" "=" or a space.
_OPENERS = frozenset("([{,:= \t")
_CLOSERS = frozenset(")]},:;. \t")
# Quote-free runs and escapes alternate, so the match is linear and cannot backtrack badly.
_LITERAL_RE = {
    '"': re.compile(r'"((?:[^"\\\n]|\\.){0,65536})"'),
    "'": re.compile(r"'((?:[^'\\\n]|\\.){0,65536})'"),
}
_QUOTE_RE = re.compile(r"[\"']")
_escape_re = _lazy.pattern(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.)")
_SIMPLE_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "/": "/",
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "a": "\a",
}
_surrogates_re = _lazy.pattern("[\ud800-\udfff]")


def decode_string_literal(body: str) -> str:
    r"""Undo Python/JSON string escapes without ``eval`` (a lone surrogate becomes U+FFFD)."""
    if "\\" not in body:
        return body

    def one(m: re.Match[str]) -> str:
        esc = m.group(0)[1:]
        head = esc[0]
        if head in "xuU" and len(esc) > 1:
            return chr(int(esc[1:], 16)) if int(esc[1:], 16) <= 0x10FFFF else m.group(0)
        if head in "01234567":
            return chr(int(esc, 8))
        return _SIMPLE_ESCAPES.get(head, m.group(0))

    text = _escape_re().sub(one, body)
    if _surrogates_re().search(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        text = _surrogates_re().sub("\ufffd", text)
    return text


class _Candidate(NamedTuple):
    """One text to look into (a named tuple: cheaper to define than a frozen dataclass)."""

    text: str
    offset: int | None
    depth: int
    via: SpanVia
    seq: int


def message_spans(message: str) -> list[MessageSpan]:
    """List the candidate texts of ``message``, innermost first, the message itself last."""
    found: list[_Candidate] = []
    seen: set[str] = {message}
    budget = [MAX_TOTAL_CHARS]
    queue: deque[_Candidate] = deque([_Candidate(message, 0, 0, SpanVia.MESSAGE, 0)])

    def add(text: str, offset: int | None, depth: int, via: SpanVia) -> None:
        # Breadth first, so shallow candidates are kept when the caps cut the deep ones off.
        if len(seen) >= MAX_SPANS or not text or text in seen or len(text) > budget[0]:
            return
        seen.add(text)
        budget[0] -= len(text)
        queue.append(_Candidate(text, offset, depth, via, len(seen)))

    while queue:
        cand = queue.popleft()
        found.append(cand)
        if cand.depth >= MAX_DEPTH:
            continue
        text, base, depth = cand.text, cand.offset, cand.depth + 1
        if cand.via is not SpanVia.MESSAGE:
            stripped = _without_sentence_period(text)
            if stripped is not None:
                add(stripped, base, depth, cand.via)
        if "&" in text:
            # An issue page or a diff pasted as markup source: ``&#x27;`` stands for a quote.
            unescaped = unescape_markup(text)
            if unescaped != text:
                add(unescaped, None, depth, SpanVia.ENTITY)
        head = text[:SCAN_CHARS]
        quoted = _literals(head, base, depth, add)
        if "\n" in head:
            pos = 0
            for line in head.split("\n"):
                stripped_line = line.strip()
                if stripped_line and stripped_line != text:
                    lead = len(line) - len(line.lstrip())
                    add(stripped_line, _at(base, pos + lead), depth, SpanVia.LINE)
                pos += len(line) + 1
        _wrappers(head, text, base, depth, add, quoted)

    found.sort(key=lambda c: (-c.depth, c.seq))
    return [MessageSpan(c.text, c.offset, c.via is not SpanVia.MESSAGE, c.via) for c in found]


def _at(base: int | None, pos: int) -> int | None:
    return None if base is None else base + pos


def _without_sentence_period(text: str) -> str | None:
    """``"... got shape (2,)."`` -> ``"... got shape (2,)"``; None when there is no such period."""
    stripped = text.rstrip()
    if stripped.endswith(".") and not stripped.endswith("..") and len(stripped) > 1:
        return stripped[:-1]
    return None


def _wrappers(
    head: str,
    text: str,
    base: int | None,
    depth: int,
    add: _Adder,
    quoted: list[tuple[int, int]],
) -> None:
    """Offer the text after each ``": "`` outside string literals (a wrapper's prefix's end)."""
    starts: list[int] = []
    start = 0
    while len(starts) < MAX_WRAPPERS:
        idx = head.find(": ", start)
        if idx < 0:
            break
        start = idx + 2
        if not any(a <= idx < b for a, b in quoted):
            starts.append(start)
    # The last wrapper's suffix is the innermost message: offer it first.
    for start in reversed(starts):
        suffix = text[start:].lstrip()
        if suffix:
            add(suffix, _at(base, len(text) - len(suffix)), depth, SpanVia.WRAPPER)


def _literals(head: str, base: int | None, depth: int, add: _Adder) -> list[tuple[int, int]]:
    """Offer the decoded contents of the string literals in ``head``; return their ranges."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    n = len(head)
    while pos < n and len(ranges) < MAX_SPANS:
        q = _QUOTE_RE.search(head, pos)
        if q is None:
            break
        start = q.start()
        quote = head[start]
        if start > 0 and head[start - 1] not in _OPENERS:
            pos = start + 1
            continue
        m = _LITERAL_RE[quote].match(head, start)
        if m is None or (m.end() < n and head[m.end()] not in _CLOSERS):
            pos = start + 1
            continue
        ranges.append((start, m.end()))
        body = m.group(1)
        decoded = decode_string_literal(body)
        if len(decoded) >= MIN_LITERAL_CHARS and " " in decoded:
            json_like = quote == '"' and head[:start].rstrip().endswith(":") and "{" in head
            via = SpanVia.JSON if json_like else SpanVia.REPR
            offset = _at(base, start + 1) if decoded == body else None
            add(decoded, offset, depth, via)
        pos = m.end()
    return ranges
