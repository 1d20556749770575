"""Narrowing a large input to the regions where an exception can be.

Parsing a log line by line in Python runs at a few MB/s; users paste logs of tens of MB that are
almost all INFO lines and progress bars. Every shape errkb explains carries an error word on the
line that holds the message or on the traceback around it: ``Traceback``, an exception class
(``...Error``, ``...Exception``, ``...Warning``, ``...Exit``, ``...Interrupt``), a level
(``ERROR``, ``CRITICAL``, ``FATAL``), ``failed``, pytest's ``E   `` lines, a chain's "exception
occurred" line. So one Aho-Corasick pass over the whole text with those few words (a tiny
automaton that stays in cache: hundreds of MB/s) finds the candidate lines, and only a window
around each is parsed: the whole traceback behind a ``Traceback`` header, a few lines around any
other hit. Windows keep their original line numbers.

Small inputs (most pastes) are parsed whole, so nothing is narrowed away there; above
``NARROW_ABOVE`` a message on a line with none of these words and no traceback around it is not
seen — use ``match_message`` for such text.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from errkb.parse.events import LogEvent
from errkb.parse.vocabulary import REGION_KEYWORDS, REGION_PYTEST_E, REGION_TRACEBACK

#: Inputs larger than this (characters) are narrowed; smaller ones are parsed whole.
NARROW_ABOVE = 1 << 20
#: Lines kept before and after an ordinary hit (a message's continuation lines follow it).
BEFORE, AFTER = 1, 5
#: How far a traceback header reaches forward, at most, to its exception line.
TRACEBACK_REACH = 600

# The words are the parser's own vocabulary (one list for the whole parser).
KEYWORDS = REGION_KEYWORDS
_TRACEBACK = REGION_TRACEBACK
_PYTEST_E = REGION_PYTEST_E

_lock = threading.Lock()
_automaton: Any = None


def _keywords() -> Any:
    global _automaton
    with _lock:
        if _automaton is None:
            import ahocorasick_rs

            # Over bytes: searching a str makes the library map every offset back to
            # characters, which costs three times the scan itself.
            _automaton = ahocorasick_rs.BytesAhoCorasick(list(KEYWORDS))
        return _automaton


def error_regions(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (first line number, region bytes) for every window worth parsing, in order."""
    hits = _keywords().find_matches_as_indexes(data)
    # Line starts of the hit lines, each once, with whether a traceback header is among them.
    lines: list[tuple[int, bool]] = []
    last = -1
    for keyword, start, _end in hits:
        # A pytest "E   " hit starts at the newline before its line.
        line_start = start + 1 if keyword == _PYTEST_E else data.rfind(b"\n", 0, start) + 1
        if line_start == last:
            if keyword == _TRACEBACK:
                lines[-1] = (line_start, True)
            continue
        lines.append((line_start, keyword == _TRACEBACK))
        last = line_start
    windows: list[list[int]] = []
    for i, (line_start, is_traceback) in enumerate(lines):
        begin = _back(data, line_start, BEFORE)
        target = line_start
        if is_traceback:
            # The traceback runs to the first later hit that is not itself a header: its
            # exception line (unless that is implausibly far away).
            following = next((s for s, tb in lines[i + 1 :] if not tb), None)
            if (
                following is not None
                and data.count(b"\n", line_start, following) <= TRACEBACK_REACH
            ):
                target = following
        end = _forward(data, target, AFTER)
        if windows and begin <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([begin, end])
    line_number = 1
    position = 0
    for begin, end in windows:
        line_number += data.count(b"\n", position, begin)
        position = begin
        yield line_number, data[begin:end]


def _back(data: bytes, line_start: int, count: int) -> int:
    start = line_start
    for _ in range(count):
        if start <= 0:
            return 0
        start = data.rfind(b"\n", 0, start - 1) + 1
    return start


def _forward(data: bytes, line_start: int, count: int) -> int:
    end = line_start
    for _ in range(count):
        nxt = data.find(b"\n", end)
        if nxt < 0:
            return len(data)
        end = nxt + 1
    return end


def parse_input(data: str | bytes) -> list[LogEvent]:
    """Parse a log into events: whole when small, region by region when large.

    Large bytes are narrowed before decoding, so a 200 MB log is never held as text whole;
    input that looks like UTF-16 (BOM or NULs) is decoded first, since its keywords are not
    byte-searchable.
    """
    from errkb.parse.text import decode_input
    from errkb.parse.traceback import parse_log

    if isinstance(data, bytes) and (
        len(data) <= NARROW_ABOVE
        or data.startswith((b"\xff\xfe", b"\xfe\xff"))
        or b"\x00" in data[:4096]
    ):
        data = decode_input(data)
    if isinstance(data, str):
        if len(data) <= NARROW_ABOVE:
            return parse_log(data)
        # Lone surrogates (a str from a library caller) survive the round trip.
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = data
    events: list[LogEvent] = []
    for index, (first_line, chunk) in enumerate(error_regions(raw)):
        events.extend(_shift(e, first_line - 1, index) for e in parse_log(decode_input(chunk)))
    return events


def _shift(event: LogEvent, offset: int, region: int) -> LogEvent:
    """Move a region's event to the input's line numbers; keep chain ids apart per region."""
    if offset == 0 and region == 0:
        return event
    return replace(
        event,
        lines=tuple(n + offset for n in event.lines),
        frames=tuple(replace(f, input_line=f.input_line + offset) for f in event.frames),
        chain_id=None if event.chain_id is None else (region << 32) + event.chain_id,
    )
