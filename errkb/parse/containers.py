r"""Containers: the texts hidden in JSON documents, JSON Lines and markup, with their line numbers.

Logs arrive inside containers (docker's json-file lines, a traceback in one JSON string,
Sentry-style exception fields, notebook outputs, junit XML, saved HTML). This module turns
the input into *views* (plain texts, each mapping its lines to the original line numbers) and
*structured* exceptions found as fields. No key name is known: every string is offered,
one-object-per-line output is reassembled per stream, a class next to a string is a
structured exception, a path next to a line number is a frame. Markup's tags are dropped
(newlines kept) and entities undone. Decoding is bounded and total (not a container: no
views), linear, and a large input is narrowed as plain text is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field, replace

from errkb import _lazy
from errkb.parse.sniff import (
    JSON_START,
    YAML_FOLD,
    has_yaml_fold,
    looks_like_container,
    looks_like_mime,
    looks_like_strace,
    unescape_markup,
)
from errkb.parse.text import replace_surrogates
from errkb.parse.traceback import is_exception_class

__all__ = [
    "Decoded",
    "StructuredException",
    "View",
    "decode_containers",
    "looks_like_container",
    "unescape_markup",
]

#: Documents larger than this (characters) are not decoded: they are parsed as plain text.
MAX_DOCUMENT_CHARS = 64 << 20
#: Strings inside strings are decoded this deep (a JSON reply in a JSON log line is depth 2).
MAX_STRING_DEPTH = 4
#: Containers nested deeper than this are not walked further.
MAX_NESTING = 64
#: At most this many views per input; the rest of a huge document is not offered.
MAX_VIEWS = 200_000
#: A string shorter than this, or one without a space or newline, cannot hold a message.
MIN_TEXT_CHARS = 8

# Every pattern here is compiled on first use: only a container needs it.
# A line that may begin a JSON document.
_doc_line_re = _lazy.pattern(f"^[ \\t\ufeff]{{0,64}}(?:{JSON_START})", re.M)
# The same line after its newline: a literal start lets the engine jump in C.
_doc_after_newline_re = _lazy.pattern(f"\\n([ \\t\ufeff]{{0,64}}(?:{JSON_START}))")
# A JSON string literal; JSON strings cannot hold a raw newline, so a match stays on its line.
_string_re = _lazy.pattern(r'"(?:[^"\\\n]|\\.){0,1048576}"')
# An exception class as a structured field holds it: a dotted identifier, nothing else.
_class_re = _lazy.pattern(r"[A-Za-z_]\w{0,127}(?:\.[A-Za-z_]\w{0,127}){0,24}")
# A source file as a frame names it.
_source_path_re = _lazy.pattern(
    r"(?:.{0,4096}[/\\])?[^/\\\n]{0,255}\.(?:py|pyx|pyi|ipynb|js|mjs|ts|rs|go|java|kt|rb|c|cc|cpp|cu|h|hpp)"
    # a frame of code without a file ("<lambda>" is a function name, not one of these)
    r"|<(?:string|stdin|console|frozen [\w.]{1,128}|ipython-input-[\w-]{1,64})>"
)
# A key that names an exception (or its message): never one of a stack frame's keys.
_exception_key_re = _lazy.pattern(
    r"exc|error|traceback|stacktrace|stack_trace|message", re.IGNORECASE
)
# What a source path as a frame names it ends with (a cheap test before the regex).
_SOURCE_ENDS = (
    ".py", ".pyx", ".pyi", ".ipynb", ".js", ".mjs", ".ts", ".rs", ".go", ".java", ".kt",
    ".rb", ".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ">",
)  # fmt: skip
# A markup tag, comment, CDATA section, or a script/style element with its content.
_markup_re = _lazy.pattern(
    r"<!--.{0,65536}?-->"
    r"|<!\[CDATA\[(?P<cdata>.{0,1048576}?)\]\]>"
    r"|<(?P<raw>script|style)\b[^>]{0,4096}>.{0,1048576}?</(?P=raw)\s{0,8}>"
    r"|<(?P<close>/?)(?P<name>[A-Za-z][\w:.-]{0,63})(?P<attrs>(?:[^<>\"']|\"[^\"]{0,65536}\"|'[^']{0,65536}'){0,4096})/?>"
    r"|<[!?][^<>]{0,4096}>",
    re.DOTALL | re.IGNORECASE,
)
_attr_re = _lazy.pattern(
    r"(?P<key>[\w:.-]{1,64})\s{0,8}=\s{0,8}(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)')"
)
# Tags that only colour or mark up text inside a line: dropped; any other tag is a space.
_INLINE_TAGS = frozenset(
    {
        "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "del", "dfn", "em", "font",
        "i", "ins", "kbd", "mark", "q", "s", "samp", "small", "span", "strong", "sub", "sup",
        "time", "tt", "u", "var", "wbr",
    }
)  # fmt: skip


@dataclass(frozen=True)
class View:
    """One plain text found in the input, with the original line number of each of its lines."""

    text: str
    lines: tuple[int, ...]  #: ``lines[i]`` is the input line of the view's line ``i + 1``
    origin: str  #: where in the container the text was (a JSON path, ``@attr``, a stream)
    #: True for a single value (a JSON string, an attribute): the whole text is a candidate.
    value: bool = True

    def line(self, number: int) -> int:
        """The input line of the view's 1-based line ``number``."""
        if not self.lines:
            return 1
        return self.lines[min(max(number, 1), len(self.lines)) - 1]


