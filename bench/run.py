"""``python -m bench.run``: every issue-6 figure in one run, each against a baseline and a target.

Measured in one run, on the same machine, against the same corpus and log:

* scan throughput of ``kb.explain`` (library, warm matcher) and of the ``errkb explain`` CLI
  (wall time: start, matcher build, scan, JSON output) on the whole log, against
  ``grep -F -f anchors.txt`` (``LC_ALL=C``, ``-c`` so it reads the whole file), a plain
  Aho-Corasick scan of the same anchors from Python (``ahocorasick_rs`` over bytes,
  overlapping), and the naive approach (Python ``re.search`` of every record's messagePattern
  on every line; measured on a sample of lines and patterns, extrapolated);
* latency of ``kb.explain(one traceback)`` in a warm process (p50, p99);
* cold start of ``errkb explain < example`` against ``python -c 'import click'`` (hyperfine if
  installed), with the bundled knowledge base and with the big one;
* a full sync of the published tree into a fresh database, and an unchanged re-sync: time and
  peak RSS (each a subprocess, its peak RSS measured by GNU time);
* memory of a warm matcher (RSS after opening the KB and explaining one log, minus RSS after
  ``import errkb``);
* precision, recall and capture accuracy of exact matches against the ground truth, with every
  miss and false hit listed with its cause.
* issue 45's realistic accuracy (``bench.accuracy``, at ``--records``; ``--no-accuracy`` skips
  it): real tool output with planted records, near-miss siblings and interpreter errors against
  a corpus holding many popular packages' records, beside the 3-record knowledge base.

The measurements that need a clean process (``scan``, ``warm``, ``tree``) run as child processes
of this module (``python -m bench.run _child ...``); the module imports only the standard
library at the top so a child's "after import errkb" RSS means what it says.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PYTHON = sys.executable
ERRKB = str(Path(PYTHON).with_name("errkb"))
MB = 1_000_000
#: Planted errors per MB in the sparse logs (the dense one has ``--rate``, 100).
SPARSE_RATE = 12
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Target:
    """Which errkb the measured processes run: the working tree, or an exported revision.

    Others edit errkb/ while benchmarks run, so ``--rev`` exports a commit (``git archive``) and
    puts it first on every measured process's PYTHONPATH, with that directory as the working
    directory (``python -m`` puts the cwd first on sys.path); ``bench`` itself still comes from
    this checkout, after it.
    """

    errkb_dir: Path = REPO_ROOT / "errkb"
    pythonpath: str | None = None
    cwd: str | None = None
    label: str = "working tree"


TARGET = Target()


# ---------------------------------------------------------------------------- helpers
def rss_bytes(field_name: str = "VmRSS") -> int:
    """This process's resident set size (or VmHWM, its peak) from /proc."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass(frozen=True)
class ChildRun:
    """A finished subprocess: wall seconds, its own peak RSS (bytes; -1 unknown), exit code."""

    seconds: float
    max_rss: int
    returncode: int
    #: The largest sum of the RSS of the command and every process under it, sampled every
    #: ``TREE_SAMPLE_S`` (-1 where ``/proc`` is not there). ``max_rss`` is one process's peak
    #: (GNU time's is the largest of the command and its reaped children, never their sum);
    #: issue 20 bounds the whole process tree, a sync's workers included.
    tree_rss: int = -1


#: Seconds between samples of a measured command's process tree.
TREE_SAMPLE_S = 0.1


def _tree_rss(root: int) -> int:
    """The summed VmRSS (bytes) of ``root`` and every process under it; 0 once it is gone."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
        todo.extend(int(c) for c in children.split())
    return total


def _watch_tree(proc: subprocess.Popen[bytes], peak: list[int]) -> None:
    while proc.poll() is None:
        peak[0] = max(peak[0], _tree_rss(proc.pid))
        time.sleep(TREE_SAMPLE_S)


def run_measured(
    cmd: Sequence[str], *, stdout: Path | None = None, stdin: Path | None = None
) -> ChildRun:
    """Run ``cmd``; its wall time and *its own* peak RSS.

    The peak comes from GNU time (``/usr/bin/time -f %M``), not from ``wait4`` on our own child:
    a child forked from this process inherits its (large) address space until ``exec``, and
    the kernel counts that in the child's ``ru_maxrss`` — even with vfork/posix_spawn. GNU time
    forks the command from its own small process. Without GNU time, ``max_rss`` is -1.
    """
    gnu_time = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile("r", suffix=".rss", encoding="ascii") as rss_file:
        full = list(cmd)
        if gnu_time.exists():
            full = [str(gnu_time), "-f", "%M", "-o", rss_file.name, *cmd]
        out = stdout.open("wb") if stdout else None
        inp = stdin.open("rb") if stdin else None
        try:
            start = time.perf_counter()
            proc = subprocess.Popen(
                full,
                stdout=out or subprocess.DEVNULL,
                stdin=inp or subprocess.DEVNULL,
                env=child_env(),
                cwd=TARGET.cwd,
            )
            peak = [0 if Path("/proc/self/status").exists() else -1]
            watcher = None
            if peak[0] == 0:
                watcher = threading.Thread(target=_watch_tree, args=(proc, peak), daemon=True)
                watcher.start()
            returncode = proc.wait()
            seconds = time.perf_counter() - start
            if watcher is not None:
                watcher.join()
        finally:
            for fh in (out, inp):
                if fh is not None:
                    fh.close()
        # GNU time writes "Command exited with non-zero status N" first when it did.
        lines = rss_file.read().split()
        max_rss = int(lines[-1]) * 1024 if gnu_time.exists() and lines else -1
    return ChildRun(seconds, max_rss, returncode, peak[0])


def child_env() -> dict[str, str]:
    """The environment of measured commands: bytecode caches allowed, no ambient database."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("ERRKB_DB", None)
    env["NO_COLOR"] = "1"
    if TARGET.pythonpath:
        env["PYTHONPATH"] = TARGET.pythonpath
    return env


