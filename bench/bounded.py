"""Bounded output (issue 21): peak RSS and JSON size of ``errkb explain`` on two hostile logs.

* ``known``: tracebacks of one known record (the bundled Comfy INT8 record), each with its own
  captured layer name: as many distinct matches as tracebacks;
* ``unknown``: tracebacks of distinct unknown exceptions (``KeyError: 'session_N'``).

Each log is explained by the CLI (``errkb explain --format json``, a child process under GNU
time for its own peak RSS) against the bundled knowledge base, beside the same command on a
one-traceback file in the same run (the floor: interpreter, imports, knowledge base). Targets
at 400,000 tracebacks (~56 MB): peak RSS <= 1 GB, JSON <= 50 MB, and the report's counts exact
(every occurrence counted in ``occurrences`` or ``truncated``).

    python -m bench.bounded [--count 400000] [--out bench/out]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.run import ERRKB, MB, run_measured

COMFY = "Comfy INT8 layer '{p}' has incompatible weight/scale shapes: (4096, 4096) and (4096, 2)"
TARGET_RSS = 1 << 30
TARGET_JSON = 50 * MB


def _traceback(n: int, message: str, cls: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "/srv/app/load.py", line {40 + n % 7}, in load\n'
        f"{cls}: {message}\n"
    )


def write_log(path: Path, case: str, count: int) -> int:
    """Write the ``case`` log of ``count`` tracebacks; its size in bytes."""
    with path.open("w", encoding="utf-8") as fh:
        for n in range(count):
            if case == "known":
                fh.write(_traceback(n, COMFY.format(p=f"blocks.{n}.attn"), "ValueError"))
            else:
                fh.write(_traceback(n, f"'session_{n}'", "KeyError"))
    return path.stat().st_size


def _counts(report: dict[str, Any]) -> dict[str, int]:
    cut = report.get("omitted") or {}
    exact = [m for m in report["matches"] if m["confidence"] == "exact"]
    return {
        "matches listed": len(exact),
        "match occurrences": sum(m["occurrences"] for m in exact) + cut.get("matchOccurrences", 0),
        "unmatched listed": len(report["unmatched"]),
        "unmatched occurrences": sum(u["occurrences"] for u in report["unmatched"])
        + cut.get("unmatchedOccurrences", 0),
        "matches cut": cut.get("matches", 0),
        "unmatched cut": cut.get("unmatched", 0),
    }


def measure(db: Path, log: Path, out: Path) -> dict[str, Any]:
    run = run_measured(
        [ERRKB, "--db", str(db), "explain", "--format", "json", str(log)], stdout=out
    )
    report = json.loads(out.read_text(encoding="utf-8")) if out.stat().st_size else {}
    return {
        "seconds": run.seconds,
        "peak_rss": run.max_rss,
        "json_bytes": out.stat().st_size,
        "exit": run.returncode,
        "counts": _counts(report) if report else {},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bounded", description=__doc__)
    parser.add_argument("--count", type=int, default=400_000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bounded-", dir=args.out))
    try:
        import errkb

        db = work / "kb.sqlite3"
        errkb.open(db).close()  # the bundled knowledge base
        one = work / "one.log"
        one.write_text(_traceback(0, COMFY.format(p="x"), "ValueError"), encoding="utf-8")
        floor = measure(db, one, work / "one.json")
        rows = []
        for case in ("known", "unknown"):
            log = args.out / f"bounded-{case}-{args.count}.log"
            size = log.stat().st_size if log.exists() else write_log(log, case, args.count)
            got = measure(db, log, work / f"{case}.json")
            want = args.count
            counted = got["counts"].get(
                "match occurrences" if case == "known" else "unmatched occurrences"
            )
            ok = (
                got["peak_rss"] <= TARGET_RSS
                and got["json_bytes"] <= TARGET_JSON
                and counted == want
            )
            rows.append((case, size, got, counted, ok))
        print(f"floor (one traceback): peak RSS {floor['peak_rss'] / MB:.0f} MB")
        print("| log | size | peak RSS | JSON | counted | time | target | status |")
        print("|---|---|---|---|---|---|---|---|")
        for case, size, got, counted, ok in rows:
            print(
                f"| {case}: {args.count:,} tracebacks | {size / MB:.1f} MB "
                f"| {got['peak_rss'] / MB:.0f} MB | {got['json_bytes'] / MB:.2f} MB "
                f"| {counted:,} of {args.count:,} | {got['seconds']:.1f} s "
                f"| RSS <= 1024 MB, JSON <= 50 MB, counts exact | {'PASS' if ok else 'MISS'} |"
            )
        for case, _size, got, _c, _ok in rows:
            print(f"{case}: {json.dumps(got['counts'])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