@dataclass(frozen=True)
class StructuredException:
    """An exception kept as fields: a class next to its message (Sentry, structlog, notebooks)."""

    exc_class: str
    message: str
    line: int  #: the input line where the message begins
    origin: str


@dataclass(frozen=True)
class Decoded:
    """What the containers of one input hold; ``plain`` is what is left to parse as text."""

    plain: str | None  #: the input with decoded documents blanked (line numbers kept), or None
    views: tuple[View, ...] = ()
    structured: tuple[StructuredException, ...] = ()


def decode_containers(text: str, worth: Container[int] | None = None) -> Decoded | None:
    """Decode the containers of ``text`` (None: none); ``worth``: the lines worth offering."""
    if not looks_like_container(text) or len(text) > MAX_DOCUMENT_CHARS:
        return None
    if looks_like_mime(text):
        return _decode_mime(text)
    if looks_like_strace(text):
        return _decode_strace(text)
    start = len(text) - len(text.lstrip(" \t\r\n\ufeff"))
    if text.startswith("<", start):
        return _decode_markup(text)
    decoded = _decode_json(text, worth)
    if decoded is None and has_yaml_fold(text):
        return _decode_yaml(text)
    return decoded


def _decode_mime(text: str) -> Decoded:
    """A mail's text parts as views (``errkb.parse.mime``); an HTML part's markup decoded too."""
    from errkb.parse.mime import mime_parts

    views: list[View] = []
    for part in mime_parts(text):
        origin = f"MIME part {part.index} ({part.content_type})"
        if part.content_type == "text/html":
            inner = _decode_markup(part.text)
            if inner is not None:
                views.extend(
                    View(v.text, tuple(part.lines[n - 1] for n in v.lines), origin, v.value)
                    for v in inner.views
                )
                continue
        views.append(View(part.text, part.lines, origin, value=False))
    return Decoded(None, tuple(views))


def _decode_strace(text: str) -> Decoded:
    """The strace output ``text`` as one view of the lines its programs wrote (``cstrings``)."""
    from errkb.parse.cstrings import unquote_lines

    physical = text.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    numbers, lines = unquote_lines(range(1, len(physical) + 1), physical)
    return Decoded(None, (View("\n".join(lines), tuple(numbers), "strace", value=False),))


class _Obj(list[tuple[str, object]]):
    """A JSON object as its (key, value) pairs, in order, duplicates kept."""


@dataclass(frozen=True, slots=True)
class _Str:
    """A JSON string value and the input line it is on."""

    text: str
    line: int


_DECODER = json.JSONDecoder(object_pairs_hook=_Obj)
#: A JSON escape of a surrogate, or a surrogate itself (a str handed to the library).
_surrogate_escape_re = _lazy.pattern("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")


@dataclass
class _Out:
    views: list[View] = field(default_factory=list)
    structured: list[StructuredException] = field(default_factory=list)

    def full(self) -> bool:
        return len(self.views) + len(self.structured) >= MAX_VIEWS


def _documents(text: str) -> Iterator[tuple[int, int, int, object]]:
    """Yield (start, end, first line, value) for every JSON document that starts and ends lines."""
    line = 1
    counted = 0  # offset up to which newlines are counted into ``line``
    pos = 0
    doc_line, doc_after_newline = _doc_line_re(), _doc_after_newline_re()
    while True:
        m = doc_line.match(text, pos) if pos == 0 or text[pos - 1] == "\n" else None
        if m is None:
            m = doc_after_newline.search(text, pos)
            if m is None:
                return
        head = m.group(m.lastindex or 0)
        i = m.start(m.lastindex or 0) + len(head) - len(head.lstrip(" \t\ufeff"))
        line += text.count("\n", counted, i)
        counted = i
        doc = _try_document(text, i)
        if doc is None:
            nl = text.find("\n", i)
            if nl < 0:
                return
            pos = nl + 1
            continue
        end, value = doc
        yield i, end, line, value
        pos = end


