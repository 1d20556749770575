"""Write tiny real safetensors files with the standard library, for the checkpoint tests.

The format is simple enough to write by hand (8-byte little-endian header length, JSON header,
data buffer), and writing it ourselves lets the malformed-file tests break exactly one rule at a
time. Tensor data is zeros unless given (Comfy markers carry JSON bytes).
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from errkb.checkpoint.safetensors import DTYPE_BITS


@dataclass(frozen=True)
class T:
    """One tensor to write: dtype, shape, and optionally its exact bytes."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes | None = None

    def payload(self) -> bytes:
        if self.data is not None:
            return self.data
        bits = math.prod(self.shape) * DTYPE_BITS[self.dtype]
        return bytes(bits // 8)


def marker(obj: object) -> T:
    """A Comfy ``.comfy_quant`` marker tensor: U8 bytes of JSON."""
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return T("U8", (len(raw),), raw)


def frame(header: bytes, data: bytes = b"") -> bytes:
    """Assemble a file from raw header bytes and a data buffer."""
    return struct.pack("<Q", len(header)) + header + data


def build(tensors: Mapping[str, T], metadata: Mapping[str, Any] | None = None) -> bytes:
    """Bytes of a valid safetensors file holding ``tensors`` in the given order."""
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    data = b""
    for name, spec in tensors.items():
        payload = spec.payload()
        header[name] = {
            "dtype": spec.dtype,
            "shape": list(spec.shape),
            "data_offsets": [len(data), len(data) + len(payload)],
        }
        data += payload
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # pad to 8 bytes, as the reference writer does
    return frame(raw, data)


def write(path: Path, tensors: Mapping[str, T], metadata: Mapping[str, Any] | None = None) -> Path:
    """Write a valid safetensors file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(build(tensors, metadata))
    return path


def quanto_metadata(qmap: object) -> dict[str, str]:
    """``__metadata__`` of a self-describing Quanto file carrying ``qmap``."""
    encoded = base64.b64encode(json.dumps(qmap).encode()).decode()
    return {"quantization_format": "quanto", "quantization_map_base64": encoded}


def quanto_layer(
    prefix: str,
    out: int = 4,
    inp: int = 8,
    *,
    scale: T | None = None,
    data: T | None = None,
    aux: T | None = None,
) -> dict[str, T]:
    """The four tensors of one valid Quanto qint8 layer (overridable one by one)."""
    return {
        f"{prefix}.weight._data": data or T("I8", (out, inp)),
        f"{prefix}.weight._scale": scale or T("F32", (out, 1)),
        f"{prefix}.input_scale": aux or T("F32", ()),
        f"{prefix}.output_scale": T("F32", ()),
    }


def comfy_layer(
    prefix: str,
    out: int = 4,
    inp: int = 8,
    *,
    weight: T | None = None,
    scale: T | None = None,
    fmt: str = "int8_tensorwise",
    with_marker: bool = True,
) -> dict[str, T]:
    """One Comfy int8_tensorwise layer: weight, rowwise scale and its marker tensor."""
    tensors = {
        f"{prefix}.weight": weight or T("I8", (out, inp)),
        f"{prefix}.weight_scale": scale or T("F32", (out, 1)),
    }
    if with_marker:
        tensors[f"{prefix}.comfy_quant"] = marker({"format": fmt})
    return tensors
