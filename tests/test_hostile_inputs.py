"""Hostile inputs to the record reader and to explain: devices, FIFOs, bombs, oversize input.

Each case runs bounded (``tests/hostile.py``): a regression shows up as a failed assertion, not
as a hung or exhausted test machine.
"""

from __future__ import annotations

import gzip
import io
import os
import threading
import zlib
from pathlib import Path

import pytest

from errkb.errors import InputError
from errkb.inputs import read_input, read_stream
from errkb.records.reader import read_file, read_sources
from tests.hostile import run_errkb

MiB = 1 << 20


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("errkb: error:")]
    assert lines, stderr
    return lines[0]


def _bomb(path: Path, inflated: int, fill: bytes = b" ", head: bytes = b"[") -> Path:
    """A gzip file of a few hundred KB that inflates to ``inflated`` bytes."""
    squeeze = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip framing
    block = fill * MiB
    with path.open("wb") as fh:
        fh.write(squeeze.compress(head))
        for _ in range(inflated // MiB):
            fh.write(squeeze.compress(block))
        fh.write(squeeze.flush())
    return path


def test_ingest_dev_zero_fails_fast(tmp_path: Path) -> None:
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", "/dev/zero"], timeout=60)
    assert out.returncode == 2, out
    assert not out.crashed
    assert "/dev/zero: a character device, not a regular file" in _error_line(out.stderr)


def test_ingest_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(fifo)], timeout=60)
    assert out.returncode == 2, out
    assert "a FIFO, not a regular file" in _error_line(out.stderr)


def test_symlink_to_dev_zero_inside_a_tree_is_a_problem_not_a_read(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "repos").mkdir(parents=True)
    (tree / "repos" / "org__repo.json").symlink_to("/dev/zero")
    os.mkfifo(tree / "repos" / "other.json")
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(tree)], timeout=60)
    assert out.returncode == 1, out  # ingest: some sources rejected, listed on stderr
    assert not out.crashed
    assert "org__repo.json" in out.stderr and "a character device" in out.stderr
    assert "other.json" in out.stderr and "a FIFO" in out.stderr


def test_symlink_loop_is_named_as_such(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match=r"loop\.json: symlink loop"):
        list(read_sources([loop]))


def test_gzip_bomb_is_refused_at_the_cap(tmp_path: Path) -> None:
    bomb = _bomb(tmp_path / "repo.json.gz", 96 * MiB)
    assert bomb.stat().st_size < MiB
    [item] = list(read_file(bomb, max_bytes=8 * MiB))
    assert item.problem is not None
    assert "more than 8388608 bytes" in item.problem.rule


@pytest.mark.parametrize("fill", [b" ", b"\0"])
def test_gzip_bomb_ingest_is_bounded(tmp_path: Path, fill: bytes) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    _bomb(tree / "repo.json.gz", 64 * MiB, fill=fill)  # twice the cap set below
    out = run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(tree)],
        env={"ERRKB_MAX_FILE_BYTES": str(32 * MiB)},
        timeout=120,
    )
    assert out.returncode == 1, out
    assert not out.crashed
    assert "more than 33554432 bytes" in out.stderr


@pytest.mark.slow
def test_gzip_bomb_default_cap_within_memory(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    _bomb(tree / "repo.json.gz", 3 << 30, fill=b"\0")  # 3 GiB: the bomb
    out = run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(tree)],
        memory=int(1.5 * (1 << 30)),
        timeout=300,
    )
    assert out.returncode == 1, out
    assert f"more than {256 * MiB} bytes" in out.stderr


def test_read_file_caps_plain_files_too(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b" " * (2 * MiB) + b"]")
    [item] = list(read_file(big, max_bytes=MiB))
    assert item.problem is not None and "more than 1048576 bytes" in item.problem.rule


def test_max_file_bytes_env_must_be_a_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERRKB_MAX_FILE_BYTES", "lots")
    (tmp_path / "a.json").write_text("[]")
    with pytest.raises(InputError, match="ERRKB_MAX_FILE_BYTES"):
        list(read_sources([tmp_path / "a.json"]))


def test_gzip_reader_still_reads_real_gzip(tmp_path: Path, seed_records: dict[str, dict]) -> None:
    import json

    record = next(iter(seed_records.values()))
    path = tmp_path / "r.json.gz"
    path.write_bytes(gzip.compress(json.dumps([record]).encode()))
    [item] = list(read_file(path))
    assert item.problem is None and item.obj["id"] == record["id"]


