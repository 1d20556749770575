"""The SQLite backend's full-text search: candidate records for a set of words, ranked by bm25.

The index itself (``search_fts``, contentless FTS5, and ``search_docs``, a stable integer key per
record) is created by migration 0004 and maintained by triggers on ``records``, so every write
path (ingest, sync, rollback) keeps it current in its own transaction without calling anything
here. This module only reads.

Callers hand over plain words; they are quoted here (``"word"``), so nothing a user types is ever
read as FTS5 syntax (``AND``, ``NEAR(``, ``*``, ``^``, column filters, unbalanced quotes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

#: Column weights for bm25, in ``search_fts`` column order: message template, slug, class, tags,
#: documentation, trigger scenarios, common situations, solutions. A word of the message
#: counts most; a word that only the prose holds still finds the record.
WEIGHTS = (10.0, 4.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0)
#: A word in more than this share of the live index is noise for ranking (``the``, ``error``)
#: and costs the most to score; it is dropped unless every word of the query is that common.
COMMON_SHARE = 0.05
#: ... but a word held by at most this many records is always kept (cheap, and in a small
#: knowledge base every word is "common").
COMMON_FLOOR = 1000


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


def indexed_count(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM search_docs").fetchone()
    return int(row[0]) if row else 0


def document_frequencies(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
    """How many indexed records hold each of ``terms`` (lower-case words); absent = 0."""
    if not terms:
        return {}
    marks = ",".join("?" * len(terms))
    sql = f"SELECT term, doc FROM search_vocab WHERE term IN ({marks})"  # noqa: S608 - only ?s
    found = {str(t): int(n) for t, n in conn.execute(sql, list(terms))}
    return {t: found.get(t, 0) for t in terms}


def choose_terms(conn: sqlite3.Connection, terms: Sequence[str], limit: int) -> list[str]:
    """The query's words worth asking the index for: known, not too common, rarest first."""
    freq = document_frequencies(conn, terms)
    known = [t for t in terms if freq[t] > 0]
    if not known:
        return []
    ceiling = max(COMMON_FLOOR, COMMON_SHARE * indexed_count(conn))
    rare = [t for t in known if freq[t] <= ceiling]
    # Every word common (a query "error value"): keep the rarest few rather than nothing.
    chosen = rare or sorted(known, key=lambda t: freq[t])[:3]
    return sorted(chosen, key=lambda t: freq[t])[:limit]


def candidates(
    conn: sqlite3.Connection, terms: Sequence[str], filters: Filters, limit: int
) -> list[Candidate]:
    """Live records holding any of ``terms``, best bm25 first, at most ``limit``."""
    if not terms:
        return []
    weights = ", ".join(str(w) for w in WEIGHTS)
    sql = [
        "SELECT r.id, r.slug, r.repo, r.error_class, r.error_message, r.severity, "  # noqa: S608
        f"bm25(search_fts, {weights}) AS score "
        "FROM search_fts JOIN search_docs d ON d.key = search_fts.rowid "
        "JOIN records r ON r.id = d.record_id "
        "WHERE search_fts MATCH ? AND r.retired = 0"
    ]
    params: list[object] = [" OR ".join(quote(t) for t in terms)]
    if filters.repo is not None:
        sql.append("AND r.repo = ?")
        params.append(filters.repo)
    if filters.error_class is not None:
        sql.append("AND r.error_class = ?")
        params.append(filters.error_class)
    if filters.severity is not None:
        sql.append("AND r.severity = ?")
        params.append(filters.severity)
    if filters.tag is not None:
        sql.append(
            "AND EXISTS (SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ?)"
        )
        params.append(filters.tag)
    sql.append("ORDER BY score, r.id LIMIT ?")
    params.append(limit)
    rows = conn.execute(" ".join(sql), params)
    return [
        Candidate(str(i), str(s), str(rp), None if c is None else str(c), str(m), str(sv), float(b))
        for i, s, rp, c, m, sv, b in rows
    ]
