"""``errkb.triage``: many logs, known errors counted per record, unknown ones grouped (issue 26).

The fixture is a directory of small logs made here: the bundled quanto example (timestamped
copies, one gzip), unknown exceptions rendered from three templates with varied values, and
every kind of log that cannot be triaged. The default tier runs the per-log function in-process
(``jobs=1``) and the reduce; worker processes (``-j 2``, a killed worker) are ``slow``.
"""

from __future__ import annotations

import bz2
import gzip
import json
import multiprocessing
import os
import random
import shutil
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

import errkb
from errkb.records import check_record, schema_validator
from errkb.render import OutputFormat, render
from errkb.report.triage import LogResult
from errkb.triage import draft_record, log_times, reduce, triage, triage_log
from errkb.triage.pool import run_local, triage_batch
from errkb.triage.templates import cluster_id
from tests.cli import QUANTO_LOG, run
from tests.conftest import QUANTO_ID

QUANTO = QUANTO_LOG.read_text()
TB = 'Traceback (most recent call last):\n  File "/w/train.py", line {n}, in main\n'
#: Three held-out templates (no record explains them), rendered with varied values.
TEMPLATES = (
    ("RuntimeError", "CUDA out of memory. Tried to allocate {mib} MiB on device cuda:{dev}"),
    ("KeyError", "missing key {key!r} in state dict of shard {shard}/8"),
    ("ValueError", "cannot reshape tensor of size {size} into shape ({rows}, {cols})"),
)


def _unknown(rng: random.Random, k: int) -> tuple[str, str]:
    cls, template = TEMPLATES[k % 3]
    message = template.format(
        mib=rng.randrange(2, 9000),
        dev=rng.randrange(8),
        key=f"layers.{rng.randrange(40)}.mlp.weight",
        shard=rng.randrange(8),
        size=rng.randrange(10, 10**6),
        rows=rng.randrange(1, 512),
        cols=rng.randrange(1, 512),
    )
    return cls, message


def make_fixture(root: Path, logs: int = 12, seed: int = 3) -> dict[str, int]:
    """Write ``logs`` good logs and the bad ones under ``root``; counts of what was planted."""
    rng = random.Random(seed)
    counts = {"quanto_logs": 0, "unknown": 0}
    for i in range(logs):
        name = root / "good" / f"job-{i:03d}.log"
        name.parent.mkdir(parents=True, exist_ok=True)
        stamp = f"2026-08-{10 + i % 9:02d}T05:10:{i % 60:02d}.5Z"
        lines = [f"{stamp} starting job {i}"]
        if i % 3 == 0:
            lines.append(QUANTO)
            counts["quanto_logs"] += 1
        cls, message = _unknown(rng, i)
        lines += [TB.format(n=i + 1) + f"{cls}: {message}", "Got exit code 1", f"+ cleanup {i}"]
        counts["unknown"] += 1
        text = "\n".join(lines) + "\n"
        if i == 3:
            name.with_suffix(".log.gz").write_bytes(gzip.compress(text.encode()))
        elif i == 5:
            name.with_suffix(".log.bz2").write_bytes(bz2.compress(text.encode()))
        else:
            name.write_text(text)
    bad = root / "bad"
    bad.mkdir()
    (bad / "empty.log").write_bytes(b"")
    (bad / "binary.log").write_bytes(bytes(range(256)) * 16)
    (bad / "damaged.log.gz").write_bytes(gzip.compress(random.randbytes(5000))[:400])
    (bad / "huge.log").write_bytes(b"ValueError: x\n" * 100_000)
    if os.geteuid() != 0:  # root reads a mode-0 file
        unreadable = bad / "unreadable.log"
        unreadable.write_text("ValueError: secret\n")
        unreadable.chmod(0)
    return counts


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, _seeded_template: Path) -> Path:
    path = tmp_path_factory.mktemp("kb") / "kb.sqlite3"
    shutil.copyfile(_seeded_template, path)
    return path


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("logs")
    return root, make_fixture(root)


LIMIT = 1 << 20  # huge.log (1.4 MB) is over it


@pytest.fixture(scope="module")
def report(db: Path, logs: tuple[Path, dict[str, int]]) -> errkb.triage.TriageReport:  # type: ignore[name-defined]
    return triage([str(logs[0])], db=db, jobs=1, limit=LIMIT)


