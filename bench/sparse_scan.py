"""Scan throughput on a log where errors are rare, beside the dense log of ``bench.run``.

``python -m bench.sparse_scan DB [--mb 50]``: builds (in memory, from a fixed seed) a log of
sglang-style INFO lines with one known traceback per ~1,000 lines and an unrelated KeyError
traceback per ~500, then times ``kb.explain`` on it against the knowledge base ``DB`` (for
example the one ``bench.run`` syncs at 150,000 records). It prints MB/s and what was found.
"""

from __future__ import annotations

import argparse
import random
import time

import errkb

WORDS = ("the", "model", "loaded", "shard", "weights", "tensor", "batch", "request", "decode")
KNOWN = [
    "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/linear.py", line 872, '
    "in weight_loader_v2",
    "    raise ValueError(",
    "ValueError: Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
    "got shape ({n},)",
]
OTHER = [
    "Traceback (most recent call last):",
    '  File "/app/y.py", line 3, in f',
    "    g()",
    "KeyError: 'missing'",
]


def build(mb: float, seed: int = 1) -> str:
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while size < mb * 1_000_000:
        r = rng.random()
        if r < 0.001:
            block = [line.format(n=rng.randint(2, 9)) for line in KNOWN]
        elif r < 0.003:
            block = OTHER
        else:
            words = " ".join(rng.choices(WORDS, k=12))
            block = [f"[2026-08-28 05:10:05 TP0] INFO {words} #{rng.randint(0, 99999)}"]
        for line in block:
            lines.append(line)
            size += len(line) + 1
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("db")
    parser.add_argument("--mb", type=float, default=50.0)
    args = parser.parse_args()
    text = build(args.mb)
    kb = errkb.open(args.db)
    kb.explain("warm up")
    start = time.perf_counter()
    report = kb.explain(text)
    elapsed = time.perf_counter() - start
    found = sum(m.occurrences for m in report.exact)
    print(
        f"{len(text) / 1e6:.1f} MB in {elapsed:.2f} s = {len(text) / 1e6 / elapsed:.1f} MB/s; "
        f"{len(report.exact)} known error(s), {found} occurrence(s), "
        f"{len(report.unmatched)} unmatched"
    )


if __name__ == "__main__":
    main()
