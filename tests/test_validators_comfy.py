from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checkpoints import T, comfy_layer, marker, write

from errkb.checkpoint.safetensors import SafetensorsHeader, read_header
from errkb.errors import CheckpointError
from errkb.validators import Condition, diagnose
from errkb.validators.comfy import (
    MAX_MARKER_BYTES,
    RECORD_ID,
    RULES,
    check_comfy,
    is_comfy_checkpoint,
)

Row = tuple[str, str | None, str | None, str, str | None, str]


def _header(
    path: Path, tensors: dict[str, T], metadata: dict[str, str] | None = None
) -> SafetensorsHeader:
    return read_header(write(path, tensors, metadata))


def _run(headers: list[SafetensorsHeader], **kw: Any) -> list[Row]:
    found = check_comfy(headers, **kw)
    assert all(f.check == "comfy" for f in found)
    return [(Path(f.path).name, f.prefix, f.tensor, f.message, f.record_id, f.rule) for f in found]


def _one(
    tmp_path: Path, tensors: dict[str, T], metadata: dict[str, str] | None = None, **kw: Any
) -> list[Row]:
    return _run([_header(tmp_path / "c.safetensors", tensors, metadata)], **kw)


def _layers_metadata(layers: object) -> dict[str, str]:
    return {"_quantization_metadata": json.dumps({"format_version": "1.0", "layers": layers})}


def test_valid_rowwise_and_tensorwise_layers_pass(tmp_path: Path) -> None:
    tensors = {
        **comfy_layer("a"),
        # A scalar F32 scale is the valid tensorwise path. The record's validationCode flags it
        # (a known defect of the dataset's code field); the reference validator must not.
        **comfy_layer("b", scale=T("F32", ())),
        "c.weight": T("BF16", (4, 8)),
    }
    assert _one(tmp_path, tensors) == []


def test_markers_from_metadata_are_checked_too(tmp_path: Path) -> None:
    tensors = comfy_layer("a", with_marker=False, scale=T("F32", (1, 4)))
    found = _one(tmp_path, tensors, _layers_metadata({"a": {"format": "int8_tensorwise"}}))
    assert [r[5] for r in found] == [RECORD_ID]


def test_same_marker_in_both_carriers_is_no_conflict(tmp_path: Path) -> None:
    tensors = comfy_layer("a")
    assert _one(tmp_path, tensors, _layers_metadata({"a": {"format": "int8_tensorwise"}})) == []


def test_other_formats_are_not_inspected_by_this_reference(tmp_path: Path) -> None:
    tensors = comfy_layer(
        "a", fmt="float8_e4m3fn", weight=T("F8_E4M3", (4, 8)), scale=T("F32", (7,))
    )
    assert _one(tmp_path, tensors) == []


def test_gate_only_comfy_checkpoints(tmp_path: Path) -> None:
    plain = _header(tmp_path / "plain.safetensors", {"a.weight": T("F8_E4M3", (4, 8))})
    assert not is_comfy_checkpoint([plain])
    marked = _header(tmp_path / "m.safetensors", comfy_layer("a"))
    assert is_comfy_checkpoint([plain, marked])
    meta = _header(tmp_path / "meta.safetensors", {"x": T("F32", ())}, _layers_metadata({}))
    assert is_comfy_checkpoint([meta])


SHAPES = [
    ((4, 8), (1, 4)),  # columnwise
    ((4, 8), (4,)),  # flattened
    ((4, 8), (4, 2)),  # per group
    ((4, 8), (8, 1)),  # transposed
    ((4, 8), (1,)),
    ((4, 8), (4, 1, 1)),
    ((4, 2, 3, 3), (4, 1)),  # 4-D conv weight: fails even with a (rows, 1) scale
    ((32,), (32, 1)),
]


@pytest.mark.parametrize(("weight", "scale"), SHAPES)
def test_record_condition_incompatible_shapes(
    tmp_path: Path, weight: tuple[int, ...], scale: tuple[int, ...]
) -> None:
    tensors = comfy_layer("blk.0", weight=T("I8", weight), scale=T("F32", scale))
    assert _one(tmp_path, tensors) == [
        (
            "c.safetensors",
            "blk.0",
            "blk.0.weight_scale",
            "Comfy INT8 layer 'blk.0' has incompatible weight/scale shapes: "
            f"{weight!r} and {scale!r}",
            RECORD_ID,
            RECORD_ID,
        )
    ]


def _row(prefix: str | None, tensor: str | None, message: str, rule: str) -> Row:
    return ("c.safetensors", prefix, tensor, message, None, rule)


