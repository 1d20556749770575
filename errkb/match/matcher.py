"""Matchers: which records' patterns match a piece of text, and with which captures.

Both matchers prefilter, then verify only the candidates under RE2, compiling regexes lazily:

* ``IndexedMatcher`` (what ``KnowledgeBase.explain`` uses) takes its candidates from the match
  index in the database (``errkb.match.index``): nothing to build at start-up, one indexed query
  per message, whatever the size of the knowledge base.
* ``Matcher`` holds a set of PatternSpecs in memory and finds candidates with one Aho-Corasick
  pass (all overlapping hits) over each record's most selective literal. Building it costs one
  automaton, so it suits whole-dataset work done once (``errkb lint``'s ambiguity check).

A state's ``SpecCache`` also keeps the masked templates ``similar`` ranks (each report's first
20 unmatched messages are ranked against ~300 records each, mostly the same ones); a
hand-written pattern's RE2 program is compiled once, not three times (``compile_re2`` keeps
the last few).

An ``IndexedMatcher``'s record is compiled only once a text holds its literals in the
template's order (``LazyRegex``; a fixed message only for its own text), as RE2's own
program searched directly (``Program``): on the dense bench log ~5,200 compiles, 0.067 ms
each against 0.108 through ``re2.compile``, and a search with its captures 5.7 against 24 us.

Records whose template has no usable literal are never candidates: a pattern that is nearly all
wildcards would "explain" any message (``errkb lint`` reports them).
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

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
#: Compiled regexes an in-memory Matcher keeps: the hot ones stay compiled without holding
#: 150,000 RE2 automata (~13 KB each) at once.
REGEX_CACHE_SIZE = 4096
#: Compiled records kept per knowledge-base state: the hot set of a long-running bot.
SPEC_CACHE_SIZE = 8192
#: How far a state's cache grows to hold one report's candidates (~13 KB of RE2 program each):
#: a dense 50 MB log has ~10,000, and a cache smaller than that evicts and recompiles on
#: every scan of it (a cyclic access pattern never hits an LRU that cannot hold it).
SPEC_CACHE_MAX = 32768
#: Longest own regex compiled on first need (``LazyRegex``); a longer one (only a database
#: written before records had size limits holds one) is compiled when loaded, so a regex RE2
#: refuses is reported then, whatever the text.
LAZY_REGEX_CHARS = 1 << 16
#: Records ranked by similarity for one message at most: those sharing most indexed words.
SIMILAR_POOL = 300
#: Masked templates (``similar``'s choices) kept per state: each report ranks up to 20
#: messages against ~300 records each, and a dense log's messages share most of them, so
#: parsing every pool's templates again was ~6% of a 5 MB dense scan.
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

    No hit when a value is a placeholder shown as such (``<prefix>``, ``{scale_shape}``: a
    quoted template names its values, it does not print them) or when ``admits`` vetoes the
    captures (a validator that knows the record's values). When ``text`` ends in a container's
    trailer (``</code> |``, a table cell's `` |``: ``slots.trailer_start``), the text before it is
    tried first: the trailer is the end of the message, not part of its last value.
    """
    cut = trailer_start(text)
    if cut is not None:
        hit = _verify(spec, regex, text[:cut], admits)
        if hit is not None:
            return hit
    return _verify(spec, regex, text, admits)


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
    """The ``limit`` (id, score 0-100) whose masked template is closest to ``message``.

    Normalised edit similarity, not WRatio: WRatio's partial-match rule rates a short template
    highly against any long message that shares a few words.
    """
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
        # Bounded: a whole-dataset pass (lint) must not keep 150,000 RE2 programs alive.
        # Keyed by regex text, so records sharing a pattern share one program.
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


#: A template field that is a plain name (``{name}``, ``{obj.attr!r}``): ``parse_template``
#: makes each one placeholder, whatever surrounds it.
_PLAIN_FIELD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.]{0,150}(?:![rsa])?\}")


def masked_template(message: str, mask: str = " ") -> str:
    """``parse_template(message).masked(mask)``, without the parse for most templates.

    A template whose only special characters are plain-name fields (no ``%``, ``$``, other
    braces) is split by one regex: 74% of the 150k bench corpus's, each the same text as the
    parse gives (checked over all 150,000), at 2.4 against 4.7 us. A similar-ranking pool is
    300 templates, parsed the first time a warm process meets each.
    """
    if "%" not in message and "$" not in message:
        parts = _PLAIN_FIELD.split(message)
        if not any("{" in part or "}" in part for part in parts):
            return mask.join(parts)
    from errkb.records.template import parse_template

    return parse_template(message).masked(mask)


