r"""Deciding: from parsed events to scored, deduplicated matches, and the Report value.

Events (``errkb.parse.traceback``) -> hits (``errkb.match.matcher``) -> matches (here). Rules:

1. Each message is searched whole and through its embedded spans (``errkb.parse.spans``);
   per event a record keeps only its innermost hit.
2. A hit whose captures hold the template's own placeholders is source text: dropped.
3. Hits claiming the same text compete: the more specific pattern wins, the others become
   alternatives.
4. One match per distinct (record, captured values) across the input, with ``occurrences``.
5. A ``FOUND`` event counts only hits at its first character, ``MESSAGE_FIRST_PENALTY`` lower.
6. Unmatched exceptions get up to three ``similar`` suggestions, marked as such.
"""

from __future__ import annotations

import builtins
import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from errkb.match.matcher import Hit, IndexedMatcher, MatcherLike
from errkb.parse.events import EventKind, Frame, LogEvent, MessageLine
from errkb.parse.spans import message_spans
from errkb.records.patterns import PatternSpec, specificity_of
from errkb.records.specificity import is_generic
from errkb.report import (
    Alternative,
    Confidence,
    Decision,
    DecisionRule,
    ExceptionInfo,
    FoundBy,
    Match,
    Unmatched,
)

BASE_EXACT = 0.8
CLASS_BONUS = 0.1
WRAPPED_BONUS = 0.05
FRAME_BONUS = 0.1
FILE_ONLY_BONUS = 0.05
#: Score taken off a message the message-first pass found (less evidence backs it).
MESSAGE_FIRST_PENALTY = 0.1
#: A possible match (``judge``) scores this much at most: below every exact answer.
POSSIBLE_MAX = 0.6
SIMILAR_SCALE = 0.6
MAX_SIMILAR_QUERIES = 20
NEARBY_LINES = 25
#: A wrapped message is rejoined from at most this many printed lines ...
MAX_REJOIN_LINES = 8
#: ... trying both joiners ("" and " ") at no more than this many full-width breaks.
MAX_JOINS = 16
#: A printed line wider than this was not wrapped: it is never rejoined (bounds a rejoin).
MAX_WRAP_WIDTH = 512
#: Events decided between two calls of a caller's checkpoint.
CHECK_EVERY = 64
#: A batch of at least this many events loads its candidates' specs up front (``_prefetched``).
PREFETCH_EVENTS = 64
_BRACKETS = (("(", ")"), ("[", "]"), ("{", "}"))
_SOURCE_ROOTS = ("python", "src", "lib")


#: Exception classes that carry another exception's message (their class says nothing).
WRAPPER_CLASSES = frozenset(
    {"RayTaskError", "PythonException", "RemoteTraceback", "ExceptionGroup", "BaseExceptionGroup"}
)


class _Found:
    """Accumulates one (record, captures) across events (a plain class: cheap to define)."""

    __slots__ = ("alternatives", "decision", "events", "evidence", "hit", "score")

    def __init__(
        self,
        hit: Hit,
        events: list[LogEvent],
        score: float,
        evidence: tuple[str, ...],
        alternatives: dict[str, float],
        decision: Decision,
    ) -> None:
        self.hit = hit
        self.events = events
        self.score = score
        self.evidence = evidence
        self.alternatives = alternatives
        self.decision = decision


RecordLookup = Callable[[str], Mapping[str, Any] | None]
Diagnoser = Callable[[str, Mapping[str, str]], Any]


class LineCandidates(Protocol):
    """A hit line's candidate records, or None (``recordscan.LineRecords``)."""

    def get(self, number: int, /) -> tuple[str, ...] | None: ...


class Possible:
    """What the record scan's anchor pass knows of the records a plain-text event can match.

    Called: whether one of the event's lines passed the literal rejects. ``candidates``: the
    records that passed on its one line, or None when the index must say.
    """

    __slots__ = ("_anchored", "_records")

    def __init__(self, anchored: set[int], records: LineCandidates) -> None:
        self._anchored = anchored
        self._records = records

    def __call__(self, event: LogEvent) -> bool:
        anchored = self._anchored
        return any(n in anchored for n in event.lines) or any(
            n in anchored for n in event.repeat_lines
        )

    def candidates(self, event: LogEvent) -> tuple[str, ...] | None:
        if (
            event.kind is EventKind.FOUND
            or event.origin
            or len(event.lines) != 1
            or len(event.message_lines) > 1
            or "\n" in event.message
        ):
            return None
        records = self._records
        found = records.get(event.lines[0])
        if found is None or event.lines[0] not in self._anchored:
            return None
        if not event.repeat_lines:
            return found
        union = dict.fromkeys(found)
        for n in event.repeat_lines:
            more = records.get(n)
            if more is None:
                if n in self._anchored:
                    return None
                continue
            union.update(dict.fromkeys(more))
        return tuple(union)


