r"""The record scan: the SCAN route of a large plain-text input, the parser only where it matters.

``record_scan`` folds into ``Folded`` the report the region parse would give, within ``Limits``,
in memory bounded by the input's size (past ``_max_shape_lines``, ``TooManyShapes``: the region
parse reads it). Its steps over one ``_Scan``:

1. ``_passes``: the record anchors' pass with its literal rejects, and the shape pass.
2. ``_open_windows``: hit lines near an error word or in a traceback open windows.
3. ``_read_alone``: exception lines outside every window, read from their line alone.
4. ``_hard_windows``: shapes only the full parser reads, in the region parse's own windows.
5. ``_decide_windows``: the windows parsed and decided in batches.
6. ``_fold_read_alone``: each line read alone becomes an ``Unmatched`` entry.
7. with nothing exact found in the whole input, the uncovered hit lines (``msgfirst``).

An input past ``segment`` bytes goes through steps 1-6 one segment at a time (``cuts``: at a
line no window, traceback or hard shape crosses when one is near), numbered as the whole input.
"""

from __future__ import annotations

import array
import bisect
import heapq
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, TypeAlias

from errkb.match.anchordb import Hits
from errkb.match.recordanchors import RecordAnchors, verbatim
from errkb.parse.events import EventKind, LogEvent
from errkb.parse.text import strip_escapes
from errkb.report import Alternative, Confidence, Match, Unmatched
from errkb.report.limits import Truncation

if TYPE_CHECKING:
    import tempfile

    import numpy as np
    import numpy.typing as npt

    from errkb.match.decide import Possible
    from errkb.match.recordanchors import Deferred
    from errkb.parse.text import LogLine

#: Lines of context a window keeps before and after a hit line (the region parser's).
BEFORE, AFTER = 1, 5
#: Lines a merged window grows to before the next hit starts another (``MAX_REGION_LINES``).
MAX_SPAN_LINES = 10_000
#: Windows (and their lines) parsed and decided together: bounds the events held at once.
BATCH_WINDOWS = 2048
BATCH_LINES = 20_000
#: Tracebacks a chain reaches over at most, either way, from the one a hit is in.
MAX_CHAIN = 32
#: Lines after a prefixed traceback header a hit is taken to be in its traceback.
PREFIXED_REACH = 64
#: Lines between a traceback's exception line and a chain sentence that ties the next one to it.
CHAIN_GAP = 3


class LineRecords:
    """Each kept line's candidate records, worked out when decide first asks (``Possible``).

    The records of the line's hits that pass their literal rejects; None when the index must
    say (a line not ``verbatim``, an escaped form's hit, a hand-written pattern, a ``|``).
    """

    def __init__(self, data: bytes, anchors: RecordAnchors, hits: Hits) -> None:
        self._data = data
        self._anchors = anchors
        self._hits = hits
        self._known: dict[int, tuple[str, ...] | None] = {}

    def get(self, number: int) -> tuple[str, ...] | None:
        """The candidates of line ``number`` (1-based), or None (ask the index)."""
        known = self._known
        if number in known:
            return known[number]
        found = known[number] = self._work_out(number - 1)
        return found

    def _work_out(self, at: int) -> tuple[str, ...] | None:
        hits, anchors = self._hits, self._anchors
        first = bisect.bisect_left(hits.lines, at)
        last = bisect.bisect_right(hits.lines, at, first)
        if first == last:
            return None
        data = self._data
        begin = hits.line_starts[first]
        end = data.find(b"\n", begin)
        line = data[begin : len(data) if end < 0 else end]
        if b"|" in line or not verbatim(line):
            return None
        text = line.decode() if line.isascii() else line.decode("utf-8", "replace")
        if not text.isascii() and "\u241b" in text:
            return None  # a shown ESC: the parser cuts what follows it
        maps = anchors.maps
        passed: dict[str, None] = {}
        for word in hits.words[first:last]:
            if not maps.plain[word]:
                return None
            records = anchors.passing(word, text)
            if records is None:
                return None  # a hand-written pattern: the index's words decide
            for record in records:
                passed[maps.record_id(record)] = None
        return tuple(passed)


# ---------------------------------------------------------------------------- the shape pass
#: Lines shaped like an exception's last line (for the unmatched entries outside windows).
EXCEPTION_WORDS = (
    b"Error:",
    b"Exception:",
    b"Warning:",
    b"Exit:",
    b"Interrupt:",
    b"Iteration:",
    b"Error\n",
    b"Exception\n",
    b"Interrupt\n",
    b"Exit\n",
    b"Iteration\n",
)
CHAIN_WORDS = (
    b"The above exception was the direct cause",
    b"During handling of the above exception",
)
#: Shapes only the full parser reads (``Shapes.hard``): panel corners, exception groups,
#: journald fields. pytest's ``E   `` lines are the region words' last.
HARD_WORDS = (
    "╭─".encode(),
    "╰─".encode(),
    b"Exception Group",
    b"+-+---",
    b"MESSAGE=",
)
_shape_lock = threading.Lock()
_shape_finders: dict[str, ShapeFinder] = {}


class ShapeFinder(Protocol):
    """Every (word index, start offset) of the shape words in a chunk, overlapping hits too."""

    def __call__(self, chunk: bytes, /) -> list[tuple[int, int]]: ...


def _shape_words() -> tuple[bytes, ...]:
    from errkb.parse.vocabulary import REGION_KEYWORDS

    # The region parser's own words first (index 0 is ``Traceback``).
    return (*REGION_KEYWORDS, *CHAIN_WORDS, *EXCEPTION_WORDS, *HARD_WORDS)


def _shapes(engine: str | None = None) -> ShapeFinder:
    """The shape pass's finder on ``engine`` (the default engine when None); same hits on each."""
    from errkb.match.anchordb import default_engine

    engine = engine or default_engine()
    with _shape_lock:
        found = _shape_finders.get(engine)
        if found is None:
            found = _shape_finders[engine] = (
                _hyperscan_finder() if engine == "hyperscan" else _ahocorasick_finder()
            )
        return found


def _ahocorasick_finder() -> ShapeFinder:
    import ahocorasick_rs

    automaton = ahocorasick_rs.BytesAhoCorasick(list(_shape_words()))

    def find(chunk: bytes) -> list[tuple[int, int]]:
        return [
            (kind, start)
            for kind, start, _end in automaton.find_matches_as_indexes(chunk, overlapping=True)
        ]

    return find


def _hyperscan_finder() -> ShapeFinder:
    import hyperscan

    words = _shape_words()
    lengths = [len(word) for word in words]
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        expressions=list(words),
        ids=list(range(len(words))),
        elements=len(words),
        flags=0,
        literal=True,
    )

    def find(chunk: bytes) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        add = found.append

        def on_match(index: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add((index, end - lengths[index]))  # Hyperscan reports where a literal ends

        # A scratch per call: one database serves every thread.
        database.scan(chunk, match_event_handler=on_match, scratch=hyperscan.Scratch(database))
        return found

    return find


def prepare_passes() -> None:
    """Build the shape pass's automaton and import numpy now (``KnowledgeBase.prepare``)."""
    _shapes()
    newline_index(b"\n")


#: Line numbers, ascending, 8 bytes each: the scan's per-line memory (BENCHMARKS.md, row 14).
Lines: TypeAlias = "array.array[int]"


def _lines(numbers: Iterable[int] = ()) -> array.array[int]:
    return array.array("q", numbers)


class LineStarts:
    """The start offset of each line the scan knows, by 1-based number (16 bytes a line).

    The shape pass's lines as two parallel sorted arrays, found by bisection; lines added
    later (a traceback's end found by its walk) in a small dict beside them.
    """

    __slots__ = ("_extra", "_numbers", "_offsets")

    def __init__(self, numbers: Lines, offsets: Lines) -> None:
        self._numbers, self._offsets = numbers, offsets
        self._extra: dict[int, int] = {}

    def get(self, number: int, default: int | None = None) -> int | None:
        at = bisect.bisect_left(self._numbers, number)
        if at < len(self._numbers) and self._numbers[at] == number:
            return self._offsets[at]
        return self._extra.get(number, default)

    def __getitem__(self, number: int) -> int:
        at = bisect.bisect_left(self._numbers, number)
        if at < len(self._numbers) and self._numbers[at] == number:
            return self._offsets[at]
        return self._extra[number]

    def __setitem__(self, number: int, offset: int) -> None:
        if self.get(number) is None:
            self._extra[number] = offset

    def __len__(self) -> int:
        return len(self._numbers) + len(self._extra)

    def items(self) -> Iterator[tuple[int, int]]:
        yield from zip(self._numbers, self._offsets, strict=True)
        yield from self._extra.items()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LineStarts) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Shapes:
    """The shape pass's lines (1-based, ascending) and each line's start offset.

    ``keywords``: lines with a ``REGION_KEYWORDS`` word; ``exceptions``: lines that may end an
    exception; ``hard``: lines only the full parser reads (``HARD_WORDS``, pytest's ``E``).
    """

    headers: Lines
    chains: Lines
    keywords: Lines
    exceptions: Lines
    starts: LineStarts
    hard: Lines = field(default_factory=_lines)


