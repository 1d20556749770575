"""Issue 49's decoders under attack: a zstd bomb, a MIME part bomb, unterminated C strings.

Each case runs ``errkb explain`` in a child under ``RLIMIT_AS`` and a timeout
(``tests/hostile.py``), as the other hostile suites do: a bomb is one line at the cap (never the
memory it claims), a mail of a million parts one line before the parser makes a part, and a
log full of unterminated or endless quoted strings is read in bounded memory.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
import zstandard

from errkb.inputs import MAX_INPUT_BYTES
from errkb.parse.mime import MAX_PARTS
from tests.hostile import Outcome, run_errkb

MiB = 1 << 20
#: What the pre-imported interpreter and an explain of a small input map (as in the others).
EXPLAIN_BASELINE = 256 * MiB


def _explain(tmp_path: Path, log: Path, *, memory: int, timeout: float = 120) -> Outcome:
    return run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "explain", "--format", "json", str(log)],
        memory=memory,
        timeout=timeout,
    )


def _zstd_bomb(path: Path, inflated: int, *, inside_gzip: bool = False) -> Path:
    squeeze = zstandard.ZstdCompressor(level=1).compressobj()
    block = b"\0" * (16 * MiB)
    packed = b"".join(squeeze.compress(block) for _ in range(inflated // len(block)))
    packed += squeeze.flush()
    if inside_gzip:
        outer = zlib.compressobj(9, zlib.DEFLATED, 31)
        packed = outer.compress(packed) + outer.flush()
    path.write_bytes(packed)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("inside_gzip", [False, True])
def test_a_zstd_bomb_is_one_line_at_the_explain_cap(tmp_path: Path, inside_gzip: bool) -> None:
    bomb = _zstd_bomb(tmp_path / "bomb.log.zst", 4 << 30, inside_gzip=inside_gzip)
    assert bomb.stat().st_size < 2 * MiB
    out = _explain(
        tmp_path, bomb, memory=MAX_INPUT_BYTES + EXPLAIN_BASELINE + 64 * MiB, timeout=300
    )
    assert out.returncode == 2, out
    assert not out.crashed
    [line] = out.stderr.strip().splitlines()
    assert line == f"errkb: error: {bomb}: decompressed input larger than {MAX_INPUT_BYTES} bytes"


def test_a_zstd_bomb_in_a_worker_s_share_is_refused_at_the_triage_cap(tmp_path: Path) -> None:
    # The default tier's scale: triage's per-log cap set to 8 MiB, the bomb of 256 MiB.
    logs = tmp_path / "logs"
    logs.mkdir()
    bomb = _zstd_bomb(logs / "bomb.log.zst", 256 * MiB, inside_gzip=True)
    out = run_errkb(
        [
            "--db",
            str(tmp_path / "kb.sqlite3"),
            "triage",
            "-q",
            "-j",
            "1",
            "--format",
            "json",
            "--max-log-mib",
            "8",
            str(logs),
        ],
        memory=EXPLAIN_BASELINE + 64 * MiB,
        timeout=120,
    )
    assert out.returncode == 3, out
    assert not out.crashed
    [error] = json.loads(out.stdout)["errors"]
    assert error == {"file": str(bomb), "reason": f"decompressed input larger than {8 * MiB} bytes"}


def test_a_mime_part_bomb_is_one_line_before_a_part_is_made(tmp_path: Path) -> None:
    mail = tmp_path / "bomb.eml"
    head = b'From: a@b\nTo: c@d\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
    mail.write_bytes(head + b"--B\n\nx\n" * 2_000_000)  # 14 MB, two million parts
    out = _explain(tmp_path, mail, memory=EXPLAIN_BASELINE + 3 * mail.stat().st_size)
    assert out.returncode == 2, out
    assert not out.crashed
    assert out.stderr.strip() == (
        f"errkb: error: input is a MIME message of more than {MAX_PARTS} parts; not read"
    )


def test_unterminated_and_endless_c_strings_are_read_in_bounded_memory(tmp_path: Path) -> None:
    log = tmp_path / "strace.log"
    lines = [
        b'100 10:00:00.000001 write(2, "' + b"\\x41" * 4000 + b"\n",  # never closed
        b'101 10:00:00.000002 write(2, "' + b"y" * 4000 + b'", 4000) = 4000\n',  # never ends a line
        b'102 10:00:00.000003 write(2, "\\' + b'"' * 2000 + b'\\n", 1) = 1\n',  # escaped quotes
    ]
    log.write_bytes(b"".join(lines) * 700)  # 8.4 MB
    out = _explain(tmp_path, log, memory=EXPLAIN_BASELINE + 4 * log.stat().st_size, timeout=300)
    assert out.returncode == 1, out.stderr[-2000:]
    assert not out.crashed, out.stderr[-2000:]