def decide(
    events: Sequence[LogEvent],
    matcher: MatcherLike,
    record: RecordLookup,
    *,
    diagnose: Diagnoser | None = None,
    has_validator: Callable[[str], bool] | None = None,
    checkpoint: Callable[[], None] | None = None,
    similar: bool = True,
    can_match: Callable[[LogEvent], bool] | None = None,
    prefetch: Callable[[Sequence[str]], object] | None = None,
) -> tuple[tuple[Match, ...], tuple[Unmatched, ...]]:
    """Turn parsed events into matches (exact first, in input order) and unmatched exceptions.

    ``checkpoint`` is called every ``CHECK_EVERY`` events (it stops the work by raising).
    ``similar=False`` leaves out the suggestions. ``can_match``: False for a one-line
    plain-text event no record can match (not looked up). ``prefetch`` is told, once, every
    record the matches will look up.
    """
    found: dict[tuple[str, tuple[tuple[str, str], ...]], _Found] = {}
    unmatched: list[LogEvent] = []
    # Exceptions only possible matches explain: still unknown, no suggestions.
    unexplained: list[LogEvent] = []
    # Each distinct text is matched once.
    found_in: dict[str, list[Hit]] = {}
    pending = list(events)
    # A message never continues over a line on which another event begins.
    starts = frozenset(e.lines[0] for e in events if e.lines)
    split_off: set[int] = set()  # ids of split-off parts (kept alive in ``keep``)
    keep: list[LogEvent] = []
    pending.reverse()  # a stack: events in input order, a split-off part right after its event
    done = 0
    possible = can_match if isinstance(can_match, Possible) else None
    candidates = _prefetched(events, matcher, can_match, possible)
    while pending:
        event = pending.pop()
        done += 1
        if checkpoint is not None and done % CHECK_EVERY == 0:
            checkpoint()
        if len(event.message_lines) > 1:
            wrap = _wrap_lines(event.message_lines, starts)
            if len(wrap) != len(event.message_lines):
                event = replace(event, message_lines=wrap)
        if (
            can_match is not None
            and len(event.message_lines) <= 1
            and event.kind is not EventKind.FOUND
            and not event.origin
            and not can_match(event)
        ):
            per_record = {}
        elif event.kind is EventKind.FOUND:
            per_record = _found_hits(event.message, matcher, found_in)
        else:
            among = possible.candidates(event) if possible is not None else None
            if among is not None:
                per_record = _hits(event.message, matcher, found_in, among=among)
            else:
                per_record = _hits(event.message, matcher, found_in, candidates)
        # Only exceptions (and split-off parts) are rejoined.
        whole_first = _exact(per_record)
        if (
            len(event.message_lines) > 1
            and (event.exc_class is not None or id(event) in split_off)
            and not whole_first
        ):
            # Rejoined, longest first: the first whole join wins, else the first that matched.
            best: tuple[int, str, dict[str, tuple[Hit, bool, str]]] | None = None
            split = False
            # "Class:" ended its line: the message is all on the lines after it.
            headless = not event.message_lines[0].text.strip()
            for used, joined in rejoins(event.message_lines):
                rejoined = _hits(joined, matcher, found_in)
                if rejoined and not headless:
                    # A record the later lines hold on their own is theirs, not this line's.
                    rest = " ".join(line.text.strip() for line in event.message_lines[1:used])
                    alone = _hits(rest, matcher, found_in)
                    split = split or any(r in alone for r in rejoined)
                    rejoined = {r: h for r, h in rejoined.items() if r not in alone}
                if rejoined and (best is None or _exact(rejoined)):
                    best = (used, joined, rejoined)
                    if _exact(rejoined):
                        break
            if split:
                tail = event.message_lines[1:]
                part = replace(
                    event,
                    kind=EventKind.LOG,
                    exc_class=None,
                    message=tail[0].text,
                    lines=(tail[0].number,),
                    message_lines=tail,
                )
                split_off.add(id(part))
                keep.append(part)
                pending.append(part)
            if best is not None:
                used, joined, per_record = best
                numbers = tuple(line.number for line in event.message_lines[int(headless) : used])
                event = replace(event, message=joined, lines=numbers)
        elif (
            len(event.message_lines) > 1
            and event.exc_class is not None
            and _generic_only(per_record)
        ):
            # Only generic templates matched: a more specific record may match the rejoin.
            joined_hits = _more_specific_join(event.message_lines, per_record, matcher, found_in)
            if joined_hits is not None:
                used, joined, rejoined = joined_hits
                per_record = {**per_record, **rejoined}
                numbers = tuple(line.number for line in event.message_lines[:used])
                event = replace(event, message=joined, lines=numbers)
        if not per_record:
            # Unmatched: exceptions and BARE messages, not logger lines nor a lone "Class:".
            lone_class = event.kind is EventKind.BARE and not event.message and event.message_lines
            if (event.kind is EventKind.BARE or event.exc_class) and not lone_class:
                unmatched.append(event)
            continue
        frames = event.chain.frames if event.chain is not None else event.frames
        agreement = {
            rid: _frame_agreement(hit.spec, frames) for rid, (hit, _e, _c) in per_record.items()
        }
        judged = {
            rid: decision
            for rid, (hit, embedded, claim) in per_record.items()
            if (decision := judge(hit, event, embedded, claim, bool(agreement[rid][0]))) is not None
        }
        if len(judged) != len(per_record):
            per_record = {rid: per_record[rid] for rid in judged}
            if not per_record:
                continue
        scored = {
            rid: (hit, *_score(hit.spec, event, embedded, agreement[rid], judged[rid]))
            for rid, (hit, embedded, _claim) in per_record.items()
        }
        # Rule 3 (nested hits both stand): exact, specific, most literal text first.
        ranked = sorted(
            per_record,
            key=lambda r: (
                judged[r].confidence is not Confidence.EXACT,
                judged[r].generic,
                -scored[r][0].spec.literal_length,
                -scored[r][1],
                r,
            ),
        )
        winners: dict[str, list[str]] = {}
        for rid in ranked:
            rival = next((w for w in winners if _competes(per_record[rid], per_record[w])), None)
            if rival is None:
                winners[rid] = []
            else:
                winners[rival].append(rid)
        if (event.kind is EventKind.BARE or event.exc_class) and all(
            judged[w].confidence is not Confidence.EXACT for w in winners
        ):
            unexplained.append(event)
        for winner, losers in winners.items():
            hit, score, evidence = scored[winner]
            decision = judged[winner]
            key = (winner, hit.captures)
            entry = found.get(key)
            if entry is None:
                entry = found[key] = _Found(hit, [], score, evidence, {}, decision)
            entry.events.append(event)
            if (_rank(decision), score) > (_rank(entry.decision), entry.score):
                entry.score, entry.evidence, entry.decision = score, evidence, decision
            for loser in losers:
                entry.alternatives[loser] = max(
                    entry.alternatives.get(loser, 0.0), scored[loser][1]
                )

    matches: list[Match] = []
    if prefetch is not None and found:
        wanted = {rid for rid, _captures in found}
        wanted.update(alt for entry in found.values() for alt in entry.alternatives)
        prefetch(sorted(wanted))
    for (rid, captures), entry in sorted(
        found.items(), key=lambda kv: min(e.lines[0] for e in kv[1].events if e.lines)
    ):
        rec = record(rid)
        if rec is None:  # retired between matcher build and look-up: not explainable now
            continue
        shown = _representative(entry.events, entry.hit.spec)
        lines = sorted({n for e in entry.events if e.lines for n in (e.lines[0], *e.repeat_lines)})
        # One occurrence per place the message begins, plus each folded repeat.
        places = {(e.lines[0], e.origin) for e in entry.events if e.lines}
        occurrences = len(places) + sum(e.repeats for e in entry.events if e.lines)
        alternatives = tuple(
            Alternative(alt, _slug(record, alt), round(score, 3))
            for alt, score in sorted(entry.alternatives.items(), key=lambda kv: -kv[1])
        )
        matches.append(
            Match(
                id=rid,
                slug=str(rec.get("slug", "")),
                confidence=entry.decision.confidence,
                score=round(min(entry.score, 1.0), 3),
                captures=captures,
                occurrences=occurrences,
                lines=tuple(lines),
                exception=ExceptionInfo(shown.exc_class, shown.message),
                record=rec,
                root_cause=any(e.is_root_cause and e.chain is not None for e in entry.events),
                alternatives=alternatives,
                evidence=entry.evidence,
                diagnosis=diagnose(rid, dict(captures)) if diagnose else None,
                validated=bool(has_validator and has_validator(rid)),
                decision=entry.decision,
            )
        )
    matches.sort(key=lambda m: m.confidence is not Confidence.EXACT)
    suggestions = similar_matches(unmatched, matcher, record) if similar else []
    leftovers = _dedupe_unmatched(unmatched, unexplained)
    return tuple(matches) + tuple(suggestions), tuple(leftovers)