class TooManyShapes(Exception):
    """The shape pass named more lines than the record scan holds: the region parse reads it."""


#: The shape lines any input may have, and the bytes per further line a larger one is allowed.
MIN_SHAPE_LINES, SHAPE_LINE_BYTES = 250_000, 48
#: The bytes of a whole input per shape line it may always have, however dense its start.
WHOLE_LINE_BYTES = 256


def _max_shape_lines(read: int, size: int) -> int:
    """Lines the shape pass may name once it has read ``read`` bytes of ``size``.

    The most of ``MIN_SHAPE_LINES``, one per ``SHAPE_LINE_BYTES`` read and one per
    ``WHOLE_LINE_BYTES`` of the whole input: repeats give up early, a dense start does not.
    """
    return max(MIN_SHAPE_LINES, read // SHAPE_LINE_BYTES, size // WHOLE_LINE_BYTES)


def shape_lines(
    data: bytes, newlines: Callable[[Sequence[int]], list[int]], engine: str | None = None
) -> Shapes:
    """One pass over ``data`` for the shape words; ``newlines`` maps offsets to 0-based lines.

    ``engine``: ``anchordb.ENGINES``' name (the default engine when None); every engine gives
    the same shapes. Raises ``TooManyShapes`` past ``_max_shape_lines`` distinct lines.
    """
    from errkb.parse.vocabulary import REGION_KEYWORDS, REGION_PYTEST_E

    find = _shapes(engine)
    pytest_e = REGION_PYTEST_E
    chain_from = len(REGION_KEYWORDS)
    exceptions_from = chain_from + len(CHAIN_WORDS)
    hard_from = exceptions_from + len(EXCEPTION_WORDS)
    overlap = max(len(w) for w in _shape_words()) - 1
    # Per kind, each line once (0 headers, 1 chains, 2 keywords, 3 exceptions, 4 hard), and
    # every line's start, as arrays (``Lines``). A line is seen again only in the chunk after
    # it (a word across the chunks' overlap): the sets of two chunks tell.
    kinds = [_lines() for _ in range(5)]
    numbers, offsets = _lines(), _lines()
    table = [
        _kinds_of(kind, chain_from, exceptions_from, hard_from, pytest_e)
        for kind in range(len(_shape_words()))
    ]
    before: set[int] = set()  # (number << 3 | list + 1) of the chunk before, 0: its start
    ordered = True
    for base in range(0, len(data), _SHAPE_CHUNK):
        found = find(data[base : base + _SHAPE_CHUNK + overlap])
        now: set[int] = set()
        if found:
            # pytest's word starts at the newline before its line.
            at = [base + start + (kind == pytest_e) for kind, start in found]
            for (kind, _s), offset, line in zip(found, at, newlines(at), strict=True):
                number = line + 1
                key = number << 3
                if key not in now and key not in before:
                    now.add(key)
                    ordered = ordered and (not numbers or number > numbers[-1])
                    numbers.append(number)
                    offsets.append(data.rfind(b"\n", 0, offset) + 1)
                for k in table[kind]:
                    if key + k + 1 not in now and key + k + 1 not in before:
                        now.add(key + k + 1)
                        lines = kinds[k]
                        ordered = ordered and (not lines or number > lines[-1])
                        lines.append(number)
        before = now
        # Judged on what has been read so far.
        read = min(len(data), base + _SHAPE_CHUNK)
        if len(numbers) > _max_shape_lines(read, len(data)):
            raise TooManyShapes(f"{len(numbers)} shape lines in the first {read} bytes")
    if not ordered:
        # A word across two chunks on an earlier line than the last one seen, or a line over
        # a chunk long seen again two chunks on: sorted, each line once.
        pairs = sorted(dict(zip(numbers, offsets, strict=True)).items())
        numbers, offsets = _lines(n for n, _o in pairs), _lines(o for _n, o in pairs)
        kinds = [_lines(sorted(set(k))) for k in kinds]
    headers, chains, keywords, exceptions, hard = kinds
    return Shapes(headers, chains, keywords, exceptions, LineStarts(numbers, offsets), hard)


def _kinds_of(
    kind: int, chain_from: int, exceptions_from: int, hard_from: int, pytest_e: int
) -> tuple[int, ...]:
    """Which of ``Shapes``' lists (0 headers ... 4 hard) a word of ``kind`` puts its line in."""
    if kind >= hard_from:
        return (4,)
    if kind >= exceptions_from:
        return (3,)
    if kind >= chain_from:
        return (1,)
    if kind == 0:
        return (2, 0)
    if kind == pytest_e:
        return (2, 4)
    return (2,)


#: Bytes the shape pass reads at a time (its hits are Python tuples).
_SHAPE_CHUNK = 1 << 20


def newline_index(data: bytes) -> npt.NDArray[np.int64] | None:
    """``data``'s newline offsets, found once per scan for every pass; None without numpy."""
    try:
        from errkb.match.anchordb import _numpy

        _numpy()
        import numpy  # noqa: F401
    except ImportError:  # pragma: no cover - numpy is a dependency of the fast path
        return None
    from errkb.match.anchordb import newline_offsets

    return newline_offsets(data)


def line_index(
    data: bytes, newlines: npt.NDArray[np.int64] | None = None
) -> Callable[[Sequence[int]], list[int]]:
    """Offsets -> 0-based line numbers over ``newlines`` (``newline_index``'s when None)."""
    if newlines is None:
        newlines = newline_index(data)
    if newlines is None:

        def counted(offsets: Sequence[int]) -> list[int]:
            out: list[int] = []
            number, position = 0, 0
            for offset in offsets:
                number += data.count(b"\n", position, offset)
                position = offset
                out.append(number)
            return out

        return counted
    import numpy as np

    found = newlines

    def mapped(offsets: Sequence[int]) -> list[int]:
        lines: list[int] = np.searchsorted(found, np.asarray(offsets, dtype=np.int64)).tolist()
        return lines

    return mapped


# ---------------------------------------------------------------------------- windows
@dataclass
class _Tracebacks:
    """Each traceback header's extent: header line -> (exception line, its start offset)."""

    data: bytes
    shapes: Shapes
    ends: dict[int, tuple[int, int]] = field(default_factory=dict)

    def end(self, header: int) -> int:
        got = self.ends.get(header)
        return (got if got is not None else self.extent(header))[0]

    def extent(self, header: int) -> tuple[int, int]:
        """(Exception line, its start offset) of the traceback whose header is ``header``."""
        got = self.ends.get(header)
        if got is None:
            from errkb.parse.regions import exception_line

            start, number = exception_line(self.data, self.shapes.starts[header], header)
            got = self.ends[header] = (number, start)
        return got

    def around(self, line: int) -> tuple[int, int] | None:
        """(header, exception line) of the traceback ``line`` is in, if any."""
        headers = self.shapes.headers
        k = bisect.bisect_right(headers, line) - 1
        # A header inside a chain's earlier traceback: look back over a few headers.
        for j in range(k, max(-1, k - 4), -1):
            header = headers[j]
            end = self.end(header)
            if header <= line <= end + AFTER and end > header:
                return header, end
            if line - header <= PREFIXED_REACH and self.prefixed(header):
                return header, line  # per-line prefixes end no walk: the parser finds the end
            if end < line - AFTER:
                break
        return None

    def prefixed(self, header: int) -> bool:
        """Whether the header's ``Traceback`` has text before it on its line (a prefix)."""
        start = self.shapes.starts[header]
        at = self.data.find(b"Traceback", start)
        return at > start and self.data[start:at].strip() != b""

    def chained(self, first: int, last: int) -> tuple[int, int]:
        """``first``..``last`` widened over the tracebacks chained before and after it."""
        headers, chains = self.shapes.headers, self.shapes.chains
        for _ in range(MAX_CHAIN):
            # A chain sentence just before this header ties the traceback before it.
            c = bisect.bisect_right(chains, first) - 1
            if c < 0 or first - chains[c] > CHAIN_GAP:
                break
            k = bisect.bisect_left(headers, chains[c]) - 1
            if k < 0:
                break
            first = headers[k]
        for _ in range(MAX_CHAIN):
            c = bisect.bisect_right(chains, last)
            if c >= len(chains) or chains[c] - last > CHAIN_GAP:
                break
            k = bisect.bisect_right(headers, chains[c])
            if k >= len(headers) or headers[k] - chains[c] > CHAIN_GAP:
                break
            last = max(last, self.end(headers[k]))
        return first, last


def windows(hits: Sequence[int], tracebacks: _Tracebacks, total_lines: int) -> list[list[int]]:
    """[first, last] line windows (1-based, inclusive, merged, ascending) around ``hits``."""
    spans: list[list[int]] = []
    headers = tracebacks.shapes.headers
    for line in hits:
        inside = tracebacks.around(line)
        if inside is not None:
            first, last = tracebacks.chained(*inside)
            first, last = first - BEFORE, max(last, line) + AFTER
        else:
            first, last = line - BEFORE, line + AFTER
        # A window that would begin inside a traceback begins at its header.
        k = bisect.bisect_right(headers, first) - 1
        if k >= 0 and headers[k] < first <= tracebacks.end(headers[k]):
            first = headers[k]
        # A header inside the window brings its whole traceback (not transitively: linear).
        k = bisect.bisect_left(headers, first)
        reach = last
        while k < len(headers) and headers[k] <= reach:
            last = max(last, tracebacks.end(headers[k]) + AFTER)
            k += 1
        first, last = max(1, first), min(total_lines, last)
        if spans and first <= spans[-1][1] + 1:
            if spans[-1][1] - spans[-1][0] < MAX_SPAN_LINES:
                spans[-1][1] = max(spans[-1][1], last)
            elif last > spans[-1][1]:
                spans.append([spans[-1][1] + 1, last])
        else:
            spans.append([first, last])
    return spans


# ---------------------------------------------------------------------------- segments
#: Lines either side of a clean cut that hold no shape word and no anchor hit.
QUIET_LINES = 2 * (BEFORE + AFTER)
#: Bytes before a segment's nominal end searched for its cut (at most half the segment).
CUT_SEARCH = 1 << 20


def cuts(data: bytes, size: int, anchors: RecordAnchors) -> list[tuple[int, int]]:
    """(start, stop) of consecutive segments of ``data``, cut at line starts, about ``size`` each.

    A cut is the *clean* line start nearest the nominal end, in the ``CUT_SEARCH`` bytes before
    it, else as many after it: within ``QUIET_LINES`` lines of it no shape word, anchor hit or
    indented line, and no traceback walked from a header reaching it, so nothing the scan reads
    as one crosses it. Else a *calm* one (no hard shape in the search; within ``QUIET_LINES``
    lines no hit, traceback, chain sentence or indented line; the next line an exception line
    of its own or the previous none: row 14's lines); else the line start farthest from any
    of those (a cut there may read the windows either side of it apart).
    """
    out: list[tuple[int, int]] = []
    start = 0
    while len(data) - start > size:
        stop = _cut_point(data, start, start + size, anchors)
        if stop >= len(data):
            break
        out.append((start, stop))
        start = stop
    out.append((start, len(data)))
    return out


def _cut_point(data: bytes, start: int, nominal: int, anchors: RecordAnchors) -> int:
    """Where the segment from ``start`` ends, near ``nominal`` (``cuts``' rule)."""
    eol = data.find(b"\n", nominal - 1)
    if eol < 0:
        return len(data)
    last = eol + 1  # the nominal end's line start
    search = min(CUT_SEARCH, (nominal - start) // 2)
    # Before the nominal end (a near cut is usual: its 64 KiB first), else after it, as far.
    ranges = [(max(start, last - width), last, True) for width in (min(search, 1 << 16), search)]
    spare = (0, last)  # else the line start farthest from anything read as one with others
    for low, high, back in [*ranges, (last, last + search, False)]:
        found, apart = _quiet_cut(data, low, high, anchors, back)
        if found is not None:
            return found
        spare = max(spare, apart, key=lambda s: s[0])
    return spare[1]


def _quiet_cut(
    data: bytes, low: int, high: int, anchors: RecordAnchors, back: bool
) -> tuple[int | None, tuple[int, int]]:
    """The clean line start in (``low``, ``high``] nearest ``high`` (``back``, else ``low``).

    Else the calm one nearest it; None when neither is there. With it, (lines, line start):
    the line start farthest from any shape word, hit, traceback or indented line.
    """
    import numpy as np

    # The lines a cut's quiet reaches beyond the range (within 64 KiB) are read too.
    begin, ahead = low, min(high, len(data))
    for _ in range(QUIET_LINES + 1):
        eol = data.rfind(b"\n", max(0, low - (1 << 16)), max(0, begin - 1))
        begin = begin if eol < 0 else eol + 1
        eol = data.find(b"\n", ahead, ahead + (1 << 16))
        ahead = ahead if eol < 0 else eol + 1
    piece = data[begin:ahead]
    newlines = newline_index(piece)
    if newlines is None:  # pragma: no cover - numpy is a dependency of the fast path
        return None, (0, high)
    shapes = shape_lines(piece, line_index(piece, newlines), anchors.engine)
    tracebacks = _Tracebacks(piece, shapes)
    hits = [number for number, _start in anchors.hit_lines(piece, newlines)]
    lines = len(newlines) + 2
    starts = np.concatenate(([0], newlines + 1))  # 1-based line n starts at starts[n - 1]
    # Marks per line: what reads as one with its neighbours (hits, tracebacks walked from
    # their headers, chain sentences, indented lines), and every other shape word.
    held = np.zeros(lines, dtype=np.int64)
    np.add.at(held, np.asarray(hits, dtype=np.int64), 1)
    np.add.at(held, np.asarray(shapes.chains, dtype=np.int64), 1)
    heads = np.frombuffer(piece, dtype=np.uint8)[starts[starts < len(piece)]]
    held[1 : len(heads) + 1] += (heads == 32) | (heads == 9)  # a frame's, a wrapped line's
    for header in shapes.headers:
        reach = tracebacks.end(header)
        if tracebacks.prefixed(header):
            reach = max(reach, header + PREFIXED_REACH)
        held[header : min(lines, reach + AFTER + 1)] += 1
    busy = held.copy()
    for kind in (shapes.keywords, shapes.exceptions, shapes.hard):
        np.add.at(busy, np.asarray(kind, dtype=np.int64), 1)
    clean, apart = _clear_around(busy), _clear_around(held)
    calm = not len(shapes.hard)  # a hard shape's region window runs over keyword lines
    exceptions = shapes.exceptions
    first = int(np.searchsorted(starts, (high if back else low) - begin, "right"))
    numbers = range(first, 1, -1) if back else range(first + 1, len(starts) + 1)
    marked = np.flatnonzero(busy).tolist()
    fallback, spare = None, (0, high)
    for number in numbers:
        at = int(starts[number - 1])
        if not low < begin + at <= high:
            break
        if clean(number):
            return begin + at, spare
        if (
            fallback is None
            and calm
            and apart(number)
            and (not _holds(exceptions, number - 1) or exception_of(piece, at) is not None)
        ):
            fallback = begin + at
        k = bisect.bisect_left(marked, number)
        after = marked[k] - number + 1 if k < len(marked) else lines
        before = number - marked[k - 1] if k else number
        spare = max(spare, (min(before, after), begin + at), key=lambda s: s[0])
    return fallback, spare


def _clear_around(marks: npt.NDArray[np.int64]) -> Callable[[int], bool]:
    """Whether no line within ``QUIET_LINES`` of a cut before line ``n`` is marked."""
    import numpy as np

    total = np.concatenate(([0], np.cumsum(marks)))
    size = len(marks)

    def clear(n: int) -> bool:
        first, stop = n - QUIET_LINES, n + QUIET_LINES
        if first < 1 or stop > size:
            return False
        return bool(total[stop] == total[first])

    return clear


# ---------------------------------------------------------------------------- hard shapes
#: Keyword lines walked back, at most, for a point where the region parse holds nothing open.
QUIET_REACH = 4096


class _Regions:
    """The region parse's own windows around given lines.

    Computed by ``regions.region_windows`` from a *quiet* keyword line on (no window open, no
    header pending before it), not from the start of the input.
    """

    def __init__(self, data: bytes, shapes: Shapes, tracebacks: _Tracebacks) -> None:
        self._data = data
        self._shapes = shapes
        self._tracebacks = tracebacks
        self._headers = frozenset(shapes.headers)
        self._stream: Iterator[list[int]] | None = None
        self._fed = -1  # index in ``keywords`` of the last keyword line the stream was fed
        self._ahead: list[list[int]] = []  # windows the stream gave past the last line asked

    def _quiet(self, k: int) -> int:
        """The last index ``j <= k`` of a keyword line before which the region parse is idle."""
        from errkb.parse.regions import TRACEBACK_REACH as reach

        keywords, headers, ends = self._shapes.keywords, self._shapes.headers, self._tracebacks
        for j in range(k, max(-1, k - QUIET_REACH), -1):
            if j == 0:
                return 0
            line, before = keywords[j], keywords[j - 1]
            if before in self._headers or line - BEFORE <= before + AFTER:
                continue
            h = bisect.bisect_left(headers, line - 2 * (reach + AFTER + 2))
            if all(
                max(headers[i], ends.end(headers[i])) + AFTER < line - BEFORE
                for i in range(bisect.bisect_left(headers, line) - 1, h - 1, -1)
            ):
                return j
        return max(0, k - QUIET_REACH + 1)

    def _feed(self, j: int) -> Iterator[tuple[int, int, bool]]:
        keywords, starts, headers = self._shapes.keywords, self._shapes.starts, self._headers
        for i in range(j, len(keywords)):
            self._fed = i
            number = keywords[i]
            yield number, starts[number], number in headers

    def containing(self, line: int) -> list[int] | None:
        """[first, last] of the region parse's window holding ``line`` (ascending calls)."""
        from errkb.parse.regions import region_windows

        k = bisect.bisect_right(self._shapes.keywords, line + BEFORE) - 1
        if k < 0:
            return None
        # A stream fed past this line goes on; else restart from a quiet line.
        if self._stream is None or self._fed < k:
            j = self._quiet(k)
            if self._stream is None or self._fed < j:
                self._stream = region_windows(self._data, self._feed(j))
                self._ahead = []
        ahead = self._ahead
        while ahead and ahead[0][1] <= line:
            ahead.pop(0)
        if ahead:
            window = ahead[0]
            return [window[0], window[1] - 1] if window[0] <= line else None
        for window in self._stream:
            if window[1] <= line:
                continue
            ahead.append(window)
            return [window[0], window[1] - 1] if window[0] <= line else None
        return None


def hard_spans(
    data: bytes, shapes: Shapes, tracebacks: _Tracebacks, lines: Sequence[int], total: int
) -> list[list[int]]:
    """The region parse's windows holding any of ``lines``, [first, last], merged, ascending."""
    found = _Regions(data, shapes, tracebacks)
    spans: list[list[int]] = []
    for line in sorted(set(lines)):
        if spans and spans[-1][0] <= line <= spans[-1][1]:
            continue
        span = found.containing(line)
        if span is None:
            continue
        span = [max(1, span[0]), min(total, span[1])]
        if spans and span[0] <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], span[1])
        else:
            spans.append(span)
    return spans


