"""Events: what the log parser finds in raw text, before any record is consulted.

Produced by ``errkb.parse.traceback``, consumed by the matcher. Line numbers are 1-based in
the *original* input, whatever was stripped on the way.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")


class EventKind(enum.StrEnum):
    """How an exception message was found."""

    TRACEBACK = "traceback"  #: the last line(s) of a Python traceback (any flavour)
    BARE = "bare"  #: a ``Class: message`` line outside a traceback
    LOG = "log"  #: a logger line that carries a message without a traceback
    #: a known message the message-first pass found on a line no other event covers
    FOUND = "found"


class ChainLink(enum.StrEnum):
    """How a traceback is tied to the one printed before it."""

    NONE = "none"  #: first (or only) traceback of its chain
    CAUSE = "cause"  #: "The above exception was the direct cause of the following exception:"
    CONTEXT = "context"  #: "During handling of the above exception, another exception occurred:"
    GROUP = "group"  #: a sub-exception printed inside an exception group


@dataclass(frozen=True)
class Frame:
    """One ``File "...", line N, in func`` frame (or its pytest / IPython equivalent)."""

    path: str
    line: int | None
    function: str | None
    source: str | None  #: the source line shown under the frame, stripped
    input_line: int  #: where the frame header is in the original input


@dataclass(frozen=True)
class ChainMember:
    """One exception of a printed chain, as the chain knows it."""

    exc_class: str | None
    message: str
    line: int  #: the input line of its message
    link: ChainLink  #: how it is tied to the member printed before it
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class Chain:
    """The exceptions Python printed together, in print order (root cause first), built once."""

    members: tuple[ChainMember, ...]

    @property
    def frames(self) -> tuple[Frame, ...]:
        """Every frame of every member, in print order."""
        return tuple(f for m in self.members for f in m.frames)

    @property
    def root(self) -> ChainMember:
        """The first exception printed: the root cause."""
        return self.members[0]

    @property
    def last(self) -> ChainMember:
        """The last exception printed: what the user saw."""
        return self.members[-1]


@dataclass(frozen=True, slots=True)
class MessageLine:
    """One printed line of a message (or a possible continuation), as the renderer left it."""

    text: str  #: the line's share of the message (the first line: the text after ``Class: ``)
    number: int  #: 1-based line number in the original input
    length: int  #: printed length of the whole line (``Class: `` included), without padding
    width: int  #: printed width of the whole line, its padding included

    @property
    def padded(self) -> bool:
        """The line ended in padding spaces (a renderer padded it to its width)."""
        return self.width > self.length


@dataclass(frozen=True)
class LogEvent:
    """One exception (or error message) found in the input, prefixes removed, newlines kept."""

    kind: EventKind
    exc_class: str | None  #: as printed, possibly dotted (``a.b.SomeError``); None for LOG lines
    message: str
    lines: tuple[int, ...]
    frames: tuple[Frame, ...] = ()
    chain_id: int | None = None  #: events of one printed chain share an id
    chain_position: int = 0  #: 0 = the first traceback printed in the chain = the root cause
    link: ChainLink = ChainLink.NONE
    stream: str = ""  #: prefix identity (rank, pod, pid) the event's lines were grouped by
    #: The message's first line and the lines that may continue it (empty: one line, none after).
    message_lines: tuple[MessageLine, ...] = ()
    #: The printed chain this event is member ``chain_position`` of (None outside any chain).
    chain: Chain | None = field(default=None, repr=False, compare=False)
    #: Where in a container the event was found and at which line of that text ("" in plain
    #: text); two events on one line with different origins are two occurrences.
    origin: str = ""
    #: Further occurrences folded into this event (``errkb.parse.repeats``); 0: one occurrence.
    repeats: int = 0
    #: The first line of each folded occurrence, in order, at most ``MAX_REPEAT_LINES``.
    repeat_lines: tuple[int, ...] = ()

    @property
    def is_root_cause(self) -> bool:
        """True for the first exception printed in a chain (Python prints the cause first)."""
        return self.chain_position == 0

    @property
    def short_class(self) -> str | None:
        """The class name without its module path."""
        return self.exc_class.rsplit(".", 1)[-1] if self.exc_class else None


def evolve(value: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` for a frozen dataclass without slots (``changes`` checked)."""
    fields_ = value.__dict__
    unknown = changes.keys() - fields_.keys()
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field(s) {', '.join(sorted(unknown))}")
    new = object.__new__(type(value))
    new.__dict__.update(fields_)
    new.__dict__.update(changes)
    return new
