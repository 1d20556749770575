"""Reference validator for sglang's Comfy INT8 rowwise marker inspection (record b9825390f5c3ae68).

Reproduces ``inspect_comfy_quant_markers`` (sglang ``quantization_utils.py``, commit 0132848)
over a group of safetensors files, with upstream's exact messages and order: (1) per file, the
``_quantization_metadata`` layers, then each tensor in sorted order and its ``.comfy_quant``
marker (a layer marked twice differently conflicts); (2) every F8_E4M3 / I8 / U8 ``.weight``
has a marker; (3) per ``int8_tensorwise`` marker: weight and scale exist, an I8 weight with an
F32 ``()`` scale is tensorwise (2-D), else I8 and F32 and the record's condition (a 2-D weight,
a ``(rows, 1)`` scale); (4) no collision after name mapping. First failure wins, unless
``all_layers`` (each layer's first failure). Newer sglang's W4A4 / NVFP4 / W4A8 / MXFP8
branches are not this record.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from errkb.validators.base import (
    Condition,
    Diagnosis,
    Finding,
    FunctionValidator,
    Group,
    Rule,
    format_shape,
    is_shape,
    numel,
    parse_capture,
)

# The checkpoint readers are named for types only: explain imports this module.
if TYPE_CHECKING:
    from errkb.checkpoint.safetensors import SafetensorsHeader

#: The validator's name: ``Finding.check`` of its findings.
NAME = "comfy"
RECORD_ID = "b9825390f5c3ae68"
UPSTREAM = "sglang inspect_comfy_quant_markers"
#: Real markers are a few dozen bytes; a bigger "marker" is not read.
MAX_MARKER_BYTES = 1_000_000
MARKED_WEIGHT_DTYPES = frozenset({"F8_E4M3", "I8", "U8"})

CAPTURE_PREFIX = "prefix"
CAPTURE_WEIGHT = "weight_shape"
CAPTURE_SCALE = "scale_shape"


def _rule(rule_id: str, template: str, record_id: str | None = None, name: str = "") -> Rule:
    return Rule(rule_id, name or rule_id, record_id, NAME, template)


INVALID_METADATA = _rule("comfy.invalid-metadata", "Invalid _quantization_metadata in {path}")
METADATA_NOT_OBJECT = _rule(
    "comfy.metadata-not-object", "_quantization_metadata in {path} must contain an object"
)
METADATA_NO_LAYERS = _rule(
    "comfy.metadata-no-layers", "_quantization_metadata in {path} must contain a layers object"
)
LAYER_NOT_OBJECT = _rule(
    "comfy.layer-metadata-not-object",
    "Comfy quantization metadata for {prefix!r} must be an object",
)
CONFLICT = _rule(
    "comfy.conflicting-markers", "Conflicting Comfy quantization markers for {prefix!r}"
)
INVALID_MARKER = _rule(
    "comfy.invalid-marker", "Invalid Comfy quantization marker {key!r} in {path}"
)
MARKER_NOT_OBJECT = _rule(
    "comfy.marker-not-object", "Comfy quantization marker {key!r} must contain a JSON object"
)
MISSING_MARKERS = _rule(
    "comfy.missing-markers",
    "Quantized weights are missing comfy_quant metadata: {sorted(missing_markers)[:5]}",
)
MISSING_TENSORS = _rule(
    "comfy.missing-tensors",
    "Comfy layer {prefix!r} is missing checkpoint tensors: {sorted(missing)}",
)
TENSORWISE_NOT_2D = _rule(
    "comfy.tensorwise-weight-not-2d",
    "Comfy tensorwise INT8 layer {prefix!r} needs a 2D weight, got {weight_shape}",
)
DTYPES = _rule(
    "comfy.int8-dtypes",
    "Comfy INT8 layer {prefix!r} needs I8 weights and F32 scales, got {weight_dtype} and "
    "{scale_dtype}",
)
INCOMPATIBLE_SHAPES = _rule(
    RECORD_ID,
    "Comfy INT8 layer {prefix!r} has incompatible weight/scale shapes: {weight_shape} and "
    "{scale_shape}",
    record_id=RECORD_ID,
    name="comfy.incompatible-shapes",
)
MAPPED_COLLISION = _rule(
    "comfy.mapped-collision", "Comfy markers collide after parameter mapping at {mapped_prefix!r}"
)

RULES: tuple[Rule, ...] = (
    INVALID_METADATA,
    METADATA_NOT_OBJECT,
    METADATA_NO_LAYERS,
    LAYER_NOT_OBJECT,
    CONFLICT,
    INVALID_MARKER,
    MARKER_NOT_OBJECT,
    MISSING_MARKERS,
    MISSING_TENSORS,
    TENSORWISE_NOT_2D,
    DTYPES,
    INCOMPATIBLE_SHAPES,
    MAPPED_COLLISION,
)


def is_comfy_checkpoint(headers: Sequence[SafetensorsHeader]) -> bool:
    """Tell whether a group carries Comfy markers (upstream inspects only such checkpoints)."""
    return any(
        "_quantization_metadata" in (header.metadata or {})
        or any(name.endswith(".comfy_quant") for name in header.tensors)
        for header in headers
    )


class _Stop(Exception):
    """First failure reached in first-failure-wins mode (internal, never escapes)."""


class _Run:
    """The state of one inspection, mirroring upstream's local variables.

    A plain class, not a dataclass: every explain imports the validators and never inspects.
    """

    __slots__ = (
        "all_layers",
        "failed",
        "findings",
        "marked_weights",
        "marker_file",
        "markers",
        "meta",
        "where",
    )

    def __init__(self, all_layers: bool) -> None:
        self.all_layers = all_layers
        self.findings: list[Finding] = []
        self.meta: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.where: dict[str, str] = {}  #: tensor name -> file it came from
        self.markers: dict[str, dict[str, Any]] = {}
        self.marker_file: dict[str, str] = {}
        self.marked_weights: set[str] = set()
        self.failed: set[str] = set()  #: prefixes already reported

    def report(
        self, rule: Rule, message: str, path: str, prefix: str | None, tensor: str | None
    ) -> None:
        self.findings.append(Finding(path, prefix, tensor, message, rule.record_id, NAME, rule.id))
        if prefix is not None:
            self.failed.add(prefix)
        if not self.all_layers:
            raise _Stop

    def add_marker(self, prefix: str, marker: dict[str, Any], path: str) -> None:
        previous = self.markers.get(prefix)
        if previous is not None and previous != marker:
            message = f"Conflicting Comfy quantization markers for {prefix!r}"
            self.report(CONFLICT, message, path, prefix, None)
            return
        self.markers[prefix] = marker
        self.marker_file[prefix] = path


def _read_metadata(run: _Run, header: SafetensorsHeader) -> None:
    path = str(header.path)
    serialized = (header.metadata or {}).get("_quantization_metadata")
    if serialized is None:
        return
    try:
        config = json.loads(serialized)
    except (json.JSONDecodeError, RecursionError):
        run.report(INVALID_METADATA, f"Invalid _quantization_metadata in {path}", path, None, None)
        return
    if not isinstance(config, dict):
        message = f"_quantization_metadata in {path} must contain an object"
        run.report(METADATA_NOT_OBJECT, message, path, None, None)
        return
    layers = config.get("layers")
    if not isinstance(layers, dict):
        message = f"_quantization_metadata in {path} must contain a layers object"
        run.report(METADATA_NO_LAYERS, message, path, None, None)
        return
    for prefix, marker in layers.items():
        if not isinstance(marker, dict):
            message = f"Comfy quantization metadata for {prefix!r} must be an object"
            run.report(LAYER_NOT_OBJECT, message, path, prefix, None)
            continue
        run.add_marker(prefix, marker, path)


def _read_tensors(run: _Run, header: SafetensorsHeader) -> None:
    from errkb.checkpoint.safetensors import read_tensor_bytes

    path = str(header.path)
    for key in header.names():
        info = header.tensors[key]
        run.meta[key] = (info.dtype, info.shape)
        run.where[key] = path
        if key.endswith(".weight") and info.dtype in MARKED_WEIGHT_DTYPES:
            run.marked_weights.add(key.removesuffix(".weight"))
        if not key.endswith(".comfy_quant"):
            continue
        prefix = key.removesuffix(".comfy_quant")
        raw = read_tensor_bytes(header, key, limit=MAX_MARKER_BYTES)
        try:
            # json.loads on bytes, as upstream: it detects UTF-8/16/32 itself.
            marker = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            message = f"Invalid Comfy quantization marker {key!r} in {path}"
            run.report(INVALID_MARKER, message, path, prefix, key)
            continue
        if not isinstance(marker, dict):
            message = f"Comfy quantization marker {key!r} must contain a JSON object"
            run.report(MARKER_NOT_OBJECT, message, path, prefix, key)
            continue
        run.add_marker(prefix, marker, path)


def _check_int8_layer(run: _Run, prefix: str) -> None:
    p = repr(prefix)
    weight, scale = f"{prefix}.weight", f"{prefix}.weight_scale"
    missing = {weight, scale} - run.meta.keys()
    if missing:
        message = f"Comfy layer {p} is missing checkpoint tensors: {sorted(missing)}"
        run.report(MISSING_TENSORS, message, run.marker_file[prefix], prefix, None)
        return
    weight_dtype, weight_shape = run.meta[weight]
    scale_dtype, scale_shape = run.meta[scale]
    w, s = format_shape(weight_shape), format_shape(scale_shape)
    if weight_dtype == "I8" and scale_dtype == "F32" and scale_shape == ():
        if len(weight_shape) != 2:
            message = f"Comfy tensorwise INT8 layer {p} needs a 2D weight, got {w}"
            run.report(TENSORWISE_NOT_2D, message, run.where[weight], prefix, weight)
        return  # the tensorwise scalar path: valid
    if weight_dtype != "I8" or scale_dtype != "F32":
        message = (
            f"Comfy INT8 layer {p} needs I8 weights and F32 scales, "
            f"got {weight_dtype} and {scale_dtype}"
        )
        at = weight if weight_dtype != "I8" else scale
        run.report(DTYPES, message, run.where[at], prefix, at)
        return
    if len(weight_shape) != 2 or scale_shape != (weight_shape[0], 1):
        message = f"Comfy INT8 layer {p} has incompatible weight/scale shapes: {w} and {s}"
        run.report(INCOMPATIBLE_SHAPES, message, run.where[scale], prefix, scale)


def _inspect(
    run: _Run,
    headers: Sequence[SafetensorsHeader],
    param_name_mapper: Callable[[str], str] | None,
) -> None:
    for header in headers:
        _read_metadata(run, header)
        _read_tensors(run, header)

    missing_markers = run.marked_weights - run.markers.keys()
    if missing_markers:
        first = sorted(missing_markers)
        message = f"Quantized weights are missing comfy_quant metadata: {first[:5]}"
        run.report(MISSING_MARKERS, message, run.where[f"{first[0]}.weight"], None, None)

    for prefix, marker in run.markers.items():
        # In all_layers mode a layer that already failed (a conflict) reports nothing more.
        if marker.get("format") == "int8_tensorwise" and prefix not in run.failed:
            _check_int8_layer(run, prefix)

    mapped: set[str] = set()
    for prefix in run.markers:
        if prefix in run.failed:
            continue  # likewise: one failure per layer
        target = param_name_mapper(prefix) if param_name_mapper else prefix
        if target in mapped:
            message = f"Comfy markers collide after parameter mapping at {target!r}"
            run.report(MAPPED_COLLISION, message, run.marker_file[prefix], prefix, None)
        mapped.add(target)


def check_comfy(
    headers: Sequence[SafetensorsHeader],
    *,
    all_layers: bool = False,
    param_name_mapper: Callable[[str], str] | None = None,
) -> tuple[Finding, ...]:
    """Run upstream's Comfy marker inspection on one group (CheckpointError: bad marker)."""
    run = _Run(all_layers=all_layers)
    with contextlib.suppress(_Stop):  # _Stop is how the first failure ends the run
        _inspect(run, headers, param_name_mapper)
    return tuple(run.findings)


