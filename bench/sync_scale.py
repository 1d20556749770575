"""``python -m bench.sync_scale``: the issue-11 storage figures at scale, each beside a baseline.

Measured in one run, each in a child process (wall time and the child's own peak RSS, from GNU
time, as ``bench.run`` does):

* the floor: reading and parsing every file of the published tree (``bench.run _child tree``),
  what any sync must do before it writes anything;
* a full sync of the tree into a new SQLite database (``errkb sync``: the bundled sample first,
  as for any user), an unchanged re-sync of the same tree, and an incremental sync of a second
  version in which every record of a seeded sample of repositories holding ``--changed``
  (1%) of the records has a new ``documentation`` and ``analyzedSha`` (a re-analysis
  upstream; built once beside the corpus, ``bench/out/changed-*``); with ``--rev REV`` the
  same three for an exported older revision (``git archive``, first on PYTHONPATH), so old and
  new are compared under the same load;
* a warm process holding the knowledge base: RSS after opening it and explaining the corpus's
  dense log (``bench.run _child scan``: the anchor table loaded, one whole-log scan), unless
  ``--no-warm``.

Each child's CPU time is user + system of the whole process tree (the sync's worker processes
included), and its peak RSS both GNU time's (the largest single process) and the sum over the
tree, sampled every 0.1 s from ``/proc``.

Two incremental versions are measured, each from a copy of the database the re-sync left:
``docs`` (every record of the sampled repositories gets new documentation) and ``messages``
(each gets a new message and id: as many records retired as added, their matchers compiled,
the match index and anchors changed). Each figure's CPU is shown beside the floor's, and as
cores busy (CPU / wall). ``--records 1000000`` builds (once) and measures a 1M corpus.

Targets (issue 48, at 500,000 records): full sync <= 120 s wall with peak RSS <= 768 MiB for
the whole tree, unchanged re-sync <= 1 s, incremental 1% <= 15 s (messages) and <= 5 s
(documentation); warm process <= 400 MB (issue 11). The machine is shared: compare CPU time
and the ratios to the floor.
``--corpus DIR`` names an existing ``bench.corpus`` output (else ``--records``/``--seed``
pick ``bench/out/corpus-n<records>-s<seed>``, built if missing).
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import run as bench_run

MIB = 1 << 20
#: Issue 48's targets at 500,000 records (wall seconds on a quiet machine; the process tree).
TARGETS = {
    "full_s": 120.0,
    "full_rss_mib": 768.0,
    "resync_s": 1.0,
    "incremental_messages_s": 15.0,
    "incremental_docs_s": 5.0,
    "warm_rss_mib": 400.0,
}
_RUNS = ("full", "resync", "incremental")


def _tree_rss(root: int) -> int:
    """RSS summed over ``root`` and its descendants, from ``/proc`` (0 once it is gone)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid = int(entry.name)
        parents[pid] = int(fields.get("PPid", "0").strip() or 0)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    tree = {root}
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        grew = bool(more)
        tree |= more
    return sum(rss.get(pid, 0) for pid in tree)