def load_specs(view: ReadView, ids: Sequence[str]) -> list[PatternSpec]:
    """The ``PatternSpec`` of each live record of ``ids``: the stored rows, no compile.

    The one seam where specs come from the store. A record without a stored row (a database
    written before migration 0006 that no writable open has reindexed yet: a read-only copy)
    is compiled from its fields, as every explain did before.
    """
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
    """``spec``'s regex compiled on first need, when literal tests can reject texts first.

    None for a hand-written pattern (no literals known) other than a fixed message's, and
    for a regex longer than ``LAZY_REGEX_CHARS``: those are compiled when loaded.
    """
    if len(spec.regex) > LAZY_REGEX_CHARS:
        return None
    if spec.literals:
        return LazyRegex(spec)
    if not spec.names and spec.regex == f"(?s)^(?:{re2_escape(spec.template)})$":
        # A fixed message (no placeholder) whose upstream pattern is its text escaped: half
        # the records of a large dataset ("call", "True"). Its regex matches that text alone.
        return LazyRegex(spec, spec.template)
    return None


class LazyRegex:
    """A record's own regex, compiled under RE2 on the first text that holds all its literals.

    A text the template's own regex matches holds every literal of the template as is, so a
    text missing one cannot match and needs no automaton. Most candidates of a message are
    near-identical templates that differ in a literal (the index selects them by shared
    words): they are rejected by a few substring tests, and only the records some text could
    match are compiled (~0.4 ms and ~13 KB each). Same answers as compiling up front; a regex
    RE2 refuses is logged once and matches nothing.
    """

    __slots__ = ("_compiled", "_fixed", "_spec")

    def __init__(self, spec: PatternSpec, fixed: str | None = None) -> None:
        self._spec = spec
        self._compiled: Any = None
        # The one text a fixed message's regex matches: its literal, or ``fixed`` (the
        # escaped text, anchored at both ends: ``_anchor``).
        if fixed is None and not spec.names and len(spec.literals) == 1:
            fixed = spec.literals[0]
        self._fixed = fixed

    def search(self, text: str) -> Any:
        literals = self._spec.literals
        if self._fixed is not None:
            # The whole text or nothing: a fixed record ("call", "True") is a candidate of
            # every line holding its word, and compiling it to learn that cost 0.1 ms each.
            if text != self._fixed:
                return None
        else:
            # The template's own regex is its literals in order with a group between each
            # two, so a text it matches holds them in that order, none overlapping the next
            # (found leftmost, each literal's earliest place after the last one's end is at or
            # before the match's): near-identical templates that share words in another
            # order are rejected here, not by a compiled automaton.
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

    ``re2.compile`` builds an options object and a cache key per call and searches through a
    generator that maps every byte offset back to characters: on the dense bench log 0.108 ms
    a compile against 0.067 for RE2's, and its search, match object and ``group`` calls were a
    third of verification. The same RE2 program, options and answers (``compile_re2``'s);
    offsets are mapped to characters only for a text that is not ASCII.

    ``lead``: the literal every match of the regex begins with (a template's own regex whose
    template starts with text). The match is then searched anchored at each place the
    literal is, leftmost first, which is the match an unanchored search finds (the leftmost
    start, then RE2's own preference), without what an unanchored search of an end-anchored
    regex costs: RE2 compiles the regex a second time, reversed, and builds a DFA to find
    where the match starts, then searches again for the captures. Anchored, a short text's
    captures come from one bit-state search. On the dense 50 MB bench log (150k records,
    5,234 programs, 11,136 searches) the searches took 1.00 s of CPU unanchored.

    ``latin1``: RE2 reads the regex and the text's UTF-8 bytes one byte at a time; only for a
    regex ``byte_safe`` vouches for, whose answers are then the same. Its program is about half
    as large: on 5,000 typed and generic template regexes of the 150k bench knowledge base,
    compiles took 83 against 154 us each (``_re2.RE2``, a loaded 2-core machine), and a dense
    log's first scan compiles one per record it hits (~5,200).
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

    So for a template's own regex (``patterns.template_regex``) in ASCII with no two
    placeholders side by side. Its pieces are ASCII literals and the slot grammars, whose only
    non-ASCII reach is a repeated class that excludes ASCII bytes alone (``.+?``,
    ``[^'\\\n]*``) and ``\.`` inside quotes, followed by more of the same: every way RE2 can
    end such a piece is before an ASCII byte, an ASCII literal or the end of the text, which
    in valid UTF-8 is a character's boundary, so each capture and the match are where RE2
    reading characters puts them (the property test compares both on non-ASCII texts). Two
    slots side by side could split a character between them, a hand-written messagePattern
    may use any RE2 syntax (``\p{L}``, ``(?i)``, ``.{3}``): those keep UTF-8.
    """
    if spec.origin is PatternOrigin.MESSAGE_PATTERN or not spec.names:
        return False
    if not (spec.regex.isascii() and spec.template.isascii()):
        return False
    # Side by side, one slot's group closes right where the next one's opens; a literal
    # between them ending in ")" is escaped (an odd run of backslashes before it). Read off
    # the regex, not parsed again from the template: this runs at every compile.
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
    """The literal every match of ``spec``'s regex begins with, or "" when not known.

    A template's own regex (``patterns.template_regex``) is its segments in order inside
    ``(?s)(?:...)$``, so when it begins with its first literal's escaped text, every match
    begins with that text. A hand-written messagePattern is not known to: "".
    """
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
    """The compiled regex, or None (logged) when RE2 refuses it.

    Validation refuses such records, but a database written by an older errkb may hold one, and
    one bad record must never make explain fail for everyone.
    """
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
    """Candidates from the database's match index, verified under RE2.

    Bound to one read view (the caller's snapshot) and one state's SpecCache; cheap to
    create per report. Given the state's anchor table (``errkb.match.scan``), candidates come
    from memory instead of one query per message: the same records either way. The cache grows
    to hold every candidate of the report. ``admits`` (the validators' veto) drops a hit whose
    captures cannot be its record's values.
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
        # ``RecordAnchors.matchable`` where the record anchors are loaded: a candidate whose
        # literals a text lacks is dropped before its spec row is read.
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
            # Only the rows not read yet: a cached record's literals are tested by its
            # ``LazyRegex`` as cheaply. (``among`` names records a line's rejects kept.)
            cached = self._cache.holds
            unread = [rid for rid in ids if not cached(rid)]
            if unread:
                dropped = set(unread).difference(matchable(unread, text))
                ids = [rid for rid in ids if rid not in dropped]
        hits = []
        for spec, regex in self._specs(ids):
            hit = verify(spec, regex, text, self._admits)
            if hit is not None:
                hits.append(hit)
        return hits

    def load(self, ids: Sequence[str]) -> bool:
        """Read (and compile) the specs of ``ids`` ahead, in one query per chunk of ids.

        The record-driven scan names every record its kept lines can match before any is
        looked up; read one or two at a time by each ``find``, the dense bench log's first
        scan at 500k records made 3,633 queries for 7,462 specs (0.35 s of CPU), 278 with
        this (0.26 s; on PostgreSQL each query is a round trip). Nothing is read when ``ids``
        would not fit the spec cache's bound (they would push each other out): False.
        """
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
        """Per record, its hit on ``text`` from the first of ``starts`` its pattern matches from.

        The message-first pass's boundary rule (``errkb.match.msgfirst``): the match must begin
        exactly at a start and run to the end; ``Hit.start`` is that start in ``text``.
        ``among`` as for ``find``.
        """
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

        For a line with no quote, escape, control or ``|`` (the caller's): every text decide
        verifies on it, its message and the wrappers' tails inside it, is a suffix of the
        line, and ``verify`` cuts a container's trailer first. So a record of one line whose
        own regex finds nothing searched anywhere in the line, nor in the line before such a
        trailer, has no match there (no captures, placeholder or validator test: never False
        where ``find`` could hit). A record over several lines, one anchored at the
        message's start, one with no placeholder or no known literals, may: True. Whether
        the message continues on the next lines is not this method's question
        (``recordscan.wrapped_exceptions`` is asked that).
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
                # Anchored at the message's start (a template that begins with a value):
                # searched on the whole line it would be tried at the line's start alone.
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
