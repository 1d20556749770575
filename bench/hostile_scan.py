"""Inputs of issue 50's large-scan rows (12, 13, 14), written for ``/usr/bin/time -v errkb``.

    python -m bench.hostile_scan OUT --records RECORDS.jsonl [--mib 16]

writes into OUT (nothing is committed; the sizes are the issue's at ``--mib 64``):

* ``row12-tracebacks.log``: ``--mib`` of distinct tracebacks of records of RECORDS.jsonl
  (``bench.logs.single_tracebacks``; explain it with a knowledge base of those records);
* ``row12-escapes.log``: ``--mib`` of lines that hit a bundled record's anchors, full of
  backslashes, quotes and ampersands (explain it with the bundled knowledge base);
* ``row13-records.jsonl`` and ``row13.log``: 5,000 records sharing one phrase (made from
  RECORDS.jsonl's first record) and 1 MiB of lines holding the phrase and no record's message;
* ``row14.log``: ``--mib`` of distinct exception-like lines of about 70 bytes (the bundled
  knowledge base; ``errkb triage`` of a folder holding it shows the worker's share).

Then, e.g. ``errkb --db kb13.sqlite3 ingest OUT/row13-records.jsonl`` and
``/usr/bin/time -v errkb --db kb13.sqlite3 explain OUT/row13.log``.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Sequence
from pathlib import Path

PHRASE = "failed to initialize the distributed process group for rank"


def tracebacks(records: Path, out: Path, size: int) -> None:
    from bench.logs import single_tracebacks

    loaded = [json.loads(line) for line in records.open(encoding="utf-8")]
    seen: set[str] = set()
    written = 0
    with out.open("w", encoding="utf-8") as f:
        for seed in range(10_000):  # bounded: each round adds about 1.7 MB of new tracebacks
            for text, _ in single_tracebacks(loaded, 2000, seed=seed):
                if text not in seen:
                    seen.add(text)
                    f.write(text)
                    written += len(text.encode())
            if written >= size:
                return


def escapes(out: Path, size: int) -> None:
    with out.open("w", encoding="utf-8") as f:
        written = k = 0
        while written < size:
            line = (
                f"ValueError: Quanto layer \\'w{k}\\' has incompatible scale &amp; "
                f'\\"x\\" &quot;{k % 977}&quot; \\\\n\n'
            )
            f.write(line)
            written += len(line)
            k += 1


def shared_phrase(records: Path, out_records: Path, out_log: Path, count: int = 5000) -> None:
    from errkb.records import upstream

    with records.open(encoding="utf-8") as f:
        base = json.loads(f.readline())
    with out_records.open("w", encoding="utf-8") as f:
        for k in range(count):
            rec = copy.deepcopy(base)
            message = f"{PHRASE} {{rank}} in variant{k} stage"
            rec["errorMessage"] = message
            rec["messagePattern"] = upstream.message_pattern(message)
            rec["id"] = upstream.record_id(rec["repo"], rec["errorCode"], message, rec["filePath"])
            rec["slug"] = upstream.slug(rec["errorCode"], message)
            f.write(json.dumps(rec) + "\n")
    with out_log.open("w", encoding="utf-8") as f:
        written = k = 0
        while written < 1 << 20:
            line = f"2026-01-01 00:00:{k % 60:02d} INFO {PHRASE} {k} in warmup\n"
            f.write(line)
            written += len(line)
            k += 1


def exception_lines(out: Path, size: int) -> None:
    classes = ("ValueError", "RuntimeError", "KeyError", "TypeError", "OSError", "AssertionError")
    with out.open("w", encoding="utf-8") as f:
        written = k = 0
        while written < size:
            line = f"{classes[k % 6]}: worker {k} failed while loading shard {k * 7 % 1000} of it\n"
            f.write(line)
            written += len(line)
            k += 1


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--records", type=Path, required=True, help="records (JSON Lines)")
    ap.add_argument("--mib", type=int, default=16)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    size = args.mib << 20
    escapes(args.out / "row12-escapes.log", size)
    shared_phrase(args.records, args.out / "row13-records.jsonl", args.out / "row13.log")
    exception_lines(args.out / "row14.log", size)
    tracebacks(args.records, args.out / "row12-tracebacks.log", size)


if __name__ == "__main__":
    main()
