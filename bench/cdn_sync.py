"""What a sync of the real dataset costs, estimated on the loopback CDN emulator.

Publishes ``--records`` generated records over ``--repos`` repositories (by default 20,000 over
72: 278 per file, as the real 500,000 over 1,800) with ``tests/published.py``, serves them with
``tests/cdn.py`` on 127.0.0.1 and syncs a fresh database, then prints the sizes (repository
files, index, database), the sync's wall time and peak RSS as JSON lines. The README's cost
estimate scales these figures linearly to 500,000 records. Run from the repository root:
``python -m bench.cdn_sync``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

V1 = "2026-09-01T00:00:00.000Z"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repos", type=int, default=72)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    work = Path(tempfile.mkdtemp(prefix="errkb-cdn-sync-"))
    os.environ["ERRKB_CACHE_DIR"] = str(work / "cache")
    from cdn import serve_cdn  # the test helpers: imported once sys.path has tests/
    from published import build_tree, make_records

    from errkb.store.sqlite import SqliteStore as Store
    from errkb.sync import sync

    started = time.monotonic()
    tree = build_tree(work / "site", make_records(args.records, repos=args.repos), V1)
    data = tree / "data"
    sizes = {
        "records": args.records,
        "repos": args.repos,
        "buildSeconds": round(time.monotonic() - started, 1),
        "repoFilesBytes": sum(p.stat().st_size for p in (data / "repos").rglob("*.json")),
        "indexGzBytes": (data / "index.json.gz").stat().st_size,
        "reposJsonBytes": (data / "repos.json").stat().st_size,
    }
    print(json.dumps(sizes), flush=True)
    with serve_cdn() as cdn:
        cdn.publish(V1, tree)
        store = Store(work / "kb.sqlite3")
        started = time.monotonic()
        report = sync(store, cdn.base)
        elapsed = time.monotonic() - started
        store.close()
    result = {
        "syncSeconds": round(elapsed, 1),
        "dbBytes": sum(p.stat().st_size for p in work.glob("kb.sqlite3*")),
        "added": report.counts.added,
        "bytesDownloaded": report.bytes_downloaded,
        "maxRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "loadAverage": os.getloadavg()[0],
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