def _wrap_lines(lines: Sequence[MessageLine], starts: frozenset[int]) -> tuple[MessageLine, ...]:
    """The lines that may continue a message: up to another event's or past a too-wide line."""
    out = [lines[0]]
    for line in lines[1:]:
        if line.number in starts or out[-1].width > MAX_WRAP_WIDTH:
            break
        out.append(line)
    return tuple(out)


def _prefetched(
    events: Sequence[LogEvent],
    matcher: MatcherLike,
    can_match: Callable[[LogEvent], bool] | None,
    possible: Possible | None = None,
) -> dict[str, list[str]]:
    """Each span's candidate ids, their specs loaded in one query per chunk of ids.

    Only for ``PREFETCH_EVENTS`` or more events through an ``IndexedMatcher`` (else empty);
    the candidates are the index's either way.
    """
    if len(events) < PREFETCH_EVENTS or not isinstance(matcher, IndexedMatcher):
        return {}
    out: dict[str, list[str]] = {}
    every: set[str] = set()
    for event in events:
        if event.kind is EventKind.FOUND:
            continue
        if (
            can_match is not None
            and len(event.message_lines) <= 1
            and not event.origin
            and not can_match(event)
        ):
            continue  # not looked up (see ``decide``)
        among = possible.candidates(event) if possible is not None else None
        if among is not None:
            every.update(among)  # its candidates are known: no index walk
            continue
        for span in message_spans(event.message):
            if span.text not in out:
                ids = out[span.text] = matcher.candidate_ids(span.text)
                every.update(ids)
    if every:
        # ``find`` on an empty text loads (and caches) every id's spec; nothing can match it.
        matcher.find("", sorted(every))
    return out


