"""An unchanged re-sync of ErrLookup's 1,800 repositories, every one answering 304.

Upstream rewrites published records in place at the same commit, so a sync revalidates every
repository whose commit and ids did not change with a conditional request (issue 23). This
measures what that costs when nothing was rewritten: ``--repos`` repositories (default 1,800,
the real count) of ``--per-repo`` records each are published as V1 on the loopback CDN
emulator (``tests/cdn.py``) and synced; then V2 (a new datasetVersion, the same commits and
files) is published and synced again: every repository file answers 304. Printed as JSON
lines, beside two baselines from the same run: the first (full) sync of V1, and the same
1,800 conditional GETs issued bare through one ``HttpClient`` per worker thread (the floor
the loopback server allows). Target: the re-sync in at most 5 s. Run from the repository
root: ``python -m bench.resync_304``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys
import tempfile
import time
from pathlib import Path

V1 = "2026-09-20T00:00:00.000Z"
V2 = "2026-09-20T01:00:00.000Z"
TARGET_SECONDS = 5.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1800)
    parser.add_argument("--per-repo", type=int, default=2)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    work = Path(tempfile.mkdtemp(prefix="errkb-resync-"))
    os.environ["ERRKB_CACHE_DIR"] = str(work / "cache")
    from cdn import serve_cdn  # the test helpers: imported once sys.path has tests/
    from published import build_tree, make_records

    from errkb.store.sqlite import SqliteStore as Store
    from errkb.sync import sync, transport

    records = make_records(args.repos * args.per_repo, repos=args.repos)
    pinned = {f"org/repo-{k}": {"analyzedSha": f"{k:040x}"} for k in range(args.repos)}
    v1 = build_tree(work / "v1", records, V1, repo_meta=pinned)
    v2 = build_tree(work / "v2", records, V2, repo_meta=pinned)
    with serve_cdn() as cdn:
        cdn.publish(V1, v1)
        store = Store(work / "kb.sqlite3")
        started, cpu = time.monotonic(), time.process_time()
        first = sync(store, cdn.base)
        full = (time.monotonic() - started, time.process_time() - cpu)
        cdn.publish(V2, v2)
        cdn.reset()
        started, cpu = time.monotonic(), time.process_time()
        again = sync(store, cdn.base)
        resync = (time.monotonic() - started, time.process_time() - cpu)
        answered = len(cdn.repo_requests())
        store.close()

        # The floor: the same conditional GETs, nothing else (4 threads, keep-alive).
        etags = {}
        client = transport.HttpClient()
        for k in range(args.repos):
            url = f"{cdn.base}/data/repos/org/repo-{k}.json"
            etags[url] = client.get(url, work / "probe.json", max_bytes=1 << 26).etag
        started = time.monotonic()

        def ask(url: str) -> bool:
            got = client.get(
                url, work / f"probe-{hash(url)}.json", max_bytes=1 << 26, etag=etags[url]
            )
            return got.path is None

        with cf.ThreadPoolExecutor(4) as pool:
            bare = sum(pool.map(ask, etags))
        floor = time.monotonic() - started
        client.close()
    print(
        json.dumps(
            {
                "repos": args.repos,
                "records": len(records),
                "fullSyncSeconds": round(full[0], 2),
                "fullSyncCpuSeconds": round(full[1], 2),
                "added": first.counts.added,
                "resyncSeconds": round(resync[0], 2),
                "resyncCpuSeconds": round(resync[1], 2),
                "revalidated": again.revalidation.to_dict(),
                "repoRequests": answered,
                "bare304Seconds": round(floor, 2),
                "bare304": bare,
                "targetSeconds": TARGET_SECONDS,
                "met": resync[0] <= TARGET_SECONDS,
                "loadAverage": os.getloadavg()[0],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