class _TreeSampler(threading.Thread):
    """The peak of ``_tree_rss(pid)`` while the process runs."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak = pid, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak = max(self.peak, _tree_rss(self.pid))


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
            proc = subprocess.Popen(
                full,
                stdout=out or subprocess.DEVNULL,
                env=bench_run.child_env(),
                cwd=bench_run.TARGET.cwd,
            )
            sampler = _TreeSampler(proc.pid)
            sampler.start()
            code = proc.wait()
            seconds = time.perf_counter() - started
            sampler.done.set()
            sampler.join()
        finally:
            if out is not None:
                out.close()
        fields = stats.read().split()
    rss, user, system = int(fields[-3]) * 1024, float(fields[-2]), float(fields[-1])
    return {
        "seconds": seconds,
        "cpu_seconds": user + system,
        "max_rss": rss,
        "tree_rss": sampler.peak,
        "returncode": code,
    }


def _errkb(*args: str) -> list[str]:
    # ``python -m errkb``: the target's package (PYTHONPATH) wins over the installed one.
    return [bench_run.PYTHON, "-m", "errkb", *args]


class Change(enum.StrEnum):
    """What the second version changes in every record of the sampled repositories."""

    DOCS = "docs"  #: another ``documentation`` (a re-analysis upstream): records updated
    #: Another message and id: the old records retired, as many new ones added (their
    #: matchers compiled, the match index and anchors changed).
    MESSAGES = "messages"


def _changed_id(rid: str) -> str:
    return hashlib.sha256(f"{rid}/changed".encode()).hexdigest()[: len(rid)]


def changed_tree(
    corpus_dir: Path, share: float, seed: int = 6, change: Change = Change.DOCS
) -> Path:
    """A second version of the corpus's tree: every record of sampled repositories changed.

    Repositories are drawn (seeded) until they hold ``share`` of the records; each of their
    records gets another ``analyzedSha`` and, by ``change``, another ``documentation`` or
    another message (a word put before ``errorMessage`` and ``messagePattern``) under a new
    id. Built once, beside the corpus.
    """
    import random

    from bench import publish_tree as publish

    tail = "" if change is Change.DOCS else f"-{change.value}"
    out = bench_run.REPO_ROOT / "bench" / "out" / f"changed-{corpus_dir.name}-{share:g}{tail}"
    if (out / "tree" / "data" / "manifest.json").exists():
        return out / "tree"
    records = [
        json.loads(line)
        for line in (corpus_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    by_repo: dict[str, int] = {}
    for r in records:
        by_repo[r["repo"]] = by_repo.get(r["repo"], 0) + 1
    repos = sorted(by_repo)
    random.Random(seed).shuffle(repos)
    chosen: set[str] = set()
    count = 0
    for repo in repos:
        if count >= share * len(records):
            break
        chosen.add(repo)
        count += by_repo[repo]
    for r in records:
        if r["repo"] not in chosen:
            continue
        r["analyzedSha"] = "f" * 40
        if change is Change.DOCS:
            r["documentation"] = f"{r.get('documentation') or ''} (re-analysed)"
        else:
            r["id"] = _changed_id(r["id"])
            r["errorMessage"] = f"Refreshed {r['errorMessage']}"
            r["messagePattern"] = f"Refreshed {r['messagePattern']}"
    shutil.rmtree(out, ignore_errors=True)
    publish.write_tree(out / "tree.tmp", records, CHANGED_VERSION)
    (out / "tree.tmp").rename(out / "tree")
    (out / "info.json").write_text(
        json.dumps({"repos": len(chosen), "records": count, "of": len(records)}), encoding="utf-8"
    )
    return out / "tree"


CHANGED_VERSION = "2026-09-30T00:00:00.000Z"  #: the changed tree's datasetVersion


def _sync_pair(
    tree: Path,
    db: Path,
    work: Path,
    label: str,
    changed: dict[str, Path] | None = None,
    *,
    synced: Path | None = None,
) -> dict[str, Any]:
    """A full sync of ``tree`` into ``db``, an unchanged re-sync, then each changed version.

    Each changed version (``Change``) is synced into its own copy of the database as the
    re-sync left it (the files beside it too), so every incremental figure starts from the
    same state. ``synced``: a database synced before (``--db``) is copied to ``db`` instead of
    the full sync and re-sync, and its anchor files compacted by this errkb first.
    """
    out: dict[str, Any] = {"errkb": label}
    if synced is not None:
        _copy_db(synced, db)
        out["compact"] = run_cpu(_errkb("--db", str(db), "maint", "compact"))
        print(f"{label}: compact {_line(out['compact'])}", flush=True)
    for name in _RUNS:
        if synced is not None and name != "incremental":
            continue
        if name == "incremental":
            for kind, source in (changed or {}).items():
                copy = work / f"{label.replace(' ', '_')}-{kind}" / db.name
                _copy_db(db, copy)
                out[f"incremental_{kind}"] = _one(copy, source, work, label, f"incremental_{kind}")
                out[f"anchors_{kind}"] = _anchor_build(db, copy, label, kind)
                shutil.rmtree(copy.parent, ignore_errors=True)
            continue
        out[name] = _one(db, tree, work, label, name)
    return out


def _copy_db(db: Path, to: Path) -> None:
    """``db`` and the files beside it, copied to ``to`` (its directory made)."""
    to.parent.mkdir(parents=True, exist_ok=True)
    for f in db.parent.glob(db.name + "*"):
        if f.is_file() and not f.name.endswith(".lock"):
            shutil.copy2(f, to.parent / (to.name + f.name[len(db.name) :]))


#: A child that builds the anchor files of a database (``KnowledgeBase.build_anchor_files``)
#: and prints what the record anchors' build did, as JSON.
_BUILD = """
import json, sys, errkb
with errkb.open(sys.argv[1]) as kb:
    built = kb.build_anchor_files()
