"""Narrowing a large input to the regions where an exception can be.

Every shape errkb explains carries an error word on the message's line or its traceback
(``Traceback``, an exception class suffix, a level, ``failed``, pytest's ``E   ``, a chain's
sentence). One small Aho-Corasick pass finds those lines, and only a window around each is
parsed: a ``Traceback`` header's whole traceback (to its exception line, found by walking its
indented frames), a few lines around any other hit. Windows keep their original line
numbers; every step is linear. Past ``NARROW_ABOVE``, a message with no such word nearby is
not seen (``match_message`` reads such text).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from errkb import _lazy
from errkb.parse.events import EventKind, Frame, LogEvent, MessageLine, evolve
from errkb.parse.repeats import Repeats
from errkb.parse.vocabulary import REGION_KEYWORDS, REGION_PYTEST_E, REGION_TRACEBACK

if TYPE_CHECKING:
    from errkb.parse.containers import View

#: Inputs larger than this (characters) are narrowed; smaller ones are parsed whole.
NARROW_ABOVE = 1 << 20
#: Lines kept before and after an ordinary hit (a message's continuation lines follow it).
BEFORE, AFTER = 1, 5
#: How far a traceback header reaches forward, at most, to its exception line.
TRACEBACK_REACH = 600
#: Bytes of one line parsed at most: four times what the parser reads of a message.
MAX_LINE_BYTES = 4 << 20
#: Lines a region grows to before an ordinary hit line outside a traceback starts the next.
MAX_REGION_LINES = 10_000

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

            # Over bytes: a str search maps every offset back to characters.
            _automaton = ahocorasick_rs.BytesAhoCorasick(list(KEYWORDS))
        return _automaton


#: Bytes handed to the keyword automaton at once: bounds the memory of its hit list.
CHUNK = 1 << 18
#: Longest keyword, less one: chunks overlap by this much so no keyword is cut in two.
_OVERLAP = max(len(k) for k in KEYWORDS) - 1


def hit_lines(data: bytes) -> Iterator[tuple[int, bool]]:
    """(Start offset, holds a traceback header) of each line holding a keyword, in order, once."""
    automaton = _keywords()
    view = memoryview(data)
    # The current hit line: [line_start, line_end) with line_end -1 until it is searched.
    line_start = line_end = -1
    header = False
    position = 0
    size = len(data)
    while position < size:
        stop = min(size, position + CHUNK)
        if (
            line_start >= 0
            and (line_end < 0 or line_end >= stop)
            and data.find(b"\n", position, stop) < 0
        ):
            # Inside one long hit line: only a header keyword could change anything.
            if not header and data.find(b"Traceback", max(0, position - _OVERLAP), stop) >= 0:
                header = True
            position = stop
            continue
        base = max(0, position - _OVERLAP)
        for keyword, start, _end in automaton.find_matches_as_indexes(view[base:stop]):
            start += base
            if keyword == _PYTEST_E:
                start += 1  # an "E   " hit starts at the newline before its line
            if line_start >= 0:
                if line_end < 0:
                    line_end = data.find(b"\n", line_start)
                    line_end = size if line_end < 0 else line_end + 1
                if start < line_end:  # the current hit line again
                    header = header or keyword == _TRACEBACK
                    continue
            # Searched back no further than the end of the previous hit line: linear in all.
            floor = max(line_end, 0)
            new = start if keyword == _PYTEST_E else data.rfind(b"\n", floor, start) + 1
            new = max(new, floor)
            if new == line_start:
                header = header or keyword == _TRACEBACK
                continue
            if line_start >= 0:
                yield line_start, header
            line_start, line_end, header = new, -1, keyword == _TRACEBACK
        position = stop
    if line_start >= 0:
        yield line_start, header


def keyword_lines(data: bytes) -> set[int]:
    """The 1-based numbers of the lines holding a keyword (one linear pass, as for regions)."""
    found: set[int] = set()
    number, position = 1, 0
    for line_start, _header in hit_lines(data):
        number += data.count(b"\n", position, line_start)
        position = line_start
        found.add(number)
    return found


def error_regions(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (first line number, region bytes) for every window worth parsing, in order."""
    for window in region_windows(data, numbered_hits(data, hit_lines(data))):
        yield _cut(data, window)