def export_rev(rev: str, into: Path) -> Target:
    """Export errkb (and the folders it ships) at ``rev`` into ``into``; describe the target."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", sha, "errkb", "migrations", "data", "schemas"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return Target(into / "errkb", f"{into}{os.pathsep}{REPO_ROOT}", str(into), f"commit {sha}")


def _git(*args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def provenance() -> dict[str, str]:
    """What was measured: the errkb source, HEAD, and whether errkb/ had uncommitted edits."""
    dirty = _git("status", "--porcelain", "--", "errkb", "migrations")
    return {
        "errkb": TARGET.label,
        "errkb_dir": str(TARGET.errkb_dir),
        "head": _git("rev-parse", "HEAD"),
        "uncommitted_errkb_changes": "yes" if dirty and TARGET.pythonpath is None else "no",
    }


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# ---------------------------------------------------------------------------- children
def child_scan(db: str, log: str, example: str, result: str) -> None:
    """Warm the matcher as a serving process is (``kb.prepare``: the anchor table, the record
    anchors and the shape pass loaded), then time ``kb.explain`` on the whole log.

    The figures are the default call's (its report bounded by ``Limits``); the matches scored
    for accuracy are a second, untimed call's with ``limits=None``: a log that plants more
    distinct records than the report lists (5,000 matches in all) would otherwise count those
    it names as cut (``Report.omitted``) as missed (the 150k dense log plants 5,073).
    """
    import errkb

    kb = errkb.open(db)
    started = time.perf_counter()
    kb.explain(Path(example).read_bytes())
    kb.explain(Path(example).read_bytes())
    kb.prepare()  # what a large input reads, loaded as ``errkb serve`` loads it after a sync
    build = time.perf_counter() - started
    data = Path(log).read_bytes()
    started, cpu = time.perf_counter(), time.process_time()
    report = kb.explain(data)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu
    omitted = report.omitted
    whole = kb.explain(data, limits=None) if omitted is not None else report
    del data
    out = {
        "build_seconds": build,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "bytes": len(Path(log).read_bytes()),
        "peak_rss": rss_bytes("VmHWM"),
        "rss_after": rss_bytes(),
        "similar": len(report.matches) - len(report.exact),
        "unmatched": len(report.unmatched),
        "cut_matches": omitted.matches if omitted is not None else 0,
        "matches": [
            {"id": m.id, "lines": list(m.lines), "captures": m.capture_dict} for m in whole.exact
        ],
        # A planted generic record printed without its class and frame is, by the decision
        # rules (issue 45), a possible match: found, not an answer (``score``'s ``possible``).
        "possible": [
            {"id": m.id, "lines": list(m.lines)}
            for m in whole.matches
            if m.confidence.value == "possible"
        ],
    }
    Path(result).write_text(json.dumps(out), encoding="utf-8")


def child_sizes(db: str, log: str, sizes: str, result: str) -> None:
    """Time ``kb.explain`` on prefixes of ``log`` (whole lines) of each size in MB; larger
    sizes than the log repeat it."""
    import errkb

    kb = errkb.open(db)
    data = Path(log).read_bytes()
    kb.prepare()
    kb.explain(data[: data.index(b"\n", min(len(data) - 1, MB)) + 1])  # warm: table, cache
    out = []
    for size in (float(x) for x in sizes.split(",")):
        want = int(size * MB)
        text = data * (want // len(data) + 1)
        text = text[: text.index(b"\n", want) + 1] if want < len(text) else text
        started = time.perf_counter()
        kb.explain(text)
        seconds = time.perf_counter() - started
        out.append({"mb": size, "bytes": len(text), "seconds": seconds})
        del text
    Path(result).write_text(json.dumps(out), encoding="utf-8")


def child_warm(db: str, example: str, tracebacks: str, anchors: str, result: str) -> None:
    """Memory of a warm matcher, then explain latency over single tracebacks (and a baseline)."""
    before = rss_bytes()
    import errkb

    after_import = rss_bytes()
    kb = errkb.open(db)
    started = time.perf_counter()
    kb.explain(Path(example).read_bytes())
    first = time.perf_counter() - started
    warm_rss = rss_bytes()
    # Then prepared as a serving process is (``errkb serve`` calls it after each sync): the
    # suggestions' related-record index, built by the first unmatched exception otherwise
    # (~1 s at 150k records, inside the loop below), and the large inputs' anchors.
    kb.prepare()
    cases = json.loads(Path(tracebacks).read_text(encoding="utf-8"))
    times: list[float] = []
    correct = 0
    for text, expected in cases:
        started = time.perf_counter()
        report = kb.explain(text)
        times.append(time.perf_counter() - started)
        ids = {m.id for m in report.exact}
        correct += expected["id"] in ids
    # Baseline: only the anchor prefilter (one Aho-Corasick pass) over the same texts.
    import ahocorasick_rs

    words = json.loads(Path(anchors).read_text(encoding="utf-8"))
    automaton = ahocorasick_rs.AhoCorasick(words)
    base: list[float] = []
    for text, _expected in cases:
        started = time.perf_counter()
        automaton.find_matches_as_indexes(text, overlapping=True)
        base.append(time.perf_counter() - started)
    out = {
        "rss_start": before,
        "rss_after_import": after_import,
        "rss_warm": warm_rss,
        "first_explain_seconds": first,
        "latencies": times,
        "correct": correct,
        "calls": len(cases),
        "baseline_latencies": base,
    }
    Path(result).write_text(json.dumps(out), encoding="utf-8")


def child_tree(tree: str) -> None:
    """Sync's floor: read and parse every file of the published tree, nothing else."""
    import gzip

    data = Path(tree) / "data"
    json.loads((data / "manifest.json").read_bytes())
    json.loads(gzip.decompress((data / "index.json.gz").read_bytes()))
    json.loads((data / "repos.json").read_bytes())
    count = sum(len(json.loads(p.read_bytes())) for p in sorted((data / "repos").rglob("*.json")))
    print(count)


# ---------------------------------------------------------------------------- baselines
def anchors_of(records: Sequence[dict[str, Any]]) -> list[str]:
    """Each record's longest literal run, as errkb's prefilter chooses it (deduplicated)."""
    from errkb.records.patterns import choose_anchor
    from errkb.records.template import parse_template

    seen: dict[str, None] = {}
    for r in records:
        anchor = choose_anchor(parse_template(r["errorMessage"]))
        if anchor:
            seen.setdefault(anchor, None)
    return list(seen)


