"""Reference validator predicting sglang's fused per-tensor scale failure (record 129d60f3f6e5f4e0).

``MergedColumnParallelLinear.weight_loader_v2`` requires a checkpoint tensor loaded whole into
a ``PerTensorScaleParameter`` to hold exactly one element, else::

    Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape (2,)

(``QKVParallelLinear`` has a sibling with no record yet.) ``()`` and ``(1,)`` pass. Predicted
when the scheme (:func:`errkb.checkpoint.inputs.detect_scheme`) makes the scale per-tensor and
the tensor is named after a fused module (``gate_up_proj``, ``qkv_proj``, ...). MoE experts
are skipped. First failure wins in load order (files as given, names sorted), unless
``all_layers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

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
    from errkb.checkpoint.inputs import QuantScheme
    from errkb.checkpoint.safetensors import SafetensorsHeader

#: The validator's name: ``Finding.check`` of its findings.
NAME = "linear"
RECORD_ID = "129d60f3f6e5f4e0"
UPSTREAM = "sglang MergedColumnParallelLinear.weight_loader_v2 / QKVParallelLinear.weight_loader_v2"
CAPTURE_SHAPE = "tuple(loaded_weight.shape)"

#: Module names of MergedColumnParallelLinear layers that checkpoints store fused.
MERGED_COLUMN_MODULES = frozenset({"gate_up_proj", "dense_h_to_4h", "in_proj_qkvz", "in_proj_ba"})
#: Module names of QKVParallelLinear layers that checkpoints store fused.
QKV_MODULES = frozenset({"qkv_proj", "query_key_value", "W_pack", "c_attn"})

MERGED_NOT_SCALAR = Rule(
    RECORD_ID,
    "linear.merged-column-scale-not-scalar",
    RECORD_ID,
    NAME,
    "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape "
    "{tuple(loaded_weight.shape)}",
)
QKV_NOT_SCALAR = Rule(
    "linear.qkv-scale-not-scalar",
    "linear.qkv-scale-not-scalar",
    None,
    NAME,
    "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when loaded_shard_id is "
    "None, got shape {tuple(loaded_weight.shape)}",
)
RULES: tuple[Rule, ...] = (MERGED_NOT_SCALAR, QKV_NOT_SCALAR)


def fused_scale_rule(name: str, scheme: QuantScheme) -> Rule | None:
    """Return the rule that governs tensor ``name`` under ``scheme``, or None if none does."""
    parts = name.split(".")
    if len(parts) < 2 or "experts" in parts[:-2]:
        return None
    module, suffix = parts[-2], parts[-1]
    if suffix not in scheme.per_tensor_scales:
        return None
    if module in MERGED_COLUMN_MODULES:
        return MERGED_NOT_SCALAR
    if module in QKV_MODULES:
        return QKV_NOT_SCALAR
    return None


def check_linear(
    headers: Sequence[SafetensorsHeader],
    scheme: QuantScheme,
    *,
    all_layers: bool = False,
) -> tuple[Finding, ...]:
    """Predict the fused per-tensor scale failure for a group of files loaded with ``scheme``."""
    findings: list[Finding] = []
    for header in headers:
        for name in header.names():
            rule = fused_scale_rule(name, scheme)
            if rule is None:
                continue
            info = header.tensors[name]
            if info.numel == 1:
                continue
            template = rule.template.removesuffix("{tuple(loaded_weight.shape)}")
            findings.append(
                Finding(
                    path=str(header.path),
                    prefix=name.rsplit(".", 1)[0],
                    tensor=name,
                    message=template + format_shape(info.shape),
                    record_id=rule.record_id,
                    check=NAME,
                    rule=rule.id,
                )
            )
            if not all_layers:
                return tuple(findings)
    return tuple(findings)


def diagnose(captures: Mapping[str, str]) -> Diagnosis:
    """Explain an ``Expected scalar scale for fused-in-checkpoint merged-column ...`` message."""
    unknowns: list[str] = []
    shape = parse_capture(captures, CAPTURE_SHAPE, unknowns)
    expected = "() or (1,)"
    if shape is None:
        return Diagnosis(
            RECORD_ID,
            Condition.UNPARSED,
            expected,
            "The scale shape could not be read; a per-tensor scale has exactly 1 element: "
            "the checkpoint's quantization recipe and the model's config disagree.",
            tuple(unknowns),
        )
    s = format_shape(shape)
    n = numel(shape)
    if n == 1:
        return Diagnosis(
            RECORD_ID,
            Condition.NOT_THIS_CHECK,
            expected,
            f"The shape {s} has exactly 1 element, which passes this check: the message did "
            "not come from this condition.",
        )
    if n == 0:
        return Diagnosis(
            RECORD_ID,
            Condition.EMPTY_SCALE,
            expected,
            f"The scale {s} has 0 elements; a per-tensor scale has exactly 1: the exporter "
            "wrote an empty placeholder where the fused layer's scalar scale belongs; "
            "re-export the checkpoint with one scalar per fused tensor.",
        )
    if n <= 3:
        hint = (
            f" {n} values look like one scale per logical shard (e.g. gate and up, or q, k "
            "and v): a per-shard recipe saved into an already fused tensor."
        )
    else:
        hint = f" {n} values look like one scale per output channel."
    return Diagnosis(
        RECORD_ID,
        Condition.NOT_PER_TENSOR,
        expected,
        f"The scale has {n} elements; a per-tensor scale has exactly 1: the checkpoint was "
        "quantized per channel or per shard while the model is configured per tensor."
        f"{hint} Load it with a per-channel quantization config, or re-export one scalar scale "
        "per fused tensor.",
    )


def _applies(group: Group) -> bool:
    # Only a config declaring a per-tensor scheme makes a scale a PerTensorScaleParameter.
    return group.scheme is not None


def _check(group: Group) -> tuple[Finding, ...]:
    if group.scheme is None:
        return ()
    return check_linear(group.headers, group.scheme, all_layers=group.all_layers)


#: The validator, as listed in ``errkb.validators.VALIDATORS``.
VALIDATOR = FunctionValidator(
    NAME,
    UPSTREAM,
    RULES,
    (CAPTURE_SHAPE,),
    gate=_applies,
    run=_check,
    explain=diagnose,
    values=MappingProxyType({CAPTURE_SHAPE: is_shape}),
)