def test_known_errors_are_counted_per_record(report, logs) -> None:  # type: ignore[no-untyped-def]
    (known,) = report.known
    assert known.id == QUANTO_ID
    assert known.logs == logs[1]["quanto_logs"] == 4
    assert known.occurrences == 2 * known.logs  # the cause and its wrapper, in every log
    assert len(known.files) == 4 and any(f.endswith(".gz") for f in known.files)
    # The logs' own timestamps (the quanto example's and the planted ones), in UTC.
    assert known.first_seen is not None and known.last_seen is not None
    assert known.first_seen <= known.last_seen
    assert dict(known.captures)["scale_shape"] == ("(4096,)",)
    assert known.diagnoses and "reshape it" in known.diagnoses[0]


def test_unknown_messages_group_by_template_with_stable_ids(report, logs) -> None:  # type: ignore[no-untyped-def]
    assert sum(u.count for u in report.unknown) == logs[1]["unknown"]
    assert len(report.unknown) == 3, [u.template for u in report.unknown]
    templates = {u.error_class: u.template for u in report.unknown}
    assert templates["RuntimeError"] == (
        "CUDA out of memory. Tried to allocate <*> MiB on device cuda:<*>"
    )
    assert templates["KeyError"] == "missing key <*> in state dict of shard <*>"
    assert templates["ValueError"] == "cannot reshape tensor of size <*> into shape <*>"
    for u in report.unknown:
        assert u.cluster == cluster_id(u.error_class, u.template)
        # The noise after each traceback is not in its message (the parser fix of issue 26).
        assert all("Got exit code" not in e.message for e in u.examples)
        assert len(u.values) == sum("<*>" in word for word in u.template.split())
        assert all(len(slot) > 1 for slot in u.values)  # each slot's values did vary
        assert u.examples == tuple(sorted(u.examples, key=lambda e: (e.file, e.line)))


def test_every_bad_log_is_one_error_line_and_the_run_goes_on(report) -> None:  # type: ignore[no-untyped-def]
    reasons = {Path(e.file).name: e.reason for e in report.errors}
    assert "empty.log" not in reasons  # empty is read, and clean: not an error line
    assert [Path(f).name for f in report.empty] == ["empty.log"]
    assert reasons["binary.log"] == "binary data (NUL bytes), not a log"
    assert reasons["damaged.log.gz"] == "truncated gzip data"
    assert reasons["huge.log"] == f"log larger than {LIMIT} bytes (not read)"
    if os.geteuid() != 0:  # root reads a mode-0 file
        assert reasons["unreadable.log"].startswith("cannot read: Permission denied")
    assert all("\n" not in r for r in reasons.values())
    assert report.logs == 12 + 4 + (os.geteuid() != 0)
    assert report.exit_code == 1  # unknown errors found: an unreadable log does not hide them


def test_json_matches_the_schema_and_rows_the_row_schema(report) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(render(report, OutputFormat.JSON))
    schema_validator("triage.schema.json").validate(data)
    rows = [json.loads(line) for line in render(report, OutputFormat.JSONL).splitlines()]
    row_schema = schema_validator("triage-row.schema.json")
    for row in rows:
        row_schema.validate(row)
    assert sum(r["kind"] == "known" for r in rows) == report.known[0].occurrences
    assert sum(r["kind"] == "unknown" for r in rows) == sum(u.count for u in report.unknown)
    csv_lines = render(report, OutputFormat.CSV).splitlines()
    assert csv_lines[0] == "file,line,kind,id,class,message"
    assert len(csv_lines) == len(rows) + 1


def test_the_reduce_does_not_depend_on_the_order_of_results(db: Path, logs) -> None:  # type: ignore[no-untyped-def]
    root = logs[0] / "good"
    with errkb.open(db) as kb:
        results = [triage_log(kb, str(p)) for p in sorted(root.iterdir())]
    texts = []
    for seed in range(3):
        shuffled = list(results)
        random.Random(seed).shuffle(shuffled)
        # Through JSON, as results cross processes.
        shuffled = [LogResult.from_dict(json.loads(json.dumps(r.to_dict()))) for r in shuffled]
        texts.append(render(reduce(shuffled), OutputFormat.JSON))
    assert texts[0] == texts[1] == texts[2]


