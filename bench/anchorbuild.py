"""Memory and CPU of ``KnowledgeBase.build_anchor_files``, whole or one file at a time.

``python -m bench.anchorbuild DB [all|recordanchors|anchors]``: removes the file(s) the stage
builds, runs the stage in this fresh process and prints its CPU (user+sys), the RSS
before it and the process's VmHWM after, in MiB. Issue 20 bounds the sync process tree.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path


def _status(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    from errkb.kb import open_kb
    from errkb.match.recordanchors import maps_path, record_anchordb_path
    from errkb.match.scan import anchor_path

    db = Path(argv[0])
    stage = argv[1] if len(argv) > 1 else "all"
    kb = open_kb(str(db))
    files = {
        "recordanchors": [record_anchordb_path(db), maps_path(record_anchordb_path(db))],
        "anchors": [anchor_path(db)],
    }
    for name, paths in files.items():
        if stage in ("all", name):
            for path in paths:
                path.unlink(missing_ok=True)
    # Their imports are paid before the measured span (the modules above import them).

    rss0, cpu0, wall0 = _status("VmRSS"), _cpu(), time.monotonic()
    if stage == "all":
        kb.build_anchor_files()
    else:
        with kb.store.snapshot() as view:
            state = view.meta_value("state") or "0"
            kb._engine._cache_for(state)
            if stage == "recordanchors":
                kb._engine._record_anchors(view, state)
            else:
                kb._engine._anchor_table(view, state)
    cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    print(
        f"{stage}: cpu {cpu:.2f} s, wall {wall:.2f} s, rss before {rss0:.0f} MiB, "
        f"VmHWM {_status('VmHWM'):.0f} MiB, rss after {_status('VmRSS'):.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
