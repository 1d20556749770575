"""The one opener (``errkb.inputs``): regular files only, sizes and JSON shapes checked first.

Issue 50's generic rule: every file errkb reads goes through ``read_regular`` (no FIFO, device or
socket ever opened blocking; a file over its cap refused from its size) and a JSON file through
``read_json`` (its depth and value count measured on the bytes before the parser allocates a
value). What a compressed input decompresses to costs at most its own size (row 9).
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import re
import tracemalloc
from pathlib import Path

import pytest

from errkb.errors import InputError, UnreadableInputError
from errkb.inputs import (
    JsonBounds,
    decompress_input,
    json_shape_problem,
    read_json,
    read_regular,
    unreadable_kind,
)

MiB = 1 << 20


def test_a_fifo_without_a_writer_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"pipe.log: a FIFO, not a regular file$"):
        read_regular(fifo, MiB, what="log")


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^/dev/zero: a character device, not a regular file$"):
        read_regular("/dev/zero", MiB)
    with pytest.raises(InputError, match=r"a directory, not a regular file$"):
        read_regular(tmp_path, MiB)


def test_a_file_over_the_cap_is_refused_from_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(3 * MiB)  # sparse: a read would take 3 MiB, the refusal takes none
    with pytest.raises(
        InputError, match=rf"big.json: baseline larger than {MiB} bytes \(not read\)$"
    ):
        read_regular(big, MiB, what="baseline")
    assert read_regular(big, 3 * MiB) == b"\x00" * (3 * MiB)


class _Refused(InputError):
    """A caller's own error class."""


def test_the_callers_error_class_is_raised(tmp_path: Path) -> None:
    with pytest.raises(_Refused, match="missing: cannot read: No such file"):
        read_regular(tmp_path / "missing", MiB, error=_Refused)


BOUNDS = JsonBounds(max_bytes=MiB, max_depth=8, max_values=1000)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b'{"a": [1, 2, {"b": "c"}]}', None),
        (b"[" * 8 + b"]" * 8, None),
        (b"[" * 9 + b"]" * 9, "nested deeper than 8 levels"),
        (b"[" * 900 + b"]" * 900, "nested deeper than 8 levels"),
        (b"[" * 900, "nested deeper than 8 levels"),  # unbalanced: never parsed
        (b"[" * 100_000 + b"]" * 100_000, "more than 1000 JSON values"),  # told first
        (b"[" + b"{}," * 1000 + b"{}]", "more than 1000 JSON values"),
        (b'{"known": [' + b'"id",' * 1000 + b'"x"]}', "more than 1000 JSON values"),
        # Brackets, commas and escaped quotes inside strings are text, not structure.
        (b'["' + b"[[[[[[[[[[,,,:{" * 100 + b'\\"]]"]', None),
        (b'["\\\\", "[[[[[[[[[[[["]', None),
        (b"x" * (MiB + 1), f"larger than {MiB} bytes"),
    ],
)
def test_json_shape_is_measured_before_parsing(text: bytes, problem: str | None) -> None:
    assert json_shape_problem(text, BOUNDS) == problem
    if problem is None:
        json.loads(text)  # what passes is what the parser takes within the bounds


def test_read_json_refuses_in_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 500 + b"]" * 500)
    with pytest.raises(InputError) as caught:
        read_json(path, BOUNDS, what="triage JSON report")
    assert str(caught.value) == f"{path}: not a triage JSON report: nested deeper than 8 levels"
    path.write_bytes(b'{"a": NaN}')
    with pytest.raises(InputError, match=r"not a triage JSON report: NaN is not JSON"):
        read_json(path, BOUNDS, what="triage JSON report")
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match=r"not a JSON file: .*utf-8"):
        read_json(path, BOUNDS)
    path.write_bytes(b'{"a": [1, "x"]}')
    assert read_json(path, BOUNDS) == {"a": [1, "x"]}


def _peak(fn: object, *args: object) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = fn(*args)  # type: ignore[operator]
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize("codec", [gzip, lzma])
def test_a_compressed_input_is_held_about_once(codec: object) -> None:
    # Issue 50 row 9: the bytearray and its bytes copy held 1,000 MiB of gzip text twice.
    line = b"2026-12-07 10:00:00 INFO worker 3 step 1200 loss 0.125 lr 3e-4\n"
    text = line * ((40 if codec is gzip else 16) * MiB // len(line))  # lzma compresses slowly
    packed = codec.compress(text)  # type: ignore[attr-defined]
    out, peak = _peak(decompress_input, packed, "x.log.gz")
    assert out == text
    # gzip states its size: one buffer of it; xz does not: the buffer grows by an eighth.
    # (tracemalloc counts a grown buffer's old and new block at once: glibc moves it in place.)
    bound = 1.0 if codec is gzip else 1.45
    assert peak < bound * len(text) + 6 * MiB, peak / len(text)


def test_a_gzip_that_lies_about_its_size_is_still_read_whole_or_capped() -> None:
    packed = bytearray(gzip.compress(b"ValueError: x\n" * 1000))
    packed[-4:] = (5 * MiB).to_bytes(4, "little")  # claims more than it holds
    with pytest.raises(InputError, match=r"damaged gzip data|truncated gzip data"):
        decompress_input(bytes(packed), "x")  # gzip checks its own trailer
    assert decompress_input(gzip.compress(b"a\n" * 10), "x") == b"a\n" * 10


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"PK\x03\x04" + b"\x00" * 30, "a zip archive"),
        (b"7z\xbc\xaf\x27\x1c\x00\x04", "a 7-Zip archive"),
        (b"\x04\x22\x4d\x18" + b"x" * 20, "lz4-compressed data"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 100, "an ELF executable"),
        (b"log.txt".ljust(257, b"\x00") + b"ustar\x0000" + b"\x00" * 300, "a tar archive"),
        (bytes(range(256)) * 16, "binary data (NUL bytes)"),
        (b"\x00" * 4096, "binary data (NUL bytes)"),
    ],
)
def test_what_errkb_cannot_read_is_named(data: bytes, kind: str) -> None:
    assert unreadable_kind(data) == kind
    with pytest.raises(UnreadableInputError, match=f"^ci.bin: {re.escape(kind)}, not a log$"):
        decompress_input(data, "ci.bin")
    with pytest.raises(
        UnreadableInputError, match=f"^ci.bin: {re.escape(kind)} inside gzip data, not a log$"
    ):
        decompress_input(gzip.compress(data), "ci.bin")


@pytest.mark.parametrize(
    "text",
    [
        b"ValueError: x\n",
        b"a log whose writer crashed\n" + b"\x00" * 100 + b"and went on\n" + b"x" * 4000,
        "ValueError: x\n".encode("utf-16-le"),  # PowerShell's > without a BOM
        "ValueError: x\n".encode("utf-16"),
        b"\x00" * 10_000 + b"ValueError: x\n",  # preallocated, then the writer crashed
        b"PK is how this line starts\n",
    ],
)
def test_text_is_not_taken_for_binary(text: bytes) -> None:
    assert unreadable_kind(text) is None
    assert decompress_input(text, "x") is text
