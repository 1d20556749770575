r"""Log text normalisation: from whatever a user pasted to clean lines with their origin.

Undoes what the transport did to each line: ANSI codes (and their ``[1;36m`` remnants), CRLF
and CR-only line ends, progress bars glued on by ``\r``, and the stack of logger and collector
prefixes (timestamps, ``[pod/x/y]``, ``svc  |``, ``[rank0]:``, pytest's ``E   `` ...). Every
cleaned line keeps its line number in the *original* input and the stream identity (rank,
pod, pid, service) its prefixes carried. Every pattern is anchored with bounded repetition
and reads a bounded head of a line; every function is total (never raises).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from errkb import _lazy
from errkb.parse.prefixes import RULES, PrefixKind, PrefixRule, by_first, compiled_indented
from errkb.parse.prefixes import compiled as compiled_prefixes
from errkb.parse.vocabulary import GLOG_LEVELS

__all__ = [
    "LogLine",
    "NormalizedLog",
    "decode_input",
    "normalize",
    "replace_surrogates",
    "strip_escapes",
]

#: Prefix patterns only ever look at this many characters of a line.
PREFIX_HEAD = 2048
#: At most this many stacked prefixes are stripped from one line.
MAX_PREFIXES = 8


# A real escape sequence (CSI, OSC, DCS/PM/APC, charset selection, two-byte), ESC or "␛".
_ANSI_RE = re.compile(
    r"[\x1b\u241b](?:"
    r"\[[0-?]{0,64}[ -/]{0,16}[@-~]"
    r"|\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)?"
    # DCS/SOS/PM/APC strings end at ST or, as xterm accepts and Buildkite's timestamps
    # (``ESC _bk;t=1733050000000 BEL``) use, at BEL: a BEL-ended one would eat its line.
    r"|[PX^_][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)?"
    r"|[()*+][0-9A-Za-z]?"
    r"|[@-Z\\-_]"
    r")?"
)
# What is left of an SGR code whose ESC was lost (``[1;36m``, ``^[[31m``; digits required):
# three branches each starting with a literal, equal to ``(?:\^\[)?\[BODY|\(B\[m``.
_ANSI_REMNANT_RE = re.compile(
    r"\^\[\[\d{1,3}(?:;\d{1,3}){0,15}m|\[\d{1,3}(?:;\d{1,3}){0,15}m|\(B\[m"
)
# C0 controls except TAB/LF/CR, and DEL: NUL bytes, backspaces and bells carry no text.
_ctrl_re = _lazy.pattern(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]+")

# A tqdm-style progress bar at the start of a ``\r`` segment; what follows its ``]`` was glued on.
_progress_re = _lazy.pattern(
    r"[^\n]{0,256}?\d{1,3}(?:\.\d{1,2})?%[^\n]{0,512}?"
    r"\d{1,12}(?:\.\d{1,3})?[kMGT]?/\d{1,12}(?:\.\d{1,3})?[kMGT]?"
    r"(?: ?\[[^\]\n]{0,256}\])?"
)


# The prefix shapes are one table (errkb.parse.prefixes); this is its one compiled alternation.
_PREFIX_RE = compiled_prefixes()
# The rules that may start with whitespace, tried first on an indented line.
_INDENTED_RE = compiled_indented()
# The same alternation by the character at the match position (``prefixes.ByFirst``).
_BY_FIRST = by_first()


def _rule_groups() -> dict[str, tuple[PrefixKind, str, str, str, str, str, str]]:
    """Per rule (by its ``K_<name>`` group): its kind and the names of the groups it reads."""
    out = {}
    for rule in RULES:
        names = set(_PREFIX_RE.groupindex)

        def group(part: str, rule: PrefixRule = rule, names: set[str] = names) -> str:
            name = f"{rule.name}__{part}"
            return name if name in names else ""

        out[f"K_{rule.name}"] = (
            rule.kind,
            group("who"),
            group("stamp"),
            group("ranks"),
            group("level"),
            group("pad"),
            group("tag"),
        )
    return out


_RULE_GROUPS = _rule_groups()
# Ray's log deduplication appends " [repeated 3x across cluster]" to a line it folded.
_ray_repeated_re = _lazy.pattern(r" {0,8}\[repeated \d{1,9}x across cluster\]$")
# docker compose "svc-1  | " only ever comes first: elsewhere "word | " is ordinary text.
_compose_re = _lazy.pattern(r"(?P<svc>[A-Za-z0-9][\w.-]{0,63}) {1,32}\| ?")
#: Where the " |" of a compose prefix ends at the latest: 1 + 63 name characters + 32 spaces + "|".
_COMPOSE_BAR_END = 1 + 63 + 32 + 1
# A bracketed tag names a stream when it looks like a rank or a worker: "TP0", "gw3", "gpu=0".
_tag_identity_re = _lazy.pattern(r"[A-Za-z][A-Za-z_-]{0,31}=?\d{1,6}")

_TS = 1
_LEVEL = 2


def _record_part(records: int, group: int, part: int) -> tuple[int, int]:
    """Count logger record headers: a timestamp and a level next to each other are one header."""
    if not records or group & part:
        return records + 1, part
    return records, group | part


class LogLine(NamedTuple):
    """One cleaned line and where it came from (a named tuple: cheaper than a frozen dataclass)."""

    number: int  #: 1-based line number in the original input (shared by ``\r`` segments)
    text: str  #: the line without prefixes, colours and trailing whitespace; indentation kept
    stream: str = ""  #: identity of the writer (rank, pod, pid, service), "" when unknown
    level: str | None = None  #: log level word of the line's own logger prefix ("ERROR", ...)
    #: How many logger prefixes (each the start of a log record) the line carried: 0 for a
    #: continuation line of a multi-line record, 2 when a relay logs another logger's lines.
    record_prefixes: int = 0
    pytest_error: bool = False  #: the line was one of pytest's ``E   `` exception lines
    #: Trailing spaces stripped from the text: a renderer that wraps (rich) pads each line to
    #: its width, so ``len(text) + pad`` is the printed width and padding marks a soft break.
    pad: int = 0

    @property
    def header(self) -> bool:
        """True when a logger prefix on this line starts a new log record."""
        return self.record_prefixes > 0


def _line(fields: tuple[int, str, str, str | None, int, bool, int]) -> LogLine:
    """``LogLine(*fields)`` without the generated ``__new__``'s argument handling (~0.5 µs)."""
    return tuple.__new__(LogLine, fields)