def _clip(spans: Sequence[list[int]], hard: _Spans) -> list[list[int]]:
    """``spans`` without the lines of the ``hard`` spans (which the full parser reads)."""
    out: list[list[int]] = []
    for first, last in spans:
        for piece in hard.outside(first, last):
            out.append(piece)
    return out


def _continuations(data: bytes, start: int) -> tuple[str, list[str]]:
    """The cleaned exception line at ``start`` and the lines that may continue it (``_ends``)."""
    from errkb.parse.text import normalize
    from errkb.parse.traceback import MAX_WRAP_LINES

    position = start
    for _ in range(MAX_WRAP_LINES):
        nxt = data.find(b"\n", position + 1)
        if nxt < 0:
            position = len(data)
            break
        position = nxt
    lines = normalize(data[start:position][: 1 << 16].decode("utf-8", "replace")).lines
    rest: list[str] = []
    for line in lines[1:]:
        if _ends(line):
            break
        rest.append(line.text)
    return (lines[0].text if lines else ""), rest


def _ends(line: LogLine) -> bool:
    """Whether the cleaned ``line`` cannot continue the message before it."""
    from errkb.parse.traceback import ends_message

    return not line.text.strip() or line.header or ends_message(line.text)


def wrapped_exceptions(
    data: bytes, lines: Sequence[tuple[int, int]], anchors: RecordAnchors
) -> list[int]:
    """Which exception ``lines`` ((number, start) each, ascending) only the full parser reads.

    Those indented, those whose message continues on the next lines, and those a record's
    anchor hits once rejoined with their continuation (a panel, a wrapped email).
    """
    hard: list[int] = []
    for begin in range(0, len(lines), WRAP_BATCH):
        hard += _wrapped(data, lines[begin : begin + WRAP_BATCH + 1], anchors)
    return hard


