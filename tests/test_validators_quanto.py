from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from checkpoints import T, quanto_layer, quanto_metadata, write
from hypothesis import given
from hypothesis import strategies as st

from errkb.checkpoint.safetensors import read_header
from errkb.validators import (
    Condition,
    diagnose,
    parse_shape,
    records_with_validators,
    rule_for,
    validator_for,
)
from errkb.validators.quanto import RECORD_ID, RULES, check_quanto

QMAP = {"enc.0": {"weights": "qint8", "activations": "none"}}
QMAP2 = {**QMAP, "enc.1": {"weights": "qint8", "activations": "none"}}


def _findings(
    tmp_path: Path, tensors: dict[str, T], metadata: dict[str, str] | None, **kw: Any
) -> list[tuple[str | None, str | None, str, str | None, str]]:
    header = read_header(write(tmp_path / "q.safetensors", tensors, metadata))
    found = check_quanto(header, **kw)
    for f in found:
        assert f.path == str(tmp_path / "q.safetensors")
        assert f.check == "quanto"
    return [(f.prefix, f.tensor, f.message, f.record_id, f.rule) for f in found]


def test_a_valid_quanto_file_has_no_findings(tmp_path: Path) -> None:
    tensors = {**quanto_layer("enc.0"), **quanto_layer("enc.1", 2, 3), "enc.0.bias": T("F32", (4,))}
    assert _findings(tmp_path, tensors, quanto_metadata(QMAP2)) == []


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
def test_every_float_scale_dtype_is_accepted(tmp_path: Path, dtype: str) -> None:
    tensors = quanto_layer("enc.0", scale=T(dtype, (4, 1)), aux=T(dtype, ()))
    assert _findings(tmp_path, tensors, quanto_metadata(QMAP)) == []


@pytest.mark.parametrize("metadata", [None, {"format": "pt"}, {"quantization_format": "Quanto"}])
def test_a_file_that_is_not_quanto_is_not_inspected(
    tmp_path: Path, metadata: dict[str, str] | None
) -> None:
    # Upstream returns None before any check: even a broken layer is not reported.
    tensors = quanto_layer("enc.0", scale=T("F32", ()))
    assert _findings(tmp_path, tensors, metadata) == []


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _raw_map(encoded: str) -> dict[str, str]:
    return {"quantization_format": "quanto", "quantization_map_base64": encoded}


INVALID = "Invalid Quanto quantization_map_base64"
NOT_OBJECT = "Quanto quantization map must be a non-empty object"
FILE_LEVEL = [
    (
        "missing-map",
        {"quantization_format": "quanto"},
        "Quanto checkpoint is missing quantization_map_base64",
        "quanto.missing-map",
    ),
    ("not-base64", _raw_map("!!notb64"), INVALID, "quanto.invalid-map"),
    ("non-ascii-base64", _raw_map("é"), INVALID, "quanto.invalid-map"),
    ("not-json", _raw_map(_b64(b"{nope")), INVALID, "quanto.invalid-map"),
    ("not-utf8", _raw_map(_b64(b"\xff\xfe")), INVALID, "quanto.invalid-map"),
    ("empty-map", quanto_metadata({}), NOT_OBJECT, "quanto.empty-map"),
    ("list-map", quanto_metadata([1]), NOT_OBJECT, "quanto.empty-map"),
    (
        "entry-not-object",
        quanto_metadata({"enc.0": "qint8"}),
        "Quanto quantization map entries must be named objects",
        "quanto.unnamed-entries",
    ),
    (
        "prefix-mismatch",
        quanto_metadata({"enc.0": QMAP["enc.0"], "enc.9": QMAP["enc.0"]}),
        "Quanto tensor/map prefixes do not match: "
        "missing metadata=['enc.1'], missing tensors=['enc.9']",
        "quanto.prefix-mismatch",
    ),
]


@pytest.mark.parametrize(
    ("case", "metadata", "message", "rule"), FILE_LEVEL, ids=[c[0] for c in FILE_LEVEL]
)
def test_file_level_conditions(
    tmp_path: Path, case: str, metadata: dict[str, str], message: str, rule: str
) -> None:
    tensors = {**quanto_layer("enc.0"), **quanto_layer("enc.1")}
    assert _findings(tmp_path, tensors, metadata) == [(None, None, message, None, rule)]