@dataclass(frozen=True)
class NormalizedLog:
    """The cleaned lines of one input, in input order."""

    lines: tuple[LogLine, ...]

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[LogLine]:
        return iter(self.lines)

    @property
    def text(self) -> str:
        """The cleaned text, one line per cleaned line (handy for debugging and tests)."""
        return "\n".join(line.text for line in self.lines)

    def streams(self) -> dict[str, list[LogLine]]:
        """Group the lines by stream identity, each group in input order."""
        groups: dict[str, list[LogLine]] = {}
        for line in self.lines:
            groups.setdefault(line.stream, []).append(line)
        return groups


def decode_input(data: bytes) -> str:
    """Decode raw log bytes to text (UTF-8 with U+FFFD, or UTF-16 when it says so); never raises."""
    try:
        if data.startswith(_UTF16_BOMS):
            return data.decode("utf-16", errors="replace").replace("\x00", "")
        if _looks_utf16le(data):
            return data.decode("utf-16-le", errors="replace").replace("\x00", "")
        # "utf-8-sig" without its codec module: a leading BOM dropped, then UTF-8.
        body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        return body.decode("utf-8", errors="replace").replace("\x00", "")
    except Exception:  # decoding must be total, and latin-1 cannot fail
        return data.decode("latin-1").replace("\x00", "")


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def needs_decoding(data: bytes) -> bool:
    """Whether ``data`` must go through ``decode_input`` before a byte-level word search."""
    return data.startswith(_UTF16_BOMS) or b"\x00" in data[:4096]


def _looks_utf16le(data: bytes) -> bool:
    """ASCII text in UTF-16-LE without a BOM: nearly every odd byte is NUL, even bytes are not."""
    head = data[:4096]
    if len(head) < 16:
        return False
    odd = head[1::2]
    even = head[0::2]
    return odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even)


_surrogate_re = _lazy.pattern("[\ud800-\udfff]")