NEEDS = "Comfy INT8 layer 'a' needs I8 weights and F32 scales, got"
INVALID_MARKER = "Invalid Comfy quantization marker 'a.comfy_quant' in {path}"
BARE = comfy_layer("a", with_marker=False)
SIBLINGS: list[tuple[str, dict[str, T], dict[str, str] | None, Row]] = [
    (
        "tensorwise-not-2d",
        comfy_layer("a", weight=T("I8", (4, 8, 1)), scale=T("F32", ())),
        None,
        _row(
            "a",
            "a.weight",
            "Comfy tensorwise INT8 layer 'a' needs a 2D weight, got (4, 8, 1)",
            "comfy.tensorwise-weight-not-2d",
        ),
    ),
    (
        "weight-not-i8",
        comfy_layer("a", weight=T("U8", (4, 8))),
        None,
        _row("a", "a.weight", f"{NEEDS} U8 and F32", "comfy.int8-dtypes"),
    ),
    (
        # A BF16 scalar is not the tensorwise path (that needs F32), so the dtype rule fires.
        "scalar-scale-not-f32",
        comfy_layer("a", scale=T("BF16", ())),
        None,
        _row("a", "a.weight_scale", f"{NEEDS} I8 and BF16", "comfy.int8-dtypes"),
    ),
    (
        "missing-scale",
        {k: v for k, v in comfy_layer("a").items() if k != "a.weight_scale"},
        None,
        _row(
            "a",
            None,
            "Comfy layer 'a' is missing checkpoint tensors: ['a.weight_scale']",
            "comfy.missing-tensors",
        ),
    ),
    (
        "missing-both",
        {"a.comfy_quant": marker({"format": "int8_tensorwise"})},
        None,
        _row(
            "a",
            None,
            "Comfy layer 'a' is missing checkpoint tensors: ['a.weight', 'a.weight_scale']",
            "comfy.missing-tensors",
        ),
    ),
    (
        "missing-markers",
        {
            **comfy_layer("a"),
            "z.weight": T("I8", (4, 8)),
            "y.weight": T("F8_E4M3", (2, 2)),
            "x.weight": T("U8", (1,)),
        },
        None,
        _row(
            None,
            None,
            "Quantized weights are missing comfy_quant metadata: ['x', 'y', 'z']",
            "comfy.missing-markers",
        ),
    ),
    (
        "invalid-marker",
        {**BARE, "a.comfy_quant": marker(b"{not json")},
        None,
        _row("a", "a.comfy_quant", INVALID_MARKER, "comfy.invalid-marker"),
    ),
    (
        "marker-bad-utf8",
        {**BARE, "a.comfy_quant": marker(b'{"format": "\xff"}')},
        None,
        _row("a", "a.comfy_quant", INVALID_MARKER, "comfy.invalid-marker"),
    ),
    (
        "marker-not-object",
        {**BARE, "a.comfy_quant": marker([1, 2])},
        None,
        _row(
            "a",
            "a.comfy_quant",
            "Comfy quantization marker 'a.comfy_quant' must contain a JSON object",
            "comfy.marker-not-object",
        ),
    ),
    (
        "invalid-metadata",
        comfy_layer("a"),
        {"_quantization_metadata": "{oops"},
        _row(None, None, "Invalid _quantization_metadata in {path}", "comfy.invalid-metadata"),
    ),
    (
        "metadata-not-object",
        comfy_layer("a"),
        {"_quantization_metadata": "[]"},
        _row(
            None,
            None,
            "_quantization_metadata in {path} must contain an object",
            "comfy.metadata-not-object",
        ),
    ),
    (
        "metadata-no-layers",
        comfy_layer("a"),
        {"_quantization_metadata": '{"format_version": "1.0"}'},
        _row(
            None,
            None,
            "_quantization_metadata in {path} must contain a layers object",
            "comfy.metadata-no-layers",
        ),
    ),
    (
        "layer-metadata-not-object",
        comfy_layer("a"),
        _layers_metadata({"a": "int8_tensorwise"}),
        _row(
            "a",
            None,
            "Comfy quantization metadata for 'a' must be an object",
            "comfy.layer-metadata-not-object",
        ),
    ),
    (
        "conflicting-markers",
        comfy_layer("a"),
        _layers_metadata({"a": {"format": "float8_e4m3fn"}}),
        _row(
            "a", None, "Conflicting Comfy quantization markers for 'a'", "comfy.conflicting-markers"
        ),
    ),
]


