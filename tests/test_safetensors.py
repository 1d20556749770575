from __future__ import annotations

import contextlib
import json
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from checkpoints import T, build, frame, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errkb.checkpoint.safetensors import (
    DTYPE_BITS,
    MAX_HEADER_BYTES,
    read_header,
    read_tensor_bytes,
)
from errkb.errors import CheckpointError
from tests.tiers import examples


def _entry(dtype: Any, shape: Any, begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _json_file(header: Any, data: bytes = b"") -> bytes:
    return frame(json.dumps(header).encode(), data)


# ---------------------------------------------------------------------------------------------
# Valid files


def test_reads_dtypes_shapes_and_metadata(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.safetensors",
        {"b.weight": T("I8", (4, 8)), "a.scale": T("F32", ()), "c.bias": T("BF16", (4,))},
        {"format": "pt"},
    )
    header = read_header(path)
    assert header.path == path
    assert header.metadata == {"format": "pt"}
    assert header.names() == ["a.scale", "b.weight", "c.bias"]  # sorted, as safe_open keys()
    assert list(header.tensors) == ["b.weight", "a.scale", "c.bias"]  # header order kept
    assert header.tensors["b.weight"].shape == (4, 8)
    assert header.tensors["a.scale"].shape == ()
    assert header.tensors["a.scale"].numel == 1
    assert header.tensors["c.bias"].dtype == "BF16"
    assert header.tensors["c.bias"].nbytes == 8
    assert "a.scale" in header and "zzz" not in header


def test_empty_header_and_null_metadata_are_valid(tmp_path: Path) -> None:
    (tmp_path / "e.safetensors").write_bytes(frame(b"{}"))
    assert read_header(tmp_path / "e.safetensors").tensors == {}
    (tmp_path / "n.safetensors").write_bytes(_json_file({"__metadata__": None}))
    assert read_header(tmp_path / "n.safetensors").metadata is None


@pytest.mark.parametrize(
    ("dtype", "shape", "nbytes"),
    [
        ("F4", (2,), 1),
        ("F4", (3, 2), 3),
        ("F6_E2M3", (4,), 3),
        ("F6_E3M2", (2, 4), 6),
        ("BOOL", (3,), 3),
        ("F8_E4M3", (2, 2), 4),
        ("C64", (1,), 8),
        ("U8", (0,), 0),
        ("F32", (0, 5), 0),
    ],
)
def test_sizes_of_every_bit_width(
    tmp_path: Path, dtype: str, shape: tuple[int, ...], nbytes: int
) -> None:
    path = write(tmp_path / "s.safetensors", {"t": T(dtype, shape)})
    info = read_header(path).tensors["t"]
    assert info.nbytes == nbytes
    assert info.shape == shape


def test_every_documented_dtype_is_known() -> None:
    documented = {
        "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
        "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
        "C64", "F64", "I64", "U64",
    }  # fmt: skip
    assert set(DTYPE_BITS) == documented
    assert DTYPE_BITS["F4"] == 4 and DTYPE_BITS["F6_E2M3"] == 6 and DTYPE_BITS["BOOL"] == 8


def test_read_tensor_bytes_seeks_to_the_tensor(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.safetensors",
        {"a": T("F32", (2,)), "m": T("U8", (5,), b"hello"), "z": T("I8", (3,))},
    )
    header = read_header(path)
    assert read_tensor_bytes(header, "m", limit=5) == b"hello"
    with pytest.raises(CheckpointError, match=r"tensor 'm' is 5 bytes; errkb reads at most 4"):
        read_tensor_bytes(header, "m", limit=4)


# ---------------------------------------------------------------------------------------------
# The malformed-file corpus: one broken rule per case, each with its own clear message.

_GOOD_DATA = bytes(16)


def _one(entry: Any, data: bytes = _GOOD_DATA, **extra: Any) -> bytes:
    return _json_file({"t": entry, **extra}, data)


MALFORMED: list[tuple[str, bytes, str]] = [
    ("empty", b"", "file is empty"),
    ("short", b"\x01\x02\x03", "file is 3 bytes, too short for the 8-byte header length"),
    (
        "length-over-limit",
        struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}",
        "header length 100000001 is over the 100000000-byte limit",
    ),
    (
        "length-max-u64",
        b"\xff" * 8 + b"{}",
        "header length 18446744073709551615 is over the 100000000-byte limit",
    ),
    (
        "length-past-end",
        struct.pack("<Q", 64) + b'{"a": 1}',
        "header length 64 runs past the end of the file (8 bytes follow the length)",
    ),
    ("zero-length-header", struct.pack("<Q", 0), "header is not a JSON object"),
    ("not-an-object", frame(b"[1, 2]"), "header is not a JSON object (it does not start with '{')"),
    ("string-header", frame(b'"x"'), "header is not a JSON object"),
    ("invalid-json", frame(b'{"t": '), "header is not valid JSON: Expecting value"),
    ("trailing-garbage", frame(b"{} x"), "header is not valid JSON: Extra data"),
    ("bad-utf8", frame(b'{"\xff": 1}'), "header is not valid UTF-8 (byte 2)"),
    (
        "nan",
        frame(b'{"__metadata__": {"a": NaN}}'),
        "header is not valid JSON: NaN is not valid JSON",
    ),
    (
        "deep-nesting",
        frame(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        "nested too deeply",
    ),
    (
        "metadata-not-object",
        _json_file({"__metadata__": ["a"]}),
        "__metadata__ is an array, not an object",
    ),
    (
        "metadata-non-string",
        _json_file({"__metadata__": {"format": 1}}),
        "__metadata__ value for 'format' is a number, not a string",
    ),
    (
        "metadata-null-value",
        _json_file({"__metadata__": {"format": None}}),
        "__metadata__ value for 'format' is null, not a string",
    ),
    ("entry-not-object", _one([1, 2]), "tensor 't': entry is an array, not an object"),
    ("missing-key", _one({"dtype": "F32", "shape": [4]}), "tensor 't': missing 'data_offsets'"),
    (
        "unknown-key",
        _one({**_entry("F32", [4], 0, 16), "extra": 1}),
        "tensor 't': unknown key 'extra'",
    ),
    ("unknown-dtype", _one(_entry("F128", [4], 0, 16)), "tensor 't': unknown dtype 'F128'"),
    ("lowercase-dtype", _one(_entry("f32", [4], 0, 16)), "tensor 't': unknown dtype 'f32'"),
    (
        "dtype-not-string",
        _one(_entry(32, [4], 0, 16)),
        "tensor 't': dtype is a number, not a string",
    ),
    (
        "shape-not-list",
        _one(_entry("F32", "4", 0, 16)),
        "tensor 't': shape is a string, not an array",
    ),
    (
        "negative-dim",
        _one(_entry("F32", [-4], 0, 16)),
        "tensor 't': shape [-4] has a negative dimension",
    ),
    (
        "float-dim",
        _one(_entry("F32", [4.0], 0, 16)),
        "tensor 't': shape [4.0] has a non-integer dimension",
    ),
    (
        "bool-dim",
        _one(_entry("F32", [True], 0, 4), bytes(4)),
        "shape [True] has a non-integer dimension",
    ),
    ("string-dim", _one(_entry("F32", ["4"], 0, 16)), "shape ['4'] has a non-integer dimension"),
    (
        "offsets-three",
        _one({"dtype": "F32", "shape": [4], "data_offsets": [0, 8, 16]}),
        "tensor 't': data_offsets must be [begin, end], got [0, 8, 16]",
    ),
    (
        "offsets-float",
        _one({"dtype": "F32", "shape": [4], "data_offsets": [0, 16.0]}),
        "tensor 't': data_offsets [0, 16.0] must be non-negative integers",
    ),
    (
        "offsets-negative",
        _one({"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}),
        "data_offsets [-16, 0] must be non-negative integers",
    ),
    (
        "offsets-reversed",
        _one(_entry("F32", [0], 16, 0)),
        "tensor 't': data_offsets [16, 0] end before they begin",
    ),
    (
        "size-mismatch",
        _one(_entry("F32", [2], 0, 16)),
        "tensor 't': data_offsets [0, 16] hold 16 bytes but F32 (2,) needs 8",
    ),
    (
        "sub-byte-misaligned",
        _one(_entry("F4", [3], 0, 2), bytes(2)),
        "tensor 't': 3 elements of F4 (4 bits each) do not fill a whole number of bytes",
    ),
    (
        "offsets-past-end",
        _one(_entry("F32", [8], 0, 32)),
        "tensor 't': data_offsets end at 32, past the end of the 16-byte data buffer",
    ),
    (
        "truncated-data",
        build({"a": T("F32", (4,)), "b": T("F32", (4,))})[:-5],
        "tensor 'b': data_offsets end at 32, past the end of the 27-byte data buffer",
    ),
    (
        "overlap",
        _json_file({"a": _entry("F32", [4], 0, 16), "b": _entry("F32", [2], 8, 16)}, bytes(16)),
        "tensor 'b' overlaps tensor 'a' in the data buffer",
    ),
    (
        "gap",
        _json_file({"a": _entry("F32", [2], 0, 8), "b": _entry("F32", [1], 12, 16)}, bytes(16)),
        "gap in the data buffer: bytes 8..12 before tensor 'b' belong to no tensor",
    ),
    (
        "leading-gap",
        _json_file({"a": _entry("F32", [1], 4, 8)}, bytes(8)),
        "gap in the data buffer: bytes 0..4 before tensor 'a' belong to no tensor",
    ),
    (
        "trailing-bytes",
        _json_file({"a": _entry("F32", [2], 0, 8)}, bytes(12)),
        "4 bytes at the end of the data buffer belong to no tensor",
    ),
    (
        "duplicate-tensor",
        frame(
            b'{"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
            b'"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}',
            b"\x00",
        ),
        "duplicate tensor name 't' in header",
    ),
    (
        "duplicate-entry-key",
        frame(
            b'{"t": {"dtype": "U8", "dtype": "I8", "shape": [1], "data_offsets": [0, 1]}}', b"\x00"
        ),
        "duplicate key 'dtype' in tensor 't'",
    ),
    (
        "duplicate-metadata-key",
        frame(b'{"__metadata__": {"a": "1", "a": "2"}}'),
        "duplicate key 'a' in __metadata__",
    ),
    (
        "duplicate-metadata",
        frame(b'{"__metadata__": {}, "__metadata__": {}}'),
        "duplicate __metadata__ in header",
    ),
    (
        "huge-integer",
        frame(b'{"t": {"dtype": "U8", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 1]}}'),
        "integer of 5000 digits",
    ),
]


@pytest.mark.parametrize(("case", "content", "message"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_file_gives_one_clear_error(
    tmp_path: Path, case: str, content: bytes, message: str
) -> None:
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as caught:
        read_header(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: "), text
    assert message in text


def test_corpus_is_large_enough() -> None:
    assert len(MALFORMED) >= 20


def test_missing_file_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="cannot read the file: No such file"):
        read_header(tmp_path / "nope.safetensors")


def test_a_lying_header_length_allocates_nothing_large(tmp_path: Path) -> None:
    path = tmp_path / "liar.safetensors"
    path.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES) + b"{}" + bytes(6))
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="runs past the end of the file"):
            read_header(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


# ---------------------------------------------------------------------------------------------
# Properties

_DTYPES = st.sampled_from(sorted(d for d, bits in DTYPE_BITS.items() if bits % 8 == 0))
_TENSORS = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(lambda s: s != "__metadata__"),
    st.tuples(_DTYPES, st.lists(st.integers(0, 4), max_size=3).map(tuple)),
    max_size=5,
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("props")


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.too_slow])
@given(
    tensors=_TENSORS, metadata=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5))
)
def test_round_trip(
    scratch: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], metadata: dict[str, str] | None
) -> None:
    path = scratch / "rt.safetensors"
    write(path, {name: T(dtype, shape) for name, (dtype, shape) in tensors.items()}, metadata)
    header = read_header(path)
    assert {n: (t.dtype, t.shape) for n, t in header.tensors.items()} == tensors
    assert header.metadata == metadata


@settings(max_examples=examples(150))
@given(position=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_corrupted_files_only_raise_checkpoint_error(
    scratch: Path, position: int, value: int, cut: int
) -> None:
    good = bytearray(
        build({"a.weight": T("I8", (4, 8)), "a.scale": T("F32", (4, 1))}, {"format": "pt"})
    )
    good[position % len(good)] = value
    path = scratch / "fuzz.safetensors"
    path.write_bytes(bytes(good[: len(good) - cut % 8]))
    try:
        read_header(path)
    except CheckpointError as error:
        assert str(error).startswith(f"{path}: ")


@settings(max_examples=examples(150))
@given(content=st.binary(max_size=64))
def test_random_bytes_only_raise_checkpoint_error(scratch: Path, content: bytes) -> None:
    path = scratch / "random.safetensors"
    path.write_bytes(content)
    with contextlib.suppress(CheckpointError):  # any other exception fails the test
        header = read_header(path)
        assert header.data_start <= len(content)
