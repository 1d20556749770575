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
#: A word held by more than this many records is "common". The cost of a query is the length of
#: its words' posting lists (FTS5 scores every record a word is in), so rare words are OR-ed and
#: common ones only ever AND-ed; a word's count is probed up to this bound, never read whole.
RARE = 500
#: At most this many common words are AND-ed when a query has no rare word.
MAX_COMMON = 6
#: At most this many matching records are scored per query: rare words alone rarely reach it
#: (8 words x RARE); a query of common words only, where more records may match, ranks the first
#: ``COMMON_SCAN_CAP`` records holding them all (a few common words do not say which is best).
SCAN_CAP = 10_000
COMMON_SCAN_CAP = 2_000


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
    """How many live-or-retired records hold each of ``terms``, counted up to ``RARE + 1``.

    FTS5 keeps no document counts: its vocabulary table reads a word's whole posting list
    (milliseconds for a word in most records). Counting at most ``RARE + 1`` matches bounds it.
    """
    out: dict[str, int] = {}
    for term in terms:
        row = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)",
            (quote(term), RARE + 1),
        ).fetchone()
        out[term] = int(row[0]) if row else 0
    return out


def plan(conn: sqlite3.Connection, terms: Sequence[str], max_terms: int) -> str | None:
    """The FTS5 expression for a query's words (quoted), or None when no word is indexed.

    The rarest words (at most ``max_terms``) OR-ed when there are rare words; otherwise the
    query's first common words AND-ed (a record must hold them all).
    """
    freq = document_frequencies(conn, terms)
    known = [t for t in terms if freq[t] > 0]
    if not known:
        return None
    rare = sorted((t for t in known if freq[t] <= RARE), key=lambda t: freq[t])[:max_terms]
    if rare:
        return " OR ".join(quote(t) for t in rare)
    return " AND ".join(quote(t) for t in known[:MAX_COMMON])


def candidates(
    conn: sqlite3.Connection, expression: str | None, filters: Filters, limit: int
) -> list[Candidate]:
    """Live records matching ``expression`` (from ``plan``), best bm25 first, at most ``limit``."""
    if expression is None:
        return []
    cap = COMMON_SCAN_CAP if " AND " in expression else SCAN_CAP
    weights = ", ".join(str(w) for w in WEIGHTS)
    # Scored inside FTS5 first (bounded by SCAN_CAP), joined to records afterwards: joining
    # every match before ranking cost more than ranking itself.
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
    sql = [select.format(inner=scored)]
    params = [expression, cap]
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
    sql.append("ORDER BY f.score, r.id LIMIT ?")
    params.append(limit)
    return _rows(conn, " ".join(sql), params)


def _count(conn: sqlite3.Connection, scored: str, expression: str, cap: int) -> int:
    row = conn.execute(f"SELECT count(*) FROM ({scored})", (expression, cap)).fetchone()  # noqa: S608
    return int(row[0]) if row else 0


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[object]) -> list[Candidate]:
    return [
        Candidate(str(i), str(s), str(rp), None if c is None else str(c), str(m), str(sv), float(b))
        for i, s, rp, c, m, sv, b in conn.execute(sql, params)
    ]