#: Exception lines checked for a continuation at a time (``wrapped_exceptions``).
WRAP_BATCH = 4096


def _wrapped(data: bytes, lines: Sequence[tuple[int, int]], anchors: RecordAnchors) -> list[int]:
    """``wrapped_exceptions`` of ``lines`` (ascending) but the last, ``WRAP_BATCH`` past."""
    from errkb.parse.text import normalize

    hard: list[int] = []
    joined: list[tuple[int, bytes]] = []
    # The common case is told from the next line alone, all of them cleaned in one call.
    pending: list[tuple[int, int]] = []
    following: list[bytes] = []
    checked = lines if len(lines) <= WRAP_BATCH else lines[:WRAP_BATCH]
    for at, (number, start) in enumerate(checked):
        if data[start : start + 1] in (b" ", b"\t"):
            hard.append(number)
            continue
        end = data.find(b"\n", start)
        if end < 0:
            continue
        after = data.find(b"\n", end + 1)
        line = data[end + 1 : len(data) if after < 0 else after][: 1 << 16]
        if not line.strip():
            continue
        if (
            at + 1 < len(lines)
            and lines[at + 1][0] == number + 1
            and line[:1] not in b" \t"
            and exception_of(data, end + 1) is not None
        ):
            continue  # the next line begins an event of its own
        pending.append((number, start))
        following.append(line)
    if not pending:
        return hard
    first: dict[int, LogLine] = {}
    for cleaned in normalize(b"\n".join(following).decode("utf-8", "replace")).lines:
        first.setdefault(cleaned.number, cleaned)  # a line's first ``\r`` segment
    for k, (number, start) in enumerate(pending, start=1):
        nxt = first.get(k)
        if nxt is None or _ends(nxt):
            continue
        head, rest = _continuations(data, start)
        if not rest:
            continue
        if rest[0][:1] in (" ", "\t") or head.rstrip().endswith(":"):
            hard.append(number)
            continue
        texts = [head.rstrip(), *(part.strip() for part in rest)]
        for joiner in (" ", ""):
            joined.append((number, joiner.join(texts).encode("utf-8", "replace")))
    if joined:
        buffer = b"\n".join(text.replace(b"\n", b" ") for _n, text in joined) + b"\n"
        hard.extend(joined[at - 1][0] for at, _start in anchors.hit_lines(buffer))
    return sorted(set(hard))


# ---------------------------------------------------------------------------- unmatched lines


def _line_text(data: bytes, start: int, *, clean: bool = True) -> str:
    end = data.find(b"\n", start)
    raw = data[start : len(data) if end < 0 else end]
    if not clean:
        return raw.decode("utf-8", "replace")
    text = raw[: 1 << 16].decode("utf-8", "replace").rstrip("\r")
    return strip_escapes(text)  # the parser's one rule: CSI, OSC, DCS, APC


def exception_of(
    data: bytes, start: int, header_prefix: str | None = None
) -> tuple[str, str] | None:
    """(class, message) of the exception line at ``start``, as the parser reads it, or None.

    ``header_prefix``: the line ends a traceback whose header carries it ("" for none).
    """
    from errkb.parse.regions import has_prefix
    from errkb.parse.traceback import exception_line

    end = data.find(b"\n", start)
    text = data[start : len(data) if end < 0 else end][: 1 << 18].decode("utf-8", "replace")
    if header_prefix and has_prefix(text, header_prefix):
        text = text[len(header_prefix) :]
    return exception_line(text, ends_traceback=header_prefix is not None)


# ---------------------------------------------------------------------------- limits, folding
@dataclass(frozen=True)
class Limits:
    """What one report keeps at most; counts stay exact past them (``Truncation`` says so)."""

    matches_per_record: int = 200
    matches: int = 5000
    lines_per_entry: int = 1000
    unmatched: int = 2000


#: No bound (``errkb explain --all``): every entry kept.
UNLIMITED = Limits(1 << 62, 1 << 62, 1 << 62, 1 << 62)


@dataclass
class _Entry:
    match: Match
    lines: set[int]
    occurrences: int


