"""Warm ``kb.search`` latency (issue 12 target at 500,000 records: p50 <= 20 ms, p99 <= 100 ms).

``search_latency(db, calls=...)`` is the function the runner (``bench.run``) calls; on its own:
``python -m bench.search_latency DB [--calls 600] [--seed 1]`` against a synced knowledge base
(for example the one ``bench.run`` builds). Queries are drawn from the records in ``DB``, in
three shapes a bot sends, a third each:

* ``message``: a record's template rendered with made-up values (as the error printed it);
* ``words``: three words from a record's template and documentation (a person's query);
* ``traceback``: a short Python traceback ending in such a message (a pasted log).

It warms up first (one search per shape), then times every call and reports p50/p99 over all
calls and per shape, and how often the record a message or traceback came from ranks first.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import errkb

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_WORD = re.compile(r"[A-Za-z]{4,}")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _render(template: str, rng: random.Random) -> str:
    return _PLACEHOLDER.sub(lambda _m: f"v{rng.randrange(1000)}", template)


def queries(db: str, count: int, seed: int = 1) -> list[tuple[str, str, str]]:
    """``count`` (shape, query, source record id) triples drawn from the live records."""
    rng = random.Random(seed)
    conn = sqlite3.connect(db)
    try:
        total = int(conn.execute("SELECT max(rowid) FROM records").fetchone()[0] or 0)
        out: list[tuple[str, str, str]] = []
        while len(out) < count and total:
            row = conn.execute(
                "SELECT id, error_class, error_message, documentation FROM records "
                "WHERE rowid >= ? AND retired = 0 LIMIT 1",
                (rng.randint(1, total),),
            ).fetchone()
            if row is None:
                continue
            rid, cls, template, doc = row
            shape = ("message", "words", "traceback")[len(out) % 3]
            if shape == "message":
                text = _render(template, rng)
            elif shape == "words":
                words = _WORD.findall(f"{template} {doc}")
                if len(words) < 3:
                    continue
                text = " ".join(rng.sample(words, 3))
            else:
                text = (
                    "Traceback (most recent call last):\n"
                    '  File "/srv/app/main.py", line 12, in <module>\n'
                    "    run()\n"
                    f"{cls or 'RuntimeError'}: {_render(template, rng)}\n"
                )
            out.append((shape, text, str(rid)))
        return out
    finally:
        conn.close()


def search_latency(db: str, calls: int = 600, seed: int = 1) -> dict[str, Any]:
    """Warm ``kb.search`` latency over ``calls`` queries against ``db``: the figures as a dict."""
    cases = queries(db, calls, seed)
    kb = errkb.open(db, bundled=False)
    try:
        records = kb.stats().records
        for _shape, text, _rid in cases[:3]:
            kb.search(text)  # warm: page cache, compiled records, imports
        times: dict[str, list[float]] = {"message": [], "words": [], "traceback": []}
        first = {"message": 0, "traceback": 0}
        for shape, text, rid in cases:
            started = time.perf_counter()
            report = kb.search(text)
            times[shape].append(time.perf_counter() - started)
            if shape in first and report.results and report.results[0].id == rid:
                first[shape] += 1
    finally:
        kb.close()
    every = [t for values in times.values() for t in values]
    ms = 1000.0
    return {
        "records": records,
        "calls": len(every),
        "p50_ms": round(percentile(every, 50) * ms, 2),
        "p99_ms": round(percentile(every, 99) * ms, 2),
        "by_shape": {
            shape: {
                "calls": len(values),
                "p50_ms": round(percentile(values, 50) * ms, 2),
                "p99_ms": round(percentile(values, 99) * ms, 2),
            }
            for shape, values in times.items()
        },
        # A variant record can share its template with the real one: first = either is fine.
        "source_ranked_first": {
            shape: round(hits / max(1, len(times[shape])), 3) for shape, hits in first.items()
        },
        "targets_500k": {"p50_ms": 20, "p99_ms": 100},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(json.dumps(search_latency(args.db, args.calls, args.seed), indent=2))


if __name__ == "__main__":
    main()