def _hits(
    text: str,
    matcher: MatcherLike,
    found_in: dict[str, list[Hit]],
    candidates: Mapping[str, list[str]] | None = None,
    *,
    among: Sequence[str] | None = None,
) -> dict[str, tuple[Hit, bool, str]]:
    """Per record, its innermost hit on ``text`` and its embedded candidates (rule 1).

    ``candidates``: span texts' ids already asked; ``among``: every record that can match a
    span (``Possible.candidates``), the hits then filtered to the index's own (``_listed``).
    """
    per_record: dict[str, tuple[Hit, bool, str]] = {}
    indexed = matcher if isinstance(matcher, IndexedMatcher) else None
    if indexed is None:
        among = None
    elif not candidates and among is None:
        indexed = None
    # Shortest first: the tightest text gives the truest captures.
    for span in sorted(message_spans(text), key=lambda s: len(s.text)):
        hits = found_in.get(span.text)
        if hits is None:
            ids = candidates.get(span.text) if among is None and candidates else None
            if indexed is not None and among is not None:
                hits = indexed.find(span.text, among)
                if hits:
                    hits = _listed(hits, span.text, indexed)
            elif indexed is not None and ids is not None:
                hits = indexed.find(span.text, ids)
            else:
                hits = matcher.find(span.text)
            found_in[span.text] = hits
        for hit in hits:
            if hit.spec.record_id in per_record or _is_source_text(hit, span.text):
                continue
            per_record[hit.spec.record_id] = (hit, span.embedded, span.text[hit.start :])
    return per_record


