"""Matchers: which records' patterns match a piece of text, and with which captures.

Both prefilter, then verify only the candidates under RE2, compiling regexes lazily:
``IndexedMatcher`` (explain's) takes its candidates from the match index (one indexed query
per message, or the anchor table), and ``Matcher`` holds PatternSpecs in memory behind one
Aho-Corasick pass (whole-dataset work done once: ``errkb lint``). A state's ``SpecCache`` also
keeps the masked templates ``similar`` ranks. A record is compiled only once a text holds its
literals in order (``LazyRegex``), as RE2's own program (``Program``). Records whose template
has no usable literal are never candidates: they would "explain" any message.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from errkb import _lazy
from errkb.records.patterns import (
    PatternOrigin,
    PatternSpec,
    compile_re2,
    compile_record,
    re2_escape,
    re2_options,
    unquote,
)
from errkb.records.slots import is_placeholder_text, trailer_start

if TYPE_CHECKING:
    from errkb.match.scan import AnchorTable
    from errkb.store import ReadView

#: rapidfuzz's normalised edit similarity (0-100) a template must reach to be suggested.
SIMILAR_CUTOFF = 60.0
#: Compiled regexes an in-memory Matcher keeps (the hot ones, not all 150,000).
REGEX_CACHE_SIZE = 4096
#: Compiled records kept per knowledge-base state: the hot set of a long-running bot.
SPEC_CACHE_SIZE = 8192
#: How far a state's cache grows to hold one report's candidates (a smaller LRU thrashes).
SPEC_CACHE_MAX = 32768
#: Longest own regex compiled on first need (``LazyRegex``); a longer one is compiled when
#: loaded, so a regex RE2 refuses is reported then, whatever the text.
LAZY_REGEX_CHARS = 1 << 16
#: Records ranked by similarity for one message at most: those sharing most indexed words.
SIMILAR_POOL = 300
#: Masked templates (``similar``'s choices) kept per state: a dense log's messages share them.
MASKED_CACHE_SIZE = 1 << 16


@dataclass(frozen=True)
class Hit:
    """A record whose full pattern matched a text."""

    spec: PatternSpec
    captures: tuple[tuple[str, str], ...]  #: (placeholder name, value), template order
    start: int  #: where the match starts in the text searched


class MatcherLike(Protocol):
    """What the decision layer needs from a matcher."""

    def find(self, text: str) -> list[Hit]: ...

    def similar(self, message: str, limit: int) -> list[tuple[str, float]]: ...


#: A veto on a record's captures (``errkb.validators.admits``): False means not the record's.
Admits = Callable[[str, Mapping[str, str]], bool]


def verify(spec: PatternSpec, regex: Any, text: str, admits: Admits | None = None) -> Hit | None:
    """Match one record's compiled regex against ``text``; captures named by placeholder.

    No hit when a value is a shown placeholder or ``admits`` vetoes it; a container's trailer
    ending ``text`` is cut first (``slots.trailer_start``).
    """
    found = verify_each([(spec, regex)], text, admits)
    return found[0] if found else None


def verify_each(
    compiled: Iterable[tuple[PatternSpec, Any]], text: str, admits: Admits | None = None
) -> list[Hit]:
    """``verify`` of each (spec, regex) on one ``text``, its trailer looked for once."""
    cut = trailer_start(text)
    head = text[:cut] if cut is not None else None
    hits = []
    for spec, regex in compiled:
        hit = None if head is None else _verify(spec, regex, head, admits)
        if hit is None:
            hit = _verify(spec, regex, text, admits)
        if hit is not None:
            hits.append(hit)
    return hits


def _verify(spec: PatternSpec, regex: Any, text: str, admits: Admits | None) -> Hit | None:
    match = regex.search(text)
    if match is None:
        return None
    captures: dict[str, str] = {}
    for i, name in enumerate(spec.names):
        value = match.group(f"c{i}")
        if value is None or name in captures:
            continue
        value = unquote(value) if spec.repr_groups[i] else value
        if is_placeholder_text(value):
            return None
        captures[name] = value
    if admits is not None and not admits(spec.record_id, captures):
        return None
    return Hit(spec, tuple(captures.items()), match.start())


def rank_similar(
    message: str, choices: Sequence[tuple[str, str]], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` (id, score 0-100) whose masked template is closest (edit similarity)."""
    if not choices:
        return []
    from rapidfuzz import fuzz, process, utils

    results = process.extract(
        message,
        [masked for _rid, masked in choices],
        scorer=fuzz.ratio,
        processor=utils.default_process,
        limit=limit,
        score_cutoff=SIMILAR_CUTOFF,
    )
    return [(choices[index][0], float(score)) for _c, score, index in results]