def numbered_hits(data: bytes, hits: Iterable[tuple[int, bool]]) -> Iterator[tuple[int, int, bool]]:
    """``hit_lines``' (start, header) as (1-based line number, start, header)."""
    number, position = 1, 0
    for line_start, is_header in hits:
        number += data.count(b"\n", position, line_start)
        position = line_start
        yield number, line_start, is_header


def region_windows(data: bytes, hits: Iterable[tuple[int, int, bool]]) -> Iterator[list[int]]:
    """``error_regions``' windows, as line numbers and anchors, from its numbered hit lines.

    Fed from a quiet point on (no window open, no header pending), the same windows as over the
    whole input.
    """
    # A window: [first line, end line (exclusive), first anchor's offset, its line, end anchor's
    # offset, its line].
    held: list[list[int]] = []
    # Headers since the last ordinary hit line, with their window's index in ``held``.
    pending: collections.deque[tuple[int, int]] = collections.deque()
    walked = (0, -1, 0)  # the last walk: (exception line's start, its number, header start)
    for number, line_start, is_header in hits:
        while pending and number - pending[0][0] > TRACEBACK_REACH:
            pending.popleft()
        first = max(1, number - BEFORE)
        target, anchor = number, line_start
        merge_from = None
        if is_header:
            # The traceback runs to the first later ordinary hit (unless implausibly far), or the
            # first line after its frames; a header inside the last walked one ends with it.
            if line_start >= walked[0] or walked[1] < 0:
                exc_start, exc_number = exception_line(data, line_start, number)
                walked = (exc_start, exc_number if exc_start != line_start else -1, line_start)
            if walked[1] > target:
                target, anchor = walked[1], walked[0]
        elif pending:
            merge_from = pending[0][1]  # the earliest header within reach ends here
            pending.clear()
        end = target + AFTER
        if merge_from is not None:
            window = held[merge_from]
            for later in held[merge_from + 1 :]:
                if later[1] > window[1]:
                    window[1], window[4], window[5] = later[1], later[4], later[5]
            del held[merge_from + 1 :]
            first = min(first, window[1])  # joins the header's window whatever the gap
        if (
            held
            and first <= held[-1][1]
            and not is_header
            and merge_from is None
            and number - held[-1][0] >= MAX_REGION_LINES
            and line_start > walked[0]
        ):
            # A region of error lines this long ends here; no traceback is open.
            window = held[-1]
            window[1], window[4], window[5] = number, line_start, number
            held.append([number, end, line_start, number, anchor, target])
        elif held and first <= held[-1][1]:
            window = held[-1]
            if end > window[1]:
                window[1], window[4], window[5] = end, anchor, target
        else:
            held.append([first, end, line_start, number, anchor, target])
        if is_header:
            pending.append((number, len(held) - 1))
        if not pending:
            # Nothing can reach back into finished windows any more: hand them out.
            yield from held[:-1]
            del held[:-1]
    yield from held


def _cut(data: bytes, window: list[int]) -> tuple[int, bytes]:
    first, end, first_anchor, first_number, end_anchor, end_number = window
    begin = _back(data, first_anchor, first_number - first)
    return first, data[begin : _forward(data, end_anchor, end - end_number)]


#: Every digit as "0": two timestamps of one format are then the same text.
_ZEROS_BYTES = bytes.maketrans(b"123456789", b"000000000")
_ZEROS_TEXT = str.maketrans("123456789", "000000000")


def _shape(text: str | bytes) -> str | bytes:
    return text.translate(_ZEROS_BYTES) if isinstance(text, bytes) else text.translate(_ZEROS_TEXT)


def has_prefix(line: str | bytes, prefix: str | bytes, at: int = 0) -> bool:
    """Whether ``line`` holds a traceback header's ``prefix`` at ``at`` (or its shape)."""
    if not prefix:
        return False
    piece = line[at : at + len(prefix)]
    return piece == prefix or (bool(prefix.strip()) and _shape(piece) == _shape(prefix))