@pytest.mark.parametrize(
    ("case", "tensors", "metadata", "row"), SIBLINGS, ids=[c[0] for c in SIBLINGS]
)
def test_sibling_conditions(
    tmp_path: Path, case: str, tensors: dict[str, T], metadata: dict[str, str] | None, row: Row
) -> None:
    path = tmp_path / "c.safetensors"
    expected = (*row[:3], row[3].replace("{path}", str(path)), *row[4:])
    assert _one(tmp_path, tensors, metadata) == [expected]


def test_collision_after_parameter_mapping(tmp_path: Path) -> None:
    tensors = {**comfy_layer("a"), **comfy_layer("b")}
    found = _one(tmp_path, tensors, param_name_mapper=lambda prefix: "same")
    assert found == [
        (
            "c.safetensors",
            "b",
            None,
            "Comfy markers collide after parameter mapping at 'same'",
            None,
            "comfy.mapped-collision",
        )
    ]


# --- upstream order --------------------------------------------------------------------------


def test_missing_markers_come_before_any_layer_check(tmp_path: Path) -> None:
    tensors = {**comfy_layer("a", scale=T("F32", (1, 4))), "b.weight": T("I8", (4, 8))}
    assert [r[5] for r in _one(tmp_path, tensors)] == ["comfy.missing-markers"]


def test_metadata_is_read_before_the_tensors_of_a_file(tmp_path: Path) -> None:
    tensors = {**comfy_layer("a", with_marker=False), "a.comfy_quant": marker(b"[")}
    found = _one(tmp_path, tensors, {"_quantization_metadata": "{oops"})
    assert [r[5] for r in found] == ["comfy.invalid-metadata"]


def test_dtype_rule_comes_before_the_shape_rule(tmp_path: Path) -> None:
    tensors = comfy_layer("a", weight=T("I8", (4, 8)), scale=T("F16", (1, 4)))
    assert [r[5] for r in _one(tmp_path, tensors)] == ["comfy.int8-dtypes"]


def test_metadata_layers_are_inspected_before_tensor_markers(tmp_path: Path) -> None:
    # Insertion order: "z" enters from __metadata__, "a" later from its marker tensor.
    tensors = {
        **comfy_layer("a", scale=T("F32", (4,))),
        **comfy_layer("z", scale=T("F32", (1, 4)), with_marker=False),
    }
    metadata = _layers_metadata({"z": {"format": "int8_tensorwise"}})
    first = _one(tmp_path, tensors, metadata)
    assert [(r[1], r[3]) for r in first] == [
        ("z", "Comfy INT8 layer 'z' has incompatible weight/scale shapes: (4, 8) and (1, 4)")
    ]
    every = _one(tmp_path, tensors, metadata, all_layers=True)
    assert [r[1] for r in every] == ["z", "a"]


def test_all_layers_reports_each_layer_once_in_order(tmp_path: Path) -> None:
    tensors = {
        **comfy_layer("a", scale=T("F32", (4,))),
        **comfy_layer("b"),
        **comfy_layer("c", weight=T("F16", (4, 8))),
        **comfy_layer("d", weight=T("I8", (4, 8, 1)), scale=T("F32", ())),
    }
    found = _one(tmp_path, tensors, all_layers=True)
    assert [(r[1], r[5]) for r in found] == [
        ("a", RECORD_ID),
        ("c", "comfy.int8-dtypes"),
        ("d", "comfy.tensorwise-weight-not-2d"),
    ]
    assert len(_one(tmp_path, tensors)) == 1


def test_all_layers_reports_a_conflicting_layer_once(tmp_path: Path) -> None:
    tensors = {**comfy_layer("a", scale=T("F32", (4,))), **comfy_layer("b", scale=T("F32", (4,)))}
    metadata = _layers_metadata({"a": {"format": "int8_tensorwise", "group_size": 1}})
    found = _one(tmp_path, tensors, metadata, all_layers=True)
    assert [(r[1], r[5]) for r in found] == [
        ("a", "comfy.conflicting-markers"),
        ("b", RECORD_ID),
    ]


def test_a_group_of_shards_is_inspected_together(tmp_path: Path) -> None:
    markers_only = _header(
        tmp_path / "model-00001-of-00002.safetensors",
        {"a.comfy_quant": marker({"format": "int8_tensorwise"})},
    )
    weights = _header(
        tmp_path / "model-00002-of-00002.safetensors",
        {"a.weight": T("I8", (4, 8)), "a.weight_scale": T("F32", (1, 4))},
    )
    found = _run([markers_only, weights])
    assert [(r[0], r[5]) for r in found] == [("model-00002-of-00002.safetensors", RECORD_ID)]
    # Alone, the marker file lacks the layer's tensors.
    assert [r[5] for r in _run([markers_only])] == ["comfy.missing-tensors"]