def _try_document(text: str, i: int) -> tuple[int, object] | None:
    try:
        value, end = _DECODER.raw_decode(text, i)
    except (ValueError, RecursionError):
        return None
    rest_end = text.find("\n", end)
    rest = text[end:] if rest_end < 0 else text[end:rest_end]
    if rest.strip():
        return None
    return end, value


def _decode_json(text: str, worth: Container[int] | None) -> Decoded | None:
    docs = list(_documents(text))
    if not docs:
        return None
    out = _Out()
    _walk_documents(text, docs, out, worth)
    plain_parts: list[str] = []
    pos = 0
    for start, end, _line, _value in docs:
        plain_parts.append(text[pos:start])
        plain_parts.append("\n" * text.count("\n", start, end))
        pos = end
    plain_parts.append(text[pos:])
    plain = "".join(plain_parts)
    views, structured = tuple(out.views), tuple(out.structured)
    if _surrogate_escape_re().search(text) is not None:
        # A lone surrogate escape becomes U+FFFD, so every report can be encoded.
        views = tuple(replace(v, text=replace_surrogates(v.text)) for v in views)
        structured = tuple(
            replace(
                s, exc_class=replace_surrogates(s.exc_class), message=replace_surrogates(s.message)
            )
            for s in structured
        )
    return Decoded(plain if plain.strip() else None, views, structured)


def _annotate(text: str, start: int, end: int, line: int, value: object) -> object:
    """Replace every string value with a ``_Str`` that knows its input line (one regex pass)."""
    if text.count("\n", start, end) == 0:
        return _with_line(value, lambda: line)
    tokens = _string_re().finditer(text, start, end)
    state = [start, line]

    def next_line() -> int:
        m = next(tokens, None)
        if m is None:
            return state[1]
        state[1] += text.count("\n", state[0], m.start())
        state[0] = m.start()
        return state[1]

    return _with_line(value, next_line)


def _with_line(value: object, next_line: Callable[[], int]) -> object:
    # Nesting is capped, and a RecursionError (a hostile document) gives up on the document.
    def convert(v: object, depth: int) -> object:
        if isinstance(v, str):
            return _Str(v, next_line())
        if depth > MAX_NESTING:
            return None
        if isinstance(v, _Obj):
            pairs = _Obj()
            for key, item in v:
                next_line()  # the key's own literal
                pairs.append((key, convert(item, depth + 1)))
            return pairs
        if isinstance(v, list):
            return [convert(item, depth + 1) for item in v]
        return v

    try:
        return convert(value, 0)
    except RecursionError:
        return None


def _walk_documents(
    text: str,
    docs: list[tuple[int, int, int, object]],
    out: _Out,
    worth: Container[int] | None = None,
) -> None:
    """Walk every document; runs of one-object-per-line output are reassembled per stream."""
    i = 0
    n = len(docs)
    while i < n:
        start, end, line, value = docs[i]
        text_key = _output_key(value)
        if text_key is not None and "\n" not in text[start:end]:
            keys = _keyset(value)
            j = i + 1
            # A piece of a long line split without its newline still belongs to the run.
            while (
                j < n
                and _keyset(docs[j][3]) == keys
                and _is_str_field(docs[j][3], text_key)
                and text.count("\n", docs[j][0], docs[j][1]) == 0
            ):
                j += 1
            if j - i >= 2:
                _reassemble([(d[2], d[3]) for d in docs[i:j]], text_key, out)
                i = j
                continue
        path = "$" if n == 1 else f"$[{i}]"
        if text.count("\n", start, end):
            _walk(_annotate(text, start, end, line, value), path, 0, out)
        elif worth is None or line in worth:
            _walk(value, path, 0, out, line)
        i += 1


def _keyset(value: object) -> frozenset[str] | None:
    return frozenset(k for k, _v in value) if isinstance(value, _Obj) else None


def _is_str_field(value: object, key: str) -> bool:
    return isinstance(value, _Obj) and any(k == key and isinstance(v, str) for k, v in value)