def replace_surrogates(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD, so the report can always be encoded."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _surrogate_re().sub("\ufffd", text)
    return text


def normalize(text: str, line_map: Sequence[int] | None = None) -> NormalizedLog:
    """Clean a whole log; ``line_map[k]``: the original number of a view's line ``k + 1``."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = strip_escapes(replace_surrogates(text))
    text = _ANSI_REMNANT_RE.sub("", text)
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if line_map is None and "\r" in text and "\n" not in text:
        # Old Mac (CR-only) line ends: with no line feed anywhere, every CR ends a line.
        text = text.replace("\r", "\n")
    if _has_controls(text):
        text = _ctrl_re().sub("", text)
    physical = text.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    if text.startswith(">") or "\n>" in text:
        _unquote(physical)

    out: list[LogLine] = []
    state = _State()
    append = out.append
    numbers: Iterable[int] = range(1, len(physical) + 1)
    if line_map is not None:
        if len(line_map) < len(physical):
            raise ValueError(f"line_map has {len(line_map)} lines, the text {len(physical)}")
        numbers = line_map
    if may_hold_quoted(text):
        from errkb.parse.cstrings import unquote_lines

        # strace's data syscalls and quoted dumps: their strings read as lines of their own.
        numbers, physical = unquote_lines(numbers, physical)
    for number, raw in zip(numbers, physical, strict=False):
        if "\r" in raw:
            for segment in _segments(raw):
                append(_clean_line(number, segment, state))
        else:
            append(_clean_line(number, raw, state))
    return NormalizedLog(tuple(out))


def may_hold_quoted(text: str) -> bool:
    r"""Whether ``text`` may hold a line ``errkb.parse.cstrings.unquote_lines`` rewrites."""
    return '"' in text and ("\\n" in text or '(2, "' in text or '(1, "' in text)


def line_text(raw: str) -> str:
    r"""What ``normalize`` leaves of one physical line read alone (no controls, no ``>`` quote)."""
    return _clean_line(1, raw, _State()).text


def strip_escapes(text: str) -> str:
    """``text`` without terminal escape sequences: the one rule every explain route applies."""
    if "\x1b" in text or "\u241b" in text:
        return _strip_ansi(text)
    return text


def _strip_ansi(text: str) -> str:
    """``_ANSI_RE.sub("", text)``, jumping between escape characters with ``str.find``."""
    parts: list[str] = []
    pos = 0
    find = text.find
    while True:
        esc, shown = find("\x1b", pos), find("\u241b", pos)
        at = esc if shown < 0 or 0 <= esc < shown else shown
        if at < 0:
            break
        m = _ANSI_RE.match(text, at)
        parts.append(text[pos:at])
        pos = m.end() if m is not None else at + 1
    if not parts:
        return text
    parts.append(text[pos:])
    return "".join(parts)


#: The characters ``_ctrl_re`` removes, as bytes: each is one byte in UTF-8, and no byte of a
#: longer character is below 0x80, so the text holds one exactly when its encoding does.
_CTRL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


def _has_controls(text: str) -> bool:
    """Tell whether ``_ctrl_re`` would remove anything (encoding and ``translate``, in C)."""
    raw = text.encode("utf-8", "surrogatepass")
    return len(raw.translate(None, _CTRL_BYTES)) != len(raw)


# An email / Markdown quote gutter: "> ", ">> ", "> > " (one optional space after each ">").
_gutter_re = _lazy.pattern(r"(?:> ?){1,16}")


def _unquote(physical: list[str]) -> None:
    """Strip the quote gutters of blocks of two or more ``>`` lines, in place (not ``>>> ``)."""
    n = len(physical)
    i = 0
    while i < n:
        if not _quoted(physical[i]):
            i += 1
            continue
        j = i + 1
        while j < n and _quoted(physical[j]):
            j += 1
        if j - i >= 2:
            for k in range(i, j):
                line = physical[k]
                m = _gutter_re().match(line)
                physical[k] = line[m.end() :] if m is not None else line
        i = j


def _quoted(line: str) -> bool:
    return line.startswith(">") and not line.startswith(">>> ")


class _State:
    """What cleaning one line needs to know about the lines before it."""

    __slots__ = ("pytest_width", "record_ids")

    def __init__(self) -> None:
        #: transport key -> rank of the log record currently being written on that transport
        self.record_ids: dict[str, str] = {}
        #: width of the "E   " prefix of the previous line, 0 when it was no pytest E line
        self.pytest_width = 0


def _pytest_text_start(line: str, start: int, state: _State) -> int:
    """Where the text of a pytest ``E`` line starts (the block's first line sets the width)."""
    pos = start + 1
    while pos < len(line) and line[pos] == " ":
        pos += 1
    width = pos - start
    if state.pytest_width and width > state.pytest_width:
        return start + state.pytest_width
    state.pytest_width = width
    return pos


def _segments(raw: str) -> list[str]:
    r"""The parts of a physical line with ``\r`` worth keeping: all but progress bars, in order."""
    kept: list[str] = []
    last_nonblank = ""
    for segment in raw.split("\r"):
        if not segment.strip():
            continue
        last_nonblank = segment
        m = _progress_re().match(segment, 0, min(len(segment), PREFIX_HEAD))
        if m is not None:
            rest = segment[m.end() :]
            if rest.strip():
                kept.append(rest)
            continue
        kept.append(segment)
    if not kept:
        # Only bars (or nothing): keep the final state, as a terminal would show it.
        kept.append(last_nonblank)
    return kept


def _clean_line(number: int, raw: str, state: _State) -> LogLine:
    """Strip the stacked prefixes of one line and work out its stream identity."""
    line = raw.rstrip()
    record_ids = state.record_ids
    if not line or (line[0] in " \t" and _INDENTED_RE.match(line, 0, PREFIX_HEAD) is None):
        # A line starting with whitespace belongs to the record its transport stream is in.
        state.pytest_width = 0
        return _line((number, line, record_ids.get("", ""), None, 0, False, len(raw) - len(line)))

    pos = 0
    end = min(len(line), PREFIX_HEAD)
    transport: list[str] = []
    record: str | None = None
    level: str | None = None
    records = 0  # logger record headers on this line
    group = 0  # which parts (_TS, _LEVEL) the current header already has
    pytest_error = False

    # A compose prefix has its " |" within the first 97 characters: a C test spares the regex.
    m = _compose_re().match(line, 0, end) if line.find(" |", 0, _COMPOSE_BAR_END) >= 0 else None
    if m is not None and not _PREFIX_RE.match(line, 0, end):
        transport.append(m.group("svc"))
        pos = m.end()

    by_char = _BY_FIRST
    for _ in range(MAX_PREFIXES):
        rules = by_char[line[pos] if pos < end else ""]
        if rules is None:
            break
        m = rules.match(line, pos, end)
        if m is None or m.end() == pos:
            break
        kind, who, stamp, ranks, word, pad_group, tag_group = _RULE_GROUPS[m.lastgroup or ""]
        new_pos = m.end()
        if kind is PrefixKind.TRANSPORT:
            transport.append(m.group(who).strip())
        elif kind is PrefixKind.STAMP:
            # A "T" date is a collector's per-line stamp; a space date is a logger's record.
            if "T" not in m.group(stamp):
                records, group = _record_part(records, group, _TS)
                found = m.group(ranks) if ranks else None
                record = found.strip() if found else ""
        elif kind is PrefixKind.RECORD:
            records, group = _record_part(records, group, _TS | _LEVEL)
            found = m.group(word)
            level, record = GLOG_LEVELS.get(found, found), ""
        elif kind is PrefixKind.LEVEL:
            records, group = _record_part(records, group, _LEVEL)
            level = m.group(word)
            record = record if record is not None else ""
            pad = m.group(pad_group) if pad_group else None
            if pad is not None and len(pad) > 1:
                # uvicorn pads "LEVEL:" to ten; any other run of spaces is the text's own
                # indentation.
                start = m.start()
                new_pos = start + 10 if new_pos - start >= 10 else m.start(pad_group) + 1
        elif kind is PrefixKind.TAG:
            tag = m.group(tag_group)
            if _tag_identity_re().fullmatch(tag):
                record = tag
        elif kind is PrefixKind.PYTEST:
            pytest_error = True
            pos = _pytest_text_start(line, m.start(), state)
            break
        # NOISE carries no identity: the line is simply continued.
        pos = new_pos

    if not pytest_error:
        state.pytest_width = 0
    key = " ".join(transport)
    if record is not None:
        record_ids[key] = record
    rank = record_ids.get(key, "")
    stream = f"{key} {rank}" if key and rank else key or rank
    text = line[pos:] if pos else line
    if text.endswith("across cluster]"):
        text = _ray_repeated_re().sub("", text)
    return _line((number, text, stream, level, records, pytest_error, len(raw) - len(line)))