def _listed(hits: list[Hit], text: str, indexed: IndexedMatcher) -> list[Hit]:
    """The ``hits`` on ``text`` of records the index lists (stricter: whole words) as candidates."""
    tokens = frozenset(_index().message_tokens(text))
    kept: list[Hit] = []
    listed: set[str] | None = None
    for hit in hits:
        words = _index_words(hit.spec)
        if not words:
            continue
        if not tokens.issuperset(words):
            if listed is None:
                listed = set(indexed.candidate_ids(text))
            if hit.spec.record_id not in listed:
                continue
        kept.append(hit)
    return kept


_WORDS: dict[str, tuple[str, ...]] = {}


def _index_words(spec: PatternSpec) -> tuple[str, ...]:
    """The words a record is indexed under (``feed.words_of`` its template), cached by template."""
    words = _WORDS.get(spec.template)
    if words is None:
        from errkb.match.matcher import masked_template

        index = _index()
        if len(_WORDS) >= 1 << 16:
            _WORDS.clear()
        # As ``index.template_tokens``: a word touching a placeholder carries its mark.
        mark, least = index.MARK, index.MIN_TOKEN
        found = index.WORD.findall(masked_template(spec.template, mark))
        words = tuple(w for w in found if len(w) >= least and mark not in w)
        _WORDS[spec.template] = words
    return words


@functools.cache
def _index() -> Any:
    """``errkb.match.index``, imported on first use (a large input's), once per process."""
    from errkb.match import index

    return index


def _found_hits(
    text: str, matcher: MatcherLike, found_in: dict[str, list[Hit]]
) -> dict[str, tuple[Hit, bool, str]]:
    """Per record, its hit on a message-first event: from the message's first character only."""
    hits = found_in.get(text)
    if hits is None:
        hits = found_in[text] = matcher.find(text)
    return {
        hit.spec.record_id: (hit, False, text)
        for hit in hits
        if hit.start == 0 and not _is_source_text(hit, text)
    }


def _exact(per_record: Mapping[str, tuple[Hit, bool, str]]) -> bool:
    """Some hits, none over a line break nor with an unbalanced or space-edged capture."""
    if not per_record:
        return False
    for hit, _embedded, claim in per_record.values():
        if "\n" in claim:
            return False
        for _name, value in hit.captures:
            if value != value.strip() or any(
                value.count(a) != value.count(b) for a, b in _BRACKETS
            ):
                return False
    return True


def rejoins(lines: Sequence[MessageLine]) -> Iterator[tuple[int, str]]:
    """Candidate rejoinings of a wrapped message: (lines used, joined text), longest first.

    A break is a wrap only if the next line's first word would not have fitted (against the
    longest line if padded, else the widest so far); the first non-wrap ends the message.
    Padded or short lines join with " "; a full-width one also with "" (tried first for a
    terminal's chop or a token longer than the width).
    """
    lines = lines[:MAX_REJOIN_LINES]
    if not lines[0].text.strip():
        # "Class:" alone: a wrap only if the first word would not have fitted after it.
        word = lines[1].text.lstrip().split(" ", 1)[0] if len(lines) > 1 else ""
        shown = max((line.length for line in lines[1:]), default=0)
        if not word or lines[0].length + 1 + len(word) <= shown:
            return
        for used, joined in rejoins(lines[1:]):
            yield used + 1, joined
        yield 2, lines[1].text.strip()
        return
    widths = {line.width for line in lines[:-1]}
    chopped = (
        len(lines) > 2 and len(widths) == 1 and any(line.text[:1] == " " for line in lines[1:])
    )
    joiners: list[tuple[str, ...]] = []
    widest = 0
    longest = max(line.length for line in lines)
    for k, (line, after) in enumerate(itertools.pairwise(lines)):
        if k == 0 or " " in line.text.strip():  # one long word may pass the width
            widest = max(widest, line.width)
        word = after.text.lstrip().split(" ", 1)[0]
        if not word:
            break
        # Padding may pass the wrap column: the longest line measures it then.
        width = min(line.width, longest) if line.padded else widest
        if line.length + 1 + len(word) <= width:
            break  # the word would have fitted: the line ended there
        if line.text.endswith("-"):
            joiners.append(("", " "))  # a wrapper that breaks after hyphens kept the hyphen
            continue
        if line.padded or line.length < widest:
            joiners.append((" ",))
            continue
        token = len(line.text.rsplit(" ", 1)[-1]) + len(after.text.split(" ", 1)[0])
        joiners.append(("", " ") if chopped or token > widest else (" ", ""))
    for used in range(len(joiners) + 1, 1, -1):
        texts = [line.text.rstrip() for line in lines[:used]]
        for chosen in _likeliest(joiners[: used - 1]):
            parts = [texts[0]]
            for joiner, text in zip(chosen, texts[1:], strict=True):
                parts.append(text if joiner == "" else " " + text.lstrip())
            yield used, "".join(parts)