def test_baseline_marks_what_is_new(tmp_path: Path, db: Path, logs, report) -> None:  # type: ignore[no-untyped-def]
    base = tmp_path / "previous.json"
    old = report.to_dict()
    old["unknown"] = old["unknown"][1:]  # one cluster was not there yesterday
    old["known"] = []
    base.write_text(json.dumps(old))
    again = triage([str(logs[0] / "good")], db=db, jobs=1, baseline=str(base))
    assert [u.new for u in again.unknown] == [
        u.cluster == report.unknown[0].cluster for u in again.unknown
    ]
    assert all(k.new for k in again.known)
    with pytest.raises(errkb.InputError, match="No such file"):
        triage([str(logs[0] / "good")], db=db, jobs=1, baseline=str(tmp_path / "none.json"))


def test_log_times_prefer_the_logs_own_stamps_else_mtime() -> None:
    data = b"2026-08-28T05:10:05.123+02:00 a\nnoise\n2026-08-28 06:00:00 b\n"
    assert log_times(data, 0.0) == ("2026-08-28T03:10:05.123000Z", "2026-08-28T06:00:00.000000Z")
    assert log_times(b"no stamps here\n", 86400.0) == ("1970-01-02T00:00:00.000000Z",) * 2


def test_a_draft_record_from_a_group_is_a_valid_record(report) -> None:  # type: ignore[no-untyped-def]
    for group in report.unknown:
        draft = draft_record(group, repo="acme/trainer")
        checked = check_record(draft, source="draft")
        assert not checked.problems, checked.problems
        assert "{value_1}" in draft["errorMessage"] and "draft" in draft["tags"]


def test_cli_exit_codes(tmp_path: Path, db: Path, logs) -> None:  # type: ignore[no-untyped-def]
    good = run(db, "triage", "-q", "--format", "json", str(logs[0] / "good"))
    assert good.exit_code == 1  # unknown errors found
    assert json.loads(good.output)["logs"] == 12
    only_known = tmp_path / "known"
    only_known.mkdir()
    (only_known / "a.log").write_text(QUANTO)
    assert run(db, "triage", "-q", str(only_known)).exit_code == 0
    empty = run(db, "triage", "-q", str(logs[0] / "bad" / "empty.log"), str(only_known))
    assert empty.exit_code == 0 and "1 empty" in empty.output  # empty is not unreadable
    bad = run(db, "triage", "-q", str(logs[0] / "bad" / "binary.log"), str(only_known))
    assert bad.exit_code == 3 and "binary data" in bad.output
    # Unknown errors and an unreadable log: 1, the finding wins; the report says both.
    both = run(db, "triage", "-q", str(logs[0] / "bad" / "binary.log"), str(logs[0] / "good"))
    assert both.exit_code == 1 and "binary data" in both.output and "1 unreadable" in both.output
    drafts = tmp_path / "drafts.jsonl"
    assert run(db, "triage", "-q", "--drafts", str(drafts), str(logs[0] / "good")).exit_code == 1
    assert len(drafts.read_text().splitlines()) == 3


@pytest.mark.slow
def test_worker_processes_give_the_same_report(db: Path, logs, report) -> None:  # type: ignore[no-untyped-def]
    parallel = triage([str(logs[0])], db=db, jobs=2, limit=LIMIT)
    assert render(parallel, OutputFormat.JSON) == render(report, OutputFormat.JSON)
    assert parallel.rows == report.rows


@pytest.mark.slow
def test_a_killed_worker_is_reported_and_its_logs_retried(db: Path, logs, report) -> None:  # type: ignore[no-untyped-def]
    killed: list[int] = []

    def kill_one(done: int, total: int, nbytes: int) -> None:
        if not killed:
            for child in multiprocessing.active_children():
                if child.pid is not None:
                    os.kill(child.pid, signal.SIGKILL)
                    killed.append(child.pid)
                    break

    survived = triage([str(logs[0])], db=db, jobs=2, limit=LIMIT, progress=kill_one)
    assert killed and survived.workers_lost >= 1
    same = survived.to_dict() | {"workersLost": 0}
    assert same == report.to_dict()


