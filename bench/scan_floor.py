"""The least a large input's explain costs, piece by piece (issue 21's 45 and 200 MB/s).

``python -m bench.scan_floor DB LOG... [--rounds 3]``: DB is a synced knowledge base (read
only, its anchor files current: run ``errkb --db DB explain`` of a large log once first);
each LOG is explained once, untimed and whole (``limits=None``), for the records it
matches, then each piece of native work the record-driven scan cannot skip is timed alone in
this process (CPU, user + sys, the minimum of ``--rounds``):

* ``anchors``: the anchor pass's Hyperscan scans as shipped (``AnchorDB._raw``: every part
  of ``anchordb.CHUNK_WORDS`` literals over the whole buffer, the gated parts over their
  lines), which must see every byte (a known message may be on any line);
* ``shapes``: the shape pass (``recordscan.shape_lines``, Hyperscan over the whole buffer);
* ``newlines``: the buffer's newline index (numpy), which both passes map hits by;
* ``re2``: compiling, under RE2, the regex of each record the log matched, as a process's
  first scan does (``matcher._compile_or_skip``: RE2 programs cannot be stored, and a record
  that matches must be verified and its captures read);
* ``rows``: reading those records' stored matcher rows (``ReadView.pattern_specs``), without
  which no record can be verified.

Their sum is the least CPU one explain of LOG can take in a fresh process on this machine,
before any line, event or match is handled in Python; the throughput it allows is printed
beside the issue's targets. ``--one-part`` also compiles the anchor pass's plain literals as a
single Hyperscan database (in a child process, whose peak RSS is printed) and times its scan:
what the pass would cost were its compile not split to stay within the sync's memory.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from errkb.match.recordanchors import RecordAnchors

MB = 1_000_000


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _best(rounds: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = _cpu()
        work()
        best = min(best, _cpu() - started)
    return best


def floor_of(db: str, log: Path, rounds: int) -> dict[str, float | int]:
    """Each native piece's CPU seconds for ``log`` (see the module's docstring)."""
    import errkb
    from errkb.match.matcher import _compile_or_skip
    from errkb.match.recordscan import line_index, newline_index, shape_lines

    kb = errkb.open(db, bundled=False)
    kb.prepare()
    data = log.read_bytes()
    report = kb.explain(data, limits=None)  # every match, past the default report's bound
    ids = sorted({m.id for m in report.exact})
    anchors = _record_anchors(kb)
    newlines = newline_index(data)
    to_line = line_index(data, newlines)
    with kb.store.snapshot() as view:
        specs = view.pattern_specs(ids)
        rows = _best(rounds, lambda: view.pattern_specs(ids))
    figures: dict[str, float | int] = {
        "bytes": len(data),
        "matched_records": len(ids),
        "anchors": _best(rounds, lambda: anchors.db._raw(data)),
        "shapes": _best(rounds, lambda: shape_lines(data, to_line, anchors.engine)),
        "newlines": _best(rounds, lambda: newline_index(data)),
        "re2": _best(rounds, lambda: [_compile_or_skip(s) for s in specs]),
        "rows": rows,
    }
    kb.close()
    return figures


def _record_anchors(kb: object) -> RecordAnchors:
    """The knowledge base's record anchors, as its explain loads them."""
    with kb.store.snapshot() as view:  # type: ignore[attr-defined]
        state = view.meta_value("state") or "0"
        return kb._engine._record_anchors(view, state)  # type: ignore[attr-defined,no-any-return]


def plain_literals(db: str, out: Path) -> int:
    """Write the anchor pass's plain literals (those not scanned per gate), one per line."""
    import errkb
    from errkb.match import anchordb

    kb = errkb.open(db, bundled=False)
    anchors = _record_anchors(kb)
    words, ends = anchors.db._encoded(), anchors.db.ends
    plain = [
        w
        for i, w in enumerate(words)
        if not anchordb._short_ended(w, ends[i]) and anchordb.gate_of(w) == anchordb.PLAIN
    ]
    out.write_bytes(b"\n".join(plain))  # a word holds no newline (the blob splits on them)
    return len(plain)


def one_part(literals: Path, logs: list[Path]) -> dict[str, object]:
    """``literals`` as one Hyperscan database: compile CPU and peak RSS, scan CPU per log."""
    import hyperscan

    from errkb.match import anchordb

    plain = literals.read_bytes().split(b"\n")
    count = len(plain)
    chunk, anchordb.CHUNK_WORDS = anchordb.CHUNK_WORDS, count + 1
    try:
        started = _cpu()
        images = list(anchordb._compiled_parts(plain, list(range(count))))
        compiled = _cpu() - started
    finally:
        anchordb.CHUNK_WORDS = chunk
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    database = hyperscan.loadb(images[0], hyperscan.HS_MODE_BLOCK)
    database.scratch = hyperscan.Scratch(database)
    scans = {}
    for log in logs:
        data = log.read_bytes()
        scan = functools.partial(database.scan, data, match_event_handler=_count)
        scans[log.name] = _best(2, scan)
    return {
        "literals": count,
        "compile_cpu": compiled,
        "peak_rss_mib": peak,
        "image_mb": len(images[0]) / MB,
        "scans": scans,
    }


def _count(*_args: object) -> None:
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one-part", action="store_true")
    parser.add_argument("--compile", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile:
        print(json.dumps(one_part(args.compile, args.logs)))
        return
    floors: dict[str, dict[str, float | int]] = {}
    for log in args.logs:
        f = floors[log.name] = floor_of(args.db, log, args.rounds)
        native = _native(f)
        size = int(f["bytes"]) / MB
        print(
            f"{log.name}: {size:.1f} MB, {f['matched_records']} records matched; "
            f"anchor pass {f['anchors']:.3f} s, shape pass {f['shapes']:.3f} s, newlines "
            f"{f['newlines']:.3f} s, RE2 compiles {f['re2']:.3f} s, rows {f['rows']:.3f} s; "
            f"native floor {native:.3f} s = at most {size / native:.1f} MB/s "
            f"(passes alone {size / (float(f['anchors']) + float(f['shapes'])):.1f} MB/s)",
            flush=True,
        )
    if args.one_part:
        with tempfile.TemporaryDirectory() as work:
            literals = Path(work) / "plain.txt"
            plain_literals(args.db, literals)
            # A fresh process: its peak is the compile's own (with the literals), not this
            # one's loads.
            child = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.scan_floor",
                    args.db,
                    *map(str, args.logs),
                    "--compile",
                    str(literals),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
        got = json.loads(child.stdout)
        print(
            f"one database of the {got['literals']} plain literals: compile "
            f"{got['compile_cpu']:.1f} s CPU, peak RSS {got['peak_rss_mib']:.0f} MiB, "
            f"image {got['image_mb']:.1f} MB",
            flush=True,
        )
        for name, scan in got["scans"].items():
            f = dict(floors[name], anchors=scan)  # the gated parts left out: a lower bound
            native = _native(f)
            size = int(f["bytes"]) / MB
            print(
                f"  {name}: its scan {scan:.3f} s; native floor with it {native:.3f} s = at "
                f"most {size / native:.1f} MB/s",
                flush=True,
            )


def _native(figures: dict[str, float | int]) -> float:
    return sum(float(figures[k]) for k in ("anchors", "shapes", "newlines", "re2", "rows"))


if __name__ == "__main__":
    main()
