"""``python -m bench.sync_scale``: the issue-11 storage figures at scale, each beside a baseline.

Measured in one run, each in a child process (wall time and the child's own peak RSS, from GNU
time, as ``bench.run`` does):

* the floor: reading and parsing every file of the published tree (``bench.run _child tree``),
  what any sync must do before it writes anything;
* a full sync of the tree into a fresh SQLite database (``errkb sync``), then an unchanged
  re-sync of the same tree; with ``--rev REV`` the same two for an exported older revision
  (``git archive``, first on PYTHONPATH), so old and new are compared under the same load;
* a warm process holding the knowledge base: RSS after opening it and explaining the corpus's
  dense log (``bench.run _child scan``: the anchor table loaded, one whole-log scan), unless
  ``--no-warm``.

Targets (issue 11, at 500,000 records): full sync <= 90 s with peak RSS <= 512 MB, unchanged
re-sync <= 5 s, warm process <= 400 MB. The machine is shared: compare the ratios to the floor.
``--corpus DIR`` names an existing ``bench.corpus`` output (else ``--records``/``--seed``
pick ``bench/out/corpus-n<records>-s<seed>``, built if missing).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import run as bench_run

MIB = 1 << 20
TARGETS = {"full_s": 90.0, "full_rss_mib": 512.0, "resync_s": 5.0, "warm_rss_mib": 400.0}


def run_cpu(cmd: Sequence[str], *, stdout: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` under GNU time: wall seconds, CPU seconds (user + system), its peak RSS.

    CPU time is the steadier figure on a shared machine: wall time there is mostly waiting
    for a core.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".time", encoding="ascii") as stats:
        full = ["/usr/bin/time", "-f", "%M %U %S", "-o", stats.name, *cmd]
        out = stdout.open("wb") if stdout else None
        try:
            started = time.perf_counter()
            code = subprocess.run(
                full,
                stdout=out or subprocess.DEVNULL,
                env=bench_run.child_env(),
                cwd=bench_run.TARGET.cwd,
                check=False,
            ).returncode
            seconds = time.perf_counter() - started
        finally:
            if out is not None:
                out.close()
        fields = stats.read().split()
    rss, user, system = int(fields[-3]) * 1024, float(fields[-2]), float(fields[-1])
    return {"seconds": seconds, "cpu_seconds": user + system, "max_rss": rss, "returncode": code}


def _errkb(*args: str) -> list[str]:
    # ``python -m errkb``: the target's package (PYTHONPATH) wins over the installed one.
    return [bench_run.PYTHON, "-m", "errkb", *args]


def _sync_pair(tree: Path, db: Path, work: Path, label: str) -> dict[str, Any]:
    cmd = _errkb("--db", str(db), "sync", "--format", "json", str(tree))
    out: dict[str, Any] = {"errkb": label}
    for name in ("full", "resync"):
        report_path = work / f"{label.replace(' ', '_')}-{name}.json"
        got = run_cpu(cmd, stdout=report_path)
        if got["returncode"] != 0:
            raise SystemExit(f"{label}: sync ({name}) failed with exit code {got['returncode']}")
        report = json.loads(report_path.read_text(encoding="utf-8"))
        out[name] = {**got, "status": report.get("status"), "added": report.get("added")}
        print(f"{label}: {name} sync {_line(got)}", flush=True)
    return out


def _line(got: dict[str, Any]) -> str:
    return (
        f"{got['seconds']:.1f} s wall, {got['cpu_seconds']:.1f} s CPU, "
        f"peak {got['max_rss'] / MIB:.0f} MiB"
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    corpus_dir = args.corpus
    if corpus_dir is None:
        from bench.corpus import build_corpus

        corpus_dir = build_corpus(records=args.records, seed=args.seed).directory
    tree = corpus_dir / "tree"
    work = Path(tempfile.mkdtemp(prefix="bench-sync-scale-", dir=args.workdir))
    results: dict[str, Any] = {"corpus": str(corpus_dir), "provenance": bench_run.provenance()}
    try:
        floor = run_cpu(bench_run._child_cmd("tree", str(tree)))
        results["floor"] = floor
        print(f"floor (read + parse the tree): {_line(floor)}", flush=True)
        new_db = work / "new.sqlite3"
        results["new"] = _sync_pair(tree, new_db, work, "working tree")
        if args.rev:
            saved = bench_run.TARGET
            bench_run.TARGET = bench_run.export_rev(args.rev, work / "rev")
            try:
                old_db = work / "old.sqlite3"
                results["old"] = _sync_pair(tree, old_db, work, f"rev {args.rev}")
            finally:
                bench_run.TARGET = saved
                (work / "old.sqlite3").unlink(missing_ok=True)
        logs = sorted(corpus_dir.glob("log-*-r100.log"))
        if not args.no_warm and logs:
            example = bench_run.REPO_ROOT / "data" / "examples"
            first = next(iter(sorted(example.glob("*.log"))), None) if example.is_dir() else None
            sample = work / "example.txt"
            sample.write_bytes(first.read_bytes() if first else b"RuntimeError: warm-up\n")
            scan_json = work / "scan.json"
            got = run_cpu(
                bench_run._child_cmd("scan", str(new_db), str(logs[0]), str(sample), str(scan_json))
            )
            scan = json.loads(scan_json.read_text(encoding="utf-8"))
            results["warm"] = {
                "log": str(logs[0]),
                "scan_seconds": scan["seconds"],
                "rss_after": scan["rss_after"],
                "peak_rss": scan["peak_rss"],
                "child": got,
            }
            print(
                f"warm process after a dense scan: {scan['rss_after'] / MIB:.0f} MiB "
                f"(peak {scan['peak_rss'] / MIB:.0f} MiB)",
                flush=True,
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return results


def table(r: dict[str, Any]) -> str:
    floor = r["floor"]
    rows = [
        "| figure | new | old | floor (read + parse) | target |",
        "|---|---:|---:|---:|---:|",
    ]

    def cell(side: str, run: str, key: str) -> str:
        got = r.get(side, {}).get(run)
        if not got:
            return "—"
        if key == "rss":
            return f"{got['max_rss'] / MIB:.0f} MiB"
        return (
            f"{got['seconds']:.1f} s wall / {got['cpu_seconds']:.1f} s CPU "
            f"({got['cpu_seconds'] / floor['cpu_seconds']:.2f}× floor CPU)"
        )

    floor_time = f"{floor['seconds']:.1f} s / {floor['cpu_seconds']:.1f} s CPU"
    rows.append(
        f"| full sync | {cell('new', 'full', 's')} | {cell('old', 'full', 's')} | {floor_time} "
        f"| ≤ {TARGETS['full_s']:.0f} s |"
    )
    rows.append(
        f"| full sync peak RSS | {cell('new', 'full', 'rss')} | {cell('old', 'full', 'rss')} "
        f"| {floor['max_rss'] / MIB:.0f} MiB | ≤ {TARGETS['full_rss_mib']:.0f} MB |"
    )
    rows.append(
        f"| unchanged re-sync | {cell('new', 'resync', 's')} | {cell('old', 'resync', 's')} | "
        f"| ≤ {TARGETS['resync_s']:.0f} s |"
    )
    if "warm" in r:
        w = r["warm"]
        rows.append(
            f"| warm process after a dense scan | {w['rss_after'] / MIB:.0f} MiB "
            f"(peak {w['peak_rss'] / MIB:.0f}) | | | ≤ {TARGETS['warm_rss_mib']:.0f} MB |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--corpus", type=Path, default=None, help="an existing corpus directory")
    parser.add_argument("--rev", default=None, help="also measure this older revision")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-process figure")
    parser.add_argument("--workdir", type=Path, default=None, help="where the databases go")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    results = measure(args)
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
