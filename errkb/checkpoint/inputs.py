"""Find the safetensors files and the quantization scheme behind what a user points ``check`` at.

An input is a ``.safetensors`` file, a sharded ``*.safetensors.index.json`` (its
``weight_map``), or a model directory (its ``*.safetensors`` and configs); a diffusers pipeline's
component subdirectories are groups of their own. Files are grouped (markers and weights may
sit in different shards). A bad input becomes a :class:`FileError` and the rest is checked.
The scheme says which scales sglang loads as ``PerTensorScaleParameter`` (record
129d60f3f6e5f4e0's precondition).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from errkb.errors import CheckpointError
from errkb.inputs import describe_oserror, open_regular, resolve_path

#: Config files are small; a bigger one is not a config we know.
MAX_CONFIG_BYTES = 16_000_000
INDEX_SUFFIX = ".safetensors.index.json"


@dataclass(frozen=True)
class FileError:
    """An input that could not be checked, and why."""

    path: str
    message: str  #: what is wrong, without the path

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@dataclass(frozen=True)
class QuantScheme:
    """A per-tensor quantization scheme read from a model's config files."""

    name: str  #: e.g. "fp8 (per-tensor, static activations)"
    source: str  #: the config file it was read from
    #: checkpoint scale suffixes sglang loads into a PerTensorScaleParameter
    per_tensor_scales: frozenset[str]


@dataclass(frozen=True)
class CheckpointGroup:
    """Safetensors files checked together, with the scheme their config declares."""

    files: tuple[Path, ...]
    scheme: QuantScheme | None = None
    index: Path | None = None  #: the index file the group came from, if any
    weight_map: Mapping[str, str] | None = field(default=None, hash=False)


def _load_json(path: Path) -> Any:
    """Load a small JSON file; raise CheckpointError naming the file when it is not one."""
    try:
        with open_regular(
            path, CheckpointError, "cannot read the file"
        ) as fh:  # a FIFO would block read_bytes
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_CONFIG_BYTES:
                raise CheckpointError(f"{path}: {size} bytes, more than a config file can be")
            text = fh.read(MAX_CONFIG_BYTES + 1).decode("utf-8")
        if len(text) > MAX_CONFIG_BYTES:
            raise CheckpointError(f"{path}: grew past {MAX_CONFIG_BYTES} bytes while read")
        return json.loads(text)
    except OSError as error:
        raise CheckpointError(f"{path}: cannot read the file: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not valid UTF-8") from None
    except (ValueError, RecursionError) as error:
        raise CheckpointError(f"{path}: not valid JSON: {error}") from None


def read_index(path: Path) -> dict[str, str]:
    """Read the ``weight_map`` of a sharded checkpoint index: tensor name -> shard file name."""
    data = _load_json(path)
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: the index is not a JSON object")
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{path}: the index has no weight_map object")
    out: dict[str, str] = {}
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise CheckpointError(f"{path}: weight_map entry {tensor!r} is not a file name")
        if "\0" in shard:
            raise CheckpointError(
                f"{path}: weight_map entry {tensor!r} names a file with a NUL byte"
            )
        parts = PurePosixPath(shard).parts
        # A shard name is resolved next to the index; it must not climb out of that directory.
        if PurePosixPath(shard).is_absolute() or ".." in parts or "\\" in shard:
            raise CheckpointError(
                f"{path}: weight_map entry {tensor!r} names {shard!r}, outside the index's folder"
            )
        out[tensor] = shard
    return out


def _as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _modelopt_scheme(algo: object, source: str) -> QuantScheme | None:
    if not isinstance(algo, str):
        return None
    # ModelOptFp8LinearMethod: weight_scale and input_scale are PerTensorScaleParameter.
    # ModelOptFp4LinearMethod: weight_scale is a block scale; weight_scale_2 and input_scale
    # are per-tensor. FP8_PER_CHANNEL_PER_TOKEN, W4A8_AWQ, MIXED_PRECISION, ... are not.
    if algo.upper() == "FP8":
        return QuantScheme(
            "ModelOpt FP8 (per-tensor)", source, frozenset({"weight_scale", "input_scale"})
        )
    if algo.upper() == "NVFP4":
        return QuantScheme(
            "ModelOpt NVFP4 (per-tensor global scales)",
            source,
            frozenset({"weight_scale_2", "input_scale"}),
        )
    return None


def _fp8_scheme(qc: Mapping[str, Any], source: str) -> QuantScheme | None:
    if qc.get("weight_block_size"):
        return None  # block-wise fp8 (DeepSeek-style weight_scale_inv): no per-tensor scales
    scales = {"weight_scale"}
    static = qc.get("activation_scheme", "dynamic") == "static"
    if static:
        scales.add("input_scale")
    kind = "static" if static else "dynamic"
    return QuantScheme(f"fp8 (per-tensor, {kind} activations)", source, frozenset(scales))


def _compressed_tensors_scheme(qc: Mapping[str, Any], source: str) -> QuantScheme | None:
    scales: set[str] = set()
    for group in _as_dict(qc.get("config_groups")).values():
        weights = _as_dict(_as_dict(group).get("weights"))
        acts = _as_dict(_as_dict(group).get("input_activations"))
        if weights.get("strategy") == "tensor":
            scales.add("weight_scale")
        if weights.get("strategy") == "tensor_group":
            scales.add("weight_global_scale")  # NVFP4: the global scale is per-tensor
        if acts and not acts.get("dynamic", False):
            if acts.get("strategy") == "tensor":
                scales.add("input_scale")
            if acts.get("strategy") == "tensor_group":
                scales.add("input_global_scale")
    if not scales:
        return None
    return QuantScheme("compressed-tensors (per-tensor)", source, frozenset(scales))