def _likeliest(options: Sequence[tuple[str, ...]]) -> Iterator[tuple[str, ...]]:
    """At most ``MAX_JOINS`` joiner choices: the shape's guess, then fewer second guesses first."""
    ambiguous = [k for k, o in enumerate(options) if len(o) > 1]
    first = [o[0] for o in options]
    tried = 0
    for flips in range(len(ambiguous) + 1):
        for chosen in itertools.combinations(ambiguous, flips):
            if tried == MAX_JOINS:
                return
            tried += 1
            choice = list(first)
            for k in chosen:
                choice[k] = options[k][1]
            yield tuple(choice)


def _competes(a: tuple[Hit, bool, str], b: tuple[Hit, bool, str]) -> bool:
    """Two hits are rival explanations: one claims text the other claims, and neither nests."""
    claim_a, claim_b = a[2], b[2]
    return (claim_a in claim_b or claim_b in claim_a) and not _nested(a, b)


def _nested(a: tuple[Hit, bool, str], b: tuple[Hit, bool, str]) -> bool:
    """One hit's whole claimed text lies inside a capture of the other (wrapper and cause)."""
    (hit_a, _ea, claim_a), (hit_b, _eb, claim_b) = a, b
    return any(claim_a in value for _n, value in hit_b.captures) or any(
        claim_b in value for _n, value in hit_a.captures
    )


def _slug(record: RecordLookup, rid: str) -> str:
    rec = record(rid)
    return str(rec.get("slug", "")) if rec else ""


def _is_source_text(hit: Hit, text: str) -> bool:
    """A match on the f-string template itself (grep output, an IPython context line)."""
    for name, value in hit.captures:
        if "{" + name in value or (value.startswith(("{", "${")) and value.endswith("}")):
            return True
    head = text[max(0, hit.start - 2) : hit.start]
    return head.endswith(('f"', "f'", 'f"""'))


def judge(hit: Hit, event: LogEvent, embedded: bool, claim: str, frame: bool) -> Decision | None:
    """Decide one occurrence: exact, possible, or (None) not this pass's to consider.

    1. A generic template found by the message-first pass, or in a container string with no
       class, is not considered unless its class and frame back it.
    2. A printed class that contradicts the record's is never exact.
    3. A specific template's match alone is exact.
    4. A generic template is exact only as the whole message, with the record's class and a
       frame in its file (``frame``); else possible.
    """
    spec = hit.spec
    score = specificity_of(spec)
    generic = is_generic(score)
    found = (
        FoundBy.MESSAGE_FIRST
        if event.kind is EventKind.FOUND
        else FoundBy.CONTAINER
        if event.origin
        else FoundBy.PARSER
    )
    agrees = None if embedded else class_agrees(event.exc_class, spec.error_class)
    whole = not embedded and hit.start == 0 and claim == event.message.strip()
    backed = agrees is True and frame and whole
    if (
        generic
        and not backed
        and (found is FoundBy.MESSAGE_FIRST or (found is FoundBy.CONTAINER and not event.exc_class))
    ):
        return None
    if agrees is False:
        rule = DecisionRule.CLASS_CONTRADICTS
    elif not generic:
        rule = DecisionRule.SPECIFIC
    elif not whole:
        rule = DecisionRule.GENERIC_INSIDE_LONGER_MESSAGE
    elif agrees is not True:
        rule = DecisionRule.GENERIC_WITHOUT_CLASS
    elif not frame:
        rule = DecisionRule.GENERIC_WITHOUT_FRAME
    else:
        rule = DecisionRule.GENERIC_WITH_CLASS_AND_FRAME
    return Decision(rule, score, generic, agrees, frame, whole, found)