def _output_key(value: object) -> str | None:
    """The one string field of an object that ends in a newline: a line of program output."""
    if not isinstance(value, _Obj):
        return None
    found = [k for k, v in value if isinstance(v, str) and v.endswith("\n")]
    return found[0] if len(found) == 1 else None


def _reassemble(run: list[tuple[int, object]], text_key: str, out: _Out) -> None:
    """Concatenate a run's output field per stream (told by fields of few values) into views."""
    values: dict[str, set[str]] = {}
    for _line, obj in run:
        if isinstance(obj, _Obj):
            for k, v in obj:
                if k != text_key and isinstance(v, str):
                    values.setdefault(k, set()).add(v)
    limit = max(2, len(run) // 4)
    stream_keys = sorted(k for k, seen in values.items() if len(seen) <= limit)
    streams: dict[tuple[str, ...], tuple[list[str], list[int]]] = {}
    for line, obj in run:
        if not isinstance(obj, _Obj):
            continue
        fields = dict(obj)
        ident = tuple(f if isinstance(f := fields.get(k), str) else "" for k in stream_keys)
        piece = fields.get(text_key)
        if not isinstance(piece, str):
            continue
        parts, lines = streams.setdefault(ident, ([], []))
        # A piece continues the last line unless the previous ended it (docker splits at 16 KiB).
        if not parts or parts[-1].endswith("\n"):
            lines.append(line)
        lines.extend([line] * piece[:-1].count("\n"))
        parts.append(piece)
    for ident, (parts, lines) in streams.items():
        text = "".join(parts)
        origin = "stream " + "/".join(ident) if ident else "stream"
        out.views.append(View(text, tuple(lines), origin, value=False))


def _walk(value: object, path: str, depth: int, out: _Out, line: int = 0) -> None:
    """Offer every string under ``value``; a plain ``str`` is on input line ``line``."""
    if out.full() or depth > MAX_NESTING:
        return
    if isinstance(value, str):
        _string(value, line, path, 0, out)
        return
    if isinstance(value, _Str):
        _string(value.text, value.line, path, 0, out)
        return
    if isinstance(value, _Obj):
        if _is_frame(value):
            return  # source context and locals are never occurrences
        consumed: set[int] = set()
        previous: object = None
        for idx, (key, item) in enumerate(value):
            # An exception class next to a string is a structured exception.
            if (
                idx
                and isinstance(item, (str, _Str))
                and isinstance(previous, (str, _Str))
                and idx - 1 not in consumed
                and _is_class(_text(previous))
            ):
                out.structured.append(
                    StructuredException(
                        _text(previous), _text(item), _line(item, line), f"{path}.{key}"
                    )
                )
                consumed.update((idx - 1, idx))
            previous = item
        for idx, (key, item) in enumerate(value):
            if idx in consumed:
                continue
            # Scalars are handled here, not by a call each: a JSON log has many.
            if isinstance(item, str):
                if len(item) >= MIN_TEXT_CHARS:
                    _string(item, line, f"{path}.{key}", 0, out)
            elif isinstance(item, (_Obj, list, _Str)):
                _walk(item, f"{path}.{key}", depth + 1, out, line)
        return
    if isinstance(value, list):
        if len(value) >= 2 and all(isinstance(v, (str, _Str)) for v in value):
            _string_list([v if isinstance(v, _Str) else _Str(v, line) for v in value], path, out)
            return
        for idx, item in enumerate(value):
            _walk(item, f"{path}[{idx}]", depth + 1, out, line)


def _text(value: object) -> str:
    return value.text if isinstance(value, _Str) else value if isinstance(value, str) else ""


def _line(value: object, line: int) -> int:
    return value.line if isinstance(value, _Str) else line


def _is_class(text: str) -> bool:
    # Cheapest tests first: nearly every string of a log is no class name.
    return (
        len(text) <= 4096
        and " " not in text
        and is_exception_class(text)
        and _class_re().fullmatch(text) is not None
    )


def _is_frame(obj: _Obj) -> bool:
    """A stack frame: a source path next to a line number, naming no exception."""
    has_int = has_path = False
    for k, v in obj:
        if _exception_key_re().search(k) is not None:
            return False
        if isinstance(v, int):
            has_int = has_int or not isinstance(v, bool)
        elif not has_path and isinstance(v, (str, _Str)):
            text = _text(v)
            # The suffix test first: the path regex runs only on what ends like a source file.
            has_path = text.endswith(_SOURCE_ENDS) and _source_path_re().fullmatch(text) is not None
    return has_int and has_path


def _string(text: str, line: int, path: str, depth: int, out: _Out) -> None:
    """Offer one string value: as a document when it holds one, else as a text."""
    if len(text) < MIN_TEXT_CHARS or out.full():
        return
    stripped = text.strip()
    if depth < MAX_STRING_DEPTH and stripped[:1] in ("{", "["):
        try:
            value = _DECODER.decode(stripped)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, (_Obj, list)):
            _walk_nested(value, path, depth + 1, out, line)
            return
    if " " not in text and "\n" not in text:
        return
    out.views.append(View(text, (line,) * (text.count("\n") + 1), path))