class _CrashingKb:
    """A knowledge base whose explain fails as a bug would (not an ErrkbError)."""

    def explain(self, data: bytes) -> object:
        raise RuntimeError(f"boom after {len(data)} bytes")


def test_a_crash_inside_explain_is_that_logs_error_line(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    text = "2026-08-10T05:10:00Z ValueError: x\n"
    log.write_text(text)
    result = triage_log(_CrashingKb(), str(log))  # type: ignore[arg-type]
    assert result.error == f"explain failed: RuntimeError: boom after {len(text)} bytes"
    assert result.first == "2026-08-10T05:10:00.000000Z"
    folded = reduce([result])
    assert [(e.file, e.reason) for e in folded.errors] == [(str(log), result.error)]
    assert folded.exit_code == 3


def _dies_on_poison(paths: Sequence[str], db: str | None, limit: int) -> list[str]:
    """A worker's task that kills its process on ``poison.log``, as an OOM kill would."""
    if any(p.endswith("poison.log") for p in paths):
        os._exit(137)
    return triage_batch(paths, db, limit)


@pytest.mark.slow
def test_a_log_that_kills_its_worker_twice_is_an_error_line(db: Path, tmp_path: Path) -> None:
    for name in ("a.log", "poison.log", "b.log"):
        (tmp_path / name).write_text(QUANTO)
    files = sorted(str(p) for p in tmp_path.iterdir())
    results, lost = run_local(files, db=db, jobs=2, limit=LIMIT, task=_dies_on_poison)
    by_file = {Path(r.file).name: r for r in results}
    assert sorted(by_file) == ["a.log", "b.log", "poison.log"]  # every log once
    # The first pool, the retry pool, and the one-worker pool that tells the guilty log.
    assert lost == 3
    assert by_file["poison.log"].error == (
        "worker process died twice while reading this log (killed or crashed)"
    )
    assert by_file["a.log"].error is None and by_file["a.log"].known  # retried, then triaged
    assert by_file["b.log"].error is None and by_file["b.log"].known


MAT = "RuntimeError: mat1 and mat2 shapes cannot be multiplied ({} and {})\n"


def _log(folder: Path, name: str, *messages: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(
        "".join(f"step\nTraceback (most recent call last):\n{m}" for m in messages)
    )


@pytest.mark.parametrize(
    "later",
    [
        [("128x4096", "1024x512")],  # the same template, other values
        [("2x3", "5x6"), ("7x7", "9x1")],  # several, each other values
    ],
)
def test_a_baseline_cluster_is_recognised_when_its_values_vary(
    tmp_path: Path, db: Path, later: list[tuple[str, str]]
) -> None:
    _log(tmp_path / "monday", "job.log", MAT.format("4x8", "16x32"))
    monday = triage([str(tmp_path / "monday")], db=db, jobs=1)
    (group,) = monday.unknown
    base = tmp_path / "monday.json"
    base.write_text(render(monday, OutputFormat.JSON))
    _log(tmp_path / "tuesday", "job.log", *(MAT.format(a, b) for a, b in later))
    tuesday = triage([str(tmp_path / "tuesday")], db=db, jobs=1, baseline=str(base))
    (again,) = tuesday.unknown
    assert not again.new and again.baseline_clusters == (group.cluster,)
    assert tuesday.exit_code == 0  # nothing new: a gate passes
    assert again.cluster == cluster_id(again.error_class, again.template)  # the id stays a hash
    schema_validator("triage.schema.json").validate(json.loads(render(tuesday, OutputFormat.JSON)))


def test_another_template_of_the_same_class_is_still_new(tmp_path: Path, db: Path) -> None:
    _log(tmp_path / "monday", "job.log", MAT.format("4x8", "16x32"))
    base = tmp_path / "monday.json"
    base.write_text(render(triage([str(tmp_path / "monday")], db=db, jobs=1), OutputFormat.JSON))
    _log(
        tmp_path / "tuesday", "job.log", "RuntimeError: CUDA error: device-side assert triggered\n"
    )
    tuesday = triage([str(tmp_path / "tuesday")], db=db, jobs=1, baseline=str(base))
    (new,) = tuesday.unknown
    assert new.new and new.baseline_clusters == () and tuesday.exit_code == 1
