"""Tests for errkb.sync.workers: repository files checked in worker processes.

Workers must change nothing but who does the work: the same records stored, the same problems
(naming file, line, record id and JSON path), the same refusals; and a worker killed mid-plan
must stop the sync with one clear SyncError, the store as it was.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from conftest import query
from published import build_tree, hashes, make_record

from errkb.errors import IntegrityError, RecordError, SyncError
from errkb.report import SyncStatus
from errkb.store import open_store
from errkb.sync import Progress, Stage, sync

TESTS = str(Path(__file__).resolve().parent)
V1 = "2026-09-01T00:00:00.000Z"
V2 = "2026-09-02T00:00:00.000Z"
REPOS = 12


def _records(marker: str = "") -> list[dict[str, Any]]:
    return [make_record(n, f"org/repo-{n % REPOS}", marker=marker) for n in range(120)]


def _repo_file(tree: Path, repo: str) -> Path:
    return tree / "data" / "repos" / f"{repo}.json"


@pytest.fixture(scope="module")
def flawed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree where one repository file is JSON Lines with an invalid record on line 2, and
    another holds a line that is not JSON at all."""
    tree = build_tree(tmp_path_factory.mktemp("flawed"), _records(), V1)
    for repo, spoil in (("org/repo-3", "severity"), ("org/repo-7", "syntax")):
        path = _repo_file(tree, repo)
        items = json.loads(path.read_text(encoding="utf-8"))
        lines = [json.dumps(obj) for obj in items]
        if spoil == "severity":
            items[1]["severity"] = "catastrophic"
            lines[1] = json.dumps(items[1])
        else:
            lines[2] = lines[2][:-5]  # cut short: not JSON
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tree


def _stored(db: Path) -> list[tuple[Any, ...]]:
    store = open_store(db)
    try:
        return query(
            store,
            "SELECT id, raw_json, content_hash, retired, dataset_version FROM records ORDER BY id",
        )
    finally:
        store.close()


def _workers_of(pid: int) -> list[int]:
    """The sync worker processes ``pid`` started (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == pid and b"errkb.sync.workers" in cmdline and stat[0] != "Z":
            found.append(int(entry.name))
    return found


def _children_during_repos(seen: list[int]) -> Any:
    def notify(p: Progress) -> None:
        if p.stage is Stage.REPOS and p.done:
            seen.append(len(_workers_of(os.getpid())))

    return notify


def test_workers_store_the_same_records_as_the_calling_process(tmp_path: Path) -> None:
    tree = build_tree(tmp_path / "tree", _records(), V1)
    seen: list[int] = []
    alone = sync(open_store(tmp_path / "alone.sqlite3"), tree, plan_workers=0)
    pooled = sync(
        open_store(tmp_path / "pooled.sqlite3"),
        tree,
        plan_workers=2,
        progress=_children_during_repos(seen),
    )
    assert max(seen) == 2  # the files really were checked by two worker processes
    assert alone.status is pooled.status is SyncStatus.APPLIED
    assert alone.counts == pooled.counts
    assert pooled.counts.added == 120
    rows = _stored(tmp_path / "pooled.sqlite3")
    assert rows == _stored(tmp_path / "alone.sqlite3")
    # The content hash the worker computed is the one the store would compute.
    assert {r[0]: r[2] for r in rows} == hashes(_records())


def test_workers_report_the_same_problems_naming_file_and_line(
    tmp_path: Path, flawed: Path
) -> None:
    refusals = []
    for workers in (0, 2):
        db = tmp_path / f"w{workers}.sqlite3"
        with pytest.raises(RecordError) as err:
            sync(open_store(db), flawed, plan_workers=workers)
        refusals.append((str(err.value), err.value.problems))
        assert _stored(db) == []  # nothing written
    assert refusals[0] == refusals[1]
    problems = refusals[1][1]
    bad_record = json.loads(
        _repo_file(flawed, "org/repo-3").read_text(encoding="utf-8").splitlines()[1]
    )
    severity = [p for p in problems if p.record_id == bad_record["id"]]
    assert len(severity) == 1
    assert severity[0].source.endswith("data/repos/org/repo-3.json")
    assert severity[0].location == "line 2"
    assert severity[0].json_path == "$.severity"
    assert "catastrophic" in severity[0].rule
    broken = [p for p in problems if p.source.endswith("org/repo-7.json")]
    assert broken and broken[0].location == "line 3"

    applied = []
    for workers in (0, 2):
        db = tmp_path / f"skip{workers}.sqlite3"
        report = sync(
            open_store(db),
            flawed,
            plan_workers=workers,
            skip_invalid=True,
            reject_report=tmp_path / f"rejects{workers}.jsonl",
        )
        applied.append((report.counts, report.problems, _stored(db)))
    assert applied[0] == applied[1]
    counts = applied[1][0]
    assert counts.rejected == 1 + 10  # the invalid record, and every record of the broken file
    assert counts.added == 120 - counts.rejected


def test_a_file_failing_the_cross_check_is_refused_as_without_workers(tmp_path: Path) -> None:
    tree = build_tree(tmp_path / "tree", _records(), V1)
    path = _repo_file(tree, "org/repo-5")
    items = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(items[:-1]), encoding="utf-8")  # an indexed id is missing
    messages = []
    for workers in (0, 2):
        with pytest.raises(IntegrityError) as err:
            sync(open_store(tmp_path / f"x{workers}.sqlite3"), tree, plan_workers=workers)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "org/repo-5" in messages[1] and "missing ids listed in the index" in messages[1]


def test_a_worker_killed_mid_plan_stops_the_sync_with_nothing_changed(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    sync(open_store(db), build_tree(tmp_path / "v1", _records(), V1), plan_workers=0)
    before = _stored(db)
    store = open_store(db)
    versions = [v.id for v in store.versions()]
    killed: list[int] = []

    def kill_workers(p: Progress) -> None:
        if p.stage is Stage.REPOS and p.done == 1 and not killed:
            for pid in _workers_of(os.getpid()):
                os.kill(pid, signal.SIGKILL)  # our own worker processes
                killed.append(pid)

    v2 = build_tree(tmp_path / "v2", _records(marker="v2"), V2)
    with pytest.raises(SyncError) as err:
        sync(store, v2, plan_workers=2, progress=kill_workers)
    assert killed
    message = str(err.value)
    assert "worker process" in message and "stopped unexpectedly" in message
    assert message.endswith("nothing changed")
    assert "\n" not in message
    assert _stored(db) == before
    assert [v.id for v in store.versions()] == versions
    # The next sync, with healthy workers, applies the version.
    report = sync(store, v2, plan_workers=2)
    assert report.counts.updated == 120
    store.close()


# No ``if __name__ == "__main__"`` guard, on purpose: workers must not re-run the caller's script.
KILLED_SYNC = """
import sys, time
from pathlib import Path
from errkb.store import open_store
from errkb.sync import Stage, sync
sys.path.insert(0, sys.argv[3])
from test_sync_workers import _workers_of