def grep_patterns(anchors: Sequence[str]) -> list[str]:
    """Anchors as grep -F lines: one spanning lines becomes its longest line (grep is per line)."""
    out: dict[str, None] = {}
    for anchor in anchors:
        if "\n" in anchor or "\r" in anchor:
            anchor = max(re.split(r"[\r\n]+", anchor), key=len).strip()
        if len(anchor) >= 4:
            out.setdefault(anchor, None)
    return list(out)


def grep_baseline(anchors_path: Path, log: Path) -> dict[str, Any] | None:
    grep = shutil.which("grep")
    if grep is None:
        return None
    env = {**child_env(), "LC_ALL": "C"}
    started, cpu = time.perf_counter(), children_cpu()
    # -c: with output to /dev/null GNU grep stops at the first match; counting reads it all.
    proc = subprocess.run(
        [grep, "-c", "-F", "-f", str(anchors_path), str(log)],
        capture_output=True,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpu_seconds": children_cpu() - cpu,
        "lines": int(proc.stdout or b"0"),
        "rc": proc.returncode,
    }


def children_cpu() -> float:
    """User + system CPU seconds of this process's finished children (a shared machine's
    steadier clock: compared with ``kb.explain``'s own CPU time in the same run)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rg_baseline(anchors_path: Path, log: Path) -> dict[str, Any] | None:
    """ripgrep with the same fixed strings (``-c``: it reads the whole file)."""
    rg = shutil.which("rg", path=os.pathsep.join([str(Path(PYTHON).parent), os.environ["PATH"]]))
    if rg is None:
        return None
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(
        [rg, "-c", "-F", "-f", str(anchors_path), str(log)],
        capture_output=True,
        env=child_env(),
        check=False,
    )
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpu_seconds": children_cpu() - cpu,
        "lines": int(proc.stdout or b"0"),
        "rc": proc.returncode,
    }


def ac_baseline(anchors: Sequence[str], data: bytes) -> dict[str, Any]:
    import ahocorasick_rs

    started = time.perf_counter()
    automaton = ahocorasick_rs.BytesAhoCorasick([a.encode("utf-8") for a in anchors])
    build = time.perf_counter() - started
    started = time.perf_counter()
    hits = automaton.find_matches_as_indexes(data, overlapping=True)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "build_seconds": build, "hits": len(hits)}


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout


def naive_baseline(
    records: Sequence[dict[str, Any]],
    log_text: str,
    *,
    lines: int,
    patterns: int,
    seed: int,
    call_timeout: float = 0.05,
) -> dict[str, Any]:
    """``re.search`` of messagePatterns over lines, on a sample; extrapolated to the whole.

    Guarding every call with a timer costs ~2.6 µs, more than a typical search, so each pattern
    first runs over the whole line sample under one generous alarm; only a pattern that trips
    it is re-run call by call under a ``call_timeout`` alarm (a call that times out counts at
    least the timeout: the estimate is a lower bound). sre checks for signals while matching,
    so the alarm does interrupt a backtracking search.
    """
    rng = random.Random(seed)
    all_lines = log_text.split("\n")
    sample = rng.sample(all_lines, min(lines, len(all_lines)))
    chosen = rng.sample(list(records), min(patterns, len(records)))
    compiled = []
    failed = 0
    for r in chosen:
        try:
            compiled.append(re.compile(r["messagePattern"]))
        except (re.error, RecursionError, OverflowError):
            failed += 1
    previous = signal.signal(signal.SIGALRM, _alarm)
    total = 0.0
    calls = 0
    timeouts = 0
    slow_patterns = 0
    try:
        for pattern in compiled:
            started = time.perf_counter()
            try:
                signal.setitimer(signal.ITIMER_REAL, max(1.0, call_timeout * len(sample)) / 4)
                for line in sample:
                    pattern.search(line)
                signal.setitimer(signal.ITIMER_REAL, 0)
                total += time.perf_counter() - started
                calls += len(sample)
                continue
            except _Timeout:
                slow_patterns += 1
            for line in sample:
                started = time.perf_counter()
                try:
                    signal.setitimer(signal.ITIMER_REAL, call_timeout)
                    pattern.search(line)
                    signal.setitimer(signal.ITIMER_REAL, 0)
                except _Timeout:
                    timeouts += 1
                total += time.perf_counter() - started
                calls += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    per_call = total / calls if calls else float("nan")
    estimate = per_call * len(all_lines) * len(records)
    return {
        "per_call_us": per_call * 1e6,
        "estimated_seconds": estimate,
        "sample_lines": len(sample),
        "sample_patterns": len(compiled),
        "patterns_not_compiling": failed,
        "backtracking_patterns": slow_patterns,
        "timeouts": timeouts,
        "log_lines": len(all_lines),
    }


def hyperfine(commands: dict[str, str], runs: int, warmup: int, out: Path) -> dict[str, float]:
    """Median wall seconds per command: hyperfine when installed, else a subprocess loop."""
    exe = shutil.which("hyperfine")
    if exe:
        export = out / "hyperfine.json"
        cmd = [exe, "--style", "none", "-i", f"--warmup={warmup}", f"--runs={runs}"]
        cmd += ["--export-json", str(export)]
        for name, command in commands.items():
            cmd += ["-n", name, command]
        subprocess.run(cmd, check=True, env=child_env(), stdout=subprocess.DEVNULL, cwd=TARGET.cwd)
        results = json.loads(export.read_text(encoding="utf-8"))["results"]
        return {r["command"]: float(r["median"]) for r in results}
    medians: dict[str, float] = {}
    for name, command in commands.items():
        times = []
        for i in range(warmup + runs):
            started = time.perf_counter()
            subprocess.run(["sh", "-c", command], env=child_env(), check=False, cwd=TARGET.cwd)
            if i >= warmup:
                times.append(time.perf_counter() - started)
        medians[name] = statistics.median(times)
    return medians


# ---------------------------------------------------------------------------- accuracy
@dataclass
class Accuracy:
    """Precision, recall and capture accuracy of exact matches, and every miss explained."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    #: Planted (record, line) pairs reported only as possible (a generic record without its
    #: class and frame): not missed, not answers.
    possible: int = 0
    captures_ok: int = 0
    false_hits: list[dict[str, Any]] = field(default_factory=list)
    misses: list[dict[str, Any]] = field(default_factory=list)
    wrong_captures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def capture_accuracy(self) -> float:
        return self.captures_ok / self.tp if self.tp else 1.0