def test_prefix_mismatch_lists_at_most_five_sorted(tmp_path: Path) -> None:
    tensors: dict[str, T] = {}
    for i in range(7):
        tensors.update(quanto_layer(f"l{6 - i}"))
    found = _findings(tmp_path, tensors, quanto_metadata({"x": QMAP["enc.0"]}))
    assert found[0][2] == (
        "Quanto tensor/map prefixes do not match: "
        "missing metadata=['l0', 'l1', 'l2', 'l3', 'l4'], missing tensors=['x']"
    )


def _layer_case(**overrides: Any) -> dict[str, T]:
    return quanto_layer("enc.0", **overrides)


LAYER = [
    (
        "weights-qint4",
        {"enc.0": {"weights": "qint4", "activations": "none"}},
        _layer_case(),
        None,
        "Unsupported Quanto weight type for 'enc.0': 'qint4'",
        None,
        "quanto.unsupported-weights",
    ),
    (
        "weights-missing",
        {"enc.0": {"activations": "none"}},
        _layer_case(),
        None,
        "Unsupported Quanto weight type for 'enc.0': None",
        None,
        "quanto.unsupported-weights",
    ),
    (
        "activations",
        {"enc.0": {"weights": "qint8", "activations": "qint8"}},
        _layer_case(),
        None,
        "Quanto activation quantization is not supported for 'enc.0'",
        None,
        "quanto.activations",
    ),
    (
        "missing-tensors",
        QMAP,
        {
            k: v
            for k, v in _layer_case().items()
            if k not in ("enc.0.input_scale", "enc.0.weight._scale")
        },
        None,
        "Quanto layer 'enc.0' is missing tensors: ['enc.0.input_scale', 'enc.0.weight._scale']",
        None,
        "quanto.missing-tensors",
    ),
    (
        "packed-and-dense",
        QMAP,
        {**_layer_case(), "enc.0.weight": T("F16", (4, 8))},
        "enc.0.weight",
        "Quanto layer 'enc.0' contains both packed and dense weights",
        None,
        "quanto.packed-and-dense",
    ),
    (
        "data-not-i8",
        QMAP,
        _layer_case(data=T("U8", (4, 8))),
        "enc.0.weight._data",
        "Quanto layer 'enc.0' needs a 2D I8 weight, got U8 (4, 8)",
        None,
        "quanto.weight-not-2d-i8",
    ),
    (
        "data-3d",
        QMAP,
        _layer_case(data=T("I8", (4, 8, 1))),
        "enc.0.weight._data",
        "Quanto layer 'enc.0' needs a 2D I8 weight, got I8 (4, 8, 1)",
        None,
        "quanto.weight-not-2d-i8",
    ),
    (
        "aux-not-scalar",
        QMAP,
        _layer_case(aux=T("F32", (1,))),
        "enc.0.input_scale",
        "Quanto auxiliary scale 'enc.0.input_scale' must be a float scalar",
        None,
        "quanto.aux-scale",
    ),
    (
        "aux-int",
        QMAP,
        {**_layer_case(), "enc.0.output_scale": T("I32", ())},
        "enc.0.output_scale",
        "Quanto auxiliary scale 'enc.0.output_scale' must be a float scalar",
        None,
        "quanto.aux-scale",
    ),
]


@pytest.mark.parametrize(
    ("case", "qmap", "tensors", "tensor", "message", "record", "rule"),
    LAYER,
    ids=[c[0] for c in LAYER],
)
def test_layer_sibling_conditions(
    tmp_path: Path,
    case: str,
    qmap: dict[str, Any],
    tensors: dict[str, T],
    tensor: str | None,
    message: str,
    record: str | None,
    rule: str,
) -> None:
    found = _findings(tmp_path, tensors, quanto_metadata(qmap))
    assert found == [("enc.0", tensor, message, record, rule)]


@pytest.mark.parametrize(
    ("scale", "printed"),
    [
        (T("F32", ()), "F32 ()"),
        (T("F32", (4,)), "F32 (4,)"),
        (T("F32", (1, 4)), "F32 (1, 4)"),
        (T("F32", (4, 2)), "F32 (4, 2)"),
        (T("F32", (4, 1, 1)), "F32 (4, 1, 1)"),
        (T("F32", (5, 1)), "F32 (5, 1)"),
        (T("I32", (4, 1)), "I32 (4, 1)"),
        (T("F64", (4, 1)), "F64 (4, 1)"),
        (T("F8_E4M3", (4, 1)), "F8_E4M3 (4, 1)"),
    ],
)
def test_record_condition_incompatible_scale(tmp_path: Path, scale: T, printed: str) -> None:
    found = _findings(tmp_path, _layer_case(scale=scale), quanto_metadata(QMAP))
    assert found == [
        (
            "enc.0",
            "enc.0.weight._scale",
            f"Quanto layer 'enc.0' has incompatible scale {printed}",
            RECORD_ID,
            RECORD_ID,
        )
    ]