def _conv_hint(weight: tuple[int, ...]) -> str:
    out, inner = weight[0], numel(weight[1:])
    return (
        f"flatten the kernel to ({out}, {inner}) with a ({out}, 1) scale, "
        "or leave the layer unquantized"
    )


def diagnose(captures: Mapping[str, str]) -> Diagnosis:
    """Explain a ``Comfy INT8 layer ... has incompatible weight/scale shapes: W and S`` message."""
    unknowns: list[str] = []
    prefix = captures.get(CAPTURE_PREFIX)
    layer = f"layer {prefix!r}" if prefix is not None else "the layer"
    weight = parse_capture(captures, CAPTURE_WEIGHT, unknowns)
    scale = parse_capture(captures, CAPTURE_SCALE, unknowns)

    def result(condition: Condition, expected: str | None, text: str) -> Diagnosis:
        return Diagnosis(RECORD_ID, condition, expected, f"In {layer}, {text}.", tuple(unknowns))

    if weight is None:
        return result(
            Condition.UNPARSED,
            "(out_features, 1)",
            "the weight shape could not be read; the scale must be (out_features, 1), where "
            "out_features is the weight's first dimension",
        )
    w = format_shape(weight)
    if len(weight) != 2:
        if len(weight) == 4:
            return result(
                Condition.WEIGHT_NOT_2D,
                f"({weight[0]}, 1)",
                f"the weight {w} is 4-D (a convolution kernel); the INT8 rowwise path needs a "
                f"2-D (out, in) weight: {_conv_hint(weight)}",
            )
        expected = f"({weight[0]}, 1)" if weight else None
        return result(
            Condition.WEIGHT_NOT_2D,
            expected,
            f"the weight {w} is {len(weight)}-D; the INT8 rowwise path needs a 2-D (out, in) "
            "weight: reshape it to 2-D or leave the layer unquantized",
        )
    out, inp = weight
    expected = f"({out}, 1)"
    if scale is None:
        return result(
            Condition.UNPARSED,
            expected,
            f"the scale shape could not be read; it must be {expected}, one F32 scale per "
            "output row",
        )
    s = format_shape(scale)
    if scale == (out, 1):
        return result(
            Condition.NOT_THIS_CHECK,
            expected,
            f"the scale {s} matches the weight {w}: these shapes pass upstream's check, so the "
            "message did not come from this condition",
        )
    if scale == ():
        return result(
            Condition.NOT_THIS_CHECK,
            expected,
            f"a scalar {s} F32 scale with a 2-D I8 weight is the valid tensorwise path, so "
            "sglang at 0132848 does not raise this message for these shapes (another "
            "version or a modified copy may)",
        )
    if scale == (1, out) and out != 1:
        return result(
            Condition.SCALE_COLUMNWISE,
            expected,
            f"scale {s} should be {expected}: the scale was saved columnwise; transpose it",
        )
    if scale == (out,):
        return result(
            Condition.SCALE_FLATTENED,
            expected,
            f"scale {s} should be {expected}: the scale was flattened to 1-D; reshape it to "
            f"{expected}",
        )
    if scale == (1,):
        return result(
            Condition.SCALE_ONE_ELEMENT,
            expected,
            f"scale {s} holds one value, a per-tensor scale with an extra dimension: save it "
            f"as a scalar () to use the tensorwise path, or as {expected} rowwise",
        )
    if scale in {(inp, 1), (inp,)} and inp != out:
        return result(
            Condition.SCALE_TRANSPOSED,
            expected,
            f"scale {s} has one value per input feature ({inp}), not per output row ({out}): "
            f"the scale was computed on the transposed weight; re-export it as {expected} "
            f"for the (out, in) weight {w}",
        )
    if scale == (1, inp) and inp != out:
        return result(
            Condition.SCALE_PER_COLUMN,
            expected,
            f"scale {s} has one value per input column (per-column quantization); "
            f"int8_tensorwise needs one scale per output row, {expected}: re-quantize rowwise",
        )
    if len(scale) == 2 and scale[0] == out and scale[1] > 1:
        groups = scale[1]
        size = f", group size {inp // groups}" if inp % groups == 0 else ""
        return result(
            Condition.SCALE_PER_GROUP,
            expected,
            f"scale {s} has {groups} values per output row (per-group quantization{size}); "
            f"int8_tensorwise needs exactly one per row, {expected}: re-quantize rowwise",
        )
    if len(scale) == 2 and scale[1] == 1:
        return result(
            Condition.SCALE_ROWS_MISMATCH,
            expected,
            f"scale {s} has {scale[0]} rows but the weight {w} has {out} output rows: the "
            "scale belongs to another tensor, or the weight was sliced or padded",
        )
    if len(scale) > 2 and numel(scale) == out:
        return result(
            Condition.SCALE_EXTRA_DIMS,
            expected,
            f"scale {s} holds one value per output row but has {len(scale)} dimensions; "
            f"reshape it to {expected}",
        )
    return result(
        Condition.SCALE_OTHER,
        expected,
        f"scale {s} should be {expected}: one F32 scale per output row of the {w} weight",
    )


def _applies(group: Group) -> bool:
    return is_comfy_checkpoint(group.headers)


def _check(group: Group) -> tuple[Finding, ...]:
    return check_comfy(group.headers, all_layers=group.all_layers)


#: The validator, as listed in ``errkb.validators.VALIDATORS``.
VALIDATOR = FunctionValidator(
    NAME,
    UPSTREAM,
    RULES,
    (CAPTURE_PREFIX, CAPTURE_WEIGHT, CAPTURE_SCALE),
    gate=_applies,
    run=_check,
    explain=diagnose,
    values=MappingProxyType({CAPTURE_WEIGHT: is_shape, CAPTURE_SCALE: is_shape}),
)