def class_agrees(printed: str | None, expected: str | None) -> bool | None:
    """Whether the printed class is the record's: True, False (it contradicts), None (unknown).

    Agrees: the same name, a built-in sub- or superclass, a wrapper's named cause, any class
    for ``Exception``. Only an unrelated built-in class contradicts.
    """
    if not printed or not expected:
        return None
    want = _short(expected)
    outer, _paren, inner = printed.partition("(")
    names = {_short(outer)}
    if inner:
        names.add(_short(inner.rstrip(")")))
    if want in names or want in ("Exception", "BaseException"):
        return True
    if _short(outer) in WRAPPER_CLASSES:
        return None

    theirs = getattr(builtins, _short(outer), None)
    if not (isinstance(theirs, type) and issubclass(theirs, BaseException)):
        return None
    ours = getattr(builtins, want, None)
    if isinstance(ours, type) and issubclass(ours, BaseException):
        return issubclass(theirs, ours) or issubclass(ours, theirs)
    return False


def _short(name: str) -> str:
    return name.strip().rsplit(".", 1)[-1]


def _rank(decision: Decision) -> int:
    return 1 if decision.confidence is Confidence.EXACT else 0


def _generic_only(per_record: Mapping[str, tuple[Hit, bool, str]]) -> bool:
    """Some hits, and every one of a generic template."""
    return bool(per_record) and all(
        is_generic(specificity_of(hit.spec)) for hit, _e, _c in per_record.values()
    )


def _more_specific_join(
    lines: Sequence[MessageLine],
    first: Mapping[str, tuple[Hit, bool, str]],
    matcher: MatcherLike,
    found_in: dict[str, list[Hit]],
) -> tuple[int, str, dict[str, tuple[Hit, bool, str]]] | None:
    """The longest rejoin of ``lines`` whose hits hold a template more specific than ``first``."""
    if not lines[0].text.strip():
        return None
    floor = max(specificity_of(hit.spec) for hit, _e, _c in first.values())
    for used, joined in rejoins(lines):
        rejoined = _hits(joined, matcher, found_in)
        better = {
            rid: h
            for rid, h in rejoined.items()
            if rid not in first and specificity_of(h[0].spec) > floor and _exact({rid: h})
        }
        if better:
            return used, joined, better
    return None


def _score(
    spec: PatternSpec,
    event: LogEvent,
    embedded: bool,
    agreement: tuple[float, str],
    decision: Decision | None = None,
) -> tuple[float, tuple[str, ...]]:
    score = BASE_EXACT
    evidence = ["the record's full pattern matched the message"]
    if decision is not None and decision.confidence is not Confidence.EXACT:
        evidence.append(_SHORT_OF[decision.rule])
    if event.kind is EventKind.FOUND:
        score -= MESSAGE_FIRST_PENALTY
        evidence.append(
            "found by the message-first pass: the message begins at a message boundary of a "
            "line no exception, error record or container field explained"
        )
    if spec.error_class and event.short_class == spec.error_class:
        score += CLASS_BONUS
        evidence.append(f"the exception class is {spec.error_class}, as the record says")
    elif embedded:
        score += WRAPPED_BONUS
        evidence.append("the message is embedded in a wrapping error")
    frame_score, frame_note = agreement
    if frame_score:
        score += frame_score
        evidence.append(frame_note)
    if decision is not None and decision.confidence is not Confidence.EXACT:
        score = min(score, POSSIBLE_MAX)
    return round(score, 3), tuple(evidence)


#: What a possible match lacked, in words (its ``evidence``).
_SHORT_OF = {
    DecisionRule.CLASS_CONTRADICTS: "possible only: the printed class is not the record's",
    DecisionRule.GENERIC_WITHOUT_CLASS: (
        "possible only: a generic template, and no exception class of the record's backs it"
    ),
    DecisionRule.GENERIC_WITHOUT_FRAME: (
        "possible only: a generic template, and no traceback frame is in the record's file"
    ),
    DecisionRule.GENERIC_INSIDE_LONGER_MESSAGE: (
        "possible only: a generic template matched part of a longer message"
    ),
}


