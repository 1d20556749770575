"""Slow tests: a sync killed with SIGKILL at random moments, and readers running during syncs.

The kill test alternates a 20,000-record knowledge base between two versions that differ in a
eighth of their repositories, killing the syncing process at random moments, mostly inside
the apply transaction (the child says when it starts). Each sync runs in a process forked from a
pre-warmed parent, so twenty runs do not pay twenty interpreter and validator start-ups. After
every kill the database (SQLite, integrity-checked; or PostgreSQL, whose server rolls back the
dead connection's transaction) must hold exactly the old or exactly the new version, and the
next sync must run. The concurrency test runs reader processes calling
``match_message`` and ``explain`` in a loop while syncs flip the version: every answer must be
consistent with one version.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import is_pg
from published import build_tree, hashes, make_record

import errkb
from errkb.errors import SyncLockedError
from errkb.report import SyncStatus
from errkb.store import open_store
from errkb.sync import sync
from tests.test_anchordelta import check_anchor_files

pytestmark = pytest.mark.slow

V1 = "2026-09-01T00:00:00.000Z"
V2 = "2026-09-02T00:00:00.000Z"
RECORDS = 20_000
REPOS = 40
RUNS = 20
RUNS_PG = 10  # each PostgreSQL sync takes longer; the issue asks for ten kills at least
TESTS_DIR = Path(__file__).resolve().parent

# A pre-warmed, single-threaded parent that forks one process per sync: each sync is its own
# process (killed with SIGKILL), without paying errkb's import and validator start-up each time.
ZYGOTE = """
import os, sys
from pathlib import Path
import errkb
from errkb import records
from errkb.store import open_store
from errkb.sync import Stage, sync

sys.path.insert(0, sys.argv[1])
from published import make_record
records.check_record(make_record(0, "org/warm"), source="warm-up")  # build the validator now

for line in sys.stdin:
    command, *args = line.split()
    if command == "REAP":  # only on request: until then the pid cannot be reused
        _, status = os.waitpid(int(args[0]), 0)
        print("EXIT", args[0], os.waitstatus_to_exitcode(status), flush=True)
        continue
    db, tree = args
    pid = os.fork()
    if pid == 0:
        def progress(p):
            if p.stage is Stage.APPLY and p.done == 0:
                print("APPLY", os.getpid(), flush=True)
        try:
            report = sync(open_store(db), tree, allow_downgrade=True, progress=progress)
            print("DONE", os.getpid(), report.status.value, flush=True)
            # Then the files beside the database, as ``KnowledgeBase.sync`` builds them after
            # its commit: a kill may land in their build too.
            with errkb.open(db) as kb:
                kb.build_anchor_files()
        finally:
            os._exit(0)
    print("PID", pid, flush=True)
