"""Folding repeated occurrences of one message into one event, as a large input is parsed.

:class:`Repeats` keeps the first event of each distinct occurrence (all but its line numbers
equal) and counts the others on it (``repeats``; ``repeat_lines``: at most
``MAX_REPEAT_LINES`` first lines). ``occurrences`` stays exact. A printed chain's events are
kept as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from errkb.parse.events import LogEvent, evolve

#: Line numbers kept per folded event; ``repeats`` counts past it.
MAX_REPEAT_LINES = 10_000


def _key(event: LogEvent) -> Hashable:
    """What makes two events the same occurrence printed again: everything but line numbers."""
    return (
        event.kind,
        event.exc_class,
        event.message,
        event.stream,
        event.origin,
        event.link,
        event.chain_position,
        tuple((f.path, f.line, f.function, f.source) for f in event.frames),
        tuple((m.text, m.length, m.width) for m in event.message_lines),
        len(event.lines),
    )


class Repeats:
    """Events in input order, each repeated occurrence folded into the first one."""

    def __init__(self) -> None:
        self._events: list[LogEvent] = []
        self._first: dict[Hashable, int] = {}  #: key -> index in ``_events``
        self._counts: dict[int, int] = {}
        self._lines: dict[int, list[int]] = {}

    def add(
        self,
        event: LogEvent,
        offset: int = 0,
        place: Callable[[LogEvent], LogEvent] | None = None,
    ) -> None:
        """Keep ``event`` (renumbered by ``place``), or count it where it repeats."""
        if event.chain is not None or event.chain_id is not None or not event.lines:
            self._events.append(place(event) if place is not None else event)
            return
        key = _key(event)
        index = self._first.get(key)
        if index is None:
            self._first[key] = len(self._events)
            self._events.append(place(event) if place is not None else event)
            return
        self._counts[index] = self._counts.get(index, 0) + 1
        lines = self._lines.setdefault(index, [])
        if len(lines) < MAX_REPEAT_LINES:
            lines.append(event.lines[0] + offset)

    def events(self) -> list[LogEvent]:
        """The kept events, in input order, with their repeats counted on them."""
        out = self._events
        for index, count in self._counts.items():
            out[index] = evolve(
                out[index], repeats=count, repeat_lines=tuple(self._lines.get(index, ()))
            )
        return out