def test_collision_after_parameter_mapping(tmp_path: Path) -> None:
    tensors = {**quanto_layer("enc.0"), **quanto_layer("enc.1")}
    found = _findings(
        tmp_path, tensors, quanto_metadata(QMAP2), param_name_mapper=lambda p: "shared"
    )
    assert found == [
        (
            "enc.1",
            None,
            "Quanto layers collide after parameter mapping at 'shared'",
            None,
            "quanto.mapped-collision",
        )
    ]


# Upstream order: the record's own check (a known defect of its code field) flags the scale
# of layers that upstream rejects earlier, for another reason.


def test_an_earlier_sibling_wins_over_the_record(tmp_path: Path) -> None:
    qmap = {"enc.0": {"weights": "qint4", "activations": "none"}}
    found = _findings(tmp_path, _layer_case(scale=T("F32", ())), quanto_metadata(qmap))
    assert [f[4] for f in found] == ["quanto.unsupported-weights"]


def test_dense_weight_wins_over_a_bad_scale(tmp_path: Path) -> None:
    tensors = {**_layer_case(scale=T("F32", (1, 4))), "enc.0.weight": T("F16", (4, 8))}
    found = _findings(tmp_path, tensors, quanto_metadata(QMAP))
    assert [f[4] for f in found] == ["quanto.packed-and-dense"]


def test_the_record_wins_over_a_later_aux_scale(tmp_path: Path) -> None:
    tensors = _layer_case(scale=T("F32", (4,)), aux=T("I8", (2,)))
    found = _findings(tmp_path, tensors, quanto_metadata(QMAP))
    assert [f[4] for f in found] == [RECORD_ID]


def test_first_failure_wins_in_map_order_and_all_layers_keeps_going(tmp_path: Path) -> None:
    tensors = {
        **quanto_layer("enc.0", scale=T("F32", ())),
        **quanto_layer("enc.1", scale=T("F32", (1, 4))),
        **quanto_layer("enc.2"),
        **quanto_layer("enc.3", aux=T("F32", (1,))),
    }
    # Map order, not name order, is upstream's order.
    qmap = dict.fromkeys(("enc.1", "enc.0", "enc.2", "enc.3"), QMAP["enc.0"])
    first = _findings(tmp_path, tensors, quanto_metadata(qmap))
    assert [(f[0], f[4]) for f in first] == [("enc.1", RECORD_ID)]
    every = _findings(tmp_path, tensors, quanto_metadata(qmap), all_layers=True)
    assert [(f[0], f[4]) for f in every] == [
        ("enc.1", RECORD_ID),
        ("enc.0", RECORD_ID),
        ("enc.3", "quanto.aux-scale"),
    ]


def test_all_layers_still_stops_at_file_level_conditions(tmp_path: Path) -> None:
    found = _findings(
        tmp_path, quanto_layer("enc.0"), {"quantization_format": "quanto"}, all_layers=True
    )
    assert [f[4] for f in found] == ["quanto.missing-map"]


def test_rules_cover_every_upstream_condition_in_order() -> None:
    assert [r.id for r in RULES] == [
        "quanto.missing-map",
        "quanto.invalid-map",
        "quanto.empty-map",
        "quanto.unnamed-entries",
        "quanto.prefix-mismatch",
        "quanto.unsupported-weights",
        "quanto.activations",
        "quanto.missing-tensors",
        "quanto.packed-and-dense",
        "quanto.weight-not-2d-i8",
        RECORD_ID,
        "quanto.aux-scale",
        "quanto.mapped-collision",
    ]
    assert [r.id for r in RULES if r.record_id] == [RECORD_ID]


# ---------------------------------------------------------------------------------------------
# Diagnosis


def _diag(dtype: str | None, shape: str | None) -> Any:
    captures = {"prefix": "enc.0"}
    if dtype is not None:
        captures["scale_slice.get_dtype()"] = dtype
    if shape is not None:
        captures["scale_shape"] = shape
    diagnosis = diagnose(RECORD_ID, captures)
    assert diagnosis is not None
    return diagnosis


def test_diagnose_scalar_scale_says_out_features_is_unknown() -> None:
    d = _diag("F32", "()")
    assert d.condition is Condition.SCALE_SCALAR
    assert d.expected == "(out_features, 1)"
    assert d.unknowns == ("out_features",)
    assert "the scale dtype F32 is fine" in d.explanation
    assert "out_features is the first dimension of 'enc.0.weight._data'" in d.explanation
    assert "which the message does not show" in d.explanation
    assert d.explanation.startswith("In layer 'enc.0', ")


