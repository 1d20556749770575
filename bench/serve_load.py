"""Load on ``errkb serve``: concurrent explain requests while syncs run (issue 12).

``python -m bench.serve_load [--clients 4] [--requests 500] [--records 3000]`` builds a knowledge
base in a temporary directory (the bundled seeds plus ``--records`` variants, as two published
trees whose versions differ), starts ``errkb serve`` on a free loopback port (a real uvicorn
process), and lets ``--clients`` threads each POST one traceback to ``/v1/explain``
``--requests`` times over a keep-alive connection, while another process syncs the knowledge
base back and forth between the two versions as fast as it can. Every answer must be a 200 that
explains the traceback exactly (the record is in both versions); anything else is an error.

Under the same load (the same clients, the same syncs) it measures two baselines: ``GET
/healthz`` (the HTTP transport alone) and ``kb.explain`` called on as many threads in this
process (the library, no HTTP), and the CPU time per request for each route of the server process
and of the server with its worker processes (where explain runs), figures a shared machine
disturbs much less than latency; and the machine's load average before and after. It prints
latency percentiles (target: p99 <= 50 ms for one traceback), errors, ratios to the baselines,
and how many syncs completed while the clients ran. Last, it sends the server SIGTERM half-way
through another such load and counts the requests the server took that were not answered
whole (target 0, and exit 0); it waits for the server's "listening on" line, never for a clock.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.corpus import write_tree
from errkb.records import upstream

ROOT = Path(__file__).resolve().parent.parent
TRACEBACK = ROOT / "data" / "examples" / "quanto-incompatible-scale.log"
EXPECTED = "5c84e15f4be2c1a6"
VERSIONS = ("2026-12-01T00:00:00.000Z", "2026-12-02T00:00:00.000Z")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _errkb(*args: str) -> list[str]:
    return [sys.executable, "-m", "errkb", *args]


def build(work: Path, records: int) -> tuple[Path, list[Path]]:
    """A knowledge base at the first version, and the two trees a sync alternates between."""
    seeds = [json.loads(p.read_text())["record"] for p in sorted((ROOT / "data/dataset").glob("*"))]
    variants = [_variant(seeds[i % len(seeds)], i) for i in range(records)]
    trees = []
    for n, version in enumerate(VERSIONS):
        # The second version drops a tenth of the variants and changes a tenth: a real sync.
        body = [dict(r) for r in variants if n == 0 or hash(r["id"]) % 10 != 0]
        if n:
            for r in body[::10]:
                r["documentation"] += " (revised)"
        tree = work / f"tree{n}"
        write_tree(tree, seeds + body, version)
        trees.append(tree)
    db = work / "kb.sqlite3"
    subprocess.run(_errkb("--db", str(db), "sync", str(trees[0])), check=True, capture_output=True)
    return db, trees


def _variant(base: dict[str, Any], n: int) -> dict[str, Any]:
    """A valid record like ``base`` in another repository, its message one word longer."""
    rec = json.loads(json.dumps(base))
    rec["repo"] = f"bench/load-{n % 97}"
    rec["errorMessage"] = f"Variant{n} {base['errorMessage']}"
    rec["messagePattern"] = upstream.message_pattern(rec["errorMessage"])
    rec["id"] = upstream.record_id(
        rec["repo"], rec["errorCode"], rec["errorMessage"], rec["filePath"]
    )
    rec["slug"] = upstream.slug(rec["errorCode"], rec["errorMessage"])
    return rec


def run(clients: int, requests: int, records: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="errkb-serve-load-") as tmp:
        work = Path(tmp)
        db, trees = build(work, records)
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen(
            _errkb("--db", str(db), "serve", "--port", str(port)),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        body = TRACEBACK.read_bytes()
        try:
            _wait_ready(server)
            with _syncing(db, trees, env) as syncs:
                # Same run, same load (clients and a sync), three floors: the transport alone,
                # the target, and the library called in-process with no HTTP at all.
                healthz = _clients(
                    clients, requests, lambda c: _get(c, "/healthz"), port, server.pid
                )
                explain = _clients(clients, requests, lambda c: _explain(c, body), port, server.pid)
                library = _in_process(db, body, clients, requests)
                stopped = _sigterm_during_load(clients, requests, body, port, server)
            return {
                "clients": clients,
                "records": records + 3,
                "explain": explain,
                "baseline_healthz": healthz,
                "baseline_kb_explain_in_process": library,
                "p99_vs_healthz": _ratio(explain, healthz),
                "p99_vs_in_process": _ratio(explain, library),
                "syncs_completed": syncs["completed"],
                "syncs_failed": syncs["failed"],
                "target_p99_ms": 50,
                "sigterm_during_load": stopped,
                # Latency on a shared machine is mostly its queue: the load average says how
                # loaded it was (the CPU times per request are the figures it disturbs less).
                "machine": {
                    "cpus": os.cpu_count(),
                    "load_average_before": round(load_before, 2),
                    "load_average_after": round(os.getloadavg()[0], 2),
                },
            }
        finally:
            server.terminate()
            server.communicate(timeout=30)


def _wait_ready(server: subprocess.Popen[bytes]) -> None:
    """Until errkb serve prints its readiness marker, the "listening on" line on stderr."""
    assert server.stderr is not None
    while True:
        line = server.stderr.readline()
        if not line:
            raise RuntimeError(f"errkb serve exited: {server.wait()}")
        if b"listening on " in line:
            # The access log goes on on stderr: drain it so the server never blocks on a pipe.
            threading.Thread(target=server.stderr.read, daemon=True).start()
            return


def _sigterm_during_load(
    clients: int, requests: int, body: bytes, port: int, server: subprocess.Popen[bytes]
) -> dict[str, Any]:
    """SIGTERM half-way through a load: every request the server took must be answered whole.

    A request is lost when its response started but did not arrive whole, or came back with
    an error status. One refused at connect, or on a keep-alive connection the server closed
    before reading it (no byte of a response), was never taken: counted apart, as refused.
    """
    answered, lost, refused = 0, [], 0
    lock = threading.Lock()
    half = threading.Event()
    done = [0]

    def client() -> None:
        nonlocal answered, refused
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(requests):
            try:
                conn.request(
                    "POST", "/v1/explain", body=body, headers={"Content-Type": "text/plain"}
                )
                resp = conn.getresponse()
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                with lock:
                    refused += 1
                break  # the server is going away: this client stops
            try:
                data = resp.read()
                ok = resp.status == 200 and EXPECTED in data.decode()
            except (OSError, http.client.IncompleteRead) as exc:
                ok, data = False, repr(exc).encode()
            with lock:
                if ok:
                    answered += 1
                else:
                    lost.append(f"{resp.status}: {data[:120]!r}")
                done[0] += 1
                if done[0] >= clients * requests // 2:
                    half.set()
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    half.wait()
    server.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    code = server.wait(timeout=60)
    return {
        "answered_whole": answered,
        "lost_in_flight": len(lost),
        "first_lost": lost[:3],
        "refused_not_taken": refused,
        "server_exit_code": code,
        "target": "0 lost, exit 0",
    }


@contextlib.contextmanager
def _syncing(db: Path, trees: list[Path], env: dict[str, str]) -> Iterator[dict[str, int]]:
    """Another process syncs ``db`` back and forth between the two trees until the block ends."""
    done = threading.Event()
    syncs = {"completed": 0, "failed": 0}

    def syncer() -> None:
        n = 1
        while not done.is_set():
            proc = subprocess.run(
                _errkb("--db", str(db), "sync", "--allow-downgrade", str(trees[n % 2])),
                env=env, capture_output=True, check=False,
            )  # fmt: skip
            syncs["completed" if proc.returncode == 0 else "failed"] += 1
            n += 1

    thread = threading.Thread(target=syncer)
    thread.start()
    try:
        yield syncs
    finally:
        done.set()
        thread.join()


def _get(conn: http.client.HTTPConnection, path: str) -> str | None:
    conn.request("GET", path)
    resp = conn.getresponse()
    data = resp.read()
    return None if resp.status == 200 else f"status {resp.status}: {data[:200]!r}"


def _explain(conn: http.client.HTTPConnection, body: bytes) -> str | None:
    conn.request("POST", "/v1/explain", body=body, headers={"Content-Type": "text/plain"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status == 200:
        ids = [m["id"] for m in json.loads(data)["matches"] if m["confidence"] == "exact"]
        if EXPECTED in ids:
            return None
    return f"status {resp.status}: {data[:200]!r}"


def _clients(
    clients: int,
    requests: int,
    call: Callable[[http.client.HTTPConnection], str | None],
    port: int,
    pid: int,
) -> dict[str, Any]:
    """``clients`` threads, each making ``requests`` calls over one keep-alive connection."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        for _ in range(requests):
            started = time.perf_counter()
            try:
                error = call(conn)
            except (OSError, ValueError, KeyError, http.client.HTTPException) as exc:
                error = repr(exc)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine.append(time.perf_counter() - started)
            if error is not None:
                with lock:
                    errors.append(error)
        conn.close()
        with lock:
            latencies.extend(mine)

    cpu, tree = _cpu_seconds(pid), _tree_cpu_seconds(pid)
    figures = _timed(clients, client, latencies, errors)
    spent, tree_spent = _cpu_seconds(pid), _tree_cpu_seconds(pid)
    if cpu is not None and spent is not None and latencies:
        figures["server_cpu_ms_per_request"] = round((spent - cpu) / len(latencies) * 1000, 3)
    if tree is not None and tree_spent is not None and latencies:
        # The server and its worker processes (where explain runs): what a request costs.
        used = sum(tree_spent.get(p, 0.0) - tree.get(p, 0.0) for p in tree_spent)
        figures["server_and_workers_cpu_ms_per_request"] = round(used / len(latencies) * 1000, 3)
    return figures


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(pid: int) -> dict[int, float] | None:
    """CPU seconds of ``pid`` and of each of its child processes (the server's workers)."""
    own = _cpu_seconds(pid)
    if own is None:
        return None
    found = {pid: own}
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = [int(p) for p in children.read_text().split()]
        except OSError:
            continue
        for kid in kids:
            spent = _cpu_seconds(kid)
            if spent is not None:
                found[kid] = spent
    return found


