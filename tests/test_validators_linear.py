from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from checkpoints import T, write

from errkb.checkpoint.inputs import QuantScheme, detect_scheme
from errkb.checkpoint.safetensors import SafetensorsHeader, read_header
from errkb.validators import Condition, diagnose
from errkb.validators.linear import RECORD_ID, check_linear, fused_scale_rule

MERGED = "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape "
QKV = (
    "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when loaded_shard_id is "
    "None, got shape "
)
QKV_RULE = "linear.qkv-scale-not-scalar"
FP8_STATIC = QuantScheme("fp8", "config.json", frozenset({"weight_scale", "input_scale"}))
NVFP4 = QuantScheme("nvfp4", "hf_quant_config.json", frozenset({"weight_scale_2", "input_scale"}))


def _header(
    tmp_path: Path, tensors: dict[str, T], name: str = "m.safetensors"
) -> SafetensorsHeader:
    return read_header(write(tmp_path / name, tensors))


def _rows(found: tuple[Any, ...]) -> list[tuple[str | None, str | None, str, str | None, str]]:
    assert all(f.check == "linear" for f in found)
    return [(f.prefix, f.tensor, f.message, f.record_id, f.rule) for f in found]


# --- scheme detection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "hf_quant", "scales"),
    [
        ({"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}, None,
         {"weight_scale", "input_scale"}),
        ({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}, None,
         {"weight_scale"}),
        ({"quantization_config": {"quant_method": "fp8"}}, None, {"weight_scale"}),
        ({"quantization_config": {"quant_method": "fp8", "weight_block_size": None}}, None,
         {"weight_scale"}),
        ({"text_config": {"quantization_config": {"quant_method": "fp8"}}}, None, {"weight_scale"}),
        ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
            "weights": {"strategy": "tensor"},
            "input_activations": {"strategy": "tensor", "dynamic": False}}}}}, None,
         {"weight_scale", "input_scale"}),
        ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
            "weights": {"strategy": "tensor"},
            "input_activations": {"strategy": "token", "dynamic": True}}}}}, None,
         {"weight_scale"}),
        ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
            "weights": {"strategy": "tensor_group"},
            "input_activations": {"strategy": "tensor_group", "dynamic": False}}}}}, None,
         {"weight_global_scale", "input_global_scale"}),
        ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}, None,
         {"weight_scale", "input_scale"}),
        ({"quantization_config": {"quant_method": "modelopt",
                                  "quantization": {"quant_algo": "NVFP4"}}},
         None, {"weight_scale_2", "input_scale"}),
        (None, {"quantization": {"quant_algo": "FP8"}}, {"weight_scale", "input_scale"}),
        ({"architectures": ["Phi3ForCausalLM"]}, {"quantization": {"quant_algo": "NVFP4"}},
         {"weight_scale_2", "input_scale"}),
    ],
)  # fmt: skip
def test_per_tensor_schemes_are_detected(
    config: dict[str, Any] | None, hf_quant: dict[str, Any] | None, scales: set[str]
) -> None:
    scheme = detect_scheme(config, hf_quant)
    assert scheme is not None
    assert scheme.per_tensor_scales == scales


@pytest.mark.parametrize(
    ("config", "hf_quant"),
    [
        # Block-wise fp8 (DeepSeek style) has no per-tensor scales.
        ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, None),
        ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
            "weights": {"strategy": "channel"}}}}}, None),
        ({"quantization_config": {"quant_method": "awq"}}, None),
        ({"quantization_config": {"quant_method": "modelopt",
                                  "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}}, None),
        (None, {"quantization": {"quant_algo": "W4A8_AWQ"}}),
        # config.json's quantization_config wins over hf_quant_config.json, as in sglang.
        ({"quantization_config": {"quant_method": "awq"}}, {"quantization": {"quant_algo": "FP8"}}),
        ({}, None),
        (None, None),
        ({"quantization_config": "fp8"}, None),
    ],
)  # fmt: skip
def test_other_schemes_are_not_per_tensor(
    config: dict[str, Any] | None, hf_quant: dict[str, Any] | None
) -> None:
    assert detect_scheme(config, hf_quant) is None


# --- the check --------------------------------------------------------------------------------

FIRES = [(2,), (3,), (1, 2), (35840, 1), (0,), (2, 1, 1)]


@pytest.mark.parametrize("shape", FIRES)
def test_fused_merged_column_scale_that_is_not_scalar_fires(
    tmp_path: Path, shape: tuple[int, ...]
) -> None:
    name = "model.layers.0.mlp.gate_up_proj.weight_scale"
    header = _header(tmp_path, {name: T("F32", shape)})
    assert _rows(check_linear([header], FP8_STATIC)) == [
        ("model.layers.0.mlp.gate_up_proj", name, MERGED + repr(shape), RECORD_ID, RECORD_ID)
    ]


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_a_single_element_passes(tmp_path: Path, shape: tuple[int, ...]) -> None:
    header = _header(tmp_path, {"model.layers.0.mlp.gate_up_proj.weight_scale": T("F32", shape)})
    assert check_linear([header], FP8_STATIC) == ()


@pytest.mark.parametrize("dtype", ["F32", "BF16", "F16", "F8_E4M3", "I32"])
def test_the_dtype_is_irrelevant(tmp_path: Path, dtype: str) -> None:
    header = _header(tmp_path, {"m.gate_up_proj.input_scale": T(dtype, (2,))})
    assert [r[2] for r in _rows(check_linear([header], FP8_STATIC))] == [MERGED + "(2,)"]


def test_fused_qkv_gives_the_qkv_sibling_without_a_record(tmp_path: Path) -> None:
    header = _header(tmp_path, {"model.layers.3.self_attn.qkv_proj.weight_scale": T("F32", (3,))})
    assert _rows(check_linear([header], FP8_STATIC)) == [
        (
            "model.layers.3.self_attn.qkv_proj",
            "model.layers.3.self_attn.qkv_proj.weight_scale",
            QKV + "(3,)",
            None,
            "linear.qkv-scale-not-scalar",
        )
    ]


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("transformer.encoder.layers.0.mlp.dense_h_to_4h.weight_scale", RECORD_ID),
        ("model.layers.0.linear_attn.in_proj_qkvz.weight_scale", RECORD_ID),
        ("model.layers.0.linear_attn.in_proj_ba.input_scale", RECORD_ID),
        ("transformer.h.0.self_attention.query_key_value.weight_scale", QKV_RULE),
        ("model.layers.0.self_attn.W_pack.weight_scale", QKV_RULE),
        ("model.layers.0.mlp.shared_experts.gate_up_proj.weight_scale", RECORD_ID),
        ("model.layers.0.mlp.down_proj.weight_scale", None),
        ("model.layers.0.self_attn.q_proj.weight_scale", None),
        ("model.layers.0.mlp.gate_up_proj.weight", None),
        ("model.layers.0.mlp.gate_up_proj.weight_scale_inv", None),
        # FusedMoE experts are not merged-column linears, even when named gate_up_proj.
        ("model.layers.0.feed_forward.experts.gate_up_proj.weight_scale", None),
        ("model.layers.0.mlp.experts.7.gate_up_proj.weight_scale", None),
        ("weight_scale", None),
    ],
)  # fmt: skip
def test_which_tensors_are_governed(name: str, rule: str | None) -> None:
    found = fused_scale_rule(name, FP8_STATIC)
    assert (found.id if found else None) == rule