@pytest.mark.parametrize(
    ("dtype", "shape", "condition", "expected", "phrase"),
    [
        (
            "F32",
            "(3072,)",
            Condition.SCALE_FLATTENED,
            "(3072, 1) if out_features is 3072",
            "reshape it to (3072, 1)",
        ),
        (
            "BF16",
            "(1, 3072)",
            Condition.SCALE_COLUMNWISE,
            "(3072, 1) if out_features is 3072",
            "transpose it to (3072, 1)",
        ),
        ("F16", "(3072, 4)", Condition.SCALE_PER_GROUP, "(out_features, 1)", "4 values per row"),
        (
            "F32",
            "(3072, 1)",
            Condition.SCALE_ROWS_MISMATCH,
            "(out_features, 1)",
            "do not match the weight's out_features",
        ),
        (
            "I32",
            "(3072, 1)",
            Condition.SCALE_DTYPE,
            "(3072, 1) if out_features is 3072 in BF16, F16 or F32",
            "only the dtype is wrong",
        ),
        (
            "F32",
            "(3072, 1, 1)",
            Condition.SCALE_EXTRA_DIMS,
            "(3072, 1) if out_features is 3072",
            "reshape it to (3072, 1)",
        ),
        (
            "F32",
            "(2, 3, 4)",
            Condition.SCALE_OTHER,
            "(out_features, 1)",
            "not one value per output row",
        ),
    ],
)
def test_diagnose_shapes(
    dtype: str, shape: str, condition: Condition, expected: str, phrase: str
) -> None:
    d = _diag(dtype, shape)
    assert d.condition is condition
    assert d.expected == expected
    assert phrase in d.explanation
    assert "out_features" in d.unknowns


def test_diagnose_bad_dtype_is_named_with_the_allowed_ones() -> None:
    d = _diag("F64", "()")
    assert "the scale dtype F64 is not allowed: it must be BF16, F16 or F32" in d.explanation
    assert d.expected == "(out_features, 1) in BF16, F16 or F32"


def test_diagnose_missing_or_unreadable_values_are_unknowns() -> None:
    d = _diag(None, "(3, oops)")
    assert d.condition is Condition.UNPARSED
    assert set(d.unknowns) == {"scale_shape", "scale_slice.get_dtype()", "out_features"}
    assert d.to_dict()["recordId"] == RECORD_ID
    assert d.to_dict()["condition"] == "unparsed"


# ---------------------------------------------------------------------------------------------
# The shared registry and shape parser


def test_registry_lists_the_three_records() -> None:
    assert records_with_validators() == ("129d60f3f6e5f4e0", "5c84e15f4be2c1a6", "b9825390f5c3ae68")
    validator = validator_for(RECORD_ID)
    assert validator is not None
    assert validator.name == "quanto"
    assert validator.captures == ("prefix", "scale_slice.get_dtype()", "scale_shape")
    assert validator_for("0000000000000000") is None
    assert diagnose("0000000000000000", {}) is None
    rule = rule_for("quanto.missing-tensors")
    assert rule is not None and rule.record_id is None


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("()", ()),
        ("(3072,)", (3072,)),
        ("(1, 3072)", (1, 3072)),
        (" ( 1 ,3072 , ) ", (1, 3072)),
        ("[1, 3072]", (1, 3072)),
        ("[]", ()),
        ("(3072)", (3072,)),
        ("torch.Size([2, 3])", (2, 3)),
    ],
)
def test_parse_shape(text: str, shape: tuple[int, ...]) -> None:
    assert parse_shape(text) == shape


@pytest.mark.parametrize(
    "text",
    ["", "(", "3072", "(1, -2)", "(1.5,)", "(a,)", "(1,,2)", "(²,)", "(1, 2]", "__import__('os')",
     "(" + "1," * 20 + ")", "(" + "9" * 30 + ",)", "(" + " " * 300 + ")"],
)  # fmt: skip
def test_parse_shape_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_shape(text)


@given(st.lists(st.integers(0, 2**63), max_size=8).map(tuple))
def test_parse_shape_reads_what_python_prints(shape: tuple[int, ...]) -> None:
    assert parse_shape(repr(shape)) == shape
    assert parse_shape(repr(list(shape))) == shape


@given(st.text(max_size=300))
def test_parse_shape_never_fails_another_way(text: str) -> None:
    try:
        shape = parse_shape(text)
    except ValueError:
        return
    assert all(isinstance(d, int) and d >= 0 for d in shape)
