"""Looking records up by words: ``kb.search(query)`` and ``errkb search``.

A query (words, a message, a traceback or log) is reduced to its messages; for each, records
the matcher explains exactly come first (score 1.0), then the full-text index's candidates
(``errkb.store.search``, ``errkb.store.pgsearch``) re-ranked by how closely their template
reads like the message. Safe on any text: words are quoted one by one; NUL, invalid UTF-8 and
lone surrogates replaced; the query capped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from errkb.errors import UsageError
from errkb.store.search import WORD, Candidate, Filters

if TYPE_CHECKING:
    from errkb.parse.events import LogEvent
    from errkb.report import Report
    from errkb.store import ReadView

#: The matcher's report on a query's text, given its parsed events, read through the same view.
Explained = Callable[[str, "list[LogEvent]"], "Report"]

#: Queries longer than this are cut (a whole log belongs to ``explain``; search reads its start).
MAX_QUERY_CHARS = 1 << 20
#: At most this many messages of a multi-line query are searched.
MAX_MESSAGES = 8
#: At most this many distinct words of one message are looked up in the index ...
MAX_WORDS = 48
#: ... and at most this many of the rarest are asked for (see ``errkb.store.search.plan``).
MAX_TERMS = 6
MAX_LIMIT = 100
#: A query of at least this many words without an exception line is tried as a message too.
MESSAGE_WORDS = 4
#: A record's severities (``schemas/record.v2.schema.json``; a test keeps them equal).
SEVERITIES = ("critical", "error", "warning", "info")
#: Share of a candidate's score that comes from message-text similarity (the rest is bm25).
FUZZ_SHARE = 0.6
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class SearchResult:
    """One record a search found, with a score in [0, 1] (1.0 = the matcher explains it)."""

    id: str
    slug: str
    repo: str
    error_class: str | None
    error_message: str
    severity: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "slug": self.slug,
            "repo": self.repo,
            "errorClass": self.error_class,
            "errorMessage": self.error_message,
            "severity": self.severity,
            "score": self.score,
        }


@dataclass(frozen=True)
class SearchReport:
    """The answer to one search: ``to_dict()`` is exactly ``errkb search --format json``."""

    query: str
    dataset_version: str | None
    results: tuple[SearchResult, ...]

    @property
    def found(self) -> bool:
        return bool(self.results)

    @property
    def exit_code(self) -> int:
        """0 when records were found, 1 when none were (``errkb search`` exits with it)."""
        return 0 if self.results else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "datasetVersion": self.dataset_version,
            "results": [r.to_dict() for r in self.results],
        }


def clean_query(query: str | bytes) -> str:
    """``query`` as safe text: valid UTF-8 only, no NULs, at most ``MAX_QUERY_CHARS``."""
    if isinstance(query, bytes | bytearray):
        text = bytes(query[: MAX_QUERY_CHARS * 4]).decode("utf-8", "replace")
    else:
        # Lone surrogates (argv with undecodable bytes, a library caller) become U+FFFD.
        text = query[:MAX_QUERY_CHARS].encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text[:MAX_QUERY_CHARS].replace("\x00", " ")


def words(text: str) -> list[str]:
    """The distinct lower-case words of ``text``, in order."""
    return list(dict.fromkeys(w.lower() for w in WORD.findall(text)))


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"search limit must be between 1 and {MAX_LIMIT}, not {limit}")
    return limit


def template_text(template: str) -> str:
    """A message template with its placeholders removed: what every message of it shares."""
    return " ".join(_PLACEHOLDER.sub(" ", template).split())


def similarity(message: str, template: str) -> float:
    """How closely ``message`` reads like a message of ``template``, in [0, 1]."""
    from rapidfuzz import fuzz

    left = " ".join(message.split()).lower()
    right = template_text(template).lower()
    if not left or not right:
        return 0.0
    return float(fuzz.ratio(left, right)) / 100.0


#: Words that say nothing about an error: a query of only these scores low.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "not",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "then",
        "there",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "why",
        "will",
        "with",
        "you",
    ]
)
#: The factor of a query with no word but stop words: what it finds is barely evidence.
NO_WORDS_FACTOR = 0.2


def coverage(message: str, cand: Candidate) -> float:
    """The factor of a candidate's score from the share of the query's telling words it holds."""
    telling = [w for w in words(message) if w not in STOP_WORDS and len(w) > 1]
    if not telling:
        return NO_WORDS_FACTOR
    held = set(words(f"{cand.error_message} {cand.slug} {cand.error_class or ''}"))
    return 0.4 + 0.6 * sum(1 for w in telling if w in held) / len(telling)


def rank(
    message: str, found: list[Candidate], exact: Mapping[str, Candidate]
) -> dict[str, tuple[float, Candidate]]:
    """Score the candidates for one message: exact matches 1.0, the rest bm25 x similarity."""
    scored: dict[str, tuple[float, Candidate]] = {rid: (1.0, c) for rid, c in exact.items()}
    if found:
        best = min(c.bm25 for c in found)  # bm25 is negative: lower is better
        for cand in found:
            if cand.id in scored:
                continue
            text_score = cand.bm25 / best if best < 0 else 0.0
            fuzz_score = similarity(message, cand.error_message)
            blend = FUZZ_SHARE * fuzz_score + (1 - FUZZ_SHARE) * text_score
            # Below 1.0 always: only the matcher's verdict earns a full score.
            score = min(0.99, blend * coverage(message, cand))
            scored[cand.id] = (round(score, 4), cand)
    return scored


def search(
    view: ReadView,
    explained: Explained,
    query: str | bytes,
    filters: Filters | None = None,
    limit: int = 10,
) -> SearchReport:
    """The records that best answer ``query``, every read through ``view`` (``explained`` too)."""
    from errkb.parse.regions import parse_input
    from errkb.report import Confidence

    check_limit(limit)
    filters = filters or Filters()
    if filters.severity is not None and filters.severity not in SEVERITIES:
        raise UsageError(f"unknown severity {filters.severity!r}: one of {', '.join(SEVERITIES)}")
    text = clean_query(query)
    events = parse_input(text)
    messages: list[str] = []
    for event in events:
        line = f"{event.exc_class or ''} {event.message}".strip()
        if line not in messages:
            messages.append(line)
    if not messages and text.strip():
        messages = [text]
    messages = messages[:MAX_MESSAGES]

    # The matcher's verdict first; a few words are a person's query, not a message.
    exact: dict[str, Candidate] = {}
    if events or len(words(text)) >= MESSAGE_WORDS:
        report = explained(text, events)
        for match in report.matches:
            if match.confidence is Confidence.EXACT and _passes(match.record, filters):
                exact.setdefault(match.id, _candidate(match.record))

    scored: dict[str, tuple[float, Candidate]] = {rid: (1.0, c) for rid, c in exact.items()}
    dataset_version = view.meta_value("dataset_version")
    for message in messages:
        found = view.search(words(message)[:MAX_WORDS], filters, max(3 * limit, 30), MAX_TERMS)
        for rid, (score, cand) in rank(message, found, {}).items():
            if rid not in scored or scored[rid][0] < score:
                scored[rid] = (score, cand)
    order = {rid: i for i, rid in enumerate(scored)}
    best = sorted(scored.items(), key=lambda kv: (-kv[1][0], order[kv[0]]))[:limit]
    results = tuple(
        SearchResult(c.id, c.slug, c.repo, c.error_class, c.error_message, c.severity, score)
        for _rid, (score, c) in best
    )
    return SearchReport(text, dataset_version, results)


def _passes(record: Mapping[str, Any], filters: Filters) -> bool:
    return (
        (filters.repo is None or record.get("repo") == filters.repo)
        and (filters.error_class is None or record.get("errorClass") == filters.error_class)
        and (filters.severity is None or record.get("severity") == filters.severity)
        and (filters.tag is None or filters.tag in (record.get("tags") or ()))
    )


def _candidate(record: Mapping[str, Any]) -> Candidate:
    cls = record.get("errorClass")
    return Candidate(
        str(record["id"]),
        str(record["slug"]),
        str(record["repo"]),
        None if cls is None else str(cls),
        str(record["errorMessage"]),
        str(record["severity"]),
        0.0,
    )
