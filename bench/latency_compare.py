"""Warm explain CPU of two (or more) errkb revisions, interleaved, in one run (issue 22).

``python -m bench.latency_compare --rev 156284e --rev WORKTREE [--corpus DIR] [--rounds 3]``

The figure typed slots must not make worse: the CPU time of one warm ``kb.explain`` of a
single traceback (``bench.run``'s 300 latency tracebacks, each a record's rendered message in a
traceback, so every call compiles the RE2 programs of the records it verifies: the cost slot
grammars add), the same tracebacks again (every program compiled), and a small log (the first
60 KB of the dense log). CPU, not wall: the machine is shared, and wall time drifts 2x within
minutes. Each revision (``git archive``, as ``bench.run --rev``; ``WORKTREE`` is the working
tree) syncs the corpus into its own database with its own code (their schemas differ), then
each round runs every revision in a fresh process; the table gives medians over rounds and the
ratio to the first revision. Nothing is written outside a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.run import PYTHON, REPO_ROOT, Target, export_rev

EXAMPLE = REPO_ROOT / "data" / "examples" / "merged-column-scalar-scale.log"
QUICK = REPO_ROOT / "bench" / "out" / "corpus-n4000-s6-quick"
SMALL_LOG_BYTES = 60_000
WORKTREE = "WORKTREE"


def child(db: str, tracebacks: str, log: str, out: str) -> None:
    """In the revision's process: warm on the example, then time each explain (CPU)."""
    import errkb

    kb = errkb.open(db)
    example = EXAMPLE.read_bytes()
    kb.explain(example)
    kb.explain(example)  # the second explain loads the anchor table, as a bot's does
    cases = json.loads(Path(tracebacks).read_text(encoding="utf-8"))
    data = Path(log).read_bytes()
    small = data[: data.index(b"\n", SMALL_LOG_BYTES) + 1]
    first: list[float] = []
    found = 0
    for text, expected in cases:
        started = time.process_time()
        report = kb.explain(text)
        first.append(time.process_time() - started)
        found += expected["id"] in {m.id for m in report.exact}
    again: list[float] = []
    for text, _expected in cases:
        started = time.process_time()
        kb.explain(text)
        again.append(time.process_time() - started)
    logs: list[float] = []
    for _ in range(3):
        started = time.process_time()
        kb.explain(small)
        logs.append(time.process_time() - started)
    result = {"first": first, "again": again, "log": logs, "found": found, "calls": len(cases)}
    Path(out).write_text(json.dumps(result), encoding="utf-8")


def _target(rev: str, into: Path) -> Target:
    if rev == WORKTREE:
        return Target(REPO_ROOT / "errkb", str(REPO_ROOT), str(REPO_ROOT), "working tree")
    return export_rev(rev, into)


def _env(target: Target) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ERRKB_DB", None)
    env["PYTHONPATH"] = target.pythonpath or str(REPO_ROOT)
    return env


def _sync(target: Target, tree: Path, db: Path) -> None:
    subprocess.run(
        [PYTHON, "-m", "errkb", "--db", str(db), "sync", "--format", "json", str(tree)],
        check=True,
        env=_env(target),
        cwd=target.cwd,
        stdout=subprocess.DEVNULL,
    )


def _run(target: Target, db: Path, tracebacks: Path, log: Path, out: Path) -> dict[str, Any]:
    files = (str(db), str(tracebacks), str(log), str(out))
    subprocess.run(
        [PYTHON, "-m", "bench.latency_compare", "_child", *files],
        check=True,
        env=_env(target),
        cwd=target.cwd,
    )
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def main() -> None:
    if sys.argv[1:2] == ["_child"]:
        child(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rev", action="append", required=True, help=f"a revision or {WORKTREE}")
    parser.add_argument("--corpus", default=str(QUICK), help="a bench.run corpus directory")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    corpus = Path(args.corpus).resolve()
    tracebacks = sorted(corpus.glob("tracebacks-*.json"))[-1]
    log = sorted(corpus.glob("log-*-r100.log"))[0]
    work = Path(tempfile.mkdtemp(prefix="latency-compare-"))
    try:
        _compare(args.rev, corpus / "tree", tracebacks, log, args.rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compare(
    revs: list[str], tree: Path, tracebacks: Path, log: Path, rounds: int, work: Path
) -> None:
    targets = {rev: _target(rev, work / f"rev-{i}") for i, rev in enumerate(revs)}
    dbs = {rev: work / f"kb-{i}.sqlite3" for i, rev in enumerate(revs)}
    for rev, target in targets.items():
        _sync(target, tree, dbs[rev])
    runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev in revs}
    for _round in range(rounds):
        for rev, target in targets.items():
            runs[rev].append(_run(target, dbs[rev], tracebacks, log, work / "out.json"))
    figures = {
        rev: {
            "traceback, first explain p50 (ms CPU)": statistics.median(
                _ms(r["first"]) for r in got
            ),
            "traceback, first explain mean (ms CPU)": statistics.median(
                statistics.mean(r["first"]) * 1e3 for r in got
            ),
            "traceback, again p50 (ms CPU)": statistics.median(_ms(r["again"]) for r in got),
            f"log {SMALL_LOG_BYTES // 1000} KB (ms CPU)": statistics.median(
                _ms(r["log"]) for r in got
            ),
            "found": got[0]["found"] / got[0]["calls"],
        }
        for rev, got in runs.items()
    }
    first = revs[0]
    print(f"{rounds} rounds, {tracebacks.name}, {log.name}")
    print(f"| figure | {' | '.join(revs)} | ratio to {first} |")
    print("|---|" + "---|" * len(revs) + "---|")
    for name in figures[first]:
        values = [figures[rev][name] for rev in revs]
        ratios = ", ".join(f"{v / values[0]:.2f}x" for v in values[1:]) if values[0] else "-"
        cells = " | ".join(f"{v:.3f}" for v in values)
        print(f"| {name} | {cells} | {ratios} |")


if __name__ == "__main__":
    main()
