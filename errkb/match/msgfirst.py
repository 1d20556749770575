r"""The message-first pass: known messages found on lines that structure-first parsing left alone.

Reads the lines no event covers and keeps what a record's pattern confirms at a message
boundary (the cleaned line's start or after a ``SEPARATORS``), to the line's end. Finds become
``FOUND`` events, scored ``decide.MESSAGE_FIRST_PENALTY`` lower.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from errkb.match.index import MAX_QUERY_TOKENS, message_tokens
from errkb.match.matcher import Hit
from errkb.parse.events import EventKind, LogEvent

if TYPE_CHECKING:
    from errkb.parse.containers import View

#: Where a message can begin inside a line, besides its start.
SEPARATORS = ("; ", ": ", " - ", "] ", "| ", " -- ")
#: Message starts tried per line at most.
MAX_STARTS = 16
#: Lines shorter than this hold no message worth a look-up.
MIN_MESSAGE_CHARS = 8
#: Characters of one line the pass reads at most.
MAX_LINE_CHARS = 1 << 16


#: (input line, cleaned text, container origin, the line's candidates when already known)
Line = tuple[int, str, str, Sequence[str] | None]


class BoundaryMatcher(Protocol):
    """What the pass needs from a matcher (``IndexedMatcher``)."""

    def candidate_ids(self, text: str) -> list[str]: ...

    def find_from(
        self, text: str, starts: Sequence[int], among: Sequence[str] | None = None
    ) -> list[Hit]: ...


def covered_lines(events: Iterable[LogEvent]) -> set[int]:
    """Input lines an event stands for: its message lines and its whole traceback body."""
    covered: set[int] = set()
    for event in events:
        covered.update(event.lines)
        covered.update(event.repeat_lines)
        covered.update(line.number for line in event.message_lines)
        if event.frames and event.lines:  # the body: first frame to the message
            first = min(frame.input_line for frame in event.frames)
            covered.update(range(first, max(event.lines) + 1))
    return covered


def message_starts(text: str) -> list[int]:
    """Offsets in ``text`` where a message may begin: 0, and right after each separator."""
    starts = {0}
    for separator in SEPARATORS:
        at = text.find(separator)
        while at >= 0 and len(starts) < MAX_STARTS:
            after = at + len(separator)
            if after < len(text) and not text[after].isspace():
                starts.add(after)
            at = text.find(separator, after)
    return sorted(starts)[:MAX_STARTS]


def found_events(
    texts: Iterable[Line],
    covered: Container[int],
    matcher: BoundaryMatcher,
    *,
    batched: bool = False,
) -> list[LogEvent]:
    """``FOUND`` events for the lines no event covers.

    ``batched``: candidates asked once per batch of lines holding at most ``MAX_QUERY_TOKENS``
    distinct words (a superset, verified per line).
    """
    lines: list[tuple[int, str, str, Sequence[str] | None]] = []
    for number, raw, origin, known in texts:
        if number in covered:
            continue
        text = raw[:MAX_LINE_CHARS].strip()
        if len(text) >= MIN_MESSAGE_CHARS:
            lines.append((number, text, origin, known))
    starts_of: dict[str, list[int]] = {}  # each distinct text's verified starts: logs repeat
    if batched:
        for batch in _batches(dict.fromkeys(text for _n, text, _o, _k in lines)):
            among = matcher.candidate_ids("\n".join(batch))
            for text in batch:
                starts_of[text] = _verified(matcher, text, among) if among else []
    out: list[LogEvent] = []
    for number, text, origin, known in lines:
        starts = starts_of.get(text)
        if starts is None:
            starts = starts_of[text] = _verified(matcher, text, known)
        out.extend(
            LogEvent(EventKind.FOUND, None, text[start:], (number,), origin=origin)
            for start in starts
        )
    return out


def _verified(matcher: BoundaryMatcher, text: str, among: Sequence[str] | None) -> list[int]:
    return sorted({hit.start for hit in matcher.find_from(text, message_starts(text), among)})


def _batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """``texts`` in order, cut where their distinct words would pass ``MAX_QUERY_TOKENS``."""
    batch: list[str] = []
    words: set[str] = set()
    for text in texts:
        own = message_tokens(text)
        if batch and len(words.union(own)) > MAX_QUERY_TOKENS:
            yield batch
            batch, words = [], set()
        batch.append(text)
        words.update(own)
    if batch:
        yield batch


def small_input_lines(text: str) -> Iterator[Line]:
    """Every cleaned line of a small input, containers' decoded texts included."""
    from errkb.parse.sniff import looks_like_container
    from errkb.parse.text import normalize

    if looks_like_container(text):
        from errkb.parse.containers import decode_containers  # plain text never needs it

        decoded = decode_containers(text)
        if decoded is not None:
            if decoded.plain is not None:
                yield from _cleaned(decoded.plain, None, "")
            for view in decoded.views:
                yield from _view_lines(view)
            return
    for line in normalize(text).lines:
        yield line.number, line.text, "", None


def _view_lines(view: View, line: int | None = None) -> Iterator[Line]:
    """The cleaned lines of a container's ``view``, by its line map, or all ``line``."""
    count = view.text.count("\n") + 1
    numbers = [line] * count if line is not None else [view.line(k) for k in range(1, count + 1)]
    yield from _cleaned(view.text, numbers, view.origin)


def _cleaned(text: str, line_map: Sequence[int] | None, origin: str) -> Iterator[Line]:
    from errkb.parse.text import normalize

    for line in normalize(text, line_map).lines:
        yield line.number, line.text, origin, None


def lines_at(data: bytes, rows: Iterable[tuple[int, int, Sequence[str] | None]]) -> Iterator[Line]:
    """The cleaned lines at (line number, start offset, candidates or None) of ``data``."""
    from errkb.parse.containers import decode_containers

    plain: list[str] = []
    numbers: list[int] = []
    known: dict[int, Sequence[str] | None] = {}
    for number, offset, among in rows:
        known[number] = among
        end = data.find(b"\n", offset)
        raw = data[offset : len(data) if end < 0 else end][: MAX_LINE_CHARS * 4]
        line = raw.decode("utf-8", "replace")
        # decode_containers asks looks_like_container itself: None for a plain line.
        decoded = decode_containers(line)
        if decoded is not None:
            for view in decoded.views:
                for _n, text, origin, _k in _view_lines(view, number):
                    yield number, text, origin, among
            continue
        plain.append(line)
        numbers.append(number)
    # The plain lines are cleaned in one call.
    for number, text, origin, _k in _cleaned("\n".join(plain), numbers, ""):
        yield number, text, origin, known[number]


def found_at(
    data: bytes, lines: Sequence[tuple[int, int]], matcher: BoundaryMatcher
) -> list[LogEvent]:
    """``FOUND`` events for the (line number, start offset) lines of ``data`` (scan hit lines)."""
    return found_events(lines_at(data, ((n, o, None) for n, o in lines)), (), matcher)


def message_first(
    data: str | bytes, events: Sequence[LogEvent], matcher: BoundaryMatcher
) -> list[LogEvent]:
    """The pass itself: known messages on the lines of ``data`` that ``events`` leave uncovered."""
    from errkb.parse.text import decode_input

    covered = covered_lines(events)
    text = decode_input(data) if isinstance(data, bytes) else data
    return found_events(small_input_lines(text), covered, matcher, batched=True)