def score(
    predictions: Sequence[dict[str, Any]],
    truth: Sequence[dict[str, Any]],
    log_lines: Sequence[str],
    literal: dict[str, int],
    templates: dict[str, str] | None = None,
    possible: Sequence[dict[str, Any]] = (),
) -> Accuracy:
    """Compare (record id, line) pairs; explain each false hit and miss from the truth rows.

    A planted pair reported only in ``possible`` (errkb's possible matches) is counted apart
    (``Accuracy.possible``), neither found nor missed.
    """
    maybe = {(m["id"], line) for m in possible for line in m["lines"]}
    predicted: dict[tuple[str, int], dict[str, str]] = {}
    for m in predictions:
        for line in m["lines"]:
            predicted[(m["id"], line)] = m["captures"]
    expected = {(t["id"], t["line"]): t for t in truth}
    by_line: dict[int, dict[str, Any]] = {t["line"]: t for t in truth}
    by_instance: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for t in truth:
        by_instance[t["instance"]].append(t)
    ids_at_line: dict[int, set[str]] = defaultdict(set)
    for rid, line in predicted:
        ids_at_line[line].add(rid)
    acc = Accuracy()
    templates = templates or {}
    for key, captures in sorted(predicted.items(), key=lambda kv: kv[0][1]):
        rid, line = key
        if key in expected:
            acc.tp += 1
            want = expected[key]["captures"]
            if captures == want:
                acc.captures_ok += 1
            else:
                acc.wrong_captures.append(
                    {"id": rid, "line": line, "got": captures, "expected": want}
                    | ({"template": templates[rid]} if rid in templates else {})
                )
            continue
        acc.fp += 1
        text = log_lines[line - 1] if 0 < line <= len(log_lines) else ""
        planted = by_line.get(line)
        if planted and rid in planted["overlaps"]:
            cause = (
                f"overlap: record {rid} ({literal.get(rid, 0)} literal chars) matches a part of "
                f"planted {planted['id']}'s message ({literal.get(planted['id'], 0)} literal "
                "chars) and is reported as a separate match"
            )
        elif planted:
            cause = f"another record at planted line ({planted['shape']}, planted {planted['id']})"
        else:
            cause = "filler line (no error planted here)"
        hit = {"id": rid, "line": line, "cause": cause, "text": text[:160]}
        if rid in templates:
            hit["template"] = templates[rid]
        if planted and planted["id"] in templates:
            hit["planted_template"] = templates[planted["id"]]
        acc.false_hits.append(hit)
    for key, row in sorted(expected.items(), key=lambda kv: kv[0][1]):
        if key in predicted:
            continue
        if key in maybe:
            acc.possible += 1
            continue
        acc.fn += 1
        rid, line = key
        others = ids_at_line.get(line, set()) - {rid}
        copies = by_instance[row["instance"]]
        siblings = [t["line"] for t in copies if (rid, t["line"]) in predicted]
        if others:
            cause = "another record reported at this line instead: " + ", ".join(sorted(others))
        elif siblings:
            cause = f"found at line(s) {siblings} of the same instance, not at this copy"
        else:
            cause = f"nothing reported at this line ({row['shape']} shape)"
        text = log_lines[line - 1] if 0 < line <= len(log_lines) else ""
        miss = {"id": rid, "line": line, "cause": cause, "text": text[:160]}
        if rid in templates:
            miss["template"] = templates[rid]
        acc.misses.append(miss)
    return acc


# ---------------------------------------------------------------------------- the run
@dataclass
class Figure:
    """One row of the result table."""

    name: str
    value: str
    baseline: str
    ratio: str
    target: str
    status: str  #: PASS, MISS, or "" (no target)


def _status(ok: bool | None) -> str:
    return "" if ok is None else ("PASS" if ok else "MISS")


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.0f} MiB" if nbytes >= 0 else "? MiB"


def _mbps(nbytes: int, seconds: float) -> float:
    return nbytes / MB / seconds if seconds > 0 else float("inf")


def _child_cmd(*args: str) -> list[str]:
    return [PYTHON, "-m", "bench.run", "_child", *args]