def progress(p):
    if p.stage is Stage.REPOS and p.done == 1:
        print(" ".join(map(str, _workers_of(os.getpid()))), flush=True)
        time.sleep(600)  # killed here, mid-plan

import os
sync(open_store(Path(sys.argv[1])), sys.argv[2], plan_workers=2, progress=progress)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_a_killed_sync_leaves_no_worker_processes(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    tree = build_tree(tmp_path / "tree", _records(), V1)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_SYNC, str(tmp_path / "kb.sqlite3"), str(tree), TESTS],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        workers = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(pid) for pid in workers)
    finally:
        proc.kill()  # SIGKILL: no chance to stop its workers itself
        proc.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "the killed sync's workers are still running"
        time.sleep(0.1)


def test_a_worker_checks_a_file_against_repos_json_when_there_is_no_index(tmp_path: Path) -> None:
    # In process: the job's text carries repos.json's count across, and the worker applies it.
    from errkb.sync.repofile import Listed
    from errkb.sync.workers import Job, _encode, check_job

    tree = build_tree(tmp_path / "t", _records(), V1, parts_listing="none")
    path = _repo_file(tree, "org/repo-1")
    held = len(json.loads(path.read_text(encoding="utf-8")))

    def run(count: int) -> dict[str, Any]:
        job = Job(path, str(path), "org/repo-1", [], {}, 1 << 20, 10_000, V1, None, Listed(count))
        return dict(json.loads(check_job(_encode(job)).splitlines()[0]))

    assert run(held) == {"problems": [], "bad": [], "broken": False}
    assert run(held + 1) == {"fallback": True}  # a mismatch: the caller judges and refuses


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="stops and continues a process")
def test_results_arrive_whole_while_a_worker_is_stopped_and_continued(tmp_path: Path) -> None:
    # Ctrl-Z and ``fg`` stop and continue the whole process group. CPython's buffered writer
    # lost bytes of a large result written to a full pipe across a stop, and the sync read one
    # result's end as the next one's start ("substring not found"); ``write_all`` must not.
    import threading
    import time

    from errkb.sync.repofile import Listed
    from errkb.sync.workers import Checker, Job, _decode, _encode, check_job

    repo = "org/big"
    tree = build_tree(tmp_path / "t", [make_record(n, repo) for n in range(100)], V1)
    path = _repo_file(tree, repo)
    job = Job(path, str(path), repo, [], {}, 1 << 24, 100_000, V1, None, Listed(None))
    text = check_job(_encode(job))
    expected = _decode(text)
    assert expected is not None and len(text) > 4 * 65536  # more than a full pipe holds
    rounds = 12
    with Checker(1) as checker:
        (pid,) = checker.pids
        stop = threading.Event()

        def hammer() -> None:
            while not stop.is_set():
                os.kill(pid, signal.SIGSTOP)
                time.sleep(0.002)
                os.kill(pid, signal.SIGCONT)
                time.sleep(0.002)

        thread = threading.Thread(target=hammer, daemon=True)
        tickets = [checker.submit(job) for _ in range(rounds)]
        thread.start()
        try:
            got = []
            for ticket in tickets:
                assert ticket is not None
                time.sleep(0.02)  # the worker fills the pipe and blocks, stopped and continued
                got.append(checker.result(ticket, str(path)))
        finally:
            stop.set()
            thread.join()
            os.kill(pid, signal.SIGCONT)
    assert got == [expected] * rounds
