"""``python -m bench.pg --pg URL``: PostgreSQL beside SQLite on the same corpus, in one run.

Measures, for each backend: a full sync of the benchmark corpus's published tree into a fresh
database (a fresh schema on PostgreSQL), an unchanged re-sync, and warm ``kb.explain`` latency
over single tracebacks (p50, p99) in this process after one warm-up pass, the two backends
taking turns call by call (``_latency``), beside the cost of one round trip to the server
(``SELECT 1``) measured in the same loop. Targets:
PostgreSQL sync time at most 1.5x SQLite's (issue 20; issue 14 asked for 2x), warm p50 at
most 3 ms.

The PostgreSQL URL is ``--pg`` or ``$ERRKB_TEST_PG_URL``; the schema it creates
(``errkb_bench_<pid>``) is dropped at the end. ``--records`` picks the corpus size
(``bench.corpus``; 150,000 by default, built once and reused); ``--corpus-out`` reads corpora
from another directory (an existing one is reused as it is, never rebuilt if its key matches).
``--keep DIR`` keeps both databases (an SQLite file in DIR, a schema named in DIR) and, when
they are there already, skips the syncs and measures latency only: for iterating on reads.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_SYNC_RATIO = 1.5  #: issue 20 (issue 14 asked for 2)
TARGET_P50_MS = 3.0


def _sync(target: str, tree: Path) -> tuple[float, float]:
    import errkb

    with errkb.open(target, bundled=False) as kb:
        # Each backend's sync starts with no dirty pages of the one before: SQLite's leaves
        # ~3.5 GB at 500k records, which the kernel wrote back during PostgreSQL's sync (the
        # same code's PostgreSQL sync took 473 s so, 369 s alone: the ratio 1.88x or 1.46x).
        os.sync()
        started = time.perf_counter()
        report = kb.sync(tree)
        full = time.perf_counter() - started
        assert report.counts.added > 0, report
        started = time.perf_counter()
        kb.sync(tree)
        again = time.perf_counter() - started
    return full, again


def _latency(
    targets: dict[str, str], cases: list[tuple[str, dict[str, Any]]], pg_url: str
) -> dict[str, dict[str, float]]:
    """Warm explain latency of every backend, measured call by call in turn.

    The backends alternate on each case (in alternating order), so a change in the machine's
    load falls on both alike and the ratio holds even when absolute times do not. The same
    loop times one ``SELECT 1`` on a plain connection: what one round trip to the server costs
    on this machine right now (a warm explain on PostgreSQL waits for one).
    """
    import psycopg

    import errkb
    from errkb.store.postgres import conninfo

    kbs = {name: errkb.open(target, bundled=False) for name, target in targets.items()}
    probe = psycopg.connect(conninfo(pg_url), autocommit=True)
    try:
        for kb in kbs.values():
            for text, _expected in cases:  # warm: compile every record the cases touch
                kb.explain(text)
        times: dict[str, list[float]] = {name: [] for name in [*kbs, "round_trip"]}
        correct = dict.fromkeys(kbs, 0)
        names = list(kbs)
        for n, (text, expected) in enumerate(cases):
            for name in names if n % 2 == 0 else names[::-1]:
                started = time.perf_counter()
                report = kbs[name].explain(text)
                times[name].append(time.perf_counter() - started)
                correct[name] += expected["id"] in {m.id for m in report.exact}
            started = time.perf_counter()
            probe.execute("SELECT 1").fetchall()
            times["round_trip"].append(time.perf_counter() - started)
    finally:
        probe.close()
        for kb in kbs.values():
            kb.close()
    out: dict[str, dict[str, float]] = {}
    for name, series in times.items():
        series.sort()
        out[name] = {
            "p50_ms": statistics.median(series) * 1000,
            "p99_ms": series[int(len(series) * 0.99) - 1] * 1000,
            "calls": len(series),
        }
        if name in correct:
            out[name]["correct"] = correct[name]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("ERRKB_TEST_PG_URL"))
    parser.add_argument("--records", type=int, default=150_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--corpus-out", type=Path, default=None, help="where corpora live")
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the databases")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    if not args.pg:
        parser.error("give --pg URL or set ERRKB_TEST_PG_URL")

    import psycopg

    from bench.corpus import DEFAULT_OUT, build_corpus
    from bench.logs import single_tracebacks
    from errkb.store.postgres import conninfo

    corpus = build_corpus(args.corpus_out or DEFAULT_OUT, records=args.records, seed=args.seed)
    records = corpus.records()
    cases = single_tracebacks(records, args.calls, seed=args.seed)
    count = len(records)
    # The corpus's 500k parsed records would stay alive beside both syncs: every full
    # collection of the collector walked them (this process's SQLite sync took 254 s, the
    # CLI's ~200 s).
    del records
    gc.collect()
    keep: Path | None = args.keep
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        work = keep
        schema = f"errkb_bench_keep_{count}"
    else:
        work = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        schema = f"errkb_bench_{os.getpid()}"
    reuse = keep is not None and (keep / "synced").exists()
    sep = "&" if "?" in args.pg else "?"
    pg_url = f"{args.pg}{sep}options=-csearch_path%3D{schema}"
    if not reuse:
        with psycopg.connect(conninfo(args.pg), autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            admin.execute(f"CREATE SCHEMA {schema}")
        (work / "kb.sqlite3").unlink(missing_ok=True)
    results: dict[str, Any] = {"records": count, "calls": args.calls}
    targets = {"sqlite": str(work / "kb.sqlite3"), "postgres": pg_url}
    try:
        for name, target in targets.items():
            results[name] = {}
            if not reuse:
                full, again = _sync(target, corpus.tree)
                results[name] = {"sync_s": full, "resync_s": again}
                print(name, json.dumps(results[name]), flush=True)
        if keep is not None:
            (keep / "synced").touch()
        latency = _latency(targets, cases, pg_url)
        for name in targets:
            results[name].update(latency[name])
        results["round_trip"] = latency["round_trip"]
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
            with psycopg.connect(conninfo(args.pg), autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA {schema} CASCADE")
    results["p50_ratio"] = results["postgres"]["p50_ms"] / results["sqlite"]["p50_ms"]
    results["targets"] = {"pg_p50<=3ms": results["postgres"]["p50_ms"] <= TARGET_P50_MS}
    if not reuse:
        ratio = results["postgres"]["sync_s"] / results["sqlite"]["sync_s"]
        results["sync_ratio"] = ratio
        results["targets"][f"sync_ratio<={TARGET_SYNC_RATIO:g}"] = ratio <= TARGET_SYNC_RATIO
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