def compile_bytecode() -> None:
    """Byte-compile site-packages and errkb, so cold start measures imports, not compiles."""
    targets = [sysconfig.get_paths()["purelib"], str(TARGET.errkb_dir)]
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", "-j0", *targets],
        check=False,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.corpus import build_corpus
    from bench.logs import (
        LOGS_VERSION,
        SINGLES_VERSION,
        Oracle,
        generate_log,
        log_path,
        single_tracebacks,
    )
    from errkb._resources import bundle_path

    quick = args.quick
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    corpus = build_corpus(args.out, records=args.records, seed=args.seed, quick=quick)
    timings["corpus"] = time.perf_counter() - t0
    records = corpus.records()
    t0 = time.perf_counter()
    path = log_path(corpus.directory, args.log_mb, args.seed, args.rate)
    oracle: Oracle | None = None
    lat_path = (
        corpus.directory
        / f"tracebacks-{args.latency_calls}-s{args.seed}-v{LOGS_VERSION}.{SINGLES_VERSION}.json"
    )
    if not lat_path.exists():
        oracle = Oracle(records)
        cases = single_tracebacks(records, args.latency_calls, seed=args.seed, oracle=oracle)
        lat_path.write_text(json.dumps(cases), encoding="utf-8")
    log = generate_log(
        records,
        path,
        size_mb=args.log_mb,
        seed=args.seed,
        rate=args.rate,
        oracle=oracle,
        key={"corpus": corpus.directory.name},
    )
    extra = {}
    for profile, mb in (("sparse", args.log_mb), ("keywordless", args.log_mb * 0.4)):
        extra[profile] = generate_log(
            records,
            log_path(corpus.directory, mb, args.seed, SPARSE_RATE, profile),
            size_mb=mb,
            seed=args.seed,
            rate=SPARSE_RATE,
            oracle=oracle,
            key={"corpus": corpus.directory.name},
            profile=profile,
        )
    timings["log"] = time.perf_counter() - t0
    work = Path(tempfile.mkdtemp(prefix="run-", dir=corpus.directory))
    try:
        results = _measure(
            args,
            corpus,
            records,
            log,
            extra,
            lat_path,
            work,
            bundle_path("data") / "examples",
            timings,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not args.no_accuracy:
        results["realistic"] = realistic_accuracy(args)
        results["figures"] += [asdict(f) for f in realistic_figures(results["realistic"])]
    return results


def realistic_accuracy(args: argparse.Namespace) -> dict[str, Any]:
    """Issue 45's benchmark (``bench.accuracy``) at this run's scale, by the errkb measured."""
    from bench.accuracy import DEFAULT_SETS, measure

    t0 = time.perf_counter()
    out = measure(
        records=args.records,
        seed=args.seed,
        out=args.out,
        sources=args.sources or args.out / ("sources-quick" if args.quick else "sources"),
        sets=1 if args.quick else DEFAULT_SETS,
        quick=args.quick,
        errkb=ERRKB,
        env=child_env(),
        cwd=TARGET.cwd,
        errkb_dir=TARGET.errkb_dir,
    )
    out["seconds"] = time.perf_counter() - t0
    return out


def realistic_figures(r: dict[str, Any]) -> list[Figure]:
    """The realistic-scale rows: the big knowledge base's column, the 3-record one beside it."""
    cols = r["columns"]
    big = [k for k in cols if k != "3 records"][-1]
    b, small = cols[big], cols.get("3 records")
    logs = f"{b['logs']} real tool/CI logs, {big} KB"

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:.1f}%"

    base = "-" if small is None else f"3 records: {pct(small['precision'])}"
    return [
        Figure(
            f"realistic: precision of exact ({logs})",
            f"{pct(b['precision'])} ({b['wrongCount']} wrong of {b['exactAnswers']})",
            base,
            "-",
            ">= 99.5%",
            _status(b["precision"] is not None and b["precision"] >= 0.995),
        ),
        Figure(
            "realistic: recall of planted records / captures",
            f"{pct(b['recall'])} ({b['found']}/{b['planted']}) / {pct(b['captureAccuracy'])}",
            "-" if small is None else f"3 records: {pct(small['recall'])}",
            "-",
            "100% / 100%",
            _status(b["recall"] == 1 and b["captureAccuracy"] == 1),
        ),
        Figure(
            "realistic: wrong-source exact / generic exact without class and frame",
            f"{b['wrongSource']} / {b['genericExactWithoutClassAndFrame']}",
            "-",
            "-",
            "0 / 0",
            _status(b["wrongSource"] == 0 and b["genericExactWithoutClassAndFrame"] == 0),
        ),
        Figure("realistic: `possible` matches", str(b["possible"]), "-", "-", "-", ""),
    ]


def _measure(
    args: argparse.Namespace,
    corpus: Any,
    records: list[dict[str, Any]],
    log: Any,
    extra: dict[str, Any],
    lat_path: Path,
    work: Path,
    examples: Path,
    timings: dict[str, float],
) -> dict[str, Any]:
    from errkb.records.patterns import compile_record

    quick = args.quick
    example = examples / "merged-column-scalar-scale.log"
    info = {**corpus.info, "jsonl_bytes": corpus.jsonl.stat().st_size}
    results: dict[str, Any] = {"corpus": info, "log": log.meta, "timings": timings}
    compile_bytecode()

    # --- sync: a fresh database, then an unchanged re-sync (also builds the DB used below).
    db = work / "kb.sqlite3"
    sync_cmd = [ERRKB, "--db", str(db), "sync", "--format", "json", str(corpus.tree)]
    full = run_measured(sync_cmd, stdout=work / "sync1.json")
    again = run_measured(sync_cmd, stdout=work / "sync2.json")
    tree_floor = run_measured(_child_cmd("tree", str(corpus.tree)))
    for name, r in (("full", full), ("resync", again)):
        if r.returncode != 0:
            raise SystemExit(f"sync ({name}) failed with exit code {r.returncode}")
    resync_report = json.loads((work / "sync2.json").read_text(encoding="utf-8"))
    results["sync"] = {
        "full": asdict(full),
        "resync": asdict(again),
        "resync_status": resync_report.get("status"),
        "tree_parse": asdict(tree_floor),
    }

    # --- scan: library (warm), CLI (wall), and the baselines on the same log.
    scan_json = work / "scan.json"
    scan = run_measured(_child_cmd("scan", str(db), str(log.path), str(example), str(scan_json)))
    if scan.returncode != 0:
        raise SystemExit(f"scan child failed with exit code {scan.returncode}")
    lib = json.loads(scan_json.read_text(encoding="utf-8"))
    cli = run_measured(
        [ERRKB, "--db", str(db), "explain", "--format", "json", str(log.path)],
        stdout=work / "cli.json",
    )
    anchors = anchors_of(records)
    anchors_path = work / "anchors.json"
    anchors_path.write_text(json.dumps(anchors), encoding="utf-8")
    grep_path = work / "anchors.txt"
    grep_path.write_text("\n".join(grep_patterns(anchors)) + "\n", encoding="utf-8")
    data = log.path.read_bytes()
    grep = None if args.no_grep else grep_baseline(grep_path, log.path)
    rg = None if args.no_grep else rg_baseline(grep_path, log.path)
    ac = ac_baseline(anchors, data)
    naive = None
    if not args.no_naive:
        naive = naive_baseline(
            records,
            data.decode("utf-8"),
            lines=args.naive_lines,
            patterns=args.naive_patterns,
            seed=args.seed,
        )
    results["scan"] = {
        "library": {k: v for k, v in lib.items() if k != "matches"},
        "cli": asdict(cli),
        "grep": grep,
        "rg": rg,
        "aho_corasick": ac,
        "naive": naive,
        "anchors": len(anchors),
    }

    # --- the sparse logs: throughput and accuracy.
    literal = {
        r["id"]: compile_record(r["id"], r["errorMessage"], r["messagePattern"]).literal_length
        for r in records
    }
    templates = {r["id"]: r["errorMessage"] for r in records}
    results["profiles"] = {}
    for profile, other in extra.items():
        out_json = work / f"scan-{profile}.json"
        run_ = run_measured(
            _child_cmd("scan", str(db), str(other.path), str(example), str(out_json))
        )
        if run_.returncode != 0:
            raise SystemExit(f"scan child ({profile}) failed with exit code {run_.returncode}")
        got = json.loads(out_json.read_text(encoding="utf-8"))
        other_lines = other.path.read_bytes().decode("utf-8").split("\n")
        acc_ = score(
            got["matches"], other.truth(), other_lines, literal, templates, got.get("possible", ())
        )
        results["profiles"][profile] = {
            "bytes": got["bytes"],
            "seconds": got["seconds"],
            "cpu_seconds": got.get("cpu_seconds", got["seconds"]),
            "truthRows": other.meta["truthRows"],
            "tp": acc_.tp,
            "fp": acc_.fp,
            "fn": acc_.fn,
            "possible": acc_.possible,
            "precision": acc_.precision,
            "recall": acc_.recall,
            "capture_accuracy": acc_.capture_accuracy,
            "misses": acc_.misses[:50],
            "false_hits": acc_.false_hits[:50],
        }

    # --- time per MB at growing sizes of the dense log.
    sizes_json = work / "sizes.json"
    scale = args.log_mb / 50
    sizes = ",".join(f"{float(mb) * scale:g}" for mb in args.sizes.split(","))
    run_ = run_measured(_child_cmd("sizes", str(db), str(log.path), sizes, str(sizes_json)))
    if run_.returncode != 0:
        raise SystemExit(f"sizes child failed with exit code {run_.returncode}")
    results["sizes"] = json.loads(sizes_json.read_text(encoding="utf-8"))

    # --- warm latency and matcher memory.
    warm_json = work / "warm.json"
    warm = run_measured(
        _child_cmd("warm", str(db), str(example), str(lat_path), str(anchors_path), str(warm_json))
    )
    if warm.returncode != 0:
        raise SystemExit(f"warm child failed with exit code {warm.returncode}")
    w = json.loads(warm_json.read_text(encoding="utf-8"))
    results["warm"] = {
        k: v for k, v in w.items() if k not in ("latencies", "baseline_latencies")
    } | {
        "p50_ms": percentile(w["latencies"], 0.5) * 1e3,
        "p99_ms": percentile(w["latencies"], 0.99) * 1e3,
        "baseline_p50_ms": percentile(w["baseline_latencies"], 0.5) * 1e3,
        "baseline_p99_ms": percentile(w["baseline_latencies"], 0.99) * 1e3,
    }

    # --- cold start.
    bundled_db = work / "bundled.sqlite3"
    subprocess.run(
        [ERRKB, "--db", str(bundled_db), "stats"],
        check=True,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        cwd=TARGET.cwd,
    )
    cold = hyperfine(
        {
            "import click": f"{PYTHON} -c 'import click'",
            "explain bundled": f"{ERRKB} --db {bundled_db} explain < {example}",
            "explain corpus": f"{ERRKB} --db {db} explain < {example}",
        },
        runs=args.cold_runs,
        warmup=1 if quick else 2,
        out=work,
    )
    results["cold"] = cold

    # --- accuracy.
    log_lines = data.decode("utf-8").split("\n")
    acc = score(lib["matches"], log.truth(), log_lines, literal, templates, lib.get("possible", ()))
    results["accuracy"] = {
        "tp": acc.tp,
        "fp": acc.fp,
        "fn": acc.fn,
        "possible": acc.possible,
        "precision": acc.precision,
        "recall": acc.recall,
        "capture_accuracy": acc.capture_accuracy,
        "false_hits": acc.false_hits,
        "misses": acc.misses,
        "wrong_captures": acc.wrong_captures,
    }
    results["figures"] = [asdict(f) for f in figures(results, quick)]
    return results