def exception_line(data: bytes, header: int, number: int) -> tuple[int, int]:
    """(Start, line number) of the line ending the traceback whose header starts at ``header``.

    The first unindented line after it (behind the header's prefix); within ``TRACEBACK_REACH``
    lines, else the header.
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
        body = position + len(prefix) if has_prefix(data, prefix, position) else position
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


def parse_input(data: str | bytes, narrow_above: int = NARROW_ABOVE) -> list[LogEvent]:
    """Parse a log into events: whole up to ``narrow_above``, region by region past it."""
    from errkb.parse.sniff import looks_like_container
    from errkb.parse.text import decode_input

    if isinstance(data, bytes) and (
        len(data) <= narrow_above
        or data.startswith((b"\xff\xfe", b"\xfe\xff"))
        or b"\x00" in data[:4096]
        or looks_like_container(data)
    ):
        data = decode_input(data)
    if isinstance(data, str):
        contained = _parse_containers(data, narrow_above=narrow_above)
        if contained is not None:
            return contained
    return _parse_text(data, narrow_above)


def _parse_text(data: str | bytes, narrow_above: int = NARROW_ABOVE) -> list[LogEvent]:
    """Parse plain text (no containers): whole when small, region by region when large."""
    from errkb.parse.traceback import parse_log

    if isinstance(data, str):
        if len(data) <= narrow_above:
            return parse_log(data)
        # Lone surrogates (a str from a library caller) survive the round trip.
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = data
    return parse_regions(error_regions(raw))


def parse_regions(regions: Iterable[tuple[int, bytes]], first_index: int = 0) -> list[LogEvent]:
    """The events of each (first line, bytes) region; ``first_index`` numbers the first region."""
    from errkb.parse.text import decode_input
    from errkb.parse.traceback import parse_log

    # One region at a time, repeats folded as they come; a region equal to the last is skipped.
    events = Repeats()
    previous: tuple[bytes, list[LogEvent]] = (b"", [])
    for index, (first_line, region) in enumerate(regions, start=first_index):
        chunk = _clip_lines(region)
        if chunk != previous[0]:
            previous = (chunk, parse_log(decode_input(chunk)))
        for event in previous[1]:
            events.add(event, first_line - 1, partial(_shift, offset=first_line - 1, region=index))
    return events.events()


def json_line_events(line: str, number: int, region: int) -> list[LogEvent]:
    """The events of one JSON object line (input line ``number``) of a large input."""
    found = _parse_containers(line, large=True)
    if not found:
        return []
    return [_shift(e, number - 1, region) for e in found]


def _parse_containers(
    text: str, *, large: bool | None = None, narrow_above: int = NARROW_ABOVE
) -> list[LogEvent] | None:
    """Events of the views a JSON or markup container holds; None for plain text."""
    from errkb.parse.sniff import looks_like_container

    if not looks_like_container(text):
        return None
    from errkb.parse.containers import decode_containers  # only now: plain text never needs it

    if large is None:
        large = len(text) > narrow_above
    # A large input is narrowed as plain text is: only lines with an error word are offered.
    worth = keyword_lines(text.encode("utf-8", "surrogatepass")) if large else None
    decoded = decode_containers(text, worth)
    if decoded is None:
        return None
    events: list[LogEvent] = []
    if decoded.plain is not None:
        events.extend(_parse_text(decoded.plain, narrow_above))
    prose = _prose_views(decoded.views)
    for index, view in enumerate(decoded.views, start=1):
        if index in prose:
            # A one-line value without an error word is only a candidate message; large: narrowed
            # away.
            message = view.text.strip()
            if message and not large:
                events.append(
                    LogEvent(
                        EventKind.LOG, None, message, (view.line(1),), origin=f"{view.origin}:1"
                    )
                )
            continue
        found = _parse_text(view.text, narrow_above)
        if not found and view.value:
            # A value that is no exception line is still a candidate message.
            message = view.text.strip()
            if message:
                found = [LogEvent(EventKind.LOG, None, message, (1,))]
        events.extend(_in_view(e, view, index) for e in found)
    for item in decoded.structured:
        events.append(
            LogEvent(
                EventKind.TRACEBACK,
                item.exc_class,
                item.message,
                (item.line,),
                origin=item.origin,
            )
        )
    events.sort(key=lambda e: e.lines[0] if e.lines else 0)
    return events


# A glog / torch record header ("E0828 05:10:05.123456 ..."): an error level with no error word.
_GLOG_HINT = _lazy.pattern(r"[EF]\d{3,4} \d{2}:\d{2}:\d{2}\.")


def _prose_views(views: Sequence[View]) -> set[int]:
    """The 1-based indices of the one-line values the line parser would find nothing in."""
    candidates = [
        k
        for k, view in enumerate(views, start=1)
        if view.value
        and "\n" not in view.text
        and "\r" not in view.text
        and "\x1b" not in view.text
        and "\u241b" not in view.text
        and _GLOG_HINT().search(view.text, 0, 256) is None
    ]
    if not candidates:
        return set()
    parts = [views[k - 1].text.encode("utf-8", "surrogatepass") for k in candidates]
    starts: list[int] = []
    position = 0
    for part in parts:
        position += 1  # the joining newline before each value
        starts.append(position)
        position += len(part)
    joined = b"\n" + b"\n".join(parts)
    prose = set(candidates)
    import bisect  # here: only a container's values get this far

    for _keyword, _start, end in _keywords().find_matches_as_indexes(joined):
        # The keyword's last byte is inside the value it was found in.
        prose.discard(candidates[bisect.bisect_right(starts, end - 1) - 1])
    return prose


def _in_view(event: LogEvent, view: View, index: int) -> LogEvent:
    """Move a view's event to the input's line numbers; keep chain ids apart per view."""
    first = event.lines[0] if event.lines else 1
    return evolve(
        event,
        lines=tuple(view.line(n) for n in event.lines),
        frames=tuple(_frame_at(f, view.line(f.input_line)) for f in event.frames),
        message_lines=_message_lines_at(event.message_lines, view),
        chain_id=None if event.chain_id is None else (index << 32) + event.chain_id,
        origin=f"{view.origin}:{first}",
    )


def _message_lines_at(lines: tuple[MessageLine, ...], view: View) -> tuple[MessageLine, ...]:
    """A view's message lines on the input's line numbers, where each keeps its own line."""
    moved = tuple(MessageLine(m.text, view.line(m.number), m.length, m.width) for m in lines)
    numbers = [m.number for m in moved]
    return moved if numbers == sorted(set(numbers)) else lines  # strictly increasing


def _clip_lines(region: bytes) -> bytes:
    """``region`` with each line longer than ``MAX_LINE_BYTES`` cut to that many bytes."""
    if len(region) <= MAX_LINE_BYTES:
        return region
    parts: list[bytes] = []
    start, clipped = 0, False
    while start < len(region):
        end = region.find(b"\n", start)
        end = len(region) if end < 0 else end + 1
        if end - start > MAX_LINE_BYTES:
            parts.append(region[start : start + MAX_LINE_BYTES])
            parts.append(region[end - 1 : end] if region[end - 1 : end] == b"\n" else b"")
            clipped = True
        else:
            parts.append(region[start:end])
        start = end
    return b"".join(parts) if clipped else region


def _shift(event: LogEvent, offset: int, region: int) -> LogEvent:
    """Move a region's event to the input's line numbers; keep chain ids apart per region."""
    if offset == 0 and region == 0:
        return event
    return evolve(
        event,
        lines=tuple(n + offset for n in event.lines),
        frames=tuple(_frame_at(f, f.input_line + offset) for f in event.frames),
        # A wrapped message's printed lines are what explain rejoins and reports lines from.
        message_lines=tuple(
            MessageLine(m.text, m.number + offset, m.length, m.width) for m in event.message_lines
        ),
        chain_id=None if event.chain_id is None else (region << 32) + event.chain_id,
    )


def _frame_at(frame: Frame, input_line: int) -> Frame:
    """``frame`` moved to ``input_line`` (built directly: ``replace`` costs ~10x more)."""
    return Frame(frame.path, frame.line, frame.function, frame.source, input_line)