#: Characters of a short summary's message ``Folded.add_copy`` finds its entry by.
COPY_HEAD = 24
#: What ``Folded.add_copy`` finds: a match's entry, or an unmatched entry's (class, message).
_Copied: TypeAlias = "_Entry | tuple[str | None, str]"


class Folded:
    """Matches and unmatched entries of batches, folded into one report's, within ``Limits``."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._matches: dict[tuple[str, tuple[tuple[str, str], ...]], _Entry] = {}
        self._per_record: dict[tuple[str, Confidence], int] = {}
        # Exact and possible entries are held apart: a possible one never takes an answer's place.
        self._held = {Confidence.EXACT: 0, Confidence.POSSIBLE: 0}
        # Each entry by (class, first ``COPY_HEAD`` characters), for ``add_copy``.
        self._heads: dict[tuple[str | None, str], list[_Copied]] = {}
        self._unmatched: dict[tuple[str | None, str], Unmatched] = {}
        self._unmatched_lines: dict[tuple[str | None, str], set[int]] = {}
        # Each entry's first line, kept as lines are added.
        self._unmatched_first: dict[tuple[str | None, str], int] = {}
        # Held entries some plain occurrence made (not only possible matches): suggested.
        self._suggested: set[tuple[str | None, str]] = set()
        self.cut_matches = 0
        self.cut_match_occurrences = 0
        self.cut_records: dict[str, int] = {}
        self._cut_unmatched = DistinctHashes()
        self.cut_unmatched_occurrences = 0
        self.cut_lines = 0

    @property
    def exact(self) -> bool:
        return self.cut_matches > 0 or any(
            e.match.confidence is Confidence.EXACT for e in self._matches.values()
        )

    def add_matches(self, matches: Sequence[Match]) -> None:
        """Fold exact and possible matches (similar suggestions are the caller's)."""
        limits = self.limits
        for m in matches:
            if m.confidence is Confidence.SIMILAR:
                continue
            key = (m.id, m.captures)
            entry = self._matches.get(key)
            if entry is None:
                per = (m.id, m.confidence)
                held = self._per_record.get(per, 0)
                if held >= limits.matches_per_record or self._held[m.confidence] >= limits.matches:
                    self.cut_matches += 1
                    self.cut_match_occurrences += m.occurrences
                    self.cut_records[m.id] = self.cut_records.get(m.id, 0) + 1
                    continue
                self._per_record[per] = held + 1
                self._held[m.confidence] += 1
                entry = self._matches[key] = _Entry(m, set(m.lines), m.occurrences)
                self._head_of(m.exception.cls, m.exception.message).append(entry)
                continue
            entry.occurrences += m.occurrences
            entry.lines.update(m.lines)
            old = entry.match
            if m.confidence is Confidence.EXACT and old.confidence is not Confidence.EXACT:
                self._held[Confidence.POSSIBLE] -= 1
                self._held[Confidence.EXACT] += 1
                old = entry.match = replace(
                    old, confidence=m.confidence, decision=m.decision, evidence=m.evidence
                )
            if m.score > old.score or m.alternatives or (m.root_cause and not old.root_cause):
                alternatives = {a.id: a for a in old.alternatives}
                for a in m.alternatives:
                    if a.id not in alternatives or a.score > alternatives[a.id].score:
                        alternatives[a.id] = a
                better = m.score > old.score
                entry.match = replace(
                    old,
                    score=m.score if better else old.score,
                    evidence=m.evidence if better else old.evidence,
                    alternatives=tuple(sorted(alternatives.values(), key=_by_score)),
                    root_cause=old.root_cause or m.root_cause,
                )

    def add_copy(self, cls: str | None, head: str, number: int) -> bool:
        """Count line ``number`` once more for the held entry of class ``cls`` it abbreviates.

        Its message begins with ``head``; a match first, else an unmatched entry; False if none.
        """
        if len(head) < COPY_HEAD:
            return False  # too little of the message to tell which entry it repeats
        found = self._heads.get((cls, head[:COPY_HEAD]), ())
        for item in sorted(found, key=lambda i: not isinstance(i, _Entry)):
            if isinstance(item, _Entry):
                if not item.match.exception.message.startswith(head):
                    continue
                if number not in item.lines:
                    item.lines.add(number)
                    item.occurrences += 1
                return True
            if not item[1].startswith(head):
                continue
            lines = self._unmatched_lines[item]
            if number not in lines:
                lines.add(number)
                held = self._unmatched[item]
                self._unmatched[item] = replace(held, occurrences=held.occurrences + 1)
                self._unmatched_first[item] = min(self._unmatched_first[item], number)
            return True
        return False

    def _head_of(self, cls: str | None, message: str) -> list[_Copied]:
        return self._heads.setdefault((cls, message[:COPY_HEAD]), [])

    def add_unmatched(self, entries: Sequence[Unmatched]) -> None:
        for u in entries:
            key = (u.cls, u.message)
            held = self._unmatched.get(key)
            if held is None:
                if len(self._unmatched) >= self.limits.unmatched:
                    self._cut_unmatched.add(hash(key))
                    self.cut_unmatched_occurrences += u.occurrences
                    continue
                self._unmatched[key] = u
                if not u.possible:
                    self._suggested.add(key)
                self._head_of(u.cls, u.message).append(key)
                self._unmatched_lines[key] = seen = set(u.lines or (u.line,))
                self._unmatched_first[key] = min(seen)
                continue
            if not u.possible:
                self._suggested.add(key)
            lines = self._unmatched_lines[key]
            new = set(u.lines or (u.line,)) - lines
            lines.update(new)
            if new:
                self._unmatched_first[key] = min(self._unmatched_first[key], min(new))
            extra = u.occurrences - (len(u.lines or (u.line,)) - len(new))
            self._unmatched[key] = replace(held, occurrences=held.occurrences + max(extra, 0))

    def _first_line(self, item: tuple[tuple[str | None, str], Unmatched]) -> int:
        return self._unmatched_first.get(item[0], item[1].line)

    def unmatched_events(self, count: int) -> list[LogEvent]:
        """The first ``count`` distinct unmatched messages as events (for suggestions).

        A message only possible matches explain has those in place of suggestions (``decide``'s
        rule on every route): it is left out.
        """
        out: list[LogEvent] = []
        seen: set[str] = set()
        for item in sorted(self._unmatched.items(), key=self._first_line):
            u = item[1]
            if u.message in seen or item[0] not in self._suggested:
                continue
            seen.add(u.message)
            out.append(LogEvent(EventKind.BARE, u.cls, u.message, (self._first_line(item),)))
            if len(out) >= count:
                break
        return out

    def result(self) -> tuple[tuple[Match, ...], tuple[Unmatched, ...], Truncation | None]:
        cap = self.limits.lines_per_entry
        matches: list[Match] = []
        for entry in sorted(self._matches.values(), key=_answers_first):
            lines = sorted(entry.lines)
            if len(lines) > cap:
                self.cut_lines += len(lines) - cap
                lines = lines[:cap]
            matches.append(replace(entry.match, lines=tuple(lines), occurrences=entry.occurrences))
        unmatched: list[Unmatched] = []
        for key, u in sorted(self._unmatched.items(), key=self._first_line):
            lines = sorted(self._unmatched_lines[key])
            count = max(u.occurrences, len(lines))
            if len(lines) > cap:
                self.cut_lines += len(lines) - cap
                lines = lines[:cap]
            unmatched.append(replace(u, line=lines[0], lines=tuple(lines), occurrences=count))
        truncation = None
        if self.cut_matches or self._cut_unmatched.added or self.cut_lines:
            truncation = Truncation(
                matches=self.cut_matches,
                match_occurrences=self.cut_match_occurrences,
                records=tuple(sorted(self.cut_records.items(), key=lambda kv: (-kv[1], kv[0]))),
                unmatched=self._cut_unmatched.count(),
                unmatched_occurrences=self.cut_unmatched_occurrences,
                lines=self.cut_lines,
            )
        return tuple(matches), tuple(unmatched), truncation


class DistinctHashes:
    """Counts distinct 64-bit hashes exactly in bounded memory.

    An array made distinct in place as it grows; past ``HELD`` distinct values it is written
    out to temporary files, one per ``PARTS`` of the hash range, each counted alone at the end.
    """

    HELD = 1 << 20
    PARTS = 64

    def __init__(self) -> None:
        self._held = array.array("q")
        self._compact = 1 << 16  # made distinct again when it holds this many
        self._spilled: tempfile.TemporaryDirectory[str] | None = None
        self.added = 0
        self._done = 0  # the values counted from the files
        self._can_spill = True  # until numpy or the temporary folder says otherwise

    def add(self, value: int) -> None:
        self.added += 1
        self._held.append(value)
        if len(self._held) >= self._compact:
            self._held = _distinct_hashes(self._held)
            self._compact = max(self._compact, 2 * len(self._held))
            if self._can_spill and len(self._held) >= self.HELD:
                try:
                    self._spill()
                except (OSError, ImportError):  # no folder to write to, or no numpy: held
                    self._can_spill = False

    def _spill(self) -> None:
        import tempfile

        import numpy as np

        if self._spilled is None:
            self._spilled = tempfile.TemporaryDirectory(prefix="errkb-distinct-")
        values = np.frombuffer(self._held, dtype=np.int64)
        parts = self._parts(values)
        for part in np.unique(parts).tolist():
            with open(os.path.join(self._spilled.name, str(part)), "ab") as out:
                out.write(values[parts == part].tobytes())
        self._held, self._compact = array.array("q"), 1 << 16

    def _parts(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
        import numpy as np

        return values.view(np.uint64) >> np.uint64(64 - self.PARTS.bit_length() + 1)

    def count(self) -> int:
        """The distinct values added: once, at the end (the files are read and removed)."""
        held = _distinct_hashes(self._held)
        if self._spilled is None:
            return self._done + len(held)
        import numpy as np

        values = np.frombuffer(held, dtype=np.int64)
        parts = self._parts(values)
        with self._spilled as folder:
            self._spilled = None
            for part in range(self.PARTS):
                path = os.path.join(folder, str(part))
                spilled = np.fromfile(path, dtype=np.int64) if os.path.exists(path) else values[:0]
                self._done += len(np.unique(np.concatenate((values[parts == part], spilled))))
        self._held = array.array("q")
        return self._done


def _distinct_hashes(hashes: array.array[int]) -> array.array[int]:
    """``hashes`` without repeats, sorted (in place: one byte a hash beside them)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency of the fast path
        return array.array("q", sorted(set(hashes)))
    values = np.frombuffer(hashes, dtype=np.int64)
    values.sort()
    keep = np.empty(len(values), dtype=bool)
    keep[:1] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    out = array.array("q")
    out.frombytes(values[keep].tobytes())
    return out


def _by_score(a: Alternative) -> float:
    return -a.score


def _answers_first(entry: _Entry) -> tuple[bool, int]:
    """Exact matches before possible ones, each in input order."""
    return entry.match.confidence is not Confidence.EXACT, min(entry.lines, default=0)


# ---------------------------------------------------------------------------- the scan
class Decider(Protocol):
    """The knowledge base's decide over events (``errkb.match.decide.decide``'s ``can_match``)."""

    def __call__(
        self, events: list[LogEvent], can_match: Callable[[LogEvent], bool] | None = None, /
    ) -> tuple[tuple[Match, ...], tuple[Unmatched, ...]]: ...


@dataclass(frozen=True)
class ScanCounts:
    """What the scan did (for the bench and tests: work counted, not timed)."""

    anchor_lines: int
    windows: int
    window_lines: int
    shape_unmatched: int
    #: Windows around hard shapes (the region parse's own), among ``windows``, and their lines.
    hard_windows: int = 0
    hard_lines: int = 0

    def __add__(self, other: ScanCounts) -> ScanCounts:
        """Two segments' counts together."""
        return ScanCounts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def record_scan(
    data: bytes,
    anchors: RecordAnchors,
    decide: Decider,
    folded: Folded,
    *,
    found: Callable[[bytes, Sequence[tuple[int, int]]], list[LogEvent]] | None = None,
    json_lines: bool = False,
    may_match: Callable[[str, Sequence[str]], bool] | None = None,
    load: Callable[[Sequence[str]], object] | None = None,
    segment: int = 0,
) -> ScanCounts:
    """Scan ``data`` (plain-text bytes) into ``folded``: matches and unmatched entries.

    ``found``: the message-first pass, asked only when nothing exact was found.
    ``json_lines``: JSON object lines are read as the container path reads them.
    ``may_match``: whether an exception line's records can match it alone (``_may_open``).
    ``load``: told the records the kept lines name before they are looked up.
    ``segment``: an input larger than this is scanned one segment (``cuts``) at a time, each
    folded before the next is read, so the per-line arrays are a segment's (0: whole).
    """
    whole = not segment or len(data) <= segment
    pieces = [(0, len(data))] if whole else cuts(data, segment, anchors)
    counts = ScanCounts(0, 0, 0, 0)
    base = index = 0
    # Each segment's uncovered hit lines, 16 bytes each, for the message-first pass.
    waiting: list[tuple[int, int, int, Lines, Lines]] = []
    for begin, end in pieces:
        scan = _passes(data if whole else data[begin:end], anchors)
        scan.base, scan.index = base, index
        _open_windows(scan, may_match, load, json_lines)
        _read_alone(scan, json_lines)
        _hard_windows(scan)
        window_lines = _decide_windows(scan, decide, folded, json_lines)
        read_alone = _fold_read_alone(scan, folded)
        if folded.exact:
            waiting.clear()  # the message-first pass will not run
        elif found is not None:
            uncovered = _uncovered(scan)
            numbers, starts = _lines(n for n, _ in uncovered), _lines(o for _, o in uncovered)
            waiting.append((begin, end, base, numbers, starts))
        base, index = base + scan.total, scan.index
        counts += ScanCounts(
            len(scan.hits),
            len(scan.spans) + len(scan.hard),
            window_lines,
            read_alone,
            len(scan.hard),
            sum(last - first + 1 for first, last in scan.hard),
        )
        del scan  # the next segment's arrays take its place
    if found is not None and not folded.exact:
        for begin, end, at, numbers, starts in waiting:
            lines = list(zip(numbers, starts, strict=True))
            extra = found(data if whole else data[begin:end], lines)
            if extra:
                matches, _none = decide(extra)
                folded.add_matches(_shifted(matches, at))
    return counts


@dataclass
class _Scan:
    """What the steps of one ``record_scan`` hand each other (one input, one call)."""

    data: bytes
    anchors: RecordAnchors
    total: int  #: the input's lines
    shapes: Shapes
    tracebacks: _Tracebacks
    #: (line number, start offset) of the lines the anchor pass kept, and the rejects deferred.
    hits: list[tuple[int, int]]
    later: Deferred
    line_records: LineRecords
    #: Hit lines that open a window (plain text), and the JSON object lines among them.
    plain_hits: list[int] = field(default_factory=list)
    objects: list[tuple[int, int]] = field(default_factory=list)
    spans: list[list[int]] = field(default_factory=list)  #: the hit lines' windows
    hard: list[list[int]] = field(default_factory=list)  #: the hard shapes' windows
    can_match: Possible | None = None
    in_hit: _Spans = field(default_factory=lambda: _Spans([]))
    #: Exception lines read alone; the traceback ends of headers outside the windows (the
    #: header's prefix and line); every line start known.
    straight: Lines = field(default_factory=_lines)
    ends: dict[int, tuple[str, int]] = field(default_factory=dict)
    line_starts: LineStarts = field(default_factory=lambda: LineStarts(_lines(), _lines()))
    covered: set[int] = field(default_factory=set)  #: lines a decided event covers
    index: int = 0  #: regions parsed so far (chain ids kept apart across batches)
    base: int = 0  #: the input's lines before this segment's (its line 1 is ``base + 1``)
    newlines: npt.NDArray[np.int64] | None = None  #: the input's newline offsets (numpy)


def _passes(data: bytes, anchors: RecordAnchors) -> _Scan:
    """The anchor pass with its rejects and the shape pass, over the whole buffer once each."""
    newlines = newline_index(data)  # once: the anchor pass and the shape pass both map by it
    raw: list[Hits] = []
    shapes = shape_lines(data, line_index(data, newlines), anchors.engine)
    tracebacks = _Tracebacks(data, shapes)
    # Rejects in Python on lines a window can start from; the rest wait (``Deferred``).
    parseable = _parseable(shapes, tracebacks) if newlines is not None else None  # numpy
    hits, later = anchors.split_hit_lines(data, newlines, raw, parseable)
    # Frame and source lines are never an occurrence.
    hits = [(n, o) for n, o in hits if not _in_frames(data, o)]
    total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    line_records = LineRecords(data, anchors, raw[0])
    scan = _Scan(data, anchors, total, shapes, tracebacks, hits, later, line_records)
    scan.newlines = newlines
    return scan


def _open_windows(
    scan: _Scan,
    may_match: Callable[[str, Sequence[str]], bool] | None,
    load: Callable[[Sequence[str]], object] | None,
    json_lines: bool,
) -> None:
    """The hit lines that open a window, the windows, and what decide is told can match."""
    from errkb.match.decide import Possible

    data, shapes = scan.data, scan.shapes
    near = _Near(shapes.keywords)
    # Near an error word or inside a traceback; a bare traceback header never opens one.
    parsed_hits = [
        (n, o)
        for n, o in scan.hits
        if not _bare_header(data, o) and (near.has(n) or scan.tracebacks.around(n) is not None)
    ]
    if may_match is not None:
        exceptions = shapes.exceptions
        if load is not None:
            opening = [n for n, _o in parsed_hits if _holds(exceptions, n)]
            load(_named(scan.line_records, opening))
        parsed_hits = [
            (n, o)
            for n, o in parsed_hits
            if not _holds(exceptions, n) or _may_open(data, o, n, scan.line_records, may_match)
        ]
    if json_lines:
        scan.objects = [(n, o) for n, o in parsed_hits if data.startswith(b'{"', o)]
        scan.plain_hits = [n for n, o in parsed_hits if not data.startswith(b'{"', o)]
    else:
        scan.plain_hits = [n for n, _o in parsed_hits]
    scan.spans = windows(scan.plain_hits, scan.tracebacks, scan.total)
    inside = [(n, o) for n, o in scan.later.take(_within(scan.spans)) if not _in_frames(data, o)]
    if inside:
        scan.hits = sorted([*scan.hits, *inside])
    scan.can_match = Possible({n for n, _o in scan.hits}, scan.line_records)
    scan.in_hit = _Spans(scan.spans)
    if load is not None:
        load(_named(scan.line_records, [n for n, _o in scan.hits if scan.in_hit.has(n)]))


def _read_alone(scan: _Scan, json_lines: bool) -> None:
    """Exception lines outside every window, and the traceback ends of headers outside them."""
    data, shapes, in_hit = scan.data, scan.shapes, scan.in_hit
    headers = set(shapes.headers)
    scan.line_starts = shapes.starts  # traceback ends' starts join them (held once)
    for header in shapes.headers:
        if in_hit.has(header):
            continue
        end, end_start = scan.tracebacks.extent(header)
        if end > header:
            text = _line_text(data, shapes.starts[header])
            scan.ends[end] = (text[: text.find("Traceback")], header)
            scan.line_starts[end] = end_start
    body = _Spans([[h, scan.tracebacks.end(h) - 1] for h in shapes.headers])
    # Both ascending: merged, each line once, with no set of every exception line.
    numbers = heapq.merge(sorted(scan.ends), shapes.exceptions)
    previous = 0
    for number in numbers:
        if number == previous:
            continue
        previous = number
        if number in headers or in_hit.has(number):
            continue
        if json_lines and data.startswith(b'{"', scan.line_starts[number]):
            continue  # read as JSON
        if number not in scan.ends and body.has(number):
            continue  # a frame's source line, not an exception being printed
        scan.straight.append(number)


def _hard_windows(scan: _Scan) -> None:
    """The region parse's own windows around the hard shapes; the hit windows give way."""
    data, shapes = scan.data, scan.shapes
    hard_lines = [*shapes.hard, *(n + 1 for n in shapes.hard)]
    # A coloured traceback header (loguru's): the walk cannot tell where it ends.
    hard_lines += [h for h in shapes.headers if _coloured_header(data, shapes.starts[h])]
    straight, starts = scan.straight, scan.line_starts
    for begin in range(0, len(straight), WRAP_BATCH):
        # A part's (number, start) pairs only, and the next part's first line after them.
        part = [(n, starts[n]) for n in straight[begin : begin + WRAP_BATCH + 1]]
        hard_lines += _wrapped(data, part, scan.anchors)
    if hard_lines:
        scan.hard = hard_spans(data, shapes, scan.tracebacks, hard_lines, scan.total)
    if scan.hard:
        scan.spans = _clip(scan.spans, _Spans(scan.hard))


def _decide_windows(scan: _Scan, decide: Decider, folded: Folded, json_lines: bool) -> int:
    """Parse every window in batches and decide each batch into ``folded``; the lines parsed."""
    from errkb.match.msgfirst import covered_lines
    from errkb.parse.regions import json_line_events, parse_regions

    data, shapes = scan.data, scan.shapes
    cut = _line_cutter(scan)
    window_lines = 0

    def decided(events: list[LogEvent], plain: bool = False) -> None:
        # ``can_match`` for plain windows only (not JSON lines, not hard windows).
        matches, unmatched = decide(events, scan.can_match if plain else None)
        folded.add_matches(_shifted(matches, scan.base))
        kept = [u for u in unmatched if not _summary_copy(scan, folded, u)]
        folded.add_unmatched(_shifted_unmatched(kept, scan.base))
        scan.covered.update(covered_lines(events))

    kinded = sorted([*((span, False) for span in scan.spans), *((s, True) for s in scan.hard)])
    for batch, is_hard in _kinded_batches(kinded):
        regions = list(cut(batch))
        if json_lines:
            regions = [(first, _blank_objects(region)) for first, region in regions]
        window_lines += sum(last - first + 1 for first, last in batch)
        events = parse_regions(regions, first_index=scan.index)
        scan.index += len(regions)
        del regions
        decided(events, plain=not is_hard)
    if json_lines:
        in_window = _Spans([*scan.spans, *scan.hard])
        shaped = [
            (n, shapes.starts[n])
            for n in shapes.exceptions
            if not in_window.has(n) and data.startswith(b'{"', shapes.starts[n])
        ]
        rows = sorted(dict([*scan.objects, *shaped]).items())
        for batch_from in range(0, len(rows), BATCH_WINDOWS):
            events = []
            for number, offset in rows[batch_from : batch_from + BATCH_WINDOWS]:
                scan.index += 1
                line = _line_text(data, offset, clean=False)
                events += json_line_events(line, number, scan.index)
            decided(events)
    return window_lines


def _fold_read_alone(scan: _Scan, folded: Folded) -> int:
    """Fold each exception line read alone into ``folded`` as ``Unmatched``; how many."""
    in_window = _Spans([*scan.spans, *scan.hard])
    entries: list[Unmatched] = []
    count = 0
    for number in scan.straight:
        if in_window.has(number):
            continue
        end_of = scan.ends.get(number)
        if end_of is not None and in_window.has(end_of[1]):
            continue  # its header's traceback was read in a window
        prefix = end_of[0] if end_of is not None else None
        parsed = exception_of(scan.data, scan.line_starts[number], prefix)
        if parsed is None:
            continue
        # pytest's short summary: one more occurrence of the entry it abbreviates.
        if (
            parsed[1].endswith("...")
            and _PYTEST_SUMMARY.search(_line_text(scan.data, scan.line_starts[number]))
            and folded.add_copy(parsed[0], parsed[1][:-3], number + scan.base)
        ):
            continue
        at = number + scan.base
        entries.append(Unmatched(parsed[0], parsed[1], at, lines=(at,)))
        if len(entries) >= BATCH_LINES:
            folded.add_unmatched(entries)
            count += len(entries)
            entries = []
    folded.add_unmatched(entries)
    return count + len(entries)


def _summary_copy(scan: _Scan, folded: Folded, entry: Unmatched) -> bool:
    """Whether ``entry`` is pytest's short summary of an entry ``folded`` holds (then folded)."""
    if entry.occurrences != 1:
        return False
    number = entry.line
    start = scan.line_starts.get(number)
    if start is None or not _PYTEST_SUMMARY.search(_line_text(scan.data, start)):
        return False
    head = entry.message[:-3] if entry.message.endswith("...") else entry.message
    return folded.add_copy(entry.cls, head, number + scan.base)


#: pytest's short-summary line (``FAILED tests/t.py::t - Cls: msg...``), prefixes aside.
_PYTEST_SUMMARY = re.compile(r"(?:^|\s)(?:FAILED|ERROR) (?:\[[\d.]{1,16}s\] )?\S{1,2048} - ")


def _uncovered(scan: _Scan) -> list[tuple[int, int]]:
    """The hit lines no decided event covers (the message-first pass reads them)."""
    rest = [(n, o) for n, o in scan.later.take() if not _in_frames(scan.data, o)]
    return [(n, o) for n, o in sorted([*scan.hits, *rest]) if n not in scan.covered]


def _shifted(matches: Sequence[Match], base: int) -> Sequence[Match]:
    """``matches`` with their lines ``base`` further on (a segment's numbers to the input's)."""
    if not base:
        return matches
    return [replace(m, lines=tuple(n + base for n in m.lines)) for m in matches]


def _shifted_unmatched(entries: Sequence[Unmatched], base: int) -> Sequence[Unmatched]:
    """``_shifted`` for unmatched entries."""
    if not base:
        return entries
    return [replace(u, line=u.line + base, lines=tuple(n + base for n in u.lines)) for u in entries]


#: Quotes a message may end before (``_may_open``).
_QUOTES = (b"'", b'"', b"`")


def _named(line_records: LineRecords, numbers: Sequence[int]) -> list[str]:
    """Every record ``line_records`` names on the lines ``numbers`` (those it knows)."""
    named: dict[str, None] = {}
    for number in numbers:
        rids = line_records.get(number)
        if rids:
            named.update(dict.fromkeys(rids))
    return list(named)


def _may_open(
    data: bytes,
    start: int,
    number: int,
    line_records: LineRecords,
    may_match: Callable[[str, Sequence[str]], bool],
) -> bool:
    """Whether the kept exception line ``number`` (at ``start``) opens a window.

    Not when its line is read as printed, holds no quote, and ``may_match`` says none of its
    records can match it alone.
    """
    rids = line_records.get(number)
    if rids is None:
        return True
    end = data.find(b"\n", start)
    line = data[start : len(data) if end < 0 else end]
    if any(quote in line for quote in _QUOTES):
        return True
    return may_match(_line_text(data, start).rstrip(), rids)


def _batches(spans: Sequence[list[int]]) -> Iterator[Sequence[list[int]]]:
    """``spans`` in batches of at most ``BATCH_WINDOWS`` windows or about ``BATCH_LINES`` lines."""
    begin, lines = 0, 0
    for k, (first, last) in enumerate(spans):
        lines += last - first + 1
        if k + 1 - begin >= BATCH_WINDOWS or lines >= BATCH_LINES:
            yield spans[begin : k + 1]
            begin, lines = k + 1, 0
    if begin < len(spans):
        yield spans[begin:]


def _kinded_batches(
    items: Sequence[tuple[list[int], bool]],
) -> Iterator[tuple[Sequence[list[int]], bool]]:
    """``_batches`` of (span, hard) items in order, a batch's spans all of one kind."""
    begin = 0
    for k in range(1, len(items) + 1):
        if k == len(items) or items[k][1] != items[begin][1]:
            for batch in _batches([span for span, _hard in items[begin:k]]):
                yield batch, items[begin][1]
            begin = k


def _blank_objects(region: bytes) -> bytes:
    """``region`` with each JSON object line emptied (its newline kept)."""
    if not region.startswith(b'{"') and b'\n{"' not in region:
        return region
    lines = region.split(b"\n")
    return b"\n".join(b"" if line.startswith(b'{"') else line for line in lines)


_FRAME = re.compile(rb'\s*(?:> )?File "[^"\n]*", line \d')
_HEADER = b"Traceback (most recent call last):"


def _bare_header(data: bytes, start: int) -> bool:
    """Whether the line at ``start`` is a traceback header and nothing else (spaces aside)."""
    end = data.find(b"\n", start)
    line = data[start : len(data) if end < 0 else end]
    return len(line) < 128 and line.strip() == _HEADER


def _coloured_header(data: bytes, start: int) -> bool:
    """Whether an ANSI colour comes before ``Traceback`` on the header line at ``start``."""
    at = data.find(b"Traceback", start)
    return at > start and b"\x1b" in data[start:at]


def _in_frames(data: bytes, start: int) -> bool:
    """Whether the line at ``start`` is a traceback frame line or the source line under one."""
    end = data.find(b"\n", start)
    line = data[start : len(data) if end < 0 else end]
    if b'File "' in line and _FRAME.search(line) is not None:
        return True
    if start == 0 or (not line[:1].isspace() and b"|" not in line[:256] and b"]" not in line[:256]):
        return False  # a source line is indented (behind a prefix, maybe)
    before = data.rfind(b"\n", 0, start - 1) + 1
    above = data[before : start - 1]
    return b'File "' in above and _FRAME.search(above) is not None


def _parseable(
    shapes: Shapes, tracebacks: _Tracebacks
) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
    """Which lines (0-based) a window may open from: a superset of ``_Near`` or ``around``."""
    import numpy as np

    keywords = np.asarray(shapes.keywords, dtype=np.int64)
    headers = np.asarray(shapes.headers, dtype=np.int64)
    reach = (
        np.maximum.accumulate(
            np.asarray(
                [max(tracebacks.end(h) + AFTER, h + PREFIXED_REACH) for h in shapes.headers],
                dtype=np.int64,
            )
        )
        if len(headers)
        else headers
    )

    def wanted(lines: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        number = lines + 1
        out = np.zeros(len(lines), dtype=bool)
        if len(keywords):
            k = np.searchsorted(keywords, number - AFTER, side="left")
            found = k < len(keywords)
            out[found] = keywords[k[found]] <= number[found] + BEFORE
        if len(headers):
            j = np.searchsorted(headers, number, side="right") - 1
            found = j >= 0
            out[found] |= reach[j[found]] >= number[found]
        return out

    return wanted


def _within(spans: Sequence[list[int]]) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
    """Which lines (0-based) fall inside ``spans`` (sorted, disjoint, 1-based, inclusive)."""
    import numpy as np

    firsts = np.asarray([first for first, _last in spans], dtype=np.int64)
    lasts = np.asarray([last for _first, last in spans], dtype=np.int64)

    def wanted(lines: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        number = lines + 1
        out = np.zeros(len(lines), dtype=bool)
        if len(firsts):
            j = np.searchsorted(firsts, number, side="right") - 1
            found = j >= 0
            out[found] = lasts[j[found]] >= number[found]
        return out

    return wanted


def _holds(lines: Sequence[int], number: int) -> bool:
    """Whether ascending ``lines`` hold ``number`` (a bisection, no set of them)."""
    at = bisect.bisect_left(lines, number)
    return at < len(lines) and lines[at] == number


class _Near:
    """Whether a line is within a window the region parse opens around a keyword line."""

    def __init__(self, keywords: Sequence[int]) -> None:
        self._lines = keywords

    def has(self, line: int) -> bool:
        k = bisect.bisect_left(self._lines, line - AFTER)
        return k < len(self._lines) and self._lines[k] <= line + BEFORE


class _Spans:
    """Membership of a line in sorted, disjoint [first, last] spans."""

    def __init__(self, spans: Sequence[Sequence[int]]) -> None:
        merged: list[list[int]] = []
        for first, last in sorted((s[0], s[1]) for s in spans):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        self._firsts = [s[0] for s in merged]
        self._lasts = [s[1] for s in merged]

    def has(self, line: int) -> bool:
        k = bisect.bisect_right(self._firsts, line) - 1
        return k >= 0 and line <= self._lasts[k]

    def outside(self, first: int, last: int) -> Iterator[list[int]]:
        """The pieces of [first, last] that no span covers, ascending."""
        k = max(0, bisect.bisect_right(self._firsts, first) - 1)
        while first <= last:
            while k < len(self._firsts) and self._lasts[k] < first:
                k += 1
            if k == len(self._firsts) or self._firsts[k] > last:
                yield [first, last]
                return
            if self._firsts[k] > first:
                yield [first, self._firsts[k] - 1]
            first = self._lasts[k] + 1
            k += 1


def _line_cutter(scan: _Scan) -> Callable[[Sequence[Sequence[int]]], Iterator[tuple[int, bytes]]]:
    """``_cut`` for ``scan``'s input: by its newline index, else from the known line starts."""
    data, newlines = scan.data, scan.newlines
    if newlines is None:
        known = dict(scan.hits)
        known.update(scan.shapes.starts.items())
        ordered = sorted(known)
        return lambda spans: _cut(data, spans, known, ordered)
    size = len(data)
    ends = newlines

    def cut(spans: Sequence[Sequence[int]]) -> Iterator[tuple[int, bytes]]:
        count = len(ends)
        for first, last in spans:
            begin = int(ends[first - 2]) + 1 if first >= 2 else 0
            stop = int(ends[last - 1]) + 1 if last - 1 < count else size
            yield first, data[begin:stop]

    return cut


def _cut(
    data: bytes, spans: Sequence[Sequence[int]], known: Mapping[int, int], ordered: Sequence[int]
) -> Iterator[tuple[int, bytes]]:
    """(first line, bytes) of each span, from the nearest ``known`` start (keys ``ordered``)."""
    for first, last in spans:
        k = bisect.bisect_right(ordered, first) - 1
        base = ordered[k] if k >= 0 else 1
        position = known[base] if k >= 0 else 0
        for _ in range(first - base):
            nxt = data.find(b"\n", position)
            position = len(data) if nxt < 0 else nxt + 1
        begin = position
        for _ in range(last - first + 1):
            nxt = data.find(b"\n", position)
            position = len(data) if nxt < 0 else nxt + 1
        yield first, data[begin:position]