"""


class Zygote:
    """Drives the ZYGOTE process: start a sync in a fresh fork, wait for its messages."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, str(TESTS_DIR)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start(self, db: str, tree: Path) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"RUN {db} {tree}\n")
        self.proc.stdin.flush()
        return int(self.wait_for("PID", 60)[1])

    def reap(self, pid: int) -> int:
        """Collect a finished (or killed) child: its exit code, -9 when SIGKILL ended it."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"REAP {pid}\n")
        self.proc.stdin.flush()
        return int(self.wait_for("EXIT", 60)[2])

    def wait_for(self, word: str, timeout: float) -> list[str]:
        """The next line starting with ``word`` (others are skipped)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith(word):
                return line.split()
        self.close()
        raise AssertionError(f"never got {word!r}: {self.proc.stderr.read()[-2000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=30)


def _versions() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """v2 changes an eighth of the repositories: every record there, plus 250 out, 250 in."""
    v1 = [make_record(n, f"org/repo-{n % REPOS}") for n in range(RECORDS)]
    v2 = []
    for n in range(RECORDS + RECORDS // 10):
        repo = n % REPOS
        changed = repo % 8 == 0
        if (n < RECORDS // 10 and changed) or (n >= RECORDS and not changed):
            continue  # removed from the changed repositories / added only to them
        v2.append(make_record(n, f"org/repo-{repo}", marker="v2" if changed else ""))
    return v1, v2


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("faults")
    v1, v2 = _versions()
    return {
        V1: build_tree(root / "v1", v1, V1),
        V2: build_tree(root / "v2", v2, V2),
        "hashes": {V1: hashes(v1), V2: hashes(v2)},
        "root": root,
    }


def _check_db(db: str, expected: dict[str, dict[str, str]]) -> str:
    """Integrity-check the database; return which version it holds (exactly)."""
    if is_pg(db):
        return _check_pg(db, expected)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        rows = conn.execute("SELECT id, content_hash FROM records WHERE retired = 0")
        held = {str(rid): str(h) for rid, h in rows}
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        [(last,)] = conn.execute(
            "SELECT dataset_version FROM dataset_versions ORDER BY id DESC LIMIT 1"
        ).fetchall()
    finally:
        conn.close()
    matching = [v for v, h in expected.items() if held == h]
    assert len(matching) == 1, f"database holds neither version exactly ({len(held)} live)"
    assert meta["dataset_version"] == last == matching[0]
    return matching[0]


def _check_pg(url: str, expected: dict[str, dict[str, str]]) -> str:
    """The PostgreSQL side of ``_check_db``: one snapshot, through the store's own reads."""
    store = open_store(url)
    try:
        with store.snapshot() as view:
            inventory = store.inventory()
            meta_version = view.meta_value("dataset_version")
            latest = store.latest_version()
            # The match index agrees with the live records (rebuilt in the same transaction).
            stray = view.conn.execute(  # type: ignore[attr-defined]
                "SELECT count(*) FROM match_tokens m JOIN records r ON r.id = m.record_id "
                "WHERE r.retired"
            ).fetchone()[0]
    finally:
        store.close()
    held = {rid: inventory.hashes[rid] for ids in inventory.live_by_repo.values() for rid in ids}
    matching = [v for v, h in expected.items() if held == h]
    assert len(matching) == 1, f"database holds neither version exactly ({len(held)} live)"
    assert latest is not None and meta_version == latest.dataset_version == matching[0]
    assert stray == 0
    return matching[0]


def _wait_for_sync_lock(db: str) -> None:
    """PostgreSQL frees a killed sync's locks when it notices the connection closed: wait."""
    if not is_pg(db):
        return
    store = open_store(db)
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                with store.sync_lock():
                    return
            except SyncLockedError:
                assert time.monotonic() < deadline, "a killed sync's lock was never released"
                time.sleep(0.05)
    finally:
        store.close()


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    yield z
    z.close()


def test_sigkill_at_random_moments_leaves_old_or_new(
    db_target: str, two_versions: dict[str, Any], zygote: Zygote
) -> None:
    db = db_target
    runs = RUNS_PG if is_pg(db) else RUNS
    expected = two_versions["hashes"]
    pid = zygote.start(db, two_versions[V1])
    zygote.wait_for("DONE", 300)
    assert zygote.reap(pid) == 0
    held = _check_db(db, expected)
    assert held == V1

    # Calibrate: one sync to the other version, uninterrupted, timing its apply phase.
    started = time.monotonic()
    pid = zygote.start(db, two_versions[V2])
    zygote.wait_for("APPLY", 120)
    apply_at = time.monotonic()
    zygote.wait_for("DONE", 120)
    done_at = time.monotonic()
    assert zygote.reap(pid) == 0
    to_apply, apply_time = apply_at - started, done_at - apply_at
    held = _check_db(db, expected)
    assert held == V2

    rng = random.Random(20260901)
    outcomes: list[tuple[str, str]] = []
    # Where the "apply" kills aim: the calibrated transaction, shortened after a kill that
    # came after its commit. The calibration can run on a busier machine than the kills (CI
    # runs this beside other slow tests): once only 3 of 16 kills landed inside it.
    window = apply_time * 1.05
    for run in range(runs):
        target = V1 if held == V2 else V2
        pid = zygote.start(db, two_versions[target])
        if run % 5 == 4:  # anywhere in the run, or just after it finished
            time.sleep(rng.uniform(0, (to_apply + apply_time) * 1.3))
            moment = "anywhere"
        else:  # inside the apply transaction
            zygote.wait_for("APPLY", 120)
            time.sleep(rng.uniform(0, window))
            moment = "apply"
        os.kill(pid, signal.SIGKILL)  # our own unreaped child: never another process
        status = zygote.reap(pid)
        assert status in (-signal.SIGKILL, 0), status  # killed, or it had just finished
        _wait_for_sync_lock(db)
        before, held = held, _check_db(db, expected)
        if not is_pg(db):
            # The anchor files (a base, its delta parts, the masked records) of the current
            # key, where a killed build left them, say what the rows say; else they are refused.
            check_anchor_files(db)
        outcome = "new" if held != before else "old"
        outcomes.append((moment, outcome))
        if moment == "apply":
            window = window * 0.7 if outcome == "new" else min(window * 1.1, apply_time * 1.05)

    # A sync after all that completes, and lands exactly on its version.
    target = V1 if held == V2 else V2
    store = open_store(db)
    report = sync(store, two_versions[target], allow_downgrade=True)
    store.close()
    with errkb.open(db) as kb:
        kb.build_anchor_files()
    assert report.status is SyncStatus.APPLIED
    assert _check_db(db, expected) == target
    assert is_pg(db) or check_anchor_files(db)  # the completed sync left them current
    mid_transaction = [o for o in outcomes if o == ("apply", "old")]
    print(f"\nkills (to apply {to_apply:.1f}s, apply {apply_time:.1f}s): {outcomes}")
    # Enough kills landed inside the transaction (after it began, before it committed).
    assert len(mid_transaction) >= runs // 4, outcomes


READER = """
import json, sys, time
from pathlib import Path
import errkb

db, stop, versions = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
kb = errkb.open(db, bundled=False)
calls, seen, errors = 0, {}, []
while not stop.exists():
    for text, kind in versions["queries"]:
        try:
            if kind == "match":
                report = kb.match_message(text, "ValueError")
            else:
                report = kb.explain(text)
            version = report.dataset_version
            seen[version] = seen.get(version, 0) + 1
            expect = versions["expect"][version]
            got = sorted(
                (m.id, m.record.get("documentation", "")[-6:]) for m in report.exact
            )
            if got != sorted(map(tuple, expect[text])):
                errors.append({"version": version, "text": text, "got": got})
        except Exception as exc:  # any exception is a failure of the test
            errors.append({"exception": repr(exc)})
        calls += 1
print(json.dumps({"calls": calls, "seen": seen, "errors": errors[:20], "n_errors": len(errors)}))
"""


@pytest.fixture
def flip_trees(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two versions of 3,000 records; one record changes content, one exists only in v2."""
    base = [make_record(n, f"org/repo-{n % 6}") for n in range(3000)]
    changed_v1 = make_record(5000, "org/special", marker="v1v1")
    changed_v2 = make_record(5000, "org/special", marker="v2v2")
    only_v2 = make_record(5001, "org/special")
    trees = {
        V1: build_tree(tmp_path / "v1", [*base, changed_v1], V1),
        V2: build_tree(tmp_path / "v2", [*base[:-200], changed_v2, only_v2], V2),
    }
    q1 = "Generated failure number 5000 in layer 'enc.0' of org/special"
    q2 = "Generated failure number 5001 in layer 'enc.1' of org/special"
    q3 = f'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: {q1}'
    tail = only_v2["documentation"][-6:]
    yield {
        "trees": trees,
        "queries": [[q1, "match"], [q2, "match"], [q3, "explain"]],
        "expect": {
            V1: {q1: [[changed_v1["id"], "[v1v1]"]], q2: [], q3: [[changed_v1["id"], "[v1v1]"]]},
            V2: {
                q1: [[changed_v2["id"], "[v2v2]"]],
                q2: [[only_v2["id"], tail]],
                q3: [[changed_v2["id"], "[v2v2]"]],
            },
        },
    }


def test_readers_see_one_consistent_version_during_syncs(
    tmp_path: Path, db_target: str, flip_trees: dict[str, Any]
) -> None:
    db = db_target
    trees = flip_trees["trees"]
    store = open_store(db)
    sync(store, trees[V1])
    stop = tmp_path / "stop"
    spec = json.dumps({k: flip_trees[k] for k in ("queries", "expect")})
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, str(db), str(stop), spec],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(TESTS_DIR)},
        )
        for _ in range(2)
    ]
    try:
        time.sleep(3)  # let the readers open the knowledge base and start looping
        flips = 0
        for _ in range(3):
            for version in (V2, V1):
                report = sync(store, trees[version], allow_downgrade=True)
                assert report.status is SyncStatus.APPLIED
                flips += 1
                time.sleep(0.5)
        store.close()
    finally:
        stop.touch()
    results = []
    for proc in readers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out))
    for result in results:
        assert result["n_errors"] == 0, result["errors"]
        # Both versions were seen by each reader: the syncs really ran under their feet.
        assert result["seen"].get(V1, 0) > 0 and result["seen"].get(V2, 0) > 0, result
    print(f"\n{flips} syncs; readers: {[(r['calls'], r['seen']) for r in results]}")
