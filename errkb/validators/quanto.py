"""Reference validator for sglang's Quanto qint8 checkpoint admission (record 5c84e15f4be2c1a6).

Reproduces ``inspect_quanto_int8_checkpoint`` (sglang ``quanto_int8_config.py``, commit 0132848)
condition by condition, with upstream's messages, from the header alone: (1) a Quanto file;
(2-4) its base64 JSON quantization map decodes to a non-empty object of objects; (5) the
``.weight._data`` prefixes equal its keys; (6-13) per layer, in map order, upstream's checks.
First failure wins; with ``all_layers`` each layer reports its first failure (1-5 still stop
the file).
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable, Mapping
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
    is_safetensors_dtype,
    is_shape,
    parse_capture,
)

# The checkpoint readers are named for types only: explain imports this module.
if TYPE_CHECKING:
    from errkb.checkpoint.safetensors import SafetensorsHeader

#: The validator's name: ``Finding.check`` of its findings.
NAME = "quanto"
RECORD_ID = "5c84e15f4be2c1a6"
UPSTREAM = "sglang inspect_quanto_int8_checkpoint"
FLOAT_DTYPES = frozenset({"BF16", "F16", "F32"})

#: Placeholder names exactly as they appear in the record's errorMessage template.
CAPTURE_PREFIX = "prefix"
CAPTURE_DTYPE = "scale_slice.get_dtype()"
CAPTURE_SHAPE = "scale_shape"


def _rule(rule_id: str, template: str, record_id: str | None = None, name: str = "") -> Rule:
    return Rule(rule_id, name or rule_id, record_id, NAME, template)


MISSING_MAP = _rule("quanto.missing-map", "Quanto checkpoint is missing quantization_map_base64")
INVALID_MAP = _rule("quanto.invalid-map", "Invalid Quanto quantization_map_base64")
EMPTY_MAP = _rule("quanto.empty-map", "Quanto quantization map must be a non-empty object")
UNNAMED_ENTRIES = _rule(
    "quanto.unnamed-entries", "Quanto quantization map entries must be named objects"
)
PREFIX_MISMATCH = _rule(
    "quanto.prefix-mismatch",
    "Quanto tensor/map prefixes do not match: missing metadata={sorted(missing_map)[:5]}, "
    "missing tensors={sorted(missing_data)[:5]}",
)
UNSUPPORTED_WEIGHTS = _rule(
    "quanto.unsupported-weights",
    "Unsupported Quanto weight type for {prefix!r}: {quantization.get('weights')!r}",
)
ACTIVATIONS = _rule(
    "quanto.activations", "Quanto activation quantization is not supported for {prefix!r}"
)
MISSING_TENSORS = _rule(
    "quanto.missing-tensors", "Quanto layer {prefix!r} is missing tensors: {sorted(missing)}"
)
PACKED_AND_DENSE = _rule(
    "quanto.packed-and-dense", "Quanto layer {prefix!r} contains both packed and dense weights"
)
WEIGHT_NOT_2D_I8 = _rule(
    "quanto.weight-not-2d-i8",
    "Quanto layer {prefix!r} needs a 2D I8 weight, got {data_slice.get_dtype()} {data_shape}",
)
INCOMPATIBLE_SCALE = _rule(
    RECORD_ID,
    "Quanto layer {prefix!r} has incompatible scale {scale_slice.get_dtype()} {scale_shape}",
    record_id=RECORD_ID,
    name="quanto.incompatible-scale",
)
AUX_SCALE = _rule(
    "quanto.aux-scale", "Quanto auxiliary scale {scale_name!r} must be a float scalar"
)
MAPPED_COLLISION = _rule(
    "quanto.mapped-collision",
    "Quanto layers collide after parameter mapping at {mapped_prefix!r}",
)

#: Every condition of the upstream function, in upstream order.
RULES: tuple[Rule, ...] = (
    MISSING_MAP,
    INVALID_MAP,
    EMPTY_MAP,
    UNNAMED_ENTRIES,
    PREFIX_MISMATCH,
    UNSUPPORTED_WEIGHTS,
    ACTIVATIONS,
    MISSING_TENSORS,
    PACKED_AND_DENSE,
    WEIGHT_NOT_2D_I8,
    INCOMPATIBLE_SCALE,
    AUX_SCALE,
    MAPPED_COLLISION,
)


def is_quanto_checkpoint(header: SafetensorsHeader) -> bool:
    """Tell whether upstream would inspect this file at all (its own first condition)."""
    return (header.metadata or {}).get("quantization_format") == "quanto"


class _InvalidMapError(Exception):
    """The quantization map did not decode (internal signal, never escapes this module)."""


def _decode_map(encoded: str) -> object:
    # Exactly upstream's decode and its "Invalid ... base64" exceptions, plus RecursionError.
    import base64  # ~1 ms at import; only errkb check decodes a map (explain never does)

    try:
        return json.loads(base64.b64decode(encoded, validate=True).decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError) as error:
        raise _InvalidMapError from error


def _layer_finding(
    header: SafetensorsHeader,
    prefix: str,
    quantization: Mapping[str, Any],
    keys: frozenset[str],
) -> tuple[Rule, str, str | None] | None:
    """Check one layer; return its first failure (rule, message, tensor) or None."""
    p = repr(prefix)
    if quantization.get("weights") != "qint8":
        weights = quantization.get("weights")
        return UNSUPPORTED_WEIGHTS, f"Unsupported Quanto weight type for {p}: {weights!r}", None
    if quantization.get("activations") != "none":
        return ACTIVATIONS, f"Quanto activation quantization is not supported for {p}", None
    data = f"{prefix}.weight._data"
    scale = f"{prefix}.weight._scale"
    aux = (f"{prefix}.input_scale", f"{prefix}.output_scale")
    missing = {data, scale, *aux} - keys
    if missing:
        return MISSING_TENSORS, f"Quanto layer {p} is missing tensors: {sorted(missing)}", None
    if f"{prefix}.weight" in keys:
        message = f"Quanto layer {p} contains both packed and dense weights"
        return PACKED_AND_DENSE, message, f"{prefix}.weight"
    data_info = header.tensors[data]
    scale_info = header.tensors[scale]
    if data_info.dtype != "I8" or len(data_info.shape) != 2:
        shape = format_shape(data_info.shape)
        message = f"Quanto layer {p} needs a 2D I8 weight, got {data_info.dtype} {shape}"
        return WEIGHT_NOT_2D_I8, message, data
    if scale_info.dtype not in FLOAT_DTYPES or scale_info.shape != (data_info.shape[0], 1):
        shape = format_shape(scale_info.shape)
        message = f"Quanto layer {p} has incompatible scale {scale_info.dtype} {shape}"
        return INCOMPATIBLE_SCALE, message, scale
    for name in aux:
        info = header.tensors[name]
        if info.dtype not in FLOAT_DTYPES or info.shape != ():
            return AUX_SCALE, f"Quanto auxiliary scale {name!r} must be a float scalar", name
    return None


def check_quanto(
    header: SafetensorsHeader,
    *,
    all_layers: bool = False,
    param_name_mapper: Callable[[str], str] | None = None,
) -> tuple[Finding, ...]:
    """Run upstream's Quanto admission on one file; first failure wins unless ``all_layers``."""
    if not is_quanto_checkpoint(header):
        return ()
    path = str(header.path)

    def finding(rule: Rule, message: str, prefix: str | None, tensor: str | None) -> Finding:
        return Finding(path, prefix, tensor, message, rule.record_id, NAME, rule.id)

    metadata = header.metadata or {}
    encoded = metadata.get("quantization_map_base64")
    if encoded is None:
        return (finding(MISSING_MAP, MISSING_MAP.template, None, None),)
    try:
        quantization_map = _decode_map(encoded)
    except _InvalidMapError:
        return (finding(INVALID_MAP, INVALID_MAP.template, None, None),)
    if not isinstance(quantization_map, dict) or not quantization_map:
        return (finding(EMPTY_MAP, EMPTY_MAP.template, None, None),)
    if not all(isinstance(spec, dict) for spec in quantization_map.values()):
        return (finding(UNNAMED_ENTRIES, UNNAMED_ENTRIES.template, None, None),)

    keys = frozenset(header.tensors)
    suffix = ".weight._data"
    data_prefixes = {name.removesuffix(suffix) for name in keys if name.endswith(suffix)}
    map_prefixes = set(quantization_map)
    if data_prefixes != map_prefixes:
        missing_map = sorted(data_prefixes - map_prefixes)[:5]
        missing_data = sorted(map_prefixes - data_prefixes)[:5]
        message = (
            "Quanto tensor/map prefixes do not match: "
            f"missing metadata={missing_map}, missing tensors={missing_data}"
        )
        return (finding(PREFIX_MISMATCH, message, None, None),)

    findings: list[Finding] = []
    mapped_prefixes: set[str] = set()
    for prefix, quantization in quantization_map.items():
        failure = _layer_finding(header, prefix, quantization, keys)
        if failure is None:
            mapped = param_name_mapper(prefix) if param_name_mapper is not None else prefix
            if mapped in mapped_prefixes:
                message = f"Quanto layers collide after parameter mapping at {mapped!r}"
                failure = (MAPPED_COLLISION, message, None)
            else:
                mapped_prefixes.add(mapped)
        if failure is not None:
            rule, message, tensor = failure
            findings.append(finding(rule, message, prefix, tensor))
            if not all_layers:
                break
    return tuple(findings)