def figures(r: dict[str, Any], quick: bool) -> list[Figure]:
    """The result table, with baselines, ratios and targets."""
    out: list[Figure] = []
    size = r["log"]["bytes"]
    lib = r["scan"]["library"]
    grep, ac, naive = r["scan"]["grep"], r["scan"]["aho_corasick"], r["scan"]["naive"]
    rg = r["scan"].get("rg")
    # CPU time where both sides have it (a shared machine's steadier clock), else wall.
    clock = "cpu_seconds" if "cpu_seconds" in lib else "seconds"
    lib_mbps = _mbps(size, lib[clock])
    grep_mbps = _mbps(size, grep.get(clock, grep["seconds"])) if grep else None
    rg_mbps = _mbps(size, rg.get(clock, rg["seconds"])) if rg else None
    ac_mbps = _mbps(size, ac["seconds"])
    naive_mbps = _mbps(size, naive["estimated_seconds"]) if naive else None
    dense_target = 45  # issue 21, at 150k and 500k records
    ok = (
        lib_mbps >= dense_target
        and (grep_mbps is None or lib_mbps > grep_mbps)
        and (rg_mbps is None or lib_mbps > rg_mbps)
    )
    ratios = [f"{lib_mbps / ac_mbps:.3g}x AC"]
    if rg_mbps:
        ratios.insert(0, f"{lib_mbps / rg_mbps:.3g}x rg")
    if grep_mbps:
        ratios.insert(0, f"{lib_mbps / grep_mbps:.3g}x grep")
    if naive_mbps:
        ratios.append(f"{lib_mbps / naive_mbps:.3g}x naive")
    out.append(
        Figure(
            f"scan: kb.explain, {size / MB:.1f} MB dense log (warm)",
            f"{lib_mbps:.2f} MB/s ({lib[clock]:.1f} s {'CPU' if clock != 'seconds' else 'wall'})",
            "grep -F, rg -F, Aho-Corasick, naive re",
            ", ".join(ratios),
            f">= {dense_target} MB/s, ahead of grep -F and rg -F",
            _status(ok),
        )
    )
    for profile, p in r.get("profiles", {}).items():
        mbps = _mbps(p["bytes"], p.get(clock, p["seconds"]))
        out.append(
            Figure(
                f"scan: kb.explain, {p['bytes'] / MB:.1f} MB {profile} log (warm)",
                f"{mbps:.1f} MB/s ({p.get(clock, p['seconds']):.2f} s)",
                f"dense log {lib_mbps:.1f} MB/s",
                f"{mbps / lib_mbps:.3g}x dense",
                ">= 200 MB/s" if profile == "sparse" else "-",
                _status(mbps >= 200) if profile == "sparse" else "",
            )
        )
    sizes = r.get("sizes") or []
    if sizes:
        per_mb = [x["seconds"] / (x["bytes"] / MB) for x in sizes]
        spread = max(per_mb) / min(per_mb)
        out.append(
            Figure(
                "scan: time per MB at " + "/".join(f"{x['mb']:g}" for x in sizes) + " MB (dense)",
                " / ".join(f"{t * 1e3:.0f}" for t in per_mb) + " ms/MB",
                f"smallest {min(per_mb) * 1e3:.0f} ms/MB",
                f"{spread:.2f}x max/min",
                "<= 1.5x",
                _status(spread <= 1.5),
            )
        )
    cli = r["scan"]["cli"]
    cli_mbps = _mbps(size, cli["seconds"])
    out.append(
        Figure(
            "scan: errkb explain --format json (CLI wall)",
            f"{cli_mbps:.2f} MB/s ({cli['seconds']:.1f} s, peak {_mib(cli['max_rss'])})",
            f"grep -F {grep_mbps:.2f} MB/s" if grep_mbps else "-",
            f"{cli_mbps / grep_mbps:.3g}x grep" if grep_mbps else "-",
            "-",
            "",
        )
    )
    if grep:
        out.append(
            Figure(
                f"baseline: LC_ALL=C grep -c -F ({r['scan']['anchors']} anchors)",
                f"{grep_mbps:.2f} MB/s ({grep['seconds']:.2f} s)",
                "-",
                "-",
                "-",
                "",
            )
        )
    if rg:
        out.append(
            Figure(
                f"baseline: rg -c -F ({r['scan']['anchors']} anchors)",
                f"{rg_mbps:.2f} MB/s ({rg['seconds']:.2f} s)",
                "-",
                "-",
                "-",
                "",
            )
        )
    out.append(
        Figure(
            "baseline: ahocorasick_rs bytes, overlapping",
            f"{ac_mbps:.1f} MB/s ({ac['seconds']:.2f} s, {ac['hits']} hits)",
            f"build {ac['build_seconds']:.2f} s",
            "-",
            "-",
            "",
        )
    )
    if naive:
        out.append(
            Figure(
                "baseline: naive re.search, every pattern x line",
                f"{naive_mbps:.5f} MB/s (est. {naive['estimated_seconds'] / 3600:.1f} h)",
                f"{naive['per_call_us']:.2f} us/call over {naive['sample_patterns']} patterns x "
                f"{naive['sample_lines']} lines",
                f"{naive['backtracking_patterns']} backtracking, {naive['timeouts']} timeouts",
                "-",
                "",
            )
        )
    w = r["warm"]
    out.append(
        Figure(
            f"latency p50: kb.explain(1 traceback), {w['calls']} calls",
            f"{w['p50_ms']:.2f} ms",
            f"AC prefilter only {w['baseline_p50_ms']:.3f} ms",
            f"{w['p50_ms'] / w['baseline_p50_ms']:.3g}x",
            "<= 1 ms",
            _status(w["p50_ms"] <= 1),
        )
    )
    out.append(
        Figure(
            "latency p99",
            f"{w['p99_ms']:.2f} ms ({w['correct']}/{w['calls']} found)",
            f"AC prefilter only {w['baseline_p99_ms']:.3f} ms",
            f"{w['p99_ms'] / w['baseline_p99_ms']:.3g}x",
            "<= 5 ms",
            _status(w["p99_ms"] <= 5),
        )
    )
    cold = r["cold"]
    click = cold["import click"]
    for name, label, limit in (
        ("explain bundled", "bundled KB", 2.5),
        ("explain corpus", f"{r['corpus']['records']} records", 4.0),
    ):
        out.append(
            Figure(
                f"cold: errkb explain < example, {label}",
                f"{cold[name] * 1e3:.0f} ms",
                f"python -c 'import click' {click * 1e3:.0f} ms",
                f"{cold[name] / click:.2f}x",
                f"<= {limit}x import click",
                _status(cold[name] / click <= limit),
            )
        )
    s = r["sync"]
    floor = s["tree_parse"]
    for key, label, limit in (
        ("full", "full sync, fresh DB", 60),  # issue 20
        ("resync", "unchanged re-sync", 5),
    ):
        run_ = s[key]
        # The process tree's summed peak where it was sampled (a sync's workers included),
        # else the one process's.
        tree = run_.get("tree_rss", -1)
        peak = max(run_["max_rss"], tree)
        base, base_label = (
            (floor["seconds"], "parse tree JSON")
            if key == "full"
            else (s["full"]["seconds"], "full sync")
        )
        out.append(
            Figure(
                f"sync: {label}",
                f"{run_['seconds']:.1f} s, peak RSS {_mib(run_['max_rss'])}"
                + (f", process tree {_mib(tree)}" if tree >= 0 else ""),
                f"{base_label} {base:.1f} s"
                + (f", {_mib(floor['max_rss'])}" if key == "full" else ""),
                f"{run_['seconds'] / base:.2f}x",
                f"<= {limit} s, RSS <= 512 MB",
                _status(run_["seconds"] <= limit and peak <= 512 * MB),
            )
        )
    mem = w["rss_warm"] - w["rss_after_import"]
    jsonl = r["corpus"].get("jsonl_bytes") or 0
    out.append(
        Figure(
            "memory: warm matcher (RSS - RSS after import errkb)",
            f"{mem / 2**20:.0f} MiB",
            f"records.jsonl {jsonl / 2**20:.0f} MiB" if jsonl else "-",
            f"{mem / jsonl:.2f}x" if jsonl else "-",
            "<= 400 MB",
            _status(mem <= 400 * MB),
        )
    )
    after = lib.get("rss_after")
    if after:
        out.append(
            Figure(
                "memory: process RSS after the dense scan",
                f"{after / 2**20:.0f} MiB (peak {_mib(lib['peak_rss'])})",
                f"records.jsonl {jsonl / 2**20:.0f} MiB" if jsonl else "-",
                f"{after / jsonl:.2f}x" if jsonl else "-",
                "<= 400 MB",
                _status(after <= 400 * MB),
            )
        )
    for profile, p in r.get("profiles", {}).items():
        out.append(
            Figure(
                f"accuracy, {profile} log: precision / recall / captures",
                f"{p['precision'] * 100:.3f}% / {p['recall'] * 100:.3f}% / "
                f"{p['capture_accuracy'] * 100:.3f}% ({p['tp']} tp, {p['fp']} fp, {p['fn']} fn, "
                f"{p.get('possible', 0)} generic plants possible)",
                "-",
                "-",
                "100%",
                _status(p["precision"] == p["recall"] == p["capture_accuracy"] == 1),
            )
        )
    a = r["accuracy"]
    cut = lib.get("cut_matches", 0)
    out.append(
        Figure(
            "precision (exact, id + line)",
            f"{a['precision'] * 100:.3f}% ({a['tp']} tp, {a['fp']} fp)",
            "-",
            "-",
            "100%",
            _status(a["precision"] == 1),
        )
    )
    out.append(
        Figure(
            "recall (exact, id + line)",
            f"{a['recall'] * 100:.3f}% ({a['fn']} missed, {a.get('possible', 0)} generic plants "
            "possible)",
            f"the whole report; the default one cut {cut} (named in omitted)" if cut else "-",
            "-",
            "100%",
            _status(a["recall"] == 1),
        )
    )
    out.append(
        Figure(
            "capture accuracy (of true hits)",
            f"{a['capture_accuracy'] * 100:.3f}%",
            "-",
            "-",
            "100%",
            _status(a["capture_accuracy"] == 1),
        )
    )
    return out