print(json.dumps(None if built is None else {
    "kind": str(built.kind), "records": built.records, "words": built.words,
    "delta_words": built.delta_words}))
"""


def _anchor_build(before: Path, after: Path, label: str, kind: str) -> dict[str, Any]:
    """The anchor files' build of an incremental sync again, alone: CPU, peak RSS, delta size.

    The database ``after`` the sync gets back the files beside it ``before`` the sync, and a
    child builds them for its state as the sync did (what the sync's own figure includes).
    """
    for f in before.parent.glob(before.name + ".*"):
        if f.is_file() and (".anchors" in f.name or ".recordanchors" in f.name):
            shutil.copy2(f, after.parent / (after.name + f.name[len(before.name) :]))
    printed = after.parent / "build.json"
    got = run_cpu([bench_run.PYTHON, "-c", _BUILD, str(after)], stdout=printed)
    text = printed.read_text(encoding="utf-8").strip()
    built = json.loads(text) if got["returncode"] == 0 and text else None
    sizes = {
        f.name[len(after.name) :]: f.stat().st_size
        for f in after.parent.glob(after.name + ".*")
        if f.is_file() and (".anchors" in f.name or ".recordanchors" in f.name)
    }
    print(f"{label}: anchor files of the {kind} sync, alone: {_line(got)}; {built}", flush=True)
    return {**got, "built": built, "sizes": sizes}


def _one(db: Path, source: Path, work: Path, label: str, name: str) -> dict[str, Any]:
    cmd = _errkb("--db", str(db), "sync", "--format", "json", str(source))
    report_path = work / f"{label.replace(' ', '_')}-{name}.json"
    got = run_cpu(cmd, stdout=report_path)
    if got["returncode"] != 0:
        raise SystemExit(f"{label}: sync ({name}) failed with exit code {got['returncode']}")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    counts = {k: report.get(k) for k in ("status", "added", "updated", "unchanged", "retired")}
    print(f"{label}: {name} sync {_line(got)}", flush=True)
    return {**got, **counts}


def _line(got: dict[str, Any]) -> str:
    return (
        f"{got['seconds']:.1f} s wall, {got['cpu_seconds']:.1f} s CPU, "
        f"peak {got['max_rss'] / MIB:.0f} MiB (tree {got.get('tree_rss', 0) / MIB:.0f} MiB)"
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    # Absolute: an older revision's children run in its exported directory.
    corpus_dir = args.corpus.resolve() if args.corpus is not None else None
    if corpus_dir is None:
        from bench.corpus import build_corpus

        corpus_dir = build_corpus(records=args.records, seed=args.seed).directory
    tree = corpus_dir / "tree"
    kinds = [Change(k) for k in args.kinds.split(",")] if args.kinds else list(Change)
    changed = (
        {c.value: changed_tree(corpus_dir, args.changed, change=c) for c in kinds}
        if args.changed > 0
        else None
    )
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-sync-scale-", dir=args.workdir))
    results: dict[str, Any] = {"corpus": str(corpus_dir), "provenance": bench_run.provenance()}
    if changed is not None:
        results["changed"] = {
            kind: json.loads((path.parent / "info.json").read_text("utf-8"))
            for kind, path in changed.items()
        }
    try:
        floor = run_cpu(bench_run._child_cmd("tree", str(tree)))
        results["floor"] = floor
        print(f"floor (read + parse the tree): {_line(floor)}", flush=True)
        new_db = work / "new.sqlite3"
        synced = args.db.resolve() if args.db is not None else None
        results["new"] = _sync_pair(tree, new_db, work, "working tree", changed, synced=synced)
        if args.rev:
            saved = bench_run.TARGET
            bench_run.TARGET = bench_run.export_rev(args.rev, work / "rev")
            try:
                old_db = work / "old.sqlite3"
                results["old"] = _sync_pair(
                    tree, old_db, work, f"rev {args.rev}", changed, synced=synced
                )
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
    """The figures as a Markdown table, each beside the floor of the same run."""
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
            return f"{got['max_rss'] / MIB:.0f} MiB, tree {got.get('tree_rss', 0) / MIB:.0f} MiB"
        cores = got["cpu_seconds"] / got["seconds"] if got["seconds"] else 0.0
        return (
            f"{got['seconds']:.1f} s wall / {got['cpu_seconds']:.1f} s CPU, {cores:.2f} cores "
            f"({got['cpu_seconds'] / floor['cpu_seconds']:.2f}× floor CPU)"
        )

    floor_time = f"{floor['seconds']:.1f} s / {floor['cpu_seconds']:.1f} s CPU"
    rows.append(
        f"| full sync | {cell('new', 'full', 's')} | {cell('old', 'full', 's')} | {floor_time} "
        f"| ≤ {TARGETS['full_s']:.0f} s |"
    )
    rows.append(
        f"| full sync peak RSS | {cell('new', 'full', 'rss')} | {cell('old', 'full', 'rss')} "
        f"| {floor['max_rss'] / MIB:.0f} MiB | ≤ {TARGETS['full_rss_mib']:.0f} MiB (tree) |"
    )
    rows.append(
        f"| unchanged re-sync | {cell('new', 'resync', 's')} | {cell('old', 'resync', 's')} | "
        f"| ≤ {TARGETS['resync_s']:.0f} s |"
    )
    for kind, c in r.get("changed", {}).items():
        run = f"incremental_{kind}"
        what = "messages (new ids: added and retired)" if kind == "messages" else "documentation"
        rows.append(
            f"| incremental, {what}: {c['records']} of {c['of']} records, {c['repos']} repos | "
            f"{cell('new', run, 's')} | {cell('old', run, 's')} | "
            f"| ≤ {TARGETS[run + '_s']:.0f} s |"
        )
        rows.append(
            f"| incremental, {kind}: peak RSS | {cell('new', run, 'rss')} | "
            f"{cell('old', run, 'rss')} | | |"
        )
        anchors = f"anchors_{kind}"
        rows.append(
            f"| its anchor files built again alone | {cell('new', anchors, 's')}, "
            f"{cell('new', anchors, 'rss')}; {_built(r, 'new', anchors)} | "
            f"{cell('old', anchors, 's')}, {cell('old', anchors, 'rss')} | | |"
        )
    if "old" in r:
        ratios = [
            f"{run} {r['new'][run]['cpu_seconds'] / r['old'][run]['cpu_seconds']:.2f}×"
            for run in r["new"]
            if run != "errkb" and run in r["old"] and r["old"][run]["cpu_seconds"]
        ]
        rows.append(f"| CPU, new / old | {', '.join(ratios)} | | | |")
    if "warm" in r:
        w = r["warm"]
        rows.append(
            f"| warm process after a dense scan | {w['rss_after'] / MIB:.0f} MiB "
            f"(peak {w['peak_rss'] / MIB:.0f}) | | | ≤ {TARGETS['warm_rss_mib']:.0f} MB |"
        )
    return "\n".join(rows)


def _built(r: dict[str, Any], side: str, run: str) -> str:
    """What the record anchors' build did and the files' sizes (``_anchor_build``)."""
    got = r.get(side, {}).get(run) or {}
    built = got.get("built")
    sizes = ", ".join(f"{n} {b / MIB:.1f} MiB" for n, b in sorted(got.get("sizes", {}).items()))
    if not built:
        return sizes
    return (
        f"{built['kind']}: {built['records']} records, {built['words']} words compiled, "
        f"{built['delta_words']} words in deltas; {sizes}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--corpus", type=Path, default=None, help="an existing corpus directory")
    parser.add_argument("--rev", default=None, help="also measure this older revision")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-process figure")
    parser.add_argument(
        "--changed",
        type=float,
        default=0.01,
        help="share of records the incremental sync's version changes (0: no incremental)",
    )
    parser.add_argument(
        "--kinds", default=None, help="the incremental kinds to measure (docs,messages: both)"
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        help="a database synced from the corpus before (--keep): its copy starts the "
        "incremental syncs, no full sync or re-sync measured",
    )
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
