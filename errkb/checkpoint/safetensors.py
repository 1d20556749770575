"""A strict reader of safetensors headers, on the standard library alone.

The validators need only what a header declares (dtypes, shapes, ``__metadata__``) and a few
tiny tensors, so errkb reads the format itself (an 8-byte little-endian length, that much
UTF-8 JSON, the data) without numpy or torch. Stricter than the reference (safetensors 0.8):
duplicate keys, a tensor entry with other keys than ``dtype``, ``shape`` and ``data_offsets``,
and ``NaN`` / ``Infinity`` are rejected. Sizes follow the reference: ``end - begin`` equals
``numel * bits / 8``, a sub-byte tensor not a whole number of bytes is "misaligned".

Every malformed file raises one :class:`~errkb.errors.CheckpointError` starting with the path
(and naming the tensor at fault). Parsing is bounded: the length checked against the file size
first, ``MAX_TENSORS``, ``MAX_HEADER_INTS``, ``MAX_INT_DIGITS``, ``MAX_DIMS``, and element
counts checked against the size while multiplied. Only a regular file is opened.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final, TypeGuard

from errkb.errors import CheckpointError
from errkb.inputs import open_regular

#: The reference reader's header size limit ("header too large").
MAX_HEADER_BYTES: Final = 100_000_000

#: Tensors per file (real checkpoints hold thousands; parsing a million costs over a gigabyte).
MAX_TENSORS: Final = 150_000
#: Integers per header (a shape's dimensions and two offsets per tensor, with room to spare).
MAX_HEADER_INTS: Final = 20 * MAX_TENSORS
#: Dimensions per shape (PyTorch allows 64 at most).
MAX_DIMS: Final = 64
#: Digits of any header integer: offsets and dimensions fit in 64 bits (20 digits).
MAX_INT_DIGITS: Final = 20

#: Bits per element of every dtype safetensors 0.8 knows.
DTYPE_BITS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "BOOL": 8,
        "F4": 4,
        "F6_E2M3": 6,
        "F6_E3M2": 6,
        "U8": 8,
        "I8": 8,
        "F8_E5M2": 8,
        "F8_E4M3": 8,
        "F8_E8M0": 8,
        "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8,
        "I16": 16,
        "U16": 16,
        "F16": 16,
        "BF16": 16,
        "I32": 32,
        "U32": 32,
        "F32": 32,
        "C64": 64,
        "F64": 64,
        "I64": 64,
        "U64": 64,
    }
)

_METADATA_KEY: Final = "__metadata__"
_ENTRY_KEYS: Final = ("dtype", "shape", "data_offsets")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as its header entry declares it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]  #: [begin, end) relative to the start of the data buffer

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]


@dataclass(frozen=True)
class SafetensorsHeader:
    """The validated header of one safetensors file."""

    path: Path
    tensors: Mapping[str, TensorInfo] = field(hash=False)  #: in header order
    metadata: Mapping[str, str] | None = field(hash=False)  #: ``__metadata__``, if present
    data_start: int  #: absolute file offset of the data buffer (8 + header length)

    def names(self) -> list[str]:
        """Tensor names, sorted, as ``safe_open(...).keys()`` returns them."""
        return sorted(self.tensors)

    def __contains__(self, name: object) -> bool:
        return name in self.tensors


class _Pairs(tuple[tuple[str, object], ...]):
    """A JSON object kept as its key/value pairs, so duplicate keys can be reported in context."""

    __slots__ = ()


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, _Pairs):
        return "an object"
    return "an array"


def _short(value: object, limit: int = 60) -> str:
    """repr() of a header value, cut short: a hostile header can hold megabytes in one field."""
    text = repr(list(value) if isinstance(value, _Pairs) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fail(path: Path, reason: str) -> CheckpointError:
    return CheckpointError(f"{path}: {reason}")


def _unique(path: Path, pairs: _Pairs, where: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _fail(path, f"duplicate key {key!r} {where}")
        out[key] = value
    return out


def _is_count(value: object) -> TypeGuard[int]:
    """Tell whether a JSON value is a non-negative integer: a valid dimension or offset."""
    # JSON true/false arrive as bool, a subclass of int: never a valid dimension or offset.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse_entry(path: Path, name: str, raw: object) -> TensorInfo:
    where = f"tensor {name!r}"
    if not isinstance(raw, _Pairs):
        raise _fail(path, f"{where}: entry is {_json_type(raw)}, not an object")
    entry = _unique(path, raw, f"in {where}")
    for key in entry:
        if key not in _ENTRY_KEYS:
            raise _fail(path, f"{where}: unknown key {key!r}")
    for key in _ENTRY_KEYS:
        if key not in entry:
            raise _fail(path, f"{where}: missing {key!r}")

    dtype = entry["dtype"]
    if not isinstance(dtype, str):
        raise _fail(path, f"{where}: dtype is {_json_type(dtype)}, not a string")
    if dtype not in DTYPE_BITS:
        raise _fail(path, f"{where}: unknown dtype {dtype!r}")

    raw_shape = entry["shape"]
    if not isinstance(raw_shape, list):
        raise _fail(path, f"{where}: shape is {_json_type(raw_shape)}, not an array")
    if len(raw_shape) > MAX_DIMS:
        raise _fail(path, f"{where}: shape has {len(raw_shape)} dimensions, over {MAX_DIMS}")
    shape: list[int] = []
    for dim in raw_shape:
        if _is_count(dim):
            shape.append(dim)
        elif isinstance(dim, int) and not isinstance(dim, bool):
            raise _fail(path, f"{where}: shape {_short(raw_shape)} has a negative dimension")
        else:
            raise _fail(path, f"{where}: shape {_short(raw_shape)} has a non-integer dimension")

    offsets = entry["data_offsets"]
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise _fail(path, f"{where}: data_offsets must be [begin, end], got {_short(offsets)}")
    begin, end = offsets
    if not (_is_count(begin) and _is_count(end)):
        raise _fail(path, f"{where}: data_offsets {_short(offsets)} must be non-negative integers")
    if end < begin:
        raise _fail(path, f"{where}: data_offsets [{begin}, {end}] end before they begin")

    info = TensorInfo(name=name, dtype=dtype, shape=tuple(shape), data_offsets=(begin, end))
    # Multiplied out with a bound, a zero dimension checked first (it empties the tensor).
    numel, most = (0 if 0 in shape else 1), max(end, 1) * 8
    for dim in shape if numel else ():
        numel *= dim
        if numel > most:
            raise _fail(
                path,
                f"{where}: shape {_short(raw_shape)} has more elements than data_offsets "
                f"[{begin}, {end}] can hold",
            )
    bits = DTYPE_BITS[dtype] * numel
    if bits % 8:
        raise _fail(
            path,
            f"{where}: {info.numel} elements of {dtype} ({DTYPE_BITS[dtype]} bits each) do not "
            "fill a whole number of bytes (safetensors rejects such a misaligned slice)",
        )
    if info.nbytes != bits // 8:
        raise _fail(
            path,
            f"{where}: data_offsets [{begin}, {end}] hold {info.nbytes} bytes but {dtype} "
            f"{tuple(shape)!r} needs {bits // 8}",
        )
    return info


def _parse_metadata(path: Path, raw: object) -> dict[str, str] | None:
    if raw is None:
        return None  # the reference reader accepts "__metadata__": null as "no metadata"
    if not isinstance(raw, _Pairs):
        raise _fail(path, f"__metadata__ is {_json_type(raw)}, not an object")
    metadata = _unique(path, raw, "in __metadata__")
    out: dict[str, str] = {}
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise _fail(
                path, f"__metadata__ value for {key!r} is {_json_type(value)}, not a string"
            )
        out[key] = value
    return out


def _check_coverage(path: Path, tensors: Sequence[TensorInfo], buffer_len: int) -> None:
    """Tensors must tile the data buffer exactly: no byte outside them, none shared."""
    for info in tensors:
        if info.data_offsets[1] > buffer_len:
            raise _fail(
                path,
                f"tensor {info.name!r}: data_offsets end at {info.data_offsets[1]}, past the end "
                f"of the {buffer_len}-byte data buffer",
            )
    expected = 0
    previous: str | None = None
    for info in sorted(tensors, key=lambda t: t.data_offsets):
        begin, end = info.data_offsets
        if begin > expected:
            raise _fail(
                path,
                f"gap in the data buffer: bytes {expected}..{begin} before tensor {info.name!r} "
                "belong to no tensor",
            )
        if begin < expected:
            raise _fail(
                path, f"tensor {info.name!r} overlaps tensor {previous!r} in the data buffer"
            )
        expected = end
        previous = info.name
    if expected != buffer_len:
        raise _fail(
            path,
            f"{buffer_len - expected} bytes at the end of the data buffer belong to no tensor",
        )


class _TooMany(Exception):
    """The header declares more than errkb parses (``reason`` says what)."""


class _Counter:
    """JSON hooks that keep pairs, refuse NaN, and stop parsing past the count limits."""

    def __init__(self) -> None:
        self.objects = 0
        self.ints = 0

    def pairs(self, pairs: list[tuple[str, object]]) -> _Pairs:
        self.objects += 1
        # Every tensor entry is an object; the top level and __metadata__ are two more.
        if self.objects > MAX_TENSORS + 2:
            raise _TooMany(f"header declares more than {MAX_TENSORS} tensors (errkb's limit)")
        return _Pairs(pairs)

    def integer(self, text: str) -> int:
        self.ints += 1
        if self.ints > MAX_HEADER_INTS:
            raise _TooMany(f"header holds more than {MAX_HEADER_INTS} integers (errkb's limit)")
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise _TooMany(
                f"header holds an integer of {len(text)} digits (a dimension or offset has at "
                f"most {MAX_INT_DIGITS})"
            )
        return int(text)


def parse_header(path: Path, header: bytes, buffer_len: int) -> SafetensorsHeader:
    """Validate header bytes already read from ``path``; ``buffer_len`` is the data size."""
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _fail(path, f"header is not valid UTF-8 (byte {error.start})") from None
    if not text.startswith("{"):
        # The reference reader (>= 0.4) insists on this too ("invalid header start").
        raise _fail(path, "header is not a JSON object (it does not start with '{')")
    counter = _Counter()
    try:
        top = json.loads(
            text,
            object_pairs_hook=counter.pairs,
            parse_constant=_reject_constant,
            parse_int=counter.integer,
        )
    except _TooMany as error:
        raise _fail(path, str(error)) from None
    except json.JSONDecodeError as error:
        raise _fail(
            path,
            f"header is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})",
        ) from None
    except RecursionError:
        raise _fail(path, "header JSON is nested too deeply") from None
    except ValueError as error:  # NaN/Infinity, or an integer with too many digits
        raise _fail(path, f"header is not valid JSON: {error}") from None
    if not isinstance(top, _Pairs):
        raise _fail(path, f"header is {_json_type(top)}, not a JSON object")

    seen: set[str] = set()
    metadata: dict[str, str] | None = None
    tensors: dict[str, TensorInfo] = {}
    for key, value in top:
        if key in seen:
            what = "__metadata__" if key == _METADATA_KEY else f"tensor name {key!r}"
            raise _fail(path, f"duplicate {what} in header")
        seen.add(key)
        if key == _METADATA_KEY:
            metadata = _parse_metadata(path, value)
        else:
            tensors[key] = _parse_entry(path, key, value)
    _check_coverage(path, list(tensors.values()), buffer_len)
    return SafetensorsHeader(
        path=path,
        tensors=MappingProxyType(tensors),
        metadata=None if metadata is None else MappingProxyType(metadata),
        data_start=8 + len(header),
    )


def read_header(path: str | Path) -> SafetensorsHeader:
    """Read and validate the header of the safetensors file at ``path`` (CheckpointError if bad)."""
    p = Path(path)
    try:
        with open_regular(p, CheckpointError, "cannot read the file") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise _fail(p, "file is empty")
            if size < 8:
                raise _fail(p, f"file is {size} bytes, too short for the 8-byte header length")
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > MAX_HEADER_BYTES:
                raise _fail(p, f"header length {length} is over the {MAX_HEADER_BYTES}-byte limit")
            if length > size - 8:
                raise _fail(
                    p,
                    f"header length {length} runs past the end of the file "
                    f"({size - 8} bytes follow the length)",
                )
            header = handle.read(length)
    except OSError as error:
        raise _fail(p, f"cannot read the file: {error.strerror or error}") from None
    if len(header) != length:  # the file shrank while we read it
        raise _fail(p, "file ended while reading the header")
    return parse_header(p, header, size - 8 - length)


def read_tensor_bytes(header: SafetensorsHeader, name: str, *, limit: int) -> bytes:
    """Read the raw bytes of one small tensor, refusing any over ``limit``."""
    info = header.tensors[name]
    if info.nbytes > limit:
        raise _fail(
            header.path,
            f"tensor {name!r} is {info.nbytes} bytes; errkb reads at most {limit} bytes of it",
        )
    try:
        with open_regular(header.path, CheckpointError, f"cannot read tensor {name!r}") as handle:
            handle.seek(header.data_start + info.data_offsets[0])
            data = handle.read(info.nbytes)
    except OSError as error:
        raise _fail(
            header.path, f"cannot read tensor {name!r}: {error.strerror or error}"
        ) from None
    if len(data) != info.nbytes:
        raise _fail(header.path, f"file ended while reading tensor {name!r}")
    return data