def test_only_the_schemes_per_tensor_scales_are_checked(tmp_path: Path) -> None:
    header = _header(
        tmp_path,
        {
            # NVFP4's weight_scale is a block scale: many elements are right.
            "m.gate_up_proj.weight_scale": T("F8_E4M3", (16, 4)),
            "m.gate_up_proj.weight_scale_2": T("F32", (2,)),
            "m.gate_up_proj.input_scale": T("F32", ()),
        },
    )
    assert [r[1] for r in _rows(check_linear([header], NVFP4))] == ["m.gate_up_proj.weight_scale_2"]


def test_loaded_shard_id_none_is_the_trigger(tmp_path: Path) -> None:
    # The record's validationCode tests `loaded_shard_id is not None` (a known defect): a
    # checkpoint that stores gate_up_proj fused is loaded with loaded_shard_id None, and that is
    # exactly the case upstream rejects. Separate gate_proj/up_proj scales load per shard and
    # never reach the check.
    header = _header(
        tmp_path,
        {
            "a.mlp.gate_proj.weight_scale": T("F32", (4,)),
            "a.mlp.up_proj.weight_scale": T("F32", (4,)),
            "b.mlp.gate_up_proj.weight_scale": T("F32", (2,)),
        },
    )
    assert [r[1] for r in _rows(check_linear([header], FP8_STATIC))] == [
        "b.mlp.gate_up_proj.weight_scale"
    ]


def test_first_failure_wins_in_load_order_and_all_layers_reports_all(tmp_path: Path) -> None:
    first = _header(
        tmp_path,
        {
            "model.layers.1.mlp.gate_up_proj.weight_scale": T("F32", (2,)),
            "model.layers.0.mlp.gate_up_proj.weight_scale": T("F32", (4,)),
        },
        "model-00001-of-00002.safetensors",
    )
    second = _header(
        tmp_path,
        {"model.layers.2.self_attn.qkv_proj.input_scale": T("F32", (3,))},
        "model-00002-of-00002.safetensors",
    )
    found = _rows(check_linear([first, second], FP8_STATIC))
    assert [r[1] for r in found] == ["model.layers.0.mlp.gate_up_proj.weight_scale"]
    every = _rows(check_linear([first, second], FP8_STATIC, all_layers=True))
    assert [r[1] for r in every] == [
        "model.layers.0.mlp.gate_up_proj.weight_scale",
        "model.layers.1.mlp.gate_up_proj.weight_scale",
        "model.layers.2.self_attn.qkv_proj.input_scale",
    ]


# --- diagnosis --------------------------------------------------------------------------------


def _diag(shape: str | None) -> Any:
    d = diagnose(RECORD_ID, {} if shape is None else {"tuple(loaded_weight.shape)": shape})
    assert d is not None
    return d


def test_diagnose_uses_the_issue_wording() -> None:
    d = _diag("(2,)")
    assert d.condition is Condition.NOT_PER_TENSOR
    assert d.expected == "() or (1,)"
    assert d.explanation.startswith(
        "The scale has 2 elements; a per-tensor scale has exactly 1: the checkpoint was "
        "quantized per channel or per shard while the model is configured per tensor."
    )
    assert "one scale per logical shard" in d.explanation
    assert d.unknowns == ()


def test_diagnose_many_elements_reads_as_per_channel() -> None:
    d = _diag("(16384,)")
    assert "The scale has 16384 elements" in d.explanation
    assert "one scale per output channel" in d.explanation
    assert _diag("(35840, 1)").explanation.startswith("The scale has 35840 elements")


def test_diagnose_empty_and_scalar_shapes() -> None:
    assert _diag("(0,)").condition is Condition.EMPTY_SCALE
    assert _diag("()").condition is Condition.NOT_THIS_CHECK
    assert _diag("(1,)").condition is Condition.NOT_THIS_CHECK


def test_diagnose_missing_shape() -> None:
    d = _diag(None)
    assert d.condition is Condition.UNPARSED
    assert d.unknowns == ("tuple(loaded_weight.shape)",)
