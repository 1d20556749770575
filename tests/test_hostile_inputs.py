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