class Matcher:
    """Aho-Corasick prefilter + RE2 verify over a fixed set of PatternSpecs. Thread-safe."""

    def __init__(self, specs: Iterable[PatternSpec]) -> None:
        import ahocorasick_rs

        self.specs: tuple[PatternSpec, ...] = tuple(specs)
        by_anchor: dict[str, list[int]] = {}
        for index, spec in enumerate(self.specs):
            if spec.anchor:
                by_anchor.setdefault(spec.anchor, []).append(index)
        self._anchors = list(by_anchor)
        self._targets: list[tuple[int, ...]] = [tuple(by_anchor[a]) for a in self._anchors]
        self._automaton: Any = ahocorasick_rs.AhoCorasick(self._anchors) if self._anchors else None
        # Bounded, keyed by regex text: records sharing a pattern share one program.
        self._regex = functools.lru_cache(maxsize=REGEX_CACHE_SIZE)(compile_re2)
        self._lock = threading.Lock()
        self._masked: list[tuple[str, str]] | None = None

    def __len__(self) -> int:
        return len(self.specs)

    def candidates(self, text: str) -> set[int]:
        """Indexes of the specs whose anchor occurs in ``text``."""
        if self._automaton is None or not text:
            return set()
        found: set[int] = set()
        for anchor_index, _start, _end in self._automaton.find_matches_as_indexes(
            text, overlapping=True
        ):
            found.update(self._targets[anchor_index])
        return found

    def regex(self, index: int) -> Any:
        """The compiled regex of spec ``index`` (compiled on first use, bounded cache)."""
        return self._regex(self.specs[index].regex)

    def verify(self, index: int, text: str) -> Hit | None:
        """Match one candidate's full pattern against ``text``."""
        return verify(self.specs[index], self.regex(index), text)

    def find(self, text: str, candidates: Sequence[int] | set[int] | None = None) -> list[Hit]:
        """Every record whose pattern matches ``text`` (anchors first, then RE2)."""
        pool = self.candidates(text) if candidates is None else candidates
        return [hit for index in sorted(pool) if (hit := self.verify(index, text)) is not None]

    def similar(self, message: str, limit: int) -> list[tuple[str, float]]:
        if self._masked is None:
            from errkb.records.template import parse_template

            masked = [(s.record_id, parse_template(s.template).masked(" ")) for s in self.specs]
            with self._lock:
                self._masked = masked
        return rank_similar(message, self._masked, limit)


