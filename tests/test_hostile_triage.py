"""Issue 50, rows 2-4: triage's logs and its ``--baseline`` are untrusted input too.

Each case runs ``errkb triage`` in a child under ``RLIMIT_AS`` and a timeout (``tests/hostile.py``):
a FIFO with no writer among the logs (it hung, ``-j 1`` too), a baseline that is not a triage
report (6.3 GB for huge empty objects, 4.8 GB for huge id lists, a ``RecursionError`` at 100,000
levels, a hang on a FIFO), and compression bombs among the logs with ``-j 2`` (1.6 GB and
``Exception ignored in ... threading``). Each must be one line, the run clean and bounded.
"""

from __future__ import annotations

import bz2
import json
import lzma
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.hostile import Outcome, run_errkb

MiB = 1 << 20


#: One knowledge base per test process, seeded by its first triage (each seeding costs seconds).
_DB: dict[str, Path] = {}


@pytest.fixture(autouse=True, scope="module")
def _shared_db(tmp_path_factory: pytest.TempPathFactory) -> None:
    _DB["db"] = tmp_path_factory.mktemp("kb") / "kb.sqlite3"


def _logs(root: Path) -> Path:
    logs = root / "logs"
    logs.mkdir()
    (logs / "a.log").write_bytes(b"2026-12-07 10:00:00 ERROR ValueError: Grapefruit 7 is sour\n")
    return logs


def _triage(tmp_path: Path, *args: str, memory: int = 1 << 30, timeout: float = 60) -> Outcome:
    """``errkb triage -q --format json ARGS`` in a bounded child.

    With worker processes (``-j 2``) the child is a real interpreter: the pool spawns fresh
    ones, which a forked zygote child does not give them (``tests/zygote.py``).
    """
    argv = [
        "--db",
        str(_DB.get("db", tmp_path / "kb.sqlite3")),
        "triage",
        "-q",
        "--format",
        "json",
        *args,
    ]
    if "-j" in args and args[args.index("-j") + 1] != "1":
        return _spawning(argv, memory=memory, timeout=timeout)
    return run_errkb(argv, memory=memory, timeout=timeout)


def _spawning(argv: list[str], *, memory: int, timeout: float) -> Outcome:
    # prlimit sets the cap before exec (no preexec_fn in a threaded test process); the
    # workers the pool spawns inherit it.
    done = subprocess.run(
        ["prlimit", f"--as={memory}", sys.executable, "-m", "errkb", *argv],
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    return Outcome(done.returncode, done.stdout.decode(), done.stderr.decode())


def _clean(out: Outcome) -> None:
    assert not out.crashed, out.stderr
    assert "Exception ignored" not in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_fifo_without_a_writer_among_the_logs_is_an_error_line(tmp_path: Path, jobs: str) -> None:
    logs = _logs(tmp_path)
    os.mkfifo(logs / "b.log")
    (logs / "c.log").write_bytes(b"ERROR ValueError: Grapefruit 8 is sour\n")
    out = _triage(tmp_path, "-j", jobs, str(logs), timeout=120)
    _clean(out)
    # c.log's unknown error is exit 1, which an unreadable log never hides (exit 3 alone
    # would be "only unreadable logs": the README's precedence).
    assert out.returncode == 1, out
    report = json.loads(out.stdout)
    assert report["errors"] == [
        {"file": str(logs / "b.log"), "reason": "a FIFO, not a regular file"}
    ]
    assert report["logs"] == 3 and len(report["unknown"]) == 1


def _write_baseline(path: Path, body: bytes) -> Path:
    path.write_bytes(body)
    return path


@pytest.mark.parametrize(
    ("name", "body", "reason"),
    [
        # 24 MB of empty objects: 8 million dictionaries before (about 1.4 GB), refused by count.
        ("objects", b'{"known": [' + b"{}," * (8 * MiB) + b'{}], "unknown": []}', "more than"),
        # 24 MB of ids: 4.8 million strings.
        ("ids", b'{"known": [' + b'"id",' * (5 * MiB) + b'"x"], "unknown": []}', "more than"),
        ("deep", b"[" * 100_000 + b"]" * 100_000, "nested deeper than 16 levels"),
        ("open", b'{"known": ' + b"[" * 100_000, "nested deeper than 16 levels"),
        ("scalar", b"17", "a JSON int, not an object"),
        ("shape", b'{"known": [{"id": 5}], "unknown": []}', "known[0] has no string 'id'"),
        ("nan", b'{"known": [], "unknown": [], "x": NaN}', "NaN is not JSON"),
    ],
)
def test_a_baseline_that_is_no_triage_report_is_one_line(
    tmp_path: Path, name: str, body: bytes, reason: str
) -> None:
    baseline = _write_baseline(tmp_path / f"{name}.json", body)
    out = _triage(tmp_path, "-j", "1", "--baseline", str(baseline), str(_logs(tmp_path)))
    _clean(out)
    assert out.returncode == 2, out
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"errkb: error: {baseline}: not a triage JSON report: "), line
    assert reason in line, line