def _walk_nested(value: object, path: str, depth: int, out: _Out, line: int) -> None:
    # Strings inside a decoded string keep their holder's input line.
    if isinstance(value, str):
        _string(value, line, path, depth, out)
    elif isinstance(value, _Obj):
        sub = _Out()
        _walk(value, path, 0, sub, line)
        out.structured.extend(sub.structured)
        for view in sub.views:
            if depth < MAX_STRING_DEPTH and view.text.strip()[:1] in ("{", "["):
                _string(view.text, view.lines[0], view.origin, depth, out)
            else:
                out.views.append(view)
    else:
        _walk(value, path, 0, out, line)


def _string_list(items: list[_Str], path: str, out: _Out) -> None:
    """A list of strings is one text: lines (notebook ``source``) or records (``traceback``)."""
    joiner = "" if all(s.text.endswith("\n") for s in items[:-1]) else "\n"
    parts: list[str] = []
    lines: list[int] = []
    for s in items:
        body = s.text[:-1] if joiner == "" and s.text.endswith("\n") else s.text
        parts.append(body)
        lines.extend([s.line] * (body.count("\n") + 1))
    text = "\n".join(parts)
    if len(text) >= MIN_TEXT_CHARS:
        out.views.append(View(text, tuple(lines), path))


# A line that opens a double-quoted scalar: group 1 is everything before the quote.
_yaml_open_re = _lazy.pattern("^(" + YAML_FOLD[1 : YAML_FOLD.rindex('"(?:')] + ')"')
#: A folded scalar longer than this many lines is not decoded (it never closed: not YAML).
MAX_SCALAR_LINES = 4096
_YAML_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_YAML_HEX = {"x": 2, "u": 4, "U": 8}


def _decode_yaml(text: str) -> Decoded | None:
    r"""The double-quoted YAML scalars that span lines, PyYAML's folding undone, each a view."""
    physical = text.split("\n")
    views: list[View] = []
    blank: set[int] = set()
    i = 0
    while i < len(physical):
        m = _yaml_open_re().match(physical[i])
        got = _yaml_scalar(physical, i, m.end()) if m is not None else None
        if got is None:
            i += 1
            continue
        value, lines, end = got
        if end > i and len(value) >= MIN_TEXT_CHARS:
            key = m.group(1).strip().rstrip(":").strip() if m is not None else ""
            views.append(View(value, lines, f"yaml:{key or i + 1}"))
            blank.update(range(i, end + 1))
        i = end + 1
    if not views:
        return None
    plain = "\n".join("" if k in blank else line for k, line in enumerate(physical))
    return Decoded(plain if plain.strip() else None, tuple(views), ())


class _ScalarText:
    r"""A scalar's decoded text; each of its lines maps to the input line of its first character."""

    def __init__(self, line: int) -> None:
        self.parts: list[str] = []
        self.lines: list[int] = [line]
        self.line = line  # input line of what is added now
        self._fresh = True  # the current decoded line has no character yet

    def add(self, text: str) -> None:
        for k, segment in enumerate(text.split("\n")):
            if k:
                self.parts.append("\n")
                self.lines.append(self.line)
                self._fresh = True
            if segment:
                if self._fresh:
                    self.lines[-1] = self.line
                    self._fresh = False
                self.parts.append(segment)


