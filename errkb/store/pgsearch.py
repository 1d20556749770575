"""The PostgreSQL backend's full-text search: the same plan and ranking contract as SQLite's.

The index (``records.search_tsv``, GIN, trigger-filled) is migration 0005's; this only reads,
step for step as ``errkb.store.search``. The score sums each word's ``ts_rank`` (the column
weights of ``WEIGHTS``) times its bm25 idf, returned negated as ``Candidate.bm25`` (lower is
better, as on SQLite). Each word is a bound parameter through ``plainto_tsquery`` (no
operators); NUL and lone surrogates are replaced first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from errkb.store.search import COMMON_SCAN_CAP, MAX_COMMON, RARE, SCAN_CAP, Candidate, Filters

#: ts_rank's weights for the classes {D, C, B, A}: ``errkb.store.search.WEIGHTS`` divided by 10.
WEIGHTS = "{0.1, 0.3, 0.4, 1.0}"
#: ts_rank normalisation 1: divide by 1 + log(document length), as bm25 discounts long documents.
NORMALISATION = 1
#: One word as a tsquery: split and lower-cased like the indexed text; never parsed as operators.
TERM = "plainto_tsquery('simple', errkb_search_words(%s))"


def clean(term: str) -> str:
    """``term`` as text PostgreSQL accepts: no NUL, valid UTF-8."""
    return term.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def document_frequencies(conn: Any, terms: Sequence[str]) -> dict[str, int]:
    """How many records hold each of ``terms``, counted up to ``RARE + 1``, in one statement."""
    if not terms:
        return {}
    rows = conn.execute(
        "SELECT w.n, (SELECT count(*) FROM (SELECT 1 FROM records "  # noqa: S608 - TERM is fixed
        f"WHERE search_tsv @@ {TERM.replace('%s', 'w.term')} LIMIT %s) s) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS w(term, n)",
        (RARE + 1, [clean(t) for t in terms]),
    ).fetchall()
    counts = {int(n): int(c) for n, c in rows}
    return {term: counts.get(i, 0) for i, term in enumerate(terms, start=1)}


def plan(
    conn: Any, terms: Sequence[str], max_terms: int
) -> tuple[str, list[tuple[str, float]]] | None:
    """The operator (``"||"`` rare words, ``"&&"`` common only), its words with ``idf``; or None."""
    distinct = list(dict.fromkeys(terms))
    freq = document_frequencies(conn, distinct)
    known = [t for t in distinct if freq[t] > 0]
    if not known:
        return None
    rare = sorted((t for t in known if freq[t] <= RARE), key=lambda t: freq[t])[:max_terms]
    total = max(_record_count(conn), max(freq.values()))
    chosen = rare if rare else known[:MAX_COMMON]
    weights = [(t, idf(total, freq[t])) for t in chosen]
    return ("||" if rare else "&&"), weights


def idf(total: int, count: int) -> float:
    """bm25's inverse document frequency: a rare word says more than a common one."""
    return math.log((total - count + 0.5) / (count + 0.5) + 1.0)


def _record_count(conn: Any) -> int:
    """The number of records: the planner's estimate when it has one (no scan), else counted."""
    row = conn.execute(
        "SELECT reltuples FROM pg_class WHERE oid = to_regclass('records')"
    ).fetchone()
    if row is not None and row[0] is not None and row[0] >= 0:
        return int(row[0])
    counted = conn.execute("SELECT count(*) FROM records").fetchone()
    return int(counted[0]) if counted else 0


def candidates(
    conn: Any, planned: tuple[str, list[tuple[str, float]]] | None, filters: Filters, limit: int
) -> list[Candidate]:
    """Live records matching ``planned`` (from ``plan``), best rank first, at most ``limit``."""
    if planned is None:
        return []
    op, terms = planned
    cap = COMMON_SCAN_CAP if op == "&&" else SCAN_CAP
    query = f" {op} ".join([TERM] * len(terms))
    # The score: each word's ts_rank (column weights, length-normalised) times its idf, summed.
    score = " + ".join(
        [f"%s * ts_rank(%s::float4[], r.search_tsv, {TERM}, {NORMALISATION})"] * len(terms)
    )
    # The cap bounds the matches scored; the live and filter terms apply to the scored set.
    sql = [
        "SELECT id, slug, repo, error_class, error_message, severity, -score FROM ("  # noqa: S608
        "SELECT r.id, r.slug, r.repo, r.error_class, r.error_message, r.severity, r.retired, "
        f"{score} AS score "
        f"FROM records r, (SELECT {query} AS q) q WHERE r.search_tsv @@ q.q LIMIT %s) m "
        "WHERE NOT retired"
    ]
    params: list[object] = []
    for term, weight in terms:
        params += [weight, WEIGHTS, clean(term)]
    params += [clean(t) for t, _w in terms]
    params.append(cap)
    if filters.repo is not None:
        sql.append("AND repo = %s")
        params.append(clean(filters.repo))
    if filters.error_class is not None:
        sql.append("AND error_class = %s")
        params.append(clean(filters.error_class))
    if filters.severity is not None:
        sql.append("AND severity = %s")
        params.append(clean(filters.severity))
    if filters.tag is not None:
        sql.append(
            "AND EXISTS (SELECT 1 FROM record_tags t WHERE t.record_id = m.id AND t.tag = %s)"
        )
        params.append(clean(filters.tag))
    sql.append('ORDER BY score DESC, id COLLATE "C" LIMIT %s')
    params.append(limit)
    return [
        Candidate(str(i), str(s), str(rp), None if c is None else str(c), str(m), str(sv), float(b))
        for i, s, rp, c, m, sv, b in conn.execute(" ".join(sql), params).fetchall()
    ]