def _in_process(db: Path, body: bytes, clients: int, requests: int) -> dict[str, Any]:
    """The floor: ``kb.explain`` on ``clients`` threads of this process, one shared KB."""
    import errkb

    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    text = body.decode("utf-8")
    kb = errkb.open(db, bundled=False)

    def client() -> None:
        mine: list[float] = []
        for _ in range(requests):
            started = time.perf_counter()
            ids = [m.id for m in kb.explain(text).exact]
            mine.append(time.perf_counter() - started)
            if EXPECTED not in ids:
                with lock:
                    errors.append(f"not explained: {ids}")
        with lock:
            latencies.extend(mine)

    try:
        kb.explain(text)
        return _timed(clients, client, latencies, errors)
    finally:
        kb.close()


def _timed(
    clients: int, client: Callable[[], None], latencies: list[float], errors: list[str]
) -> dict[str, Any]:
    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    ms = 1000.0
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:5],
        "seconds": round(wall, 2),
        "requests_per_second": round(len(latencies) / wall, 1),
        "p50_ms": round(percentile(latencies, 50) * ms, 2),
        "p90_ms": round(percentile(latencies, 90) * ms, 2),
        "p99_ms": round(percentile(latencies, 99) * ms, 2),
        "max_ms": round(max(latencies, default=0.0) * ms, 2),
    }


def _ratio(figures: dict[str, Any], baseline: dict[str, Any]) -> float | None:
    base = baseline["p99_ms"]
    return round(figures["p99_ms"] / base, 2) if base else None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=500, help="per client")
    parser.add_argument("--records", type=int, default=3000, help="variants beside the seeds")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.clients, args.requests, args.records), indent=2))


if __name__ == "__main__":
    main()