def diagnose(captures: Mapping[str, str]) -> Diagnosis:
    """Explain a ``Quanto layer ... has incompatible scale DTYPE SHAPE`` message."""
    unknowns: list[str] = []
    prefix = captures.get(CAPTURE_PREFIX)
    layer = f"layer {prefix!r}" if prefix is not None else "the layer"
    data = f"'{prefix}.weight._data'" if prefix is not None else "'<prefix>.weight._data'"
    dtype = captures.get(CAPTURE_DTYPE)
    shape = parse_capture(captures, CAPTURE_SHAPE, unknowns)
    if dtype is None:
        unknowns.append(CAPTURE_DTYPE)
        dtype_text = "the scale dtype is not known"
    elif dtype in FLOAT_DTYPES:
        dtype_text = f"the scale dtype {dtype} is fine"
    else:
        dtype_text = f"the scale dtype {dtype} is not allowed: it must be BF16, F16 or F32"
    # An unknown dtype is not a wrong one: only a known non-float dtype is called out.
    dtype_bad = dtype is not None and dtype not in FLOAT_DTYPES
    unknowns.append("out_features")
    expected = "(out_features, 1)"
    where = f"out_features is the first dimension of {data}, which the message does not show"

    def result(condition: Condition, shape_text: str, expected_text: str = expected) -> Diagnosis:
        return Diagnosis(
            RECORD_ID,
            condition,
            f"{expected_text} in BF16, F16 or F32" if dtype_bad else expected_text,
            f"In {layer}, {dtype_text}; {shape_text}.",
            tuple(dict.fromkeys(unknowns)),
        )

    if shape is None:
        return result(
            Condition.SCALE_DTYPE if dtype_bad else Condition.UNPARSED,
            f"the scale shape could not be read; it must be (out_features, 1), and {where}",
        )
    s = format_shape(shape)
    if shape == ():
        return result(
            Condition.SCALE_SCALAR,
            f"the scale {s} is a scalar (a per-tensor scale: quanto writes one when the weight "
            "has a single output row, or an exporter squeezed it), but sglang needs one scale "
            f"per output row, shape (out_features, 1); {where}",
        )
    if len(shape) == 1:
        (n,) = shape
        return result(
            Condition.SCALE_FLATTENED,
            f"the scale {s} is 1-D; if {n} is out_features, reshape it to ({n}, 1) ({where})",
            f"({n}, 1) if out_features is {n}",
        )
    if len(shape) == 2 and shape[1] == 1:
        (n, _) = shape
        if dtype is None:
            return result(
                Condition.UNPARSED,
                f"the shape {s} has the right form, so either the dtype is not BF16, F16 or "
                f"F32, or the scale's {n} rows do not match the weight's out_features ({where})",
            )
        if dtype_bad:
            return result(
                Condition.SCALE_DTYPE,
                f"the shape {s} has the right form, so if {n} is out_features only the dtype "
                f"is wrong: cast the scale to F32 ({where})",
                f"({n}, 1) if out_features is {n}",
            )
        return result(
            Condition.SCALE_ROWS_MISMATCH,
            f"the shape {s} has the right form, so the scale's {n} rows do not match the "
            f"weight's out_features: the scale belongs to another layer or the weight was "
            f"sliced or padded ({where})",
        )
    if len(shape) == 2 and shape[0] == 1:
        (_, n) = shape
        return result(
            Condition.SCALE_COLUMNWISE,
            f"the scale {s} is laid out as a row; if {n} is out_features, transpose it to "
            f"({n}, 1) ({where})",
            f"({n}, 1) if out_features is {n}",
        )
    if len(shape) == 2:
        (n, k) = shape
        return result(
            Condition.SCALE_PER_GROUP,
            f"the scale {s} has {k} values per row (a per-group or per-block scale); sglang's "
            f"qint8 path needs exactly one per output row, ({n}, 1) if {n} is out_features: "
            f"re-quantize per output channel ({where})",
        )
    if all(d == 1 for d in shape[1:]):
        n = shape[0]
        return result(
            Condition.SCALE_EXTRA_DIMS,
            f"the scale {s} has {len(shape)} dimensions; if {n} is out_features, reshape it "
            f"to ({n}, 1) ({where})",
            f"({n}, 1) if out_features is {n}",
        )
    return result(
        Condition.SCALE_OTHER,
        f"the scale {s} is not one value per output row; it must be (out_features, 1), and {where}",
    )


def _applies(group: Group) -> bool:
    return any(is_quanto_checkpoint(header) for header in group.headers)


def _check(group: Group) -> tuple[Finding, ...]:
    # Upstream inspects each Quanto file on its own: one run (and one first failure) per file.
    return tuple(
        finding
        for header in group.headers
        for finding in check_quanto(header, all_layers=group.all_layers)
    )


#: The validator, as listed in ``errkb.validators.VALIDATORS``.
VALIDATOR = FunctionValidator(
    NAME,
    UPSTREAM,
    RULES,
    (CAPTURE_PREFIX, CAPTURE_DTYPE, CAPTURE_SHAPE),
    gate=_applies,
    run=_check,
    explain=diagnose,
    values=MappingProxyType({CAPTURE_DTYPE: is_safetensors_dtype, CAPTURE_SHAPE: is_shape}),
)
