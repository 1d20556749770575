"""Log parser: find every exception (and error message) in a cleaned log.

Text -> events, each writer's stream (rank, pod, pid) on its own after :mod:`errkb.parse.text`.
Flavours: CPython's tracebacks (chains, exception groups), pytest's, IPython/Jupyter's, rich's,
Django's, and single lines carrying an error. Source context (a frame's source line, a listing,
grep output, a source code fence) is never an occurrence. Never raises; linear in the input.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Sequence

from errkb import _lazy
from errkb.parse.events import (
    Chain,
    ChainLink,
    ChainMember,
    EventKind,
    Frame,
    LogEvent,
    MessageLine,
    evolve,
)
from errkb.parse.text import LogLine, NormalizedLog, normalize
from errkb.parse.vocabulary import ERROR_LEVELS, is_exception_class

__all__ = ["exception_line", "is_exception_class", "parse_log", "parse_normalized"]

#: A message keeps at most this many continuation lines ...
MAX_CONTINUATION_LINES = 200
#: ... and stops growing past this many characters.
MAX_MESSAGE_CHARS = 1 << 20
#: How far a wrapped frame listing inside an indented block is searched for its exception line.
TRACEBACK_SCAN_LINES = 400
#: Lines after a single-line message offered as its possible wrapped continuation.
MAX_WRAP_LINES = 8
#: Frames kept per traceback (a RecursionError prints up to ~1000; the ends are what matter).
MAX_FRAMES = 512

_TB_TAIL = "Traceback (most recent call last):"
_CHAIN_SEPARATORS = {
    "The above exception was the direct cause of the following exception:": ChainLink.CAUSE,
    "During handling of the above exception, another exception occurred:": ChainLink.CONTEXT,
}

# ``  File "<path>", line N, in <func>`` (loguru: ``> File``).
_FRAME_RE = re.compile(
    r"(?:> |[ \t]{0,64})File \"(?P<path>[^\"\n]{1,4096})\", line (?P<line>\d{1,10})"
    r"(?:, in (?P<func>.{1,1024}))?$"
)
# A traceback's last line: ``pkg.mod.Error: message``, ``Error``, ``RayTaskError(ValueError)``.
_EXC_LINE_RE = re.compile(
    r"(?P<cls>[A-Za-z_]\w{0,127}(?:\.(?:<locals>|[A-Za-z_]\w{0,127})){0,24}"
    r"(?:\([A-Za-z_][\w.]{0,255}\))?)"
    r"(?P<colon>: ?(?P<msg>.*))?$"
)
# Django's copy-and-paste traceback: ``Exception Type: X at /path``, ``Exception Value: msg``.
_django_type_re = _lazy.pattern(
    r"Exception Type: (?P<cls>[A-Za-z_]\w{0,127}(?:\.[A-Za-z_]\w{0,127}){0,24})"
    r"(?: at \S.{0,4096})?$"
)
_django_value_re = _lazy.pattern(r"Exception Value: ?(?P<msg>.*)$")
# A ``Class: message`` line outside any traceback; the class is then checked by name.
_BARE_RE = re.compile(r"(?P<cls>[A-Za-z_]\w{0,127}(?:\.[A-Za-z_]\w{0,127}){0,24}): (?P<msg>\S.*)$")
# ``Class:`` ending its line (a wrapper moved the message to the next line).
_CLASS_COLON_RE = re.compile(r"(?P<cls>[A-Za-z_]\w{0,127}(?:\.[A-Za-z_]\w{0,127}){0,24}):$")
_PATH = r"(?P<path>(?:[A-Za-z]:)?[^\s:][^:\n]{0,1023}?)"
# warnings.showwarning / pytest --tb=line / grep over a log: ``path.py:168: ValueError: msg``.
_PATH_EXC_RE = re.compile(
    _PATH + r":(?P<line>\d{1,9}): ?"
    r"(?P<cls>[A-Za-z_]\w{0,127}(?:\.[A-Za-z_]\w{0,127}){0,24}): (?P<msg>\S.*)$"
)
# pytest frame locations: ``path.py:12: in test_x`` (short), ``path.py:12:`` / ``path.py:168:
# ValueError`` (long; trailing space already stripped).
_PYTEST_LOC_RE = re.compile(
    _PATH + r":(?P<line>\d{1,9}):(?: (?:in (?P<func>\S.{0,1023})|(?P<cls>[A-Za-z_][\w.]{0,255})))?$"
)
# pytest's short summary: ``FAILED tests/x.py::test_y - ValueError: msg``.
_PYTEST_SUMMARY_RE = re.compile(
    r"(?:FAILED|ERROR) (?:\[[\d.]{1,16}s\] )?(?P<node>\S{1,2048}) - "
    r"(?P<cls>[A-Za-z_]\w{0,127}(?:\.[A-Za-z_]\w{0,127}){0,24}): (?P<msg>.*)$"
)
# grep / rg output: ``path.py:306:    f"..."`` (greedy over a colon-free class: no backtracking).
_GREP_RE = re.compile(r"(?P<path>[^\s:]{1,1024}):\d{1,9}[:-]")
# IPython / Jupyter.
_ipy_header_re = _lazy.pattern(
    r"(?P<cls>[A-Za-z_][\w.]{0,255}?) {1,200}Traceback \(most recent call last\)$"
)
_ipy_cell_re = _lazy.pattern(
    r"(?P<path>(?:Cell|Input) In ?\[\d{1,9}\]), (?:line (?P<line>\d{1,9})|in (?P<func1>.{1,512}))"
    r"(?:, in (?P<func2>.{1,512}))?$"
)
_ipy_file_re = _lazy.pattern(
    r"File (?P<path>\S.{0,4095}?):(?P<line>\d{1,9})(?:, in (?P<func>.{1,1024}))?$"
)
_ipy_old_re = _lazy.pattern(
    r"(?P<path><ipython-input-[^>\n]{1,128}>|(?:/|~|[A-Za-z]:\\)[^\n]{0,4096}?\.pyx?)"
    r" in (?P<func>\S.{0,1023})$"
)
# rich's traceback box: "╭──── Traceback (most recent call last) ────╮".
_box_header_re = _lazy.pattern(r"╭─{1,512} Traceback \(most recent call last\) ─{1,512}╮$")
_ipy_arrow_re = _lazy.pattern(r"-{1,16}> {0,16}(?P<line>\d{1,9})(?: (?P<src>.*))?$")
# Exception groups: margins ``  | ``, header ``  + Exception Group ...``, separators, closers.
_group_line_re = _lazy.pattern(r"(?P<ind>(?:  ){1,64})(?P<mark>[|+])(?P<rest>.*)$")
_group_sep_re = _lazy.pattern(r"(?P<ind>(?:  ){0,64})(?P<first>\+-)?\+-{16} \S{1,16} -{16}$")
_group_close_re = _lazy.pattern(r"(?:  ){0,64}\+-{36}$")
_GROUP_HEAD = "  + Exception Group " + _TB_TAIL
# Markdown code fences; code in a source-language fence is source, not output.
_fence_re = _lazy.pattern(r" {0,3}(?:`{3,}|~{3,}) {0,8}(?P<info>[\w+#.-]{0,32})")
_SOURCE_FENCES = frozenset(
    {
        "python", "py", "python3", "py3", "diff", "patch", "c", "cpp", "c++", "cuda", "cu",
        "rust", "rs", "go", "java", "javascript", "js", "typescript", "ts", "toml", "yaml",
        "yml", "ini", "cfg", "dockerfile",
    }
)  # fmt: skip
# A reply or serialized result in a text line carrying a sentence as a string value
# (``{"message": "Failed to ..."}``); decoded later by ``errkb.parse.spans``.
_PAYLOAD_RE = re.compile(r"[\"'][^\"'\n]{1,128}[\"'] {0,8}: {0,8}[\"'][^\"'\\\n]{0,256}? ")

# A shell or REPL prompt after a traceback is the user typing again, not more message.
_PROMPT_RE = re.compile(r"(?:\$|#|>>>|PS [^>\n]{1,256}>|In \[\d{1,9}\]:)(?: |$)")
# Other tools' lines no message continues with: pytest's rules and report lines, GitHub
# Actions workflow commands, shell xtrace.
_FOREIGN_LINE_RE = re.compile(
    r"(?P<rule>[-=_])(?P=rule){2,} \S.{0,300} (?P=rule){3,}$"
    r"|[=_]{10,}$"
    r"|(?:FAILED|PASSED|ERROR|XFAIL|XPASS|SKIPPED) \S{1,2048}::"
    r"|- generated xml file: "
    r"|##\[[a-z]{1,16}\]"
    r"|\+{1,4} [\w./\'\"$-]"
)


def parse_log(text: str, line_map: Sequence[int] | None = None) -> list[LogEvent]:
    """Find the exceptions and error messages in raw log text, in input order.

    ``line_map``: each line's original number (:func:`errkb.parse.text.normalize`).
    """
    return parse_normalized(normalize(text, line_map))


def parse_normalized(log: NormalizedLog) -> list[LogEvent]:
    """Find the exceptions and error messages in an already normalised log, in input order."""
    chain_ids = itertools.count(1)
    events: list[LogEvent] = []
    for stream, lines in log.streams().items():
        if _looks_reversed(lines):
            # Cloud log viewers export newest first; a traceback then reads bottom-up.
            lines = lines[::-1]
        events.extend(_StreamParser(lines, stream, chain_ids).run())
    events.sort(key=lambda e: e.lines[0] if e.lines else 0)
    return _renumber_chains(events)


def _renumber_chains(events: list[LogEvent]) -> list[LogEvent]:
    """Renumber chains 1, 2, ... by first appearance and give every member its :class:`Chain`."""
    mapping: dict[int, int] = {}
    members: dict[int, list[LogEvent]] = {}
    for event in events:
        if event.chain_id is not None:
            mapping.setdefault(event.chain_id, len(mapping) + 1)
            members.setdefault(event.chain_id, []).append(event)
    chains = {
        old: Chain(
            tuple(
                ChainMember(e.exc_class, e.message, e.lines[0] if e.lines else 0, e.link, e.frames)
                for e in sorted(group, key=lambda e: e.chain_position)
            )
        )
        for old, group in members.items()
    }
    return [
        event
        if event.chain_id is None
        else evolve(event, chain_id=mapping[event.chain_id], chain=chains[event.chain_id])
        for event in events
    ]


def _looks_reversed(lines: Sequence[LogLine]) -> bool:
    """Tell whether a stream is in reverse order: its traceback headers come *after* frames."""
    forward = backward = 0
    n = len(lines)
    for idx, line in enumerate(lines):
        if not line.text.endswith(_TB_TAIL):
            continue
        if idx + 1 < n and _FRAME_RE.match(lines[idx + 1].text):
            forward += 1
        elif idx > 0 and _FRAME_RE.match(lines[idx - 1].text):
            backward += 1
    return backward > forward


class _Draft:
    """An event being built; turned into a frozen LogEvent once its chain is complete.

    A plain class (cheap to define, unlike a dataclass).
    """

    __slots__ = (
        "exc_class",
        "frames",
        "kind",
        "lines",
        "link",
        "message",
        "message_lines",
        "order",
    )

    def __init__(
        self,
        kind: EventKind,
        exc_class: str | None,
        message: str,
        lines: list[int],
        frames: list[Frame],
    ) -> None:
        self.kind = kind
        self.exc_class = exc_class
        self.message = message
        self.lines = lines
        self.frames = frames
        self.link = ChainLink.NONE
        #: print position of the traceback's first line (for sorting group members)
        self.order = 0
        self.message_lines: tuple[MessageLine, ...] = ()


class _StreamParser:
    """Parse the lines of one stream (or of one exception-group member)."""

    def __init__(self, lines: Sequence[LogLine], stream: str, chain_ids: Iterator[int]) -> None:
        self.lines = lines
        self.n = len(lines)
        self.stream = stream
        self.chain_ids = chain_ids
        self.events: list[LogEvent] = []
        #: Parsing one exception-group member (de-margined lines that are all the group's).
        self.in_group = False
        self._not_group_until = -1  # a "  | ..." run already known to be no exception group
        self._at = 0  # index of the single line being reported
        # pytest output is emitted entry by entry; this is what has been seen of the current test
        self._pt_frames: list[Frame] = []
        self._pt_source: str | None = None
        self._pt_chain: int | None = None
        self._pt_position = 0
        self._pt_link: ChainLink | None = None
        #: (first message line, message, class) of the events so far, sorted, by short class
        #: name (the short summary's lookup), and how many events they hold: built lazily.
        self._messages: dict[str, list[tuple[str, str, str]]] = {}
        self._indexed = 0

    def run(self) -> list[LogEvent]:
        lines, n = self.lines, self.n
        i = 0
        in_fence = source_fence = False
        while i < n:
            line = lines[i]
            t = line.text
            if not t or t.isspace():
                i += 1
                continue
            first = t[0]
            if first in "`~" or (first == " " and t.lstrip()[:1] in ("`", "~")):
                fence = _fence_re().match(t)
                if fence is not None:
                    if in_fence:
                        in_fence = source_fence = False
                    else:
                        in_fence = True
                        source_fence = fence.group("info").lower() in _SOURCE_FENCES
                    i += 1
                    continue
            if first in " \t" and "Traceback (most recent call last)" in t:
                end = self._indented_block(i)
                if end > i:
                    i = end
                    continue
            if self._starts_traceback(i, headerless=True):
                i = self._chain(i)
                continue
            link = _CHAIN_SEPARATORS.get(t.strip())
            if link is not None:
                # Only pytest prints a separator between tracebacks this parser did not chain.
                self._pt_link = link
                i += 1
                continue
            if line.pytest_error:
                i = self._pytest_exception(i)
                continue
            if self._pytest_marker(i):
                i += 1
                continue
            if not source_fence:
                self._single_line(line, i)
            i += 1
        return self.events

    def _starts_traceback(self, i: int, *, headerless: bool) -> bool:
        """Tell whether a traceback (or a chain beginning without one) starts at line ``i``."""
        t = self.lines[i].text
        if t.endswith(_TB_TAIL):
            return True
        if t.endswith("Traceback (most recent call last)") and _ipy_header_re().match(t):
            return True
        if t.startswith(("  |", "  +")) and self._group_end(i) > i:
            return True
        if headerless and not self.lines[i].pytest_error:
            # An exception that was never raised prints without a traceback; as the cause of
            # another one it is followed by a chain separator.
            m = _BARE_RE.match(t)
            if m is not None and is_exception_class(m.group("cls")):
                k = self._skip_blank(i + 1)
                return k < self.n and self.lines[k].text.strip() in _CHAIN_SEPARATORS
        return False

    def _skip_blank(self, j: int) -> int:
        lines, n = self.lines, self.n
        while j < n and (not lines[j].text or lines[j].text.isspace()):
            j += 1
        return j

    def _indented_block(self, i: int) -> int:
        """Parse a traceback indented as a block (nbconvert, RichHandler), dedented.

        Only under an IPython or rich box header. Where the block ends, or ``i`` if no such block.
        """
        head = self.lines[i].text
        body = head.lstrip()
        if not (_ipy_header_re().match(body) or _box_header_re().match(body)):
            return i
        indent = len(head) - len(body)
        lines, n = self.lines, self.n
        k = i + 1
        last = i
        while k < n:
            t = lines[k].text
            if t and not t.isspace():
                if len(t) - len(t.lstrip()) < indent:
                    break
                last = k
            k += 1
        block = [line._replace(text=line.text[indent:]) for line in lines[i : last + 1]]
        nested = _StreamParser(block, self.stream, self.chain_ids)
        self.events.extend(nested.run())
        return last + 1

    def _chain(self, i: int) -> int:
        j, drafts = self._chain_drafts(i)
        self._emit_chain(drafts)
        return j

    def _chain_drafts(self, i: int) -> tuple[int, list[_Draft]]:
        """Parse one printed chain starting at line ``i``; return where it ends and its drafts."""
        drafts: list[_Draft] = []
        link = ChainLink.NONE
        while True:
            j, found = self._one(i)
            if found:
                found[0].link = link
                drafts.extend(found)
            k = self._skip_blank(j)
            if k < self.n:
                next_link = _CHAIN_SEPARATORS.get(self.lines[k].text.strip())
                if next_link is not None:
                    k2 = self._skip_blank(k + 1)
                    if k2 < self.n and self._starts_traceback(k2, headerless=False):
                        link, i = next_link, k2
                        continue
                    if k2 < self.n and self._exception_line_at(k2):
                        link, i = next_link, k2
                        continue
                    return k + 1, drafts
            return max(j, i + 1), drafts

    def _exception_line_at(self, i: int) -> bool:
        m = _BARE_RE.match(self.lines[i].text)
        return m is not None and is_exception_class(m.group("cls"))

    def _emit_chain(self, drafts: list[_Draft]) -> None:
        if not drafts:
            return
        chain_id = next(self.chain_ids)
        for position, d in enumerate(drafts):
            self.events.append(self._event(d, chain_id, position))

    def _event(self, d: _Draft, chain_id: int | None, position: int) -> LogEvent:
        return LogEvent(
            kind=d.kind,
            exc_class=d.exc_class,
            message=d.message,
            lines=tuple(d.lines),
            frames=tuple(d.frames),
            chain_id=chain_id,
            chain_position=position,
            link=d.link,
            stream=self.stream,
            message_lines=d.message_lines,
        )

    def _one(self, i: int) -> tuple[int, list[_Draft]]:
        """Parse one traceback (of any flavour) starting at line ``i``."""
        t = self.lines[i].text
        if t.startswith(("  |", "  +")):
            end = self._group_end(i)
            if end > i:
                return self._group(i, end)
        if t.endswith("Traceback (most recent call last)"):
            m = _ipy_header_re().match(t)
            if m is not None:
                return self._ipython(i)
        if t.endswith(_TB_TAIL):
            return self._plain(i, headerless=False)
        return self._plain(i, headerless=True)

    def _plain(self, h: int, *, headerless: bool) -> tuple[int, list[_Draft]]:
        lines, n = self.lines, self.n
        base = 0
        frames: list[Frame] = []
        if headerless:
            j = h
            every = lines[h].header
        else:
            head = lines[h].text
            stripped = head.lstrip()
            if stripped.startswith(("Traceback", "Exception Group Traceback")):
                # An indented traceback (a Markdown code block, a doctest): strip its indent.
                base = len(head) - len(stripped)
            j = h + 1
            # Loggers that prefix *every* line (vLLM, logging with a subprocess's output) also
            # prefix the frames; only where the frames are bare does a prefix mean "new record".
            every = j < n and lines[j].header
            path: str | None = None
            lineno: int | None = None
            func: str | None = None
            source: str | None = None
            frame_at = 0
            while j < n:
                t = lines[j].text
                if not t or t.isspace():
                    # CPython prints no blank lines here; loguru separates frames (and the
                    # exception line) with them.
                    k = self._skip_blank(j)
                    if k < n and _FRAME_RE.match(_dedent(lines[k].text, base) or ""):
                        j = k
                        continue
                    if (
                        k < n
                        and path is not None
                        and (
                            self._exception_line_at(k)
                            or _django_type_re().match(lines[k].text.strip())
                        )
                    ):
                        j = k
                    break
                body = _dedent(t, base)
                if body is None or (body[:1] not in (" ", "\t") and not body.startswith("> File")):
                    break
                fm = _FRAME_RE.match(body)
                if fm is not None:
                    if path is not None:
                        _add_frame(frames, Frame(path, lineno, func, source, frame_at))
                    path, lineno = fm.group("path"), int(fm.group("line"))
                    func, source, frame_at = fm.group("func"), None, lines[j].number
                elif path is not None and source is None and _is_source(body):
                    source = body.strip()
                j += 1
            if path is not None:
                _add_frame(frames, Frame(path, lineno, func, source, frame_at))
            if base and j < n:
                j = self._wrapped_frames_end(j, base)
        if j >= n:
            return max(j, h + 1), []
        exc = lines[j]
        if exc.header and not every and not headerless:
            return max(j, h + 1), []  # the traceback was cut off; a new log record follows
        body = _dedent(exc.text, base)
        if body is not None and frames and body.startswith("Exception Type: "):
            django = self._django_exception(j, base, every, frames, lines[h].number)
            if django is not None:
                return django
        m = _EXC_LINE_RE.match(body) if body is not None else None
        if m is None or (m.group("colon") is None and not is_exception_class(m.group("cls"))):
            return max(j, h + 1), []
        parts = [m.group("msg") or ""]
        numbers = [exc.number]
        if m.group("colon") is not None and parts[0]:
            exc_at = j
            j = self._continuation(j + 1, parts, numbers, every=every, base=base, pytest=False)
            wrap = self._message_lines(parts, exc_at)
            if not self.in_group:  # inside a group's margin every line is the group's
                j = exc_at + _printed(parts, numbers)
        else:
            # An empty message has no further lines; after a colon they are still offered.
            wrap = self._offered(j, "") if m.group("colon") is not None else ()
            j += 1
        order = lines[h].number
        draft = _Draft(EventKind.TRACEBACK, m.group("cls"), "\n".join(parts), numbers, frames)
        draft.order = order
        draft.message_lines = wrap
        return j, [draft]

    def _django_exception(
        self, j: int, base: int, every: bool, frames: list[Frame], order: int
    ) -> tuple[int, list[_Draft]] | None:
        """Django's ``Exception Type: X at /path`` + ``Exception Value: msg`` ending at ``j``."""
        kind = _django_type_re().match(_dedent(self.lines[j].text, base) or "")
        if kind is None or j + 1 >= self.n:
            return None
        value = _django_value_re().match(_dedent(self.lines[j + 1].text, base) or "")
        if value is None:
            return None
        parts = [value.group("msg")]
        numbers = [self.lines[j + 1].number]
        end = self._continuation(j + 2, parts, numbers, every=every, base=base, pytest=False)
        draft = _Draft(EventKind.TRACEBACK, kind.group("cls"), "\n".join(parts), numbers, frames)
        draft.order = order
        draft.message_lines = self._message_lines(parts, j + 1)
        return end, [draft]

    def _wrapped_frames_end(self, j: int, base: int) -> int:
        """Inside an indented block, skip frame lines a handler (RichHandler) wrapped.

        The exception line is then the first ``Class: message`` line further on in the block.
        """
        lines, n = self.lines, self.n
        body = _dedent(lines[j].text, base)
        if body is None or self._exception_body(body):
            return j
        k = j + 1
        while k < n and k - j <= TRACEBACK_SCAN_LINES:
            t = lines[k].text
            if t and not t.isspace():
                body = _dedent(t, base)
                if body is None:
                    break  # the block ended
                if self._exception_body(body):
                    return k
            k += 1
        return j

    @staticmethod
    def _exception_body(body: str) -> bool:
        m = _BARE_RE.match(body)
        return m is not None and is_exception_class(m.group("cls"))

    def _continuation(
        self,
        j: int,
        parts: list[str],
        numbers: list[int],
        *,
        every: bool,
        base: int,
        pytest: bool,
        limit: int = MAX_CONTINUATION_LINES,
    ) -> int:
        """Append the further lines of a multi-line message; return the first line after it."""
        lines, n = self.lines, self.n
        size = sum(len(p) for p in parts)
        first = lines[j - 1]
        while j < n and len(numbers) <= limit and size < MAX_MESSAGE_CHARS:
            line = lines[j]
            t = line.text
            if (
                not t
                or t.isspace()
                or line.pytest_error != pytest
                or _PROMPT_RE.match(t)
                or (not pytest and _FOREIGN_LINE_RE.match(t))
            ):
                break
            if every:
                # Every line of the record carries the same logger prefix; a line with another
                # one (or none, or one more) was written by someone else.
                if not pytest and (
                    line.record_prefixes != first.record_prefixes or line.level != first.level
                ):
                    break
            elif line.header:
                break
            if (
                t.endswith(_TB_TAIL)
                or t.endswith("Traceback (most recent call last)")
                or t.strip() in _CHAIN_SEPARATORS
                or _FRAME_RE.match(t)
                or (t.lstrip()[:1] in ("`", "~") and _fence_re().match(t))
            ):
                break
            body = _dedent(t, base)
            if body is None:
                break
            parts.append(body)
            numbers.append(line.number)
            size += len(body)
            j += 1
        return j

    def _message_lines(self, parts: list[str], first: int) -> tuple[MessageLine, ...]:
        """The printed lines of a message whose first line is ``lines[first]``, one part each."""
        if len(parts) < 2:
            return ()
        out = []
        # Widths are measured from the block's own margin (an indented traceback's indent).
        head = self.lines[first].text
        margin = len(head) - len(head.lstrip())
        for k, text in enumerate(parts[:MAX_WRAP_LINES]):
            line = self.lines[first + k]
            length = len(line.text) - margin
            out.append(MessageLine(text, line.number, length, length + line.pad))
        return tuple(out)

    def _ipython(self, h: int) -> tuple[int, list[_Draft]]:
        lines, n = self.lines, self.n
        frames: list[Frame] = []
        path: str | None = None
        lineno: int | None = None
        func: str | None = None
        source: str | None = None
        frame_at = 0
        j = h + 1
        while j < n:
            t = lines[j].text
            if not t or t.isspace():
                j += 1
                continue
            m = _ipy_cell_re().match(t) or _ipy_file_re().match(t) or _ipy_old_re().match(t)
            if m is not None:
                if path is not None:
                    _add_frame(frames, Frame(path, lineno, func, source, frame_at))
                groups = m.groupdict()
                path = groups["path"]
                lineno = int(groups["line"]) if groups.get("line") else None
                raw_func = groups.get("func") or groups.get("func2") or groups.get("func1")
                func = _ipython_function(raw_func) if raw_func else None
                source, frame_at = None, lines[j].number
                j += 1
                continue
            arrow = _ipy_arrow_re().match(t)
            if arrow is not None:
                # "--> 168     raise ValueError(" marks the line the frame stopped at.
                if path is not None and source is None:
                    source = (arrow.group("src") or "").strip() or None
                    if lineno is None:
                        lineno = int(arrow.group("line"))
                j += 1
                continue
            if t[0] in " \t" or t.startswith("..."):
                j += 1  # numbered context lines, "[... skipping hidden 1 frame]"
                continue
            break
        if path is not None:
            _add_frame(frames, Frame(path, lineno, func, source, frame_at))
        if j >= n:
            return j, []
        m2 = _EXC_LINE_RE.match(lines[j].text)
        if m2 is None or (m2.group("colon") is None and not is_exception_class(m2.group("cls"))):
            return j, []
        parts = [m2.group("msg") or ""]
        numbers = [lines[j].number]
        wrap: tuple[MessageLine, ...] = ()
        if parts[0]:
            exc_at = j
            j = self._continuation(j + 1, parts, numbers, every=False, base=0, pytest=False)
            wrap = self._message_lines(parts, exc_at)
        else:
            j += 1
        draft = _Draft(EventKind.TRACEBACK, m2.group("cls"), "\n".join(parts), numbers, frames)
        draft.order = lines[h].number
        draft.message_lines = wrap
        return j, [draft]

    def _group_end(self, i: int) -> int:
        """Return the end of the exception-group block starting at ``i``, or ``i`` if none."""
        if i < self._not_group_until:
            return i
        lines, n = self.lines, self.n
        k = i
        has_separator = lines[i].text == _GROUP_HEAD
        while k < n:
            t = lines[k].text
            if not _group_line_re().match(t):
                break
            if not has_separator and "+-" in t and _group_sep_re().match(t):
                has_separator = True
            k += 1
        if has_separator:
            return k
        self._not_group_until = k  # a margin-like run that is no group: do not rescan it
        return i

    def _group(self, h: int, end: int) -> tuple[int, list[_Draft]]:
        """Split a group block into its members (by margin depth) and parse each on its own."""
        buckets: dict[tuple[int, ...], list[LogLine]] = {}
        paths: dict[int, tuple[int, ...]] = {1: ()}
        counters: dict[int, int] = {}
        for line in self.lines[h:end]:
            t = line.text
            sep = _group_sep_re().match(t)
            if sep is not None:
                depth = len(sep.group("ind")) // 2 - (0 if sep.group("first") else 1)
                depth = max(depth, 1)
                counters[depth] = counters.get(depth, 0) + 1
                parent = _nearest(paths, depth)
                paths = {d: p for d, p in paths.items() if d <= depth}
                counters = {d: c for d, c in counters.items() if d <= depth}
                paths[depth + 1] = (*parent, counters[depth])
                continue
            if _group_close_re().match(t):
                continue
            m = _group_line_re().match(t)
            if m is None:
                continue
            rest = m.group("rest")
            content = rest[1:] if rest.startswith(" ") else rest
            path = _nearest(paths, len(m.group("ind")) // 2)
            buckets.setdefault(path, []).append(
                line._replace(text=content, record_prefixes=0, pytest_error=False)
            )
        drafts: list[_Draft] = []
        for path, member_lines in buckets.items():
            member = _StreamParser(member_lines, self.stream, self.chain_ids)
            member.in_group = True
            found = member.member_drafts()
            if path and found:
                found[0].link = ChainLink.GROUP
            drafts.extend(found)
        drafts.sort(key=lambda d: d.order)
        return end, drafts

    def member_drafts(self) -> list[_Draft]:
        """Parse a de-margined group member: its chain(s), with or without traceback headers."""
        drafts: list[_Draft] = []
        i = 0
        while i < self.n:
            t = self.lines[i].text
            if not t or t.isspace():
                i += 1
                continue
            m = _EXC_LINE_RE.match(t)
            if t.endswith(_TB_TAIL) or (
                m is not None
                and (m.group("colon") is not None or is_exception_class(m.group("cls")))
            ):
                j, found = self._chain_drafts(i)
                drafts.extend(found)
                i = max(j, i + 1)
                continue
            i += 1
        return drafts

    def _pytest_marker(self, i: int) -> bool:
        """Record pytest frame context at line ``i``; tell whether the line was such context."""
        t = self.lines[i].text
        if t.startswith(("___", "===")) and t.endswith(("___", "===")):
            # A new test (or a new session section): what came before belongs to another test.
            self._pt_frames, self._pt_source = [], None
            self._pt_chain, self._pt_link = None, None
            return True
        if t.startswith("> ") or t == ">":
            self._pt_source = t[1:].strip() or None
            return True
        m = _PYTEST_LOC_RE.match(t) if ":" in t else None
        if m is None:
            return False
        func = m.group("func")
        source = self._pt_source
        if func is not None and i + 1 < self.n and self.lines[i + 1].text[:1] in (" ", "\t"):
            source = self.lines[i + 1].text.strip() or None  # --tb=short: source comes after
        _add_frame(
            self._pt_frames,
            Frame(m.group("path"), int(m.group("line")), func, source, self.lines[i].number),
        )
        self._pt_source = None
        return True

    def _pytest_exception(self, i: int) -> int:
        """Turn a block of ``E   `` lines (plus the location line after it) into one event."""
        lines, n = self.lines, self.n
        m = _EXC_LINE_RE.match(lines[i].text)
        if m is not None and (m.group("colon") is not None or is_exception_class(m.group("cls"))):
            cls: str | None = m.group("cls")
            parts = [m.group("msg") or ""]
        else:
            cls, parts = None, [lines[i].text]
        numbers = [lines[i].number]
        j = self._continuation(i + 1, parts, numbers, every=True, base=0, pytest=True)
        wrap = self._message_lines(parts, i)
        frames = self._pt_frames
        k = self._skip_blank(j)
        if k < n and k - j <= 1:
            loc = _PYTEST_LOC_RE.match(lines[k].text)
            if loc is not None and loc.group("func") is None:
                # --tb=long names the raising frame (and the class) after the E lines.
                _add_frame(
                    frames,
                    Frame(
                        loc.group("path"),
                        int(loc.group("line")),
                        None,
                        self._pt_source,
                        lines[k].number,
                    ),
                )
                cls = cls or loc.group("cls")
                j = k + 1
        if cls is None and parts[0].startswith("assert "):
            cls = "AssertionError"  # pytest's assertion rewriting prints the expression only
        draft = _Draft(EventKind.TRACEBACK, cls, "\n".join(parts), numbers, frames)
        draft.message_lines = wrap
        if self._pt_link is not None and self._pt_chain is not None:
            draft.link = self._pt_link
            self._pt_position += 1
        else:
            self._pt_chain = next(self.chain_ids)
            self._pt_position = 0
        self.events.append(self._event(draft, self._pt_chain, self._pt_position))
        self._pt_frames, self._pt_source, self._pt_link = [], None, None
        return j

    def _single_line(self, line: LogLine, i: int) -> None:
        """Report a line that carries an error on its own (no traceback around it)."""
        self._at = i
        t = line.text
        if line.level in ERROR_LEVELS:
            body = t.strip()
            m = _BARE_RE.match(body)
            if m is not None and is_exception_class(m.group("cls")):
                self._single(EventKind.LOG, m.group("cls"), m.group("msg"), line)
            elif body:
                s = _PYTEST_SUMMARY_RE.match("ERROR " + body)
                if s is not None and is_exception_class(s.group("cls")):
                    cls, message = self._unabbreviated(s.group("cls"), s.group("msg"))
                    self._single(EventKind.LOG, cls, message, line)
                else:
                    self._single(EventKind.LOG, None, body, line)
            return
        if t[0] not in " \t":
            # Each regex below only where the text holds what every match of it holds.
            m = _BARE_RE.match(t) if ": " in t else None
            if m is not None and is_exception_class(m.group("cls")):
                self._single(EventKind.BARE, m.group("cls"), m.group("msg"), line)
                return
            if t.endswith(":"):
                # "pkg.mod.SomeError:" alone: its message may start on the next line, where a
                # wrapper put it (offered, rejoined only where a record's pattern confirms).
                c = _CLASS_COLON_RE.match(t)
                if c is not None and is_exception_class(c.group("cls")):
                    self._single(EventKind.BARE, c.group("cls"), "", line)
                    return
            if ": " in t and ":" in t[:1100]:
                p = _PATH_EXC_RE.match(t)
                if p is not None and is_exception_class(p.group("cls")):
                    frame = Frame(p.group("path"), int(p.group("line")), None, None, line.number)
                    self._single(EventKind.BARE, p.group("cls"), p.group("msg"), line, frame)
                    return
            if t.startswith("FAILED "):
                s = _PYTEST_SUMMARY_RE.match(t)
                if s is not None:
                    cls, message = self._unabbreviated(s.group("cls"), s.group("msg"))
                    self._single(EventKind.LOG, cls, message, line)
                    return
            grep = _GREP_RE.match(t) if ":" in t else None
            if grep is not None and ("/" in grep.group("path") or "." in grep.group("path")):
                return  # grep output quotes source, and source is no occurrence
        elif t.lstrip()[:1] not in ("'", '"'):
            # Indented: source or a listing, unless it is a key of a pretty-printed payload.
            return
        if ('"' in t or "'" in t) and _PAYLOAD_RE.search(t) is not None:
            self._single(EventKind.LOG, None, t.strip(), line)

    def _unabbreviated(self, cls: str, message: str) -> tuple[str, str]:
        """A short-summary line's exception (``FAILED t.py::t - Cls: msg...``), as printed above.

        The class and whole message of the event it abbreviates, else its own text.
        """
        import bisect  # only for a log with a short summary: cold explain does not import it

        shown = message[:-3].rstrip() if message.endswith("...") else message
        if not shown:
            return cls, message
        seen = self._messages
        for event in self.events[self._indexed :]:  # the events since the last summary line
            if event.exc_class is not None and event.kind is not EventKind.LOG:
                texts = seen.setdefault(event.exc_class.rsplit(".", 1)[-1], [])
                first = event.message.split("\n", 1)[0]
                bisect.insort(texts, (first, event.message, event.exc_class))
        self._indexed = len(self.events)
        texts = seen.get(cls.rsplit(".", 1)[-1], [])
        at = bisect.bisect_left(texts, (shown,))  # the least first line >= shown
        if at < len(texts) and texts[at][0].startswith(shown):
            return texts[at][2], texts[at][1]
        return cls, message

    def _single(
        self,
        kind: EventKind,
        cls: str | None,
        message: str,
        line: LogLine,
        frame: Frame | None = None,
    ) -> None:
        self.events.append(
            LogEvent(
                kind=kind,
                exc_class=cls,
                message=message,
                lines=(line.number,),
                frames=(frame,) if frame is not None else (),
                stream=self.stream,
                message_lines=self._offered(self._at, message)
                if self.lines[self._at] is line
                else (),
            )
        )

    def _offered(self, i: int, message: str) -> tuple[MessageLine, ...]:
        """The message's line ``i`` and the few lines after it that may continue it (wrapped).

        Only offered: the matcher rejoins them where a record's pattern confirms the join.
        """
        if i + 1 >= self.n:
            return ()
        line = self.lines[i]
        parts = [message]
        numbers = [line.number]
        # A next line that is itself an exception line begins its own event.
        after = self.lines[i + 1].text
        if after[:1] not in " \t" and self._exception_body(after):
            return ()
        self._continuation(
            i + 1, parts, numbers, every=False, base=0, pytest=False, limit=MAX_WRAP_LINES - 1
        )
        return self._message_lines(parts, i)


def ends_message(text: str) -> bool:
    """Whether no message continues with the cleaned line ``text`` (``_continuation``'s stops)."""
    return bool(
        _PROMPT_RE.match(text)
        or _FOREIGN_LINE_RE.match(text)
        or text.endswith(_TB_TAIL)
        or text.endswith("Traceback (most recent call last)")
        or text.strip() in _CHAIN_SEPARATORS
        or _FRAME_RE.match(text)
    )


def _printed(parts: list[str], numbers: list[int]) -> int:
    """Cut a traceback's message to what the exception printed; return how many lines it has.

    Only lines indented past the margin stay; the others are offered (``message_lines``).
    """
    keep = 1
    while keep < len(parts) and parts[keep][:1] in (" ", "\t"):
        keep += 1
    del parts[keep:], numbers[keep:]
    return keep


def _nearest(paths: dict[int, tuple[int, ...]], depth: int) -> tuple[int, ...]:
    """Return the member path at ``depth``, or the deepest one above it (malformed input)."""
    while depth > 1 and depth not in paths:
        depth -= 1
    return paths.get(depth, ())


def _dedent(text: str, base: int) -> str | None:
    """Remove ``base`` columns of indentation; None when the line is indented less."""
    if not base:
        return text
    if len(text) >= base and text[:base].isspace():
        return text[base:]
    return None


def _is_source(body: str) -> bool:
    """Tell whether an indented traceback line is the frame's source (not a caret or elision)."""
    s = body.strip()
    if not s or not s.strip("^~ "):
        return False  # 3.11+ caret line
    return not (s.startswith("...<") or s.startswith("[Previous line repeated"))


def _add_frame(frames: list[Frame], frame: Frame) -> None:
    # Keep the first and the last frames of very deep stacks: they say where it started and
    # where it failed.
    if len(frames) >= MAX_FRAMES:
        del frames[MAX_FRAMES // 2]
    frames.append(frame)


def _ipython_function(raw: str) -> str:
    """``func(a, b)`` -> ``func``; ``<cell line: 2>()`` -> ``<cell line: 2>``."""
    raw = raw.strip()
    if raw.startswith("<"):
        end = raw.find(">")
        return raw[: end + 1] if end > 0 else raw
    paren = raw.find("(")
    return raw[:paren] if paren > 0 else raw


def exception_line(raw: str, *, ends_traceback: bool = False) -> tuple[str, str] | None:
    """(class, message) of one physical line read alone as the parser reads it, or None.

    Cleaned as ``normalize`` cleans it, then read by the parser's shapes: any class name when
    ``ends_traceback``, else as ``_single_line`` reports it. Pure; short lines' answers cached.
    """
    if len(raw) <= CACHED_LINE_CHARS:
        return _read_short(raw, ends_traceback)
    return _read_line(raw, ends_traceback)


def _read_line(raw: str, ends_traceback: bool) -> tuple[str, str] | None:
    for line in normalize(raw[:MAX_LINE_READ]).lines:
        found = _ending(line.text.strip()) if ends_traceback else _single(line)
        if found is not None:
            return found
    return None


#: Characters of one line ``exception_line`` reads at most (as the scan always read them).
MAX_LINE_READ = 1 << 16
#: Lines up to this long have their answers kept, the last ``CACHED_LINES`` of them.
CACHED_LINE_CHARS = 512
CACHED_LINES = 4096
_read_short = functools.lru_cache(maxsize=CACHED_LINES)(_read_line)


def _ending(body: str) -> tuple[str, str] | None:
    m = _EXC_LINE_RE.match(body) if body else None
    return None if m is None else (m.group("cls"), (m.group("msg") or "").strip())


def _single(line: LogLine) -> tuple[str, str] | None:
    t = line.text
    if not t or t[0] in " \t":
        return None  # indented: source or a listing (``_single_line``)
    body = t.strip()
    m = _BARE_RE.match(body)
    if m is not None and is_exception_class(m.group("cls")):
        return m.group("cls"), m.group("msg").strip()
    if line.level in ERROR_LEVELS:
        s = _PYTEST_SUMMARY_RE.match("ERROR " + body)
        if s is not None and is_exception_class(s.group("cls")):
            return s.group("cls"), s.group("msg").strip()
        return None
    if body.endswith(":"):
        c = _CLASS_COLON_RE.match(body)
        if c is not None and is_exception_class(c.group("cls")):
            return c.group("cls"), ""
    if ": " in body:
        p = _PATH_EXC_RE.match(body)
        if p is not None and is_exception_class(p.group("cls")):
            return p.group("cls"), p.group("msg").strip()
    if body.startswith("FAILED "):
        s = _PYTEST_SUMMARY_RE.match(body)
        if s is not None:
            return s.group("cls"), s.group("msg").strip()
    return None
