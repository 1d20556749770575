"""The SQLite backend's full-text search: candidate records for a set of words, ranked by bm25.

The index (``search_fts``, contentless FTS5, and ``search_docs``) is made by migration 0004 and
kept by triggers on ``records``; this module only reads. A query of common words only is
ranked here (``_common``). Words are quoted here, so nothing typed is read as FTS5 syntax.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

#: Column weights for bm25, in ``search_fts`` column order: the message's words count most.
WEIGHTS = (10.0, 4.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0)
#: A word held by more than this many records is "common": rare words are OR-ed, common ones
#: only AND-ed; a word's count is probed up to this bound.
RARE = 500
#: At most this many common words are AND-ed when a query has no rare word.
MAX_COMMON = 6
#: At most this many matching records are scored per query; ``COMMON_SCAN_CAP`` is
#: PostgreSQL's bound for a query of common words only.
SCAN_CAP = 10_000
COMMON_SCAN_CAP = 2_000
#: A query of common words only is ranked on at most this many records holding them all.
COMMON_RANKED = 200
#: Words as FTS5's unicode61 tokenizer sees them (letters and digits; "_" separates).
WORD = re.compile(r"[^\W_]+")
#: Weights of the columns a common-words query is ranked on (template, slug, class).
COMMON_WEIGHTS = (WEIGHTS[0], WEIGHTS[1], WEIGHTS[2])


@dataclass(frozen=True)
class Filters:
    """Exact-value filters on the records a search may return."""

    repo: str | None = None
    tag: str | None = None
    error_class: str | None = None
    severity: str | None = None


@dataclass(frozen=True)
class Candidate:
    """One record the index found, with its bm25 score (lower is better, as SQLite gives it)."""

    id: str
    slug: str
    repo: str
    error_class: str | None
    error_message: str
    severity: str
    bm25: float


def quote(term: str) -> str:
    """``term`` as an FTS5 string: the only form in which query text reaches MATCH."""
    return '"' + term.replace('"', '""') + '"'


def document_frequencies(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
    """How many records hold each of ``terms``, counted up to ``RARE + 1``."""
    out: dict[str, int] = {}
    for term in terms:
        row = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)",
            (quote(term), RARE + 1),
        ).fetchone()
        out[term] = int(row[0]) if row else 0
    return out


@dataclass(frozen=True)
class Plan:
    """How the index is asked for a query's words."""

    expression: str  #: the FTS5 expression, every word quoted
    terms: tuple[str, ...]  #: the words in it
    common: bool  #: every word is common: AND-ed, and ranked without FTS5's bm25


def plan(conn: sqlite3.Connection, terms: Sequence[str], max_terms: int) -> Plan | None:
    """The FTS5 query for a query's words (rare ones OR-ed, else common AND-ed), or None."""
    freq = document_frequencies(conn, terms)
    known = [t for t in terms if freq[t] > 0]
    if not known:
        return None
    rare = sorted((t for t in known if freq[t] <= RARE), key=lambda t: freq[t])[:max_terms]
    if rare:
        return Plan(" OR ".join(quote(t) for t in rare), tuple(rare), common=False)
    chosen = tuple(known[:MAX_COMMON])
    return Plan(" AND ".join(quote(t) for t in chosen), chosen, common=True)