def test_an_oversized_marker_is_refused_not_read(tmp_path: Path) -> None:
    big = T("U8", (MAX_MARKER_BYTES + 1,))
    header = _header(
        tmp_path / "big.safetensors", {**comfy_layer("a", with_marker=False), "a.comfy_quant": big}
    )
    with pytest.raises(CheckpointError, match=r"tensor 'a.comfy_quant' is 1000001 bytes"):
        check_comfy([header])


def test_rules_list_every_upstream_message_once() -> None:
    assert len({r.id for r in RULES}) == len(RULES) == 13
    assert [r.id for r in RULES if r.record_id] == [RECORD_ID]
    # The newer W4A4 / NVFP4 / W4A8 / MXFP8 near-misses are not this record's.
    assert all("INT8" in r.template for r in RULES if r.record_id)


# --- diagnosis --------------------------------------------------------------------------------


def _diag(
    weight: str | None, scale: str | None, prefix: str = "double_blocks.0.img_attn.qkv"
) -> Any:
    captures = {"prefix": prefix}
    if weight is not None:
        captures["weight_shape"] = weight
    if scale is not None:
        captures["scale_shape"] = scale
    d = diagnose(RECORD_ID, captures)
    assert d is not None
    return d


def test_diagnose_columnwise_uses_the_issue_wording() -> None:
    d = _diag("(3072, 4096)", "(1, 3072)")
    assert d.condition is Condition.SCALE_COLUMNWISE
    assert d.expected == "(3072, 1)"
    assert d.explanation == (
        "In layer 'double_blocks.0.img_attn.qkv', scale (1, 3072) should be (3072, 1): "
        "the scale was saved columnwise; transpose it."
    )
    assert d.unknowns == ()


W = "(3072, 4096)"
CONV = "(320, 4, 3, 3)"
DIAG = [
    (W, "(3072,)", Condition.SCALE_FLATTENED, "flattened to 1-D; reshape it to (3072, 1)"),
    (W, "(3072, 32)", Condition.SCALE_PER_GROUP, "(per-group quantization, group size 128)"),
    (W, "(3072, 32)", Condition.SCALE_PER_GROUP, "32 values per output row"),
    (W, "(4096, 1)", Condition.SCALE_TRANSPOSED, "one value per input feature (4096)"),
    (W, "(4096,)", Condition.SCALE_TRANSPOSED, "computed on the transposed weight"),
    (W, "(1, 4096)", Condition.SCALE_PER_COLUMN, "one value per input column"),
    (W, "(1536, 1)", Condition.SCALE_ROWS_MISMATCH, "1536 rows but the weight (3072, 4096)"),
    (W, "(1,)", Condition.SCALE_ONE_ELEMENT, "save it as a scalar ()"),
    (W, "(3072, 1, 1)", Condition.SCALE_EXTRA_DIMS, "reshape it to (3072, 1)"),
    (W, "(2, 2, 2)", Condition.SCALE_OTHER, "one F32 scale per output row"),
    (W, "(3072, 1)", Condition.NOT_THIS_CHECK, "pass upstream's check"),
    (W, "()", Condition.NOT_THIS_CHECK, "valid tensorwise path"),
    (CONV, "(3072, 1)", Condition.WEIGHT_NOT_2D, "4-D (a convolution kernel)"),
    (CONV, "(3072, 1)", Condition.WEIGHT_NOT_2D, "flatten the kernel to (320, 36)"),
    ("(3072,)", "(3072, 1)", Condition.WEIGHT_NOT_2D, "the weight (3072,) is 1-D"),
]


@pytest.mark.parametrize(("weight", "scale", "condition", "phrase"), DIAG)
def test_diagnose_shapes(weight: str, scale: str, condition: Condition, phrase: str) -> None:
    d = _diag(weight, scale)
    assert d.condition is condition
    expected = "(320, 1)" if weight == CONV else "(3072, 1)"
    assert d.expected == expected
    assert phrase in d.explanation
    assert d.unknowns == ()


def test_diagnose_unreadable_values() -> None:
    d = _diag("(3072, 4096)", "garbage")
    assert d.condition is Condition.UNPARSED
    assert d.unknowns == ("scale_shape",)
    assert d.expected == "(3072, 1)"
    d = _diag(None, "(1, 3)")
    assert d.condition is Condition.UNPARSED
    assert d.unknowns == ("weight_shape",)
    assert d.to_dict() == {
        "recordId": RECORD_ID,
        "condition": "unparsed",
        "expected": "(out_features, 1)",
        "explanation": d.explanation,
        "unknowns": ["weight_shape"],
    }