def _yaml_scalar(
    physical: list[str], first: int, start: int
) -> tuple[str, tuple[int, ...], int] | None:
    """Decode a scalar from ``physical[first][start:]``: value, line map, closing line; or None."""
    acc = _ScalarText(first + 1)
    k, line, pos = first, physical[first], start
    while True:
        n = len(line)
        chunk_start = pos
        while pos < n and line[pos] not in ('"', "\\"):
            pos += 1
        if pos < n and line[pos] == '"':
            acc.add(line[chunk_start:pos])
            return "".join(acc.parts), tuple(acc.lines), k
        if pos < n - 1:  # an escape inside the line
            acc.add(line[chunk_start:pos])
            pos = _yaml_escape(line, pos, acc)
            continue
        escaped_break = pos == n - 1  # the line ends in a backslash
        piece = line[chunk_start:pos]
        if not escaped_break:
            piece = piece.rstrip(" \t")
        acc.add(piece)
        if k - first >= MAX_SCALAR_LINES or k + 1 >= len(physical):
            return None
        # The next line: its indentation is dropped either way.
        k += 1
        acc.line = k + 1
        if not escaped_break:
            empties = 0
            while k < len(physical) and not physical[k].strip():
                empties += 1
                k += 1
            if k >= len(physical):
                return None
            acc.line = k + 1
            acc.add("\n" * empties if empties else " ")
        line = physical[k]
        pos = len(line) - len(line.lstrip(" \t"))


def _yaml_escape(line: str, pos: int, acc: _ScalarText) -> int:
    """Undo the escape at ``line[pos]`` (a backslash), appending it to ``acc``; the next pos."""
    ch = line[pos + 1]
    width = _YAML_HEX.get(ch)
    if width is not None:
        digits = line[pos + 2 : pos + 2 + width]
        if len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
            code = int(digits, 16)
            acc.add(chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd")
            return pos + 2 + width
    decoded = _YAML_ESCAPES.get(ch)
    acc.add(decoded if decoded is not None else "\\" + ch)
    return pos + 2


class _Lines:
    """Builds a text and the input line of each of its lines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.lines: list[int] = [1]
        self.line = 1  # input line of the current position
        self.at_line_start = True

    def raw(self, piece: str, unescape: bool) -> None:
        """Append input text: its newlines are the input's, entities may add more."""
        for k, segment in enumerate(piece.split("\n")):
            if k:
                self.line += 1
                self.newline()
            self.add(unescape_markup(segment) if unescape else segment)

    def add(self, text: str) -> None:
        """Append decoded text: any newline in it stays on the current input line."""
        if not text:
            return
        self.parts.append(text)
        self.lines.extend([self.line] * text.count("\n"))
        self.at_line_start = text.endswith("\n")

    def newline(self) -> None:
        self.parts.append("\n")
        self.lines.append(self.line)
        self.at_line_start = True


def _decode_markup(text: str) -> Decoded | None:
    head = text[:65536]
    if "</" not in head and "/>" not in head:
        return None  # "<frozen importlib._bootstrap>" starts text, not a document
    acc = _Lines()
    views: list[View] = []
    pos = 0
    for m in _markup_re().finditer(text):
        start = m.start()
        piece = text[pos:start]
        name = (m.group("name") or "").lower()
        if name and name not in _INLINE_TAGS:
            # Spaces before a block tag indent the markup, not the text.
            cut = piece.rfind("\n") + 1
            if (cut or acc.at_line_start) and not piece[cut:].strip(" \t"):
                piece = piece[:cut]
        acc.raw(piece, unescape=True)
        whole = m.group(0)
        if m.group("cdata") is not None:
            acc.raw("\n" * m.group(0).count("\n", 0, m.start("cdata") - start), unescape=False)
            acc.raw(m.group("cdata"), unescape=False)
            acc.raw("\n" * m.group(0).count("\n", m.end("cdata") - start), unescape=False)
        else:
            attrs = m.group("attrs")
            if attrs and not m.group("close") and len(views) < MAX_VIEWS:
                base = m.start("attrs") - start
                for a in _attr_re().finditer(attrs):
                    raw = a.group("dq") if a.group("dq") is not None else a.group("sq")
                    value = unescape_markup(raw or "")
                    if len(value) >= MIN_TEXT_CHARS and (" " in value or "\n" in value):
                        at = acc.line + whole.count("\n", 0, base + a.start())
                        views.append(
                            View(
                                value,
                                (at,) * (value.count("\n") + 1),
                                f"<{name} @{a.group('key')}>",
                            )
                        )
            newlines = whole.count("\n")
            if newlines:
                acc.raw("\n" * newlines, unescape=False)
            elif (
                name
                and name not in _INLINE_TAGS
                and not acc.at_line_start
                and text[m.end() : m.end() + 1] not in ("", "\n", "<")
            ):
                acc.add(" ")
        pos = m.end()
    acc.raw(text[pos:], unescape=True)
    view = View("".join(acc.parts), tuple(acc.lines), "markup", value=False)
    return Decoded(None, (view, *views), ())
