"""Narrowing a large input to the regions where an exception can be.

Parsing a log line by line in Python runs at a few MB/s; users paste logs of tens of MB that are
almost all INFO lines and progress bars. Every shape errkb explains carries an error word on the
line that holds the message or on the traceback around it: ``Traceback``, an exception class
(``...Error``, ``...Exception``, ``...Warning``, ``...Exit``, ``...Interrupt``), a level
(``ERROR``, ``CRITICAL``, ``FATAL``), ``failed``, pytest's ``E   `` lines, a chain's "exception
occurred" line. So one Aho-Corasick pass over the whole text with those few words (a tiny
automaton that stays in cache: hundreds of MB/s) finds the candidate lines, and only a window
around each is parsed: the whole traceback behind a ``Traceback`` header (up to its exception
line, found by walking its indented frames, so a class with no error word such as
``CannotInvert`` keeps its message), a few lines around any other hit. Windows keep their
original line numbers.

Every step is linear in the input, whatever it holds (a line of 300 MB of ``Error`` words,
200,000 consecutive headers, chains): the automaton sees the input in bounded chunks, each
hit's line start is searched back only to the previous hit line, and windows are merged as line
numbers before being cut out once each.

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


#: Bytes handed to the keyword automaton at once: its hits come back as one Python list, so a
#: chunk bounds the memory a line full of error words can cost (300 MB of ``Error `` is 50
#: million hits).
CHUNK = 1 << 18
#: Longest keyword, less one: chunks overlap by this much so no keyword is cut in two.
_OVERLAP = max(len(k) for k in KEYWORDS) - 1


def hit_lines(data: bytes) -> tuple[list[int], list[bool]]:
    """Start offsets of the lines holding a keyword, in order, each once; and which are headers.

    Linear in ``data`` whatever it holds: chunks bound the hit lists, each line's start is
    searched back only to the previous hit line, and a chunk without a newline that continues a
    line already taken is checked for ``Traceback`` alone (a C substring search), not scanned.
    """
    automaton = _keywords()
    view = memoryview(data)
    starts: list[int] = []
    headers: list[bool] = []
    # The current hit line: [line_start, line_end) with line_end -1 until it is searched.
    line_start = line_end = -1
    position = 0
    size = len(data)
    while position < size:
        stop = min(size, position + CHUNK)
        if starts and (line_end < 0 or line_end >= stop) and data.find(b"\n", position, stop) < 0:
            # Inside one long hit line: only a header keyword could change anything.
            if not headers[-1] and data.find(b"Traceback", max(0, position - _OVERLAP), stop) >= 0:
                headers[-1] = True
            position = stop
            continue
        base = max(0, position - _OVERLAP)
        for keyword, start, _end in automaton.find_matches_as_indexes(view[base:stop]):
            start += base
            if keyword == _PYTEST_E:
                start += 1  # an "E   " hit starts at the newline before its line
            if starts:
                if line_end < 0:
                    line_end = data.find(b"\n", line_start)
                    line_end = size if line_end < 0 else line_end + 1
                if start < line_end:  # the current hit line again
                    if keyword == _TRACEBACK:
                        headers[-1] = True
                    continue
            # Searched back no further than the end of the previous hit line: linear in all.
            floor = max(line_end, 0)
            line_start = start if keyword == _PYTEST_E else data.rfind(b"\n", floor, start) + 1
            line_start = max(line_start, floor)
            if starts and line_start == starts[-1]:
                headers[-1] = headers[-1] or keyword == _TRACEBACK
                continue
            line_end = -1
            starts.append(line_start)
            headers.append(keyword == _TRACEBACK)
        position = stop
    return starts, headers


def error_regions(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (first line number, region bytes) for every window worth parsing, in order."""
    starts, headers = hit_lines(data)
    # Line number of every hit line: one pass, newlines between neighbours counted once.
    numbers: list[int] = []
    number, position = 1, 0
    for start in starts:
        number += data.count(b"\n", position, start)
        position = start
        numbers.append(number)
    # For each hit line, the index of the first later hit line that is not a header.
    following = [len(starts)] * len(starts)
    nxt = len(starts)
    for i in range(len(starts) - 1, -1, -1):
        following[i] = nxt
        if not headers[i]:
            nxt = i
    # Windows are merged in line numbers (integers), and turned into byte offsets once per
    # window: a dense log has hundreds of thousands of hit lines.
    windows: list[list[int]] = []  # [first line, end line, hit index of each]
    walked = (-1, 0, 0)  # the last walk: (its header, the exception line's start, its number)
    for i, line_start in enumerate(starts):
        first = max(1, numbers[i] - BEFORE)
        target, target_hit = numbers[i], i
        if headers[i]:
            # The traceback runs to its exception line: the first later hit that is not itself
            # a header (unless implausibly far away), or, whatever words the class has
            # (``CannotInvert``), the first line after its frames.
            j = following[i]
            if j < len(starts) and numbers[j] - numbers[i] <= TRACEBACK_REACH:
                target, target_hit = numbers[j], j
            if line_start >= walked[1]:
                walked = (i, *_exception_line(data, line_start, numbers[i]))
            # A header inside the last walked traceback (a chain) ends where it ends.
            if walked[2] > target:
                target, target_hit = walked[2], -1 - walked[0]
        end = target + AFTER
        if windows and first <= windows[-1][1]:
            if end > windows[-1][1]:
                windows[-1][1], windows[-1][3] = end, target_hit
        else:
            windows.append([first, end, i, target_hit])
    for first, end, first_hit, end_hit in windows:
        begin = _back(data, starts[first_hit], numbers[first_hit] - first)
        if end_hit >= 0:
            anchor, number = starts[end_hit], numbers[end_hit]
        else:  # an exception line found by walking from header -1 - end_hit
            anchor, number = _exception_line(data, starts[-1 - end_hit], numbers[-1 - end_hit])
        yield first, data[begin : _forward(data, anchor, end - number)]


def _exception_line(data: bytes, header: int, number: int) -> tuple[int, int]:
    """(Start, line number) of the line ending the traceback whose header starts at ``header``.

    After the header come frames and source lines, indented (behind the header's own prefix
    when every line carries one, as docker compose and kubectl print them); the first line
    that is not is the exception line. At most ``TRACEBACK_REACH`` lines are walked; when none
    is found, the header itself is returned.
    """
    eol = data.find(b"\n", header)
    if eol < 0:
        return header, number
    keyword = data.find(b"Traceback", header, eol)
    prefix = data[header:keyword] if keyword > header else b""
    position = eol + 1
    for walked in range(1, TRACEBACK_REACH + 1):
        if position >= len(data):
            break
        end = data.find(b"\n", position)
        end = len(data) if end < 0 else end
        body = position + len(prefix) if prefix and data.startswith(prefix, position) else position
        if body < end and data[body] not in b" \t":
            return position, number + walked
        position = end + 1
    return header, number


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