def test_a_fifo_baseline_is_refused_not_waited_for(tmp_path: Path) -> None:
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    out = _triage(tmp_path, "-j", "1", "--baseline", str(fifo), str(_logs(tmp_path)))
    _clean(out)
    assert out.returncode == 2, out
    assert f"{fifo}: a FIFO, not a regular file" in out.stderr


def test_a_real_baseline_still_marks_what_is_new(tmp_path: Path) -> None:
    logs = _logs(tmp_path)
    first = _triage(tmp_path, "-j", "1", str(logs))
    baseline = _write_baseline(tmp_path / "base.json", first.stdout.encode())
    (logs / "b.log").write_bytes(b"ERROR KeyError: Lemon 3 is missing\n")
    again = _triage(tmp_path, "-j", "1", "--baseline", str(baseline), str(logs))
    _clean(again)
    new = {g["template"]: g["new"] for g in json.loads(again.stdout)["unknown"]}
    assert list(new.values()).count(False) == 1 and list(new.values()).count(True) == 1, new


def _gzip_bomb(path: Path, inflated: int) -> None:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as fh:
        for _ in range(inflated // MiB):
            fh.write(squeeze.compress(b"\0" * MiB))
        fh.write(squeeze.flush())


def test_bombs_among_the_logs_are_one_line_each_with_two_workers(tmp_path: Path) -> None:
    logs = _logs(tmp_path)
    _gzip_bomb(logs / "g.log.gz", 24 * MiB)
    (logs / "b.log.bz2").write_bytes(bz2.compress(b"\0" * (24 * MiB)))
    (logs / "x.log.xz").write_bytes(lzma.compress(b"\0" * (24 * MiB)))
    (logs / "n.log.gz").write_bytes(zlib.compress(b"", 9))  # a stray non-gzip: plain bytes
    _gzip_bomb(tmp_path / "inner.gz", 24 * MiB)
    nested = zlib.compressobj(9, zlib.DEFLATED, 31)
    (logs / "nested.log.gz").write_bytes(
        nested.compress((tmp_path / "inner.gz").read_bytes()) + nested.flush()
    )
    # Two workers each at an 8 MiB cap: a bomb costs a worker at most the cap plus a chunk.
    out = _triage(tmp_path, "-j", "2", "--max-log-mib", "8", str(logs), timeout=180)
    _clean(out)
    # The plain logs' unknown errors are exit 1, which unreadable logs never hide.
    report = json.loads(out.stdout)
    assert out.returncode == (1 if report["unknown"] else 3), out
    reasons = {Path(e["file"]).name: e["reason"] for e in json.loads(out.stdout)["errors"]}
    cap = f"decompressed input larger than {8 * MiB} bytes"
    assert reasons == {
        "g.log.gz": cap,
        "b.log.bz2": cap,
        "x.log.xz": cap,
        "nested.log.gz": cap,
        "n.log.gz": "binary data (NUL bytes), not a log",
    }, reasons


def test_a_bad_baseline_is_refused_before_any_log_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb import triage
    from errkb.errors import InputError
    from errkb.triage import pool

    def never(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("logs were read before the baseline was checked")

    monkeypatch.setattr(pool, "run_local", never)
    baseline = _write_baseline(tmp_path / "deep.json", b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(InputError, match="nested deeper than 16 levels"):
        triage.triage([str(_logs(tmp_path))], db=tmp_path / "kb.sqlite3", baseline=str(baseline))
