"""``python -m bench.warm_scan DB LOG... [--repeat 3]``: explain CPU of logs in one process.

The steadier view of "did this change make explain faster" on one machine: the process is
warmed as ``bench.run``'s scan child warms it (two explains of a bundled example, then
``kb.prepare``: the anchor table, the record anchors and the shape pass loaded), then each log
is explained once (the figure ``bench.run`` reports, ``first``) and ``--repeat`` more times
(``warm``: their median, when the spec cache and the record anchors' memos are full). Each line
also prints the sha256 of the report's ``to_dict()`` (its first 12 hex digits), so two
revisions' runs can be compared for the same answer. Run an older revision from its exported
tree (``cd`` there, with ``PYTHONPATH`` set to it): ``python -m`` puts the current directory
first on ``sys.path``, so from this checkout ``PYTHONPATH`` alone still imports this errkb.
Each revision on its own copy of the knowledge base: a revision rewrites anchor files of
another format.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from pathlib import Path

from bench.run import REPO_ROOT

MB = 1_000_000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    import errkb

    example = (REPO_ROOT / "data" / "examples" / "quanto-incompatible-scale.log").read_bytes()
    kb = errkb.open(args.db)
    kb.explain(example)
    kb.explain(example)
    kb.prepare()
    for log in args.logs:
        data = log.read_bytes()
        times: list[float] = []
        digest = ""
        for _ in range(1 + args.repeat):
            cpu = time.process_time()
            report = kb.explain(data)
            times.append(time.process_time() - cpu)
            text = json.dumps(report.to_dict(), sort_keys=True)
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        first, rest = times[0], times[1:]
        warm = statistics.median(rest) if rest else first
        print(
            f"{log.name}: {len(data) / MB:.1f} MB, first {first:.3f} s "
            f"({len(data) / MB / first:.1f} MB/s), warm {warm:.3f} s "
            f"({len(data) / MB / warm:.1f} MB/s), exact {len(report.exact)}, "
            f"to_dict {digest}",
            flush=True,
        )


if __name__ == "__main__":
    main()