def same_file(frame_path: str, record_path: str) -> bool:
    """Whether a traceback path and a record's repo path name one file (from the package on)."""
    record_parts = _path_parts(record_path, True)
    frame_parts = _path_parts(frame_path, False)
    if not record_parts or len(frame_parts) < len(record_parts):
        return False
    return frame_parts[-len(record_parts) :] == record_parts


@functools.lru_cache(maxsize=1 << 14)
def _path_parts(path: str, record: bool) -> tuple[str, ...]:
    """A path's parts; a record's without its leading source roots (``_SOURCE_ROOTS``)."""
    parts = tuple(p for p in path.replace("\\", "/").split("/") if p)
    while record and len(parts) > 1 and parts[0] in _SOURCE_ROOTS:
        parts = parts[1:]
    return parts


def _frame_agreement(spec: PatternSpec, frames: Sequence[Frame]) -> tuple[float, str]:
    file_only = False
    for frame in frames:
        if not same_file(frame.path, spec.file_path):
            continue
        near = (
            frame.line is not None
            and spec.line_number is not None
            and abs(frame.line - spec.line_number) <= NEARBY_LINES
        )
        if near or (frame.function and frame.function in spec.functions):
            return FRAME_BONUS, f"a traceback frame is {spec.file_path}:{frame.line}"
        file_only = True
    if file_only:
        return FILE_ONLY_BONUS, f"a traceback frame is in {spec.file_path}"
    return 0.0, ""


def _representative(events: Sequence[LogEvent], spec: PatternSpec) -> LogEvent:
    """The event to show: the one raised as the record's class, else the root cause."""
    for event in events:
        if spec.error_class and event.short_class == spec.error_class:
            return event
    for event in events:
        if event.is_root_cause:
            return event
    return events[0]


def _dedupe_unmatched(
    events: Sequence[LogEvent], unexplained: Sequence[LogEvent] = ()
) -> list[Unmatched]:
    """One entry per distinct (class, message), with every line it was seen at.

    An entry only ``unexplained`` events (possible matches alone) make is marked ``possible``.
    """
    lines: dict[tuple[str | None, str], set[int]] = {}
    repeats: dict[tuple[str | None, str], int] = {}
    plain = {(event.exc_class, event.message) for event in events}
    for event in [*events, *unexplained]:
        key = (event.exc_class, event.message)
        at = lines.setdefault(key, set())
        if event.lines:
            at.add(event.lines[0])
            at.update(event.repeat_lines)
            repeats[key] = repeats.get(key, 0) + event.repeats - len(event.repeat_lines)
    out: list[Unmatched] = []
    for (cls, message), found in lines.items():
        ordered = sorted(found)
        count = len(ordered) + repeats.get((cls, message), 0)
        first = ordered[0] if ordered else 0
        out.append(
            Unmatched(
                cls,
                message,
                first,
                lines=tuple(ordered),
                occurrences=max(count, 1),
                possible=(cls, message) not in plain,
            )
        )
    return out


def similar_matches(
    events: Sequence[LogEvent], matcher: MatcherLike, record: RecordLookup
) -> list[Match]:
    """Up to three suggestions for each of the first ``MAX_SIMILAR_QUERIES`` distinct messages."""
    out: list[Match] = []
    for event in _dedupe_events(events)[:MAX_SIMILAR_QUERIES]:
        for rid, ratio in matcher.similar(event.message, 3):
            rec = record(rid)
            if rec is None:
                continue
            out.append(
                Match(
                    id=rid,
                    slug=str(rec.get("slug", "")),
                    confidence=Confidence.SIMILAR,
                    score=round(ratio / 100 * SIMILAR_SCALE, 3),
                    captures=(),
                    occurrences=1,
                    lines=(event.lines[0],) if event.lines else (),
                    exception=ExceptionInfo(event.exc_class, event.message),
                    record=rec,
                    evidence=(
                        f"suggestion only: the message is {ratio:.0f}% similar to the "
                        "record's template, but its pattern did not match",
                    ),
                )
            )
    return out


def _dedupe_events(events: Sequence[LogEvent]) -> list[LogEvent]:
    seen: set[str] = set()
    out: list[LogEvent] = []
    for event in events:
        if event.message not in seen:
            seen.add(event.message)
            out.append(event)
    return out