def detect_scheme(
    config: Mapping[str, Any] | None,
    hf_quant_config: Mapping[str, Any] | None,
    *,
    config_source: str = "config.json",
    hf_quant_source: str = "hf_quant_config.json",
) -> QuantScheme | None:
    """The per-tensor scheme a model's configs declare (``config.json`` first), or None."""
    cfg = _as_dict(config)
    qc = (
        _as_dict(cfg.get("quantization_config"))
        or _as_dict(cfg.get("compression_config"))
        or _as_dict(_as_dict(cfg.get("text_config")).get("quantization_config"))
    )
    if qc:
        method = qc.get("quant_method")
        if method == "fp8":
            return _fp8_scheme(qc, config_source)
        if method == "compressed-tensors":
            return _compressed_tensors_scheme(qc, config_source)
        if isinstance(method, str) and method.startswith("modelopt"):
            algo = qc.get("quant_algo") or _as_dict(qc.get("quantization")).get("quant_algo")
            return _modelopt_scheme(algo, config_source)
        return None
    hf = _as_dict(hf_quant_config)
    if hf:
        algo = _as_dict(hf.get("quantization")).get("quant_algo") or hf.get("quant_algo")
        return _modelopt_scheme(algo, hf_quant_source)
    return None


#: Why a file the walk found is not read when the caller confined it (``within``).
OUTSIDE = "resolves outside the allowed directories (a symlink leading out): not read"


def _outside(path: Path, within: Sequence[Path] | None) -> bool:
    """True when ``within`` confines the walk and ``path``, symlinks resolved, leaves it."""
    if within is None:
        return False
    try:
        real = path.resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return True  # a loop or a bad name: nothing under the roots to read
    return not any(real == root or real.is_relative_to(root) for root in within)


def _scheme_for_dir(
    directory: Path, errors: list[FileError], within: Sequence[Path] | None = None
) -> QuantScheme | None:
    configs: dict[str, dict[str, Any] | None] = {}
    for name in ("config.json", "hf_quant_config.json"):
        path = directory / name
        configs[name] = None
        if not path.is_file():
            continue
        if _outside(path, within):
            errors.append(FileError(str(path), OUTSIDE))
            continue
        try:
            data = _load_json(path)
        except CheckpointError as error:
            errors.append(_file_error(path, error))
            continue
        if not isinstance(data, dict):
            errors.append(FileError(str(path), "not a JSON object"))
            continue
        configs[name] = data
    return detect_scheme(
        configs["config.json"],
        configs["hf_quant_config.json"],
        config_source=str(directory / "config.json"),
        hf_quant_source=str(directory / "hf_quant_config.json"),
    )


def _file_error(path: Path, error: CheckpointError) -> FileError:
    return FileError(str(path), str(error).removeprefix(f"{path}: "))


def _safetensors_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.safetensors") if p.is_file())


def _dir_groups(
    directory: Path, errors: list[FileError], within: Sequence[Path] | None
) -> list[CheckpointGroup]:
    # The directory's own files are one checkpoint; each subdirectory with safetensors another.
    files = _safetensors_in(directory)
    scheme = _scheme_for_dir(directory, errors, within)
    groups = [CheckpointGroup(tuple(files), scheme)] if files else []
    for sub in sorted(p for p in directory.iterdir() if p.is_dir()):
        if _outside(sub, within):
            errors.append(FileError(str(sub), OUTSIDE))
        elif sub_files := _safetensors_in(sub):
            groups.append(CheckpointGroup(tuple(sub_files), _scheme_for_dir(sub, errors, within)))
    if not groups:
        errors.append(FileError(str(directory), "no .safetensors files in this directory"))
    return groups


def _missing(path: Path) -> str | None:
    """Why ``path`` cannot be checked at all (absent, a symlink loop), or None."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "no such file or directory"
    except OSError as error:
        return describe_oserror(path, error).removeprefix(f"{path}: ")
    except ValueError:
        return "not a valid file name (NUL byte)"
    return None


def resolve_inputs(
    paths: Sequence[str | Path], *, within: Sequence[Path] | None = None
) -> tuple[list[CheckpointGroup], list[FileError]]:
    """Turn ``check``'s inputs into groups of files; bad inputs become errors, not exceptions.

    Each file once. With ``within``, a path leaving those roots is an error, not read.
    """
    groups: list[CheckpointGroup] = []
    errors: list[FileError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            groups.extend(_dir_groups(path, errors, within))
        elif (missing := _missing(path)) is not None:
            errors.append(FileError(str(path), missing))
        elif path.name.endswith(INDEX_SUFFIX) or path.suffix == ".json":
            try:
                weight_map = read_index(path)
            except CheckpointError as error:
                errors.append(_file_error(path, error))
                continue
            shards = sorted({path.parent / shard for shard in weight_map.values()})
            groups.append(
                CheckpointGroup(
                    tuple(shards),
                    _scheme_for_dir(path.parent, errors, within),
                    index=path,
                    weight_map=MappingProxyType(weight_map),
                )
            )
        else:
            groups.append(CheckpointGroup((path,), _scheme_for_dir(path.parent, errors, within)))

    seen: set[Path] = set()
    unique: list[CheckpointGroup] = []
    for group in groups:
        files = []
        for file in group.files:
            if _outside(file, within):
                errors.append(FileError(str(file), OUTSIDE))
                continue
            try:
                key = resolve_path(file, CheckpointError)
            except CheckpointError:
                key = file  # a symlink loop: reading it reports the loop
            if key not in seen:
                seen.add(key)
                files.append(file)
        if files:
            unique.append(
                CheckpointGroup(tuple(files), group.scheme, group.index, group.weight_map)
            )
    # A config.json read for two groups of one folder is reported once.
    return unique, list(dict.fromkeys(errors))