class SpecCache:
    """Compiled records of one knowledge-base state, shared by threads, bounded (LRU)."""

    def __init__(self, size: int = SPEC_CACHE_SIZE) -> None:
        self._entries: OrderedDict[str, tuple[PatternSpec, Any] | None] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size
        self._masked: dict[str, str | None] = {}

    @property
    def size(self) -> int:
        return self._size

    def reserve(self, count: int) -> None:
        """Grow (up to ``SPEC_CACHE_MAX``) so ``count`` entries and some headroom fit."""
        with self._lock:
            self._size = max(self._size, min(SPEC_CACHE_MAX, count + count // 4))

    def masked(self, view: ReadView, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(id, masked template) of each record of ``ids`` that exists, sorted; cached."""
        with self._lock:
            known = {rid: self._masked[rid] for rid in ids if rid in self._masked}
        missing = [rid for rid in ids if rid not in known]
        if missing:
            found = {rid: masked_template(msg) for rid, msg in view.messages(missing)}
            for rid in missing:
                known[rid] = found.get(rid)  # None: no such record in this state
            with self._lock:
                if len(self._masked) + len(missing) > MASKED_CACHE_SIZE:
                    self._masked.clear()
                self._masked.update((rid, known[rid]) for rid in missing)
        return sorted((rid, text) for rid, text in known.items() if text is not None)

    def holds(self, rid: str) -> bool:
        """Whether ``rid``'s spec has been read (compiled or known to be absent)."""
        return rid in self._entries

    def get_many(self, view: ReadView, ids: Sequence[str]) -> list[tuple[PatternSpec, Any]]:
        """The compiled (spec, regex) of each id, loading and compiling the missing ones."""
        found: dict[str, tuple[PatternSpec, Any] | None] = {}
        missing: list[str] = []
        with self._lock:
            for rid in ids:
                if rid in self._entries:
                    self._entries.move_to_end(rid)
                    found[rid] = self._entries[rid]
                else:
                    missing.append(rid)
        if missing:
            loaded = _load_specs(view, missing)
            with self._lock:
                for rid in missing:
                    entry = loaded.get(rid)
                    self._entries[rid] = found[rid] = entry
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return [entry for rid in ids if (entry := found.get(rid)) is not None]


#: A template field that is a plain name (``{name}``, ``{obj.attr!r}``): one placeholder each.
_PLAIN_FIELD = _lazy.pattern(r"\{[A-Za-z_][A-Za-z0-9_.]{0,150}(?:![rsa])?\}")


def masked_template(message: str, mask: str = " ") -> str:
    """``parse_template(message).masked(mask)``, one regex split for plain names."""
    if "%" not in message and "$" not in message:
        parts = _PLAIN_FIELD().split(message)
        if not any("{" in part or "}" in part for part in parts):
            return mask.join(parts)
    from errkb.records.template import parse_template

    return parse_template(message).masked(mask)


def load_specs(view: ReadView, ids: Sequence[str]) -> list[PatternSpec]:
    """The ``PatternSpec`` of each live record of ``ids``: the stored rows (none: compiled)."""
    specs = view.pattern_specs(ids)
    if len(specs) < len(set(ids)):
        have = {s.record_id for s in specs}
        specs += [
            compile_record(
                row.id,
                row.error_message,
                row.message_pattern,
                error_class=row.error_class,
                file_path=row.file_path,
                line_number=row.line_number,
                source_code=row.source_code,
            )
            for row in view.pattern_rows([i for i in ids if i not in have])
        ]
    return specs


def _load_specs(view: ReadView, ids: Sequence[str]) -> dict[str, tuple[PatternSpec, Any]]:
    out: dict[str, tuple[PatternSpec, Any]] = {}
    for spec in load_specs(view, ids):
        if not spec.anchor:  # same rule as Matcher: no usable literal, never a candidate
            continue
        lazy = lazy_regex(spec)
        if lazy is not None:
            out[spec.record_id] = (spec, lazy)
            continue
        regex = _compile_or_skip(spec)
        if regex is not None:
            out[spec.record_id] = (spec, regex)
    return out


def lazy_regex(spec: PatternSpec) -> LazyRegex | None:
    """``spec``'s regex compiled on first need (None: hand-written, or too long)."""
    if len(spec.regex) > LAZY_REGEX_CHARS:
        return None
    if spec.literals:
        return LazyRegex(spec)
    if not spec.names and spec.regex == f"(?s)^(?:{re2_escape(spec.template)})$":
        # A fixed message (no placeholder) whose pattern is its text escaped matches that text
        # alone.
        return LazyRegex(spec, spec.template)
    return None


class LazyRegex:
    """A record's own regex, compiled under RE2 on the first text that holds all its literals.

    Same answers as compiling up front; a regex RE2 refuses is logged once and matches nothing.
    """

    __slots__ = ("_compiled", "_fixed", "_spec")

    def __init__(self, spec: PatternSpec, fixed: str | None = None) -> None:
        self._spec = spec
        self._compiled: Any = None
        # The one text a fixed message's regex matches.
        if fixed is None and not spec.names and len(spec.literals) == 1:
            fixed = spec.literals[0]
        self._fixed = fixed

    def search(self, text: str) -> Any:
        literals = self._spec.literals
        if self._fixed is not None:
            # The whole text or nothing: no compile for a fixed record.
            if text != self._fixed:
                return None
        else:
            # The regex is its literals in order with a group between each two: a match holds them
            # in order.
            at = 0
            for literal in literals:
                at = text.find(literal, at)
                if at < 0:
                    return None
                at += len(literal)
        compiled = self._compiled
        if compiled is None:
            # Two threads may both compile it: the same automaton either way.
            compiled = self._compiled = _compile_or_skip(self._spec) or _NEVER
        return None if compiled is _NEVER else compiled.search(text)


#: Stands for a regex RE2 refused (logged when it was tried).
_NEVER: Any = object()


class Program:
    """One record's regex as RE2's own program, searched without the ``re``-like layer.

    Same program, options and answers as ``compile_re2``; offsets are mapped to characters only
    for non-ASCII text. ``lead``: the literal every match begins with; the match is then searched
    anchored at each place of it, leftmost first (what an unanchored search finds, without
    RE2's reversed second compile). ``latin1``: the regex and text read byte by byte, only for a
    regex ``byte_safe`` vouches for (same answers, a smaller program).
    """

    __slots__ = ("_groups", "_lead", "_program")
    #: RE2's anchors (set with the first program: ``re2`` is imported then).
    _unanchored: Any = None
    _both: Any = None

    def __init__(self, regex: str, lead: str = "", *, latin1: bool = False) -> None:
        import re2
        from re2 import _re2

        program = _re2.RE2(
            regex.encode("latin-1" if latin1 else "utf-8"), re2_options(latin1=latin1)
        )
        if not program.ok():
            raise re2.error(program.error())
        self._program = program
        self._groups = {
            bytes(name).decode(): index for name, index in program.NamedCapturingGroups()
        }
        self._lead = lead.encode("utf-8")
        Program._unanchored = _re2.RE2.Anchor.UNANCHORED
        Program._both = _re2.RE2.Anchor.ANCHOR_BOTH

    def search(self, text: str) -> Found | None:
        encoded = text.encode("utf-8")
        lead = self._lead
        if not lead:
            spans = self._program.Match(self._unanchored, encoded, 0, len(encoded))
            return None if spans[0][0] < 0 else Found(text, encoded, spans, self._groups)
        match, both, end = self._program.Match, self._both, len(encoded)
        at = encoded.find(lead)
        while at >= 0:
            spans = match(both, encoded, at, end)
            if spans[0][0] >= 0:
                return Found(text, encoded, spans, self._groups)
            at = encoded.find(lead, at + 1)
        return None


def byte_safe(spec: PatternSpec) -> bool:
    r"""Whether ``spec``'s regex answers the same read byte by byte (``Program``'s ``latin1``).

    True for a template's own regex in ASCII with no two placeholders side by side: each slot
    grammar can end only before an ASCII byte or the end, a character boundary in valid UTF-8
    (the property test compares both). Adjacent slots and hand-written patterns keep UTF-8.
    """
    if spec.origin is PatternOrigin.MESSAGE_PATTERN or not spec.names:
        return False
    if not (spec.regex.isascii() and spec.template.isascii()):
        return False
    # Side by side, one slot's group closes right where the next opens (a literal ")" between
    # them is escaped); read off the regex: this runs at every compile.
    regex = spec.regex
    at = regex.find(")(?P<c")
    while at >= 0:
        before = at
        while before > 0 and regex[before - 1] == "\\":
            before -= 1
        if (at - before) % 2 == 0:
            return False
        at = regex.find(")(?P<c", at + 1)
    return True


def regex_lead(spec: PatternSpec) -> str:
    """The literal every match of ``spec``'s regex begins with, or "" when not known."""
    if spec.origin is PatternOrigin.MESSAGE_PATTERN or not spec.literals or not spec.literals[0]:
        return ""
    first = spec.literals[0]
    return first if spec.regex.startswith("(?s)(?:" + re2_escape(first)) else ""


class Found:
    """A ``Program``'s match: ``start()`` and ``group(name)`` as ``re2``'s match gives them."""

    __slots__ = ("_encoded", "_groups", "_spans", "_text")

    def __init__(
        self, text: str, encoded: bytes, spans: Sequence[tuple[int, int]], groups: dict[str, int]
    ) -> None:
        self._text = text
        self._encoded = encoded
        self._spans = spans
        self._groups = groups

    def _chars(self, offset: int) -> int:
        # RE2 matches whole UTF-8 characters: every offset is on a character's boundary.
        if len(self._encoded) == len(self._text):
            return offset
        return len(self._encoded[:offset].decode("utf-8"))

    def start(self) -> int:
        return self._chars(self._spans[0][0])

    def end(self) -> int:
        return self._chars(self._spans[0][1])

    def group(self, key: str | int = 0) -> str | None:
        begin, end = self._spans[key if isinstance(key, int) else self._groups[key]]
        if begin < 0:
            return None
        if len(self._encoded) == len(self._text):
            return self._text[begin:end]
        return self._encoded[begin:end].decode("utf-8")


def _compile_or_skip(spec: PatternSpec) -> Any:
    """The compiled regex, or None (logged) when RE2 refuses: one bad record fails nothing."""
    try:
        return Program(spec.regex, regex_lead(spec), latin1=byte_safe(spec))
    except Exception as exc:  # re2 raises its own error type
        import logging  # only here: cold start does not pay for it

        logging.getLogger(__name__).warning(
            "record %s skipped: its matcher does not compile under RE2 (%s)",
            spec.record_id,
            str(exc)[:200],
        )
        return None


class IndexedMatcher:
    """Candidates from the match index (or the anchor table), verified under RE2.

    Bound to one read view and one state's SpecCache; ``admits`` (the validators' veto) drops a
    hit whose captures cannot be its record's values.
    """

    def __init__(
        self,
        view: ReadView,
        cache: SpecCache,
        table: AnchorTable | None = None,
        admits: Admits | None = None,
        matchable: Callable[[Sequence[str], str], list[str]] | None = None,
    ) -> None:
        self._view = view
        self._cache = cache
        self._table = table
        self._admits = admits
        # A candidate whose literals a text lacks is dropped before its spec row is read.
        self._matchable = matchable
        self._seen: set[str] = set()

    @property
    def table(self) -> AnchorTable | None:
        """The anchor table candidates come from (None: the database's index)."""
        return self._table

    def candidate_ids(self, text: str) -> list[str]:
        """The records that may match ``text`` (from the anchor table when there is one)."""
        if self._table is not None:
            return self._table.candidates(text)
        from errkb.match.index import candidate_ids

        return candidate_ids(self._view, text)

    def find(self, text: str, among: Sequence[str] | None = None) -> list[Hit]:
        """Hits on ``text``; with ``among``, those ids are the candidates (a superset is fine)."""
        ids = sorted(set(self.candidate_ids(text) if among is None else among))
        matchable = self._matchable
        if matchable is not None and among is None:
            # Only the rows not read yet (``among`` names records a line's rejects kept).
            cached = self._cache.holds
            unread = [rid for rid in ids if not cached(rid)]
            if unread:
                dropped = set(unread).difference(matchable(unread, text))
                ids = [rid for rid in ids if rid not in dropped]
        return verify_each(self._specs(ids), text, self._admits)

    def load(self, ids: Sequence[str]) -> bool:
        """Read (and compile) the specs of ``ids`` ahead; False, reading none, past the bound."""
        wanted = sorted(set(ids))
        if not wanted or len(wanted) > SPEC_CACHE_MAX // 2:
            return False
        self._specs(wanted)
        return True

    def _specs(self, ids: Sequence[str]) -> list[tuple[PatternSpec, Any]]:
        """The (spec, regex) of ``ids``, the cache grown first to hold every id a report met."""
        self._seen.update(ids)
        if len(self._seen) > self._cache.size:
            self._cache.reserve(len(self._seen))
        return self._cache.get_many(self._view, ids)

    def find_from(
        self, text: str, starts: Sequence[int], among: Sequence[str] | None = None
    ) -> list[Hit]:
        """Per record, its hit on ``text`` beginning exactly at the first of ``starts`` it can."""
        hits = []
        for hit in self.find(text, among):
            for start in starts:
                if start < hit.start:
                    continue  # RE2's match is the leftmost: none begins before it
                at = hit if start == hit.start else self._verify_at(hit.spec, text, start)
                if at is not None:
                    hits.append(at)
                    break
        return hits

    def may_match_alone(self, line: str, among: Sequence[str]) -> bool:
        """Whether one of ``among`` may match a message read from ``line`` alone.

        For a line with no quote, escape, control or ``|``: every text decide verifies on it is a
        suffix of the line, so a one-line record whose regex finds nothing in the line (nor before a
        trailer) cannot match: never False where ``find`` could hit. Multi-line, start-anchored,
        placeholder-free or literal-less records: True.
        """
        cut = trailer_start(line)
        texts = (line,) if cut is None else (line, line[:cut])
        for spec, regex in self._cache.get_many(self._view, sorted(set(among))):
            if (
                regex is None
                or not spec.literals
                # No placeholder: its ``LazyRegex`` may test the message whole, never a line.
                or not spec.names
                or "\n" in spec.template
                # Anchored at the message's start: searched on the whole line it would be tried
                # there alone.
                or spec.regex.startswith("(?s)^")
                or any(regex.search(text) is not None for text in texts)
            ):
                return True
        return False

    def _verify_at(self, spec: PatternSpec, text: str, start: int) -> Hit | None:
        for found_spec, regex in self._cache.get_many(self._view, [spec.record_id]):
            hit = verify(found_spec, regex, text[start:], self._admits)
            if hit is not None and hit.start == 0:
                return Hit(found_spec, hit.captures, start)
        return None

    def similar(self, message: str, limit: int) -> list[tuple[str, float]]:
        from errkb.match.index import message_tokens, related_ids

        found = None
        if self._table is not None:
            found = self._table.related(message_tokens(message), SIMILAR_POOL)
        ids = related_ids(self._view, message, SIMILAR_POOL) if found is None else found
        return rank_similar(message, self._cache.masked(self._view, ids), limit)
