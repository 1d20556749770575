"""Scan throughput of two (or more) errkb revisions on the same logs, interleaved, in one run.

``python -m bench.scan_compare DB LOG [LOG ...] --rev A --rev B [--rounds 3] [--records JSONL]``

The machine is shared, so absolute times drift by 2x within minutes; a figure means something
only beside a baseline measured at the same moment. Each round measures, for every log, every
revision (exported with ``git archive``, as ``bench.run --rev`` does) in a fresh process exactly
as ``bench.run``'s scan child does (warm on the example, then one ``kb.explain`` of the whole
log: candidates compiled inside the timing), and ``grep -c -F`` (and ``rg -c -F`` when
installed) with every record's anchor over the same log. It prints the median MB/s of each and
the ratios, and checks that every revision gave the same matches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.run import (
    MB,
    PYTHON,
    REPO_ROOT,
    Target,
    anchors_of,
    export_rev,
    grep_baseline,
    grep_patterns,
    rg_baseline,
)

#: What ``bench.run`` warms the matcher with before it times the scan.
EXAMPLE = REPO_ROOT / "data" / "examples" / "merged-column-scalar-scale.log"


def _scan(target: Target, db: str, log: str, example: str, out: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("ERRKB_DB", None)
    if target.pythonpath:
        env["PYTHONPATH"] = target.pythonpath
    subprocess.run(
        [PYTHON, "-m", "bench.run", "_child", "scan", db, log, example, str(out)],
        check=True,
        env=env,
        cwd=target.cwd,
    )
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _anchors_file(records: Path, into: Path) -> Path:
    rows = []
    with records.open(encoding="utf-8") as fh:
        for line in fh:
            rows.append({"errorMessage": json.loads(line)["errorMessage"]})
    path = into / "anchors.txt"
    path.write_text("\n".join(grep_patterns(anchors_of(rows))) + "\n", encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("db")
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--rev", action="append", required=True, help="a revision (repeat)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", help="records.jsonl: grep/rg baselines with its anchors")
    parser.add_argument("--example", default=str(EXAMPLE))
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time the scans by their CPU (user + system) instead of wall-clock: a loaded machine",
    )
    args = parser.parse_args()
    # The children run in the exported revision's directory.
    args.db = str(Path(args.db).resolve())
    args.logs = [str(Path(log).resolve()) for log in args.logs]
    args.example = str(Path(args.example).resolve())
    work = Path(tempfile.mkdtemp(prefix="scan-compare-"))
    try:
        _compare(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compare(args: argparse.Namespace, work: Path) -> None:
    targets = {rev: export_rev(rev, work / f"rev-{i}") for i, rev in enumerate(args.rev)}
    anchors = _anchors_file(Path(args.records), work) if args.records else None
    seconds: dict[tuple[str, str], list[float]] = {}
    matches: dict[tuple[str, str], object] = {}
    for _round in range(args.rounds):
        for log in args.logs:
            if anchors is not None:
                for name, baseline in (("grep -F", grep_baseline), ("rg -F", rg_baseline)):
                    got = baseline(anchors, Path(log))
                    if got is not None:
                        seconds.setdefault((name, log), []).append(float(got["seconds"]))
            for rev, target in targets.items():
                got = _scan(target, args.db, log, args.example, work / "scan.json")
                taken = got["cpu_seconds"] if args.cpu else got["seconds"]
                seconds.setdefault((rev, log), []).append(float(taken))
                matches[(rev, log)] = got["matches"]
    first = args.rev[0]
    print(f"| log | what | median MB/s (s) | vs {first} | runs |")
    print("|---|---|---|---|---|")
    for log in args.logs:
        size = Path(log).stat().st_size
        base = statistics.median(seconds[(first, log)])
        for (name, at), runs in seconds.items():
            if at != log:
                continue
            med = statistics.median(runs)
            print(
                f"| {Path(log).name} | {name} | {size / MB / med:.1f} ({med:.2f} s) "
                f"| {base / med:.2f}x | {', '.join(f'{r:.2f}' for r in runs)} |"
            )
        same = all(matches[(rev, log)] == matches[(first, log)] for rev in args.rev)
        print(f"| {Path(log).name} | same matches in every revision | {same} | | |")


if __name__ == "__main__":
    main()