def render_table(rows: Sequence[Figure]) -> str:
    """A Markdown table (pastes into BENCHMARKS.md as is)."""
    head = ("Figure", "Value", "Baseline (same run)", "Ratio", "Target", "Status")
    body = [(f.name, f.value, f.baseline, f.ratio, f.target, f.status) for f in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(head), sep, *(line(b) for b in body)])


def report(results: dict[str, Any], show: int) -> str:
    rows = [Figure(**f) for f in results["figures"]]
    a = results["accuracy"]
    out = [render_table(rows), ""]
    if "realistic" in results:
        from bench.accuracy import table, wrong_listing

        columns = results["realistic"]["columns"]
        out += ["Realistic accuracy (bench.accuracy):", "", table(columns), ""]
        for name, col in columns.items():
            out += [f"Wrong exact answers, {name}: {col['wrongCount']}"]
            out += [wrong_listing(col["wrong"], show), ""]
    for title, items in (
        ("False hits", a["false_hits"]),
        ("Misses", a["misses"]),
        ("Wrong captures", a["wrong_captures"]),
    ):
        if not items:
            out.append(f"{title}: none")
            continue
        causes = Counter(
            i.get("cause", "captures differ").split(":")[0].split(" (")[0] for i in items
        )
        out.append(f"{title}: {len(items)} ({', '.join(f'{c}: {n}' for c, n in causes.items())})")
        for item in items[:show]:
            out.append("  " + json.dumps(item, ensure_ascii=False))
        if len(items) > show:
            out.append(f"  ... and {len(items) - show} more (see the results JSON)")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_child"]:
        kind, rest = argv[1], argv[2:]
        if kind == "scan":
            child_scan(*rest)
        elif kind == "sizes":
            child_sizes(*rest)
        elif kind == "warm":
            child_warm(*rest)
        elif kind == "tree":
            child_tree(*rest)
        else:
            raise SystemExit(f"unknown child {kind!r}")
        return
    from bench.corpus import DEFAULT_OUT, DEFAULT_RECORDS, DEFAULT_SEED, QUICK_RECORDS

    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--records", type=int, default=None, help="corpus size (150000)")
    parser.add_argument("--log-mb", type=float, default=None, help="log size in 10^6 bytes (50)")
    parser.add_argument("--quick", action="store_true", help="4,000 records, a 3 MB log")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--rate", type=float, default=100, help="planted errors per MB")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--latency-calls", type=int, default=None)
    parser.add_argument("--cold-runs", type=int, default=None)
    parser.add_argument("--naive-lines", type=int, default=None)
    parser.add_argument("--naive-patterns", type=int, default=None)
    parser.add_argument(
        "--sizes", default="1,10,50,200", help="MB (of a 50 MB log; scaled) for time per MB"
    )
    parser.add_argument("--no-grep", action="store_true")
    parser.add_argument("--no-naive", action="store_true")
    parser.add_argument(
        "--no-accuracy", action="store_true", help="skip the realistic accuracy bench (issue 45)"
    )
    parser.add_argument(
        "--sources", type=Path, default=None, help="its extra packages (--out/sources)"
    )
    parser.add_argument("--show", type=int, default=30, help="misses and false hits to print")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--rev",
        default=None,
        help="measure errkb at this git revision (exported) instead of the working tree",
    )
    args = parser.parse_args(argv)
    q = args.quick
    args.records = args.records or (QUICK_RECORDS if q else DEFAULT_RECORDS)
    args.log_mb = args.log_mb or (3.0 if q else 50.0)
    args.latency_calls = args.latency_calls or (300 if q else 2000)
    args.cold_runs = args.cold_runs or (3 if q else 10)
    args.naive_lines = args.naive_lines or (100 if q else 400)
    args.naive_patterns = args.naive_patterns or (200 if q else 2000)
    global TARGET
    # Turn a kill into an exception, so the exported snapshot and work directory are removed.
    signal.signal(signal.SIGTERM, lambda _s, _f: sys.exit(143))
    snapshot = None
    if args.rev:
        snapshot = Path(tempfile.mkdtemp(prefix="errkb-rev-"))
        TARGET = export_rev(args.rev, snapshot)
    started = time.perf_counter()
    try:
        results = run(args)
    finally:
        if snapshot:
            shutil.rmtree(snapshot, ignore_errors=True)
    results["measured"] = provenance()
    results["args"] = {k: str(v) for k, v in vars(args).items()}
    results["seconds"] = time.perf_counter() - started
    name = f"results-n{args.records}-{args.log_mb:g}mb-s{args.seed}{'-quick' if q else ''}.json"
    path = args.json or args.out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    m = results["measured"]
    print(
        f"errkb measured: {m['errkb']} (HEAD {m['head'][:12]}, uncommitted errkb changes: "
        f"{m['uncommitted_errkb_changes']})"
    )
    print(report(results, args.show))
    print(f"\n(results: {path}; {results['seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
