"""What every input needs from the container rules, cheaply: a look and undoing entities.

``looks_like_container`` tells JSON, JSON Lines, markup and MIME mail from plain text by a look
at the first characters and one substring search; ``unescape_markup`` undoes HTML/XML
character references. The decoder (``errkb.parse.containers``) is imported only for input
that looks like a container.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TypeVar

from errkb import _lazy

__all__ = [
    "JSON_START",
    "MAX_UNESCAPES",
    "YAML_FOLD",
    "has_yaml_fold",
    "looks_like_container",
    "looks_like_mime",
    "looks_like_strace",
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
#: A line that opens a YAML double-quoted scalar and folds it with a ``\`` ending the line.
YAML_FOLD = (
    r"^[ \t]{0,256}(?:-[ \t]{1,8}){0,8}"
    r'(?:(?:"(?:[^"\\\n]|\\.){0,256}"|[^\s"\'#:\-][^\n:"]{0,256}):[ \t]{1,8})?'
    r'"(?:[^"\\\n]|\\.){0,65536}\\\Z'
)
_yaml_fold_re = _lazy.pattern(YAML_FOLD)
# How a JSON document or a markup document begins.
_START_RE = re.compile(f"(?:{JSON_START})|<[A-Za-z!?]")
# Bytes input is rarer (library callers): compiled on first use.
_start_bytes_re = _lazy.pattern(_START_RE.pattern.encode())
_entity_re = _lazy.pattern(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


#: Header lines looked at to tell a mail from a log: the first blank line must come first.
MAX_HEADER_LINES = 200
_MIME_FIELDS = ("mime-version", "content-type", "content-transfer-encoding")


def looks_like_mime(head: str | bytes) -> bool:
    """Whether ``text`` begins with a mail header block (up to a blank line) that declares MIME."""
    if isinstance(head, bytes):
        head = head[:65536].decode("utf-8", "replace")
    if not head[:1].isalpha():
        return False  # a header block begins with a field name (or mbox's ``From ``)
    fields = 0
    mime = False
    for index, line in enumerate(head[:65536].split("\n", MAX_HEADER_LINES)):
        line = line.rstrip("\r")
        if not line:
            return mime and fields >= 2
        if index == MAX_HEADER_LINES:
            return False
        if line[0] in " \t" and fields:
            continue  # a folded header's continuation
        if index == 0 and line.startswith("From "):
            continue
        name, colon, _value = line.partition(":")
        if not (colon and _field_name(name)):
            return False
        fields += 1
        mime = mime or name.lower() in _MIME_FIELDS
    return False


def _field_name(name: str) -> bool:
    """A header field's name: 1 to 76 printable ASCII characters, no space (no regex)."""
    return 0 < len(name) <= 76 and name.isascii() and name.isprintable() and " " not in name


#: An strace line: an optional ``[pid N]`` or pid, an optional time stamp, then a syscall's
#: name and its opening parenthesis, a signal (``--- SIG``) or an exit (``+++ exited``).
_strace_re = _lazy.pattern(
    r"(?:\[pid\s{1,8}\d{1,10}\]\s{1,8}|\d{1,10}\s{1,8})?(?:\d{1,10}(?::\d{2}:\d{2})?(?:\.\d{1,9})?\s{1,8})?"
    r"(?:[a-z_][a-z0-9_]{0,31}\(|--- SIG|\+\+\+ (?:exited|killed)|<\.\.\. [a-z_0-9]{1,32} resumed>)"
)
#: Lines of a head looked at to tell strace output: every one of them must be strace's.
STRACE_HEAD_LINES = 8


def looks_like_strace(head: str | bytes) -> bool:
    """Whether ``head`` begins as strace output: its first lines (at least three) all are."""
    if isinstance(head, bytes):
        head = head[:4096].decode("utf-8", "replace")
    if not head[:1].isalnum() and not head.startswith("[pid"):
        return False
    lines = [line for line in head[:4096].split("\n")[:STRACE_HEAD_LINES] if line.strip()]
    if len(lines) < 3 or ('(2, "' not in head and '(1, "' not in head):
        return False
    pattern = _strace_re()
    return all(pattern.match(line) is not None for line in lines)


def looks_like_container(head: str | bytes) -> bool:
    """Tell cheaply whether input looks like JSON, markup or a folded YAML scalar.

    The character after an opener must fit too: ``[2026-...]`` and ``<frozen ...>`` are plain.
    """
    if looks_like_mime(head) or looks_like_strace(head):
        return True
    if isinstance(head, bytes):
        start = head[:4096].lstrip(b" \t\r\n\xef\xbb\xbf")[:64]
        return (
            _start_bytes_re().match(start) is not None
            or _has_object_line(head, b"{", b'"\n')
            or has_yaml_fold(head)
        )
    first = head[:4096].lstrip(" \t\r\n\ufeff")[:64]
    return (
        _START_RE.match(first) is not None
        or _has_object_line(head, "{", '"\n')
        or has_yaml_fold(head)
    )


#: Lines ending in a backslash looked at, at most (a shell script's continuations are many).
MAX_FOLD_LINES = 256


def has_yaml_fold(text: str | bytes) -> bool:
    """Tell whether a line of ``text`` opens a YAML double-quoted scalar folded with a backslash."""
    lines: Iterator[str]
    if isinstance(text, bytes):
        lines = (b.decode("utf-8", "replace") for b in _backslash_lines(text, b"\\\n"))
    else:
        lines = _backslash_lines(text, "\\\n")
    return any(_yaml_fold_re().match(line) is not None for line in lines)


def _backslash_lines(data: _T, needle: _T) -> Iterator[_T]:
    """The first ``MAX_FOLD_LINES`` lines of ``data`` that end in a backslash, with it."""
    newline = needle[1:]
    pos = data.find(needle)
    for _ in range(MAX_FOLD_LINES):
        if pos < 0:
            return
        yield data[data.rfind(newline, 0, pos) + 1 : pos + 1]
        pos = data.find(needle, pos + 2)


def starts_like_container(head: bytes) -> bool:
    """Whether ``head`` begins like a JSON document, markup or a MIME mail (then decoded whole)."""
    start = head[:4096].lstrip(b" \t\r\n\xef\xbb\xbf")[:64]
    return (
        _start_bytes_re().match(start) is not None
        or looks_like_mime(head)
        or looks_like_strace(head)
    )


def _has_object_line(data: _T, brace: _T, marks: _T) -> bool:
    """Tell whether a line starts with ``{"`` (a one-byte search between braces)."""
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