def candidates(
    conn: sqlite3.Connection, planned: Plan | None, filters: Filters, limit: int
) -> list[Candidate]:
    """Live records matching ``planned`` (from ``plan``), best bm25 first, at most ``limit``."""
    if planned is None:
        return []
    if planned.common:
        return _common(conn, planned, filters, limit)
    expression, cap = planned.expression, SCAN_CAP
    weights = ", ".join(str(w) for w in WEIGHTS)
    # Scored inside FTS5 first (bounded by SCAN_CAP), joined to records afterwards.
    scored = (
        f"SELECT rowid, bm25(search_fts, {weights}) AS score FROM search_fts "  # noqa: S608
        "WHERE search_fts MATCH ? LIMIT ?"
    )
    select = (
        "SELECT r.id, r.slug, r.repo, r.error_class, r.error_message, r.severity, f.score "
        "FROM ({inner}) f JOIN search_docs d ON d.key = f.rowid "
        "JOIN records r ON r.id = d.record_id WHERE r.retired = 0"
    )
    unfiltered = filters == Filters()
    if unfiltered:
        # Only the best few are joined; a few spare cover retired records.
        inner = f"SELECT rowid, score FROM ({scored}) ORDER BY score LIMIT ?"  # noqa: S608
        params: list[object] = [expression, cap, limit + 16]
        found = _rows(conn, select.format(inner=inner) + " ORDER BY f.score, r.id", params)
        if len(found) >= limit or len(found) == _count(conn, scored, expression, cap):
            return found[:limit]
    sql = [select.format(inner=scored), *_where(filters)]
    params = [expression, cap, *_values(filters)]
    sql.append("ORDER BY f.score, r.id LIMIT ?")
    params.append(limit)
    return _rows(conn, " ".join(sql), params)


def _common(
    conn: sqlite3.Connection, planned: Plan, filters: Filters, limit: int
) -> list[Candidate]:
    """Records holding every (common) word of ``planned``, ranked here rather than by bm25."""
    sql = [
        "SELECT r.id, r.slug, r.repo, r.error_class, r.error_message, r.severity "
        "FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ? LIMIT ?) f "
        "JOIN search_docs d ON d.key = f.rowid JOIN records r ON r.id = d.record_id "
        "WHERE r.retired = 0",
        *_where(filters),
    ]
    params: list[object] = [planned.expression, COMMON_RANKED, *_values(filters)]
    terms = set(planned.terms)
    found = []
    for i, sl, rp, c, m, sv in conn.execute(" ".join(sql), params):
        score = _column_score(terms, (str(m), str(sl), "" if c is None else str(c)))
        found.append(
            Candidate(
                str(i), str(sl), str(rp), None if c is None else str(c), str(m), str(sv), -score
            )
        )
    found.sort(key=lambda cand: (cand.bm25, cand.id))
    return found[:limit]


def _column_score(terms: set[str], columns: tuple[str, str, str]) -> float:
    """bm25's shape (saturating term counts, short fields favoured) over three weighted columns."""
    score = 0.0
    for text, weight in zip(columns, COMMON_WEIGHTS, strict=True):
        tokens = [w.lower() for w in WORD.findall(text)]
        if not tokens:
            continue
        hits = sum(1 for w in tokens if w in terms)
        # k1 = 1.2 as bm25's default; a field's length discounts it as bm25's b does, by log.
        score += weight * hits * 2.2 / (hits + 1.2) / (1.0 + math.log(len(tokens)))
    return score


def _where(filters: Filters) -> list[str]:
    sql = []
    if filters.repo is not None:
        sql.append("AND r.repo = ?")
    if filters.error_class is not None:
        sql.append("AND r.error_class = ?")
    if filters.severity is not None:
        sql.append("AND r.severity = ?")
    if filters.tag is not None:
        sql.append(
            "AND EXISTS (SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ?)"
        )
    return sql


def _values(filters: Filters) -> list[object]:
    """The parameters of ``_where(filters)``, in its order."""
    values = (filters.repo, filters.error_class, filters.severity, filters.tag)
    return [v for v in values if v is not None]


def _count(conn: sqlite3.Connection, scored: str, expression: str, cap: int) -> int:
    row = conn.execute(f"SELECT count(*) FROM ({scored})", (expression, cap)).fetchone()  # noqa: S608
    return int(row[0]) if row else 0


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[object]) -> list[Candidate]:
    return [
        Candidate(str(i), str(s), str(rp), None if c is None else str(c), str(m), str(sv), float(b))
        for i, s, rp, c, m, sv, b in conn.execute(sql, params)
    ]