class _Endless(io.RawIOBase):
    """A stream that never ends; counts what was read from it."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        n = len(buffer)
        buffer[:n] = b"x" * n
        self.served += n
        return n


def test_stream_refused_after_the_cap_plus_a_chunk() -> None:
    endless = _Endless()
    with pytest.raises(InputError, match="input larger than 4194304 bytes"):
        read_stream(io.BufferedReader(endless), "-", limit=4 * MiB)  # type: ignore[arg-type]
    assert endless.served <= 4 * MiB + 2 * MiB


def test_stdin_pipe_refused_without_reading_everything() -> None:
    read_fd, write_fd = os.pipe()
    written = 0

    def feed() -> None:
        nonlocal written
        try:
            with os.fdopen(write_fd, "wb") as out:
                for _ in range(64):
                    out.write(b"y" * MiB)
                    written += MiB
        except BrokenPipeError:
            pass

    feeder = threading.Thread(target=feed)
    feeder.start()
    with os.fdopen(read_fd, "rb") as stdin, pytest.raises(InputError):
        read_input("-", stdin, limit=2 * MiB)
    feeder.join(timeout=30)
    assert written < 16 * MiB


def test_regular_file_over_the_cap_is_refused_from_its_size(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.log"
    with sparse.open("wb") as fh:
        fh.truncate((1 << 30) + 1)  # sparse: nothing is written, nothing should be read
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "explain", str(sparse)], timeout=60)
    assert out.returncode == 2, out
    assert "input larger than 1073741824 bytes" in _error_line(out.stderr)


def test_explain_reads_a_named_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "log"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as fh:
            fh.write(b"nothing to see here\n")

    feeder = threading.Thread(target=feed)
    feeder.start()
    assert read_input(str(fifo)) == b"nothing to see here\n"
    feeder.join(timeout=30)


@pytest.mark.slow
def test_explain_stdin_over_a_gib_is_refused_within_memory(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        out = run_errkb(
            ["--db", str(tmp_path / "kb.sqlite3"), "explain", "-"],
            stdin=zero.fileno(),
            memory=int(1.9 * (1 << 30)),  # the cap plus the interpreter: no room for a 2x copy
            timeout=300,
        )
    assert out.returncode == 2, out
    assert "-: input larger than 1073741824 bytes" in _error_line(out.stderr)


def test_stdin_redirected_from_a_file_over_the_cap_is_refused_from_its_size(
    tmp_path: Path,
) -> None:
    sparse = tmp_path / "huge.log"
    with sparse.open("wb") as fh:
        fh.truncate((1 << 30) + 1)
    with sparse.open("rb") as stdin:
        out = run_errkb(
            ["--db", str(tmp_path / "kb.sqlite3"), "explain", "-"],
            stdin=stdin.fileno(),
            memory=256 * MiB,  # nothing of it is read: no room to hold it either
            timeout=60,
        )
    assert out.returncode == 2, out
    assert "-: input larger than 1073741824 bytes" in _error_line(out.stderr)


def test_a_file_is_read_in_one_buffer_of_its_size(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"x" * (3 * MiB + 5))
    assert read_input(str(path)) == b"x" * (3 * MiB + 5)
    with path.open("rb") as stdin:
        assert read_input("-", stdin) == b"x" * (3 * MiB + 5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"input larger than 3145728 bytes"):
        read_input(str(path), limit=3 * MiB)


#: What ``errkb explain`` maps besides its input, with room to spare: the interpreter with errkb
#: (about 75 MB of address space) and, on a large input, numpy for the record scan's line
#: mapping (about 90 MB more with one BLAS thread; OpenBLAS gives up below that).
EXPLAIN_BASELINE = 256 * MiB


def _explain_bounded(tmp_path: Path, log: Path, *, timeout: float) -> dict:
    import json

    size = log.stat().st_size
    out = run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "explain", str(log), "--format", "json"],
        memory=2 * size + EXPLAIN_BASELINE,
        timeout=timeout,
    )
    assert out.returncode == 1, out.stderr[-2000:]  # nothing known: the bundled sample only
    assert not out.crashed, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow
def test_fifty_megabytes_of_one_error_line_within_twice_the_input(tmp_path: Path) -> None:
    # The case: 3.5 million "ValueError: x" lines took 2.75 GB and 50 s. Repeats of one
    # line are folded into one event as regions are parsed, and like regions are parsed once.
    log = tmp_path / "repeated.log"
    count = 50_000_000 // 14
    log.write_bytes(b"ValueError: x\n" * count)
    report = _explain_bounded(tmp_path, log, timeout=600)
    [entry] = report["unmatched"]
    assert (entry["class"], entry["message"]) == ("ValueError", "x")
    assert entry["occurrences"] == count  # every one counted ...
    assert entry["lines"][:3] == [1, 2, 3]  # ... and the first ones listed
    assert len(entry["lines"]) <= 20_000


def test_repeated_error_lines_scaled_down(tmp_path: Path) -> None:
    # The same attack at 2 MB (past the 1 MiB switch to region parsing), in the default run:
    # bounded memory and every occurrence counted.
    log = tmp_path / "repeated.log"
    count = 2_000_000 // 14
    log.write_bytes(b"ValueError: x\n" * count + b"KeyError: 'the last one'\n")
    report = _explain_bounded(tmp_path, log, timeout=300)
    by_class = {u["class"]: u for u in report["unmatched"]}
    assert by_class["ValueError"]["occurrences"] == count
    assert by_class["KeyError"]["lines"] == [count + 1]  # the real error after them is kept


@pytest.mark.slow
def test_a_line_of_error_words_within_twice_the_input(tmp_path: Path) -> None:
    # The 300 MB of "Error " aborted at 5.3 GB in the keyword pass; 30 MB of it (one
    # line, ten times scaled down) stays within twice the input plus the interpreter.
    log = tmp_path / "words.log"
    log.write_bytes(b"Error " * (30_000_000 // 6) + b"\n")
    report = _explain_bounded(tmp_path, log, timeout=600)
    assert report["matches"] == []


def test_a_device_named_as_explain_input_is_refused_before_reading() -> None:
    # On main /dev/zero was read up to the cap, then refused as too large.
    with pytest.raises(InputError, match=r"/dev/zero: a character device, not a regular file"):
        read_input("/dev/zero", limit=4 * MiB)


def test_a_piped_input_is_held_once_not_twice() -> None:
    import tracemalloc

    size = 24 * MiB
    stream = io.BytesIO(b"a" * size)
    tracemalloc.start()
    try:
        data = read_stream(stream, "-")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data) == size
    # main: the bytearray and its bytes copy, 2x; now the one buffer and its growth slack.
    assert peak < 1.4 * size, peak / size


def test_file_too_large_and_symlink_loops_are_named(tmp_path: Path) -> None:
    import errno

    from errkb.inputs import describe_oserror

    big = OSError(errno.EFBIG, "File too large")
    assert describe_oserror("x.log", big) == "x.log: file too large for this system (EFBIG)"
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match=r"loop\.log: symlink loop"):
        read_input(str(loop))


@pytest.mark.slow
def test_a_flood_of_distinct_tracebacks_is_reported_within_the_limits(tmp_path: Path) -> None:
    # Issue 21's bounded case scaled down: 150,000 tracebacks of distinct unknown exceptions
    # (300,000 shape lines, past the 250,000 any input may have at one per 256 bytes). The
    # region parse they went to held every distinct event at once (3.8 GB and 957 MB of JSON
    # for as many of one record's); the scan counts them all within the input's size.
    log = tmp_path / "distinct.log"
    count = 150_000
    log.write_text(
        "".join(
            "Traceback (most recent call last):\n"
            f'  File "/srv/app/load.py", line {40 + n % 7}, in load\n'
            f"KeyError: 'session_{n}'\n"
            for n in range(count)
        ),
        encoding="utf-8",
    )
    size = log.stat().st_size
    out = run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "explain", str(log), "--format", "json"],
        memory=8 * size + EXPLAIN_BASELINE,
        timeout=600,
    )
    assert out.returncode == 1, out.stderr[-2000:]  # nothing known
    assert not out.crashed, out.stderr[-2000:]
    assert len(out.stdout) < size // 20  # the report, not the log again
    import json

    report = json.loads(out.stdout)
    listed = sum(u["occurrences"] for u in report["unmatched"])
    assert len(report["unmatched"]) == 2_000
    assert listed + report["omitted"]["unmatchedOccurrences"] == count
