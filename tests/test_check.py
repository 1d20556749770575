from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checkpoints import T, comfy_layer, quanto_layer, quanto_metadata, write

import errkb
from errkb.errors import UsageError
from errkb.validators import Finding
from errkb.validators.preflight import CheckReport, FileError, check

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "data" / "examples"
QUANTO_ID = "5c84e15f4be2c1a6"
COMFY_ID = "b9825390f5c3ae68"
LINEAR_ID = "129d60f3f6e5f4e0"
QMAP = {"enc.0": {"weights": "qint8", "activations": "none"}}
FP8_STATIC = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}


def _json(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def _rules(report: CheckReport) -> list[tuple[str, str]]:
    return [(Path(f.path).name, f.rule) for f in report.findings]


def _errors(report: CheckReport) -> list[tuple[str, str]]:
    return [(Path(e.path).name, e.message) for e in report.errors]


def test_a_clean_directory_exits_zero(tmp_path: Path) -> None:
    write(tmp_path / "a.safetensors", quanto_layer("enc.0"), quanto_metadata(QMAP))
    write(tmp_path / "b.safetensors", comfy_layer("l0"))
    write(tmp_path / "c.safetensors", {"lm_head.weight": T("BF16", (4, 4))})
    _json(tmp_path / "config.json", FP8_STATIC)
    report = check([tmp_path])
    assert report.findings == ()
    assert report.errors == ()
    assert [Path(p).name for p in report.checked] == [
        "a.safetensors",
        "b.safetensors",
        "c.safetensors",
    ]
    assert report.exit_code == 0


def test_findings_of_every_check_in_one_directory(tmp_path: Path) -> None:
    write(
        tmp_path / "a.safetensors",
        quanto_layer("enc.0", scale=T("F32", (4,))),
        quanto_metadata(QMAP),
    )
    write(tmp_path / "b.safetensors", comfy_layer("l0", scale=T("F32", (1, 4))))
    write(tmp_path / "c.safetensors", {"m.gate_up_proj.weight_scale": T("F32", (2,))})
    _json(tmp_path / "config.json", FP8_STATIC)
    report = check([tmp_path])
    assert _rules(report) == [
        ("a.safetensors", QUANTO_ID),
        ("b.safetensors", COMFY_ID),
        ("c.safetensors", LINEAR_ID),
    ]
    assert report.exit_code == 1
    assert report.to_dict()["findings"][0] == {
        "path": str(tmp_path / "a.safetensors"),
        "prefix": "enc.0",
        "tensor": "enc.0.weight._scale",
        "message": "Quanto layer 'enc.0' has incompatible scale F32 (4,)",
        "recordId": QUANTO_ID,
        "check": "quanto",
        "rule": QUANTO_ID,
    }


def test_a_malformed_file_is_an_error_and_the_others_are_still_checked(tmp_path: Path) -> None:
    (tmp_path / "broken.safetensors").write_bytes(b"\x10\x00\x00")
    write(tmp_path / "good.safetensors", comfy_layer("l0", scale=T("F32", (4,))))
    report = check([tmp_path])
    assert _errors(report) == [
        ("broken.safetensors", "file is 3 bytes, too short for the 8-byte header length")
    ]
    assert _rules(report) == [("good.safetensors", COMFY_ID)]
    assert [Path(p).name for p in report.checked] == ["good.safetensors"]
    assert report.exit_code == 2
    assert report.to_dict()["errors"] == [
        {
            "path": str(tmp_path / "broken.safetensors"),
            "message": "file is 3 bytes, too short for the 8-byte header length",
        }
    ]


def test_a_single_file_uses_the_config_beside_it(tmp_path: Path) -> None:
    path = write(tmp_path / "model.safetensors", {"m.qkv_proj.input_scale": T("F32", (3,))})
    _json(tmp_path / "hf_quant_config.json", {"quantization": {"quant_algo": "FP8"}})
    report = check([path])
    assert [(f.rule, f.record_id, f.check) for f in report.findings] == [
        ("linear.qkv-scale-not-scalar", None, "linear")
    ]


def test_no_per_tensor_scheme_means_no_linear_check(tmp_path: Path) -> None:
    path = write(tmp_path / "model.safetensors", {"m.gate_up_proj.weight_scale": T("F32", (2,))})
    assert check([path]).exit_code == 0
    block = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    _json(tmp_path / "config.json", block)
    assert check([path]).exit_code == 0


def _sharded(tmp_path: Path, weight_map: dict[str, str] | None = None) -> Path:
    write(
        tmp_path / "model-00001-of-00002.safetensors",
        {"a.comfy_quant": comfy_layer("a")["a.comfy_quant"], "x.bias": T("F32", (2,))},
    )
    write(
        tmp_path / "model-00002-of-00002.safetensors",
        {"a.weight": T("I8", (4, 8)), "a.weight_scale": T("F32", (1, 4))},
    )
    weight_map = weight_map or {
        "a.comfy_quant": "model-00001-of-00002.safetensors",
        "x.bias": "model-00001-of-00002.safetensors",
        "a.weight": "model-00002-of-00002.safetensors",
        "a.weight_scale": "model-00002-of-00002.safetensors",
    }
    return _json(
        tmp_path / "model.safetensors.index.json",
        {"metadata": {"total_size": 1}, "weight_map": weight_map, "extra": [1]},
    )


def test_a_sharded_checkpoint_through_its_index(tmp_path: Path) -> None:
    report = check([_sharded(tmp_path)])
    assert _rules(report) == [("model-00002-of-00002.safetensors", COMFY_ID)]
    assert len(report.checked) == 2
    assert report.errors == ()


def test_an_index_entry_that_its_shard_does_not_hold_is_an_error(tmp_path: Path) -> None:
    index = _sharded(
        tmp_path,
        {
            "a.comfy_quant": "model-00001-of-00002.safetensors",
            "a.weight": "model-00001-of-00002.safetensors",
            "a.weight_scale": "model-00002-of-00002.safetensors",
        },
    )
    report = check([index])
    assert _errors(report) == [
        (
            "model.safetensors.index.json",
            "weight_map puts tensor 'a.weight' in 'model-00001-of-00002.safetensors', "
            "which does not contain it",
        )
    ]


def test_a_missing_shard_is_an_error_and_the_rest_is_checked(tmp_path: Path) -> None:
    index = _sharded(
        tmp_path,
        {"a.weight": "model-00002-of-00002.safetensors", "b.weight": "model-00009.safetensors"},
    )
    report = check([index])
    assert [name for name, _ in _errors(report)] == ["model-00009.safetensors"]
    assert "cannot read the file" in report.errors[0].message
    assert [Path(p).name for p in report.checked] == ["model-00002-of-00002.safetensors"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "the index is not a JSON object"),
        ("{", "not valid JSON"),
        ('{"metadata": {}}', "the index has no weight_map object"),
        ('{"weight_map": {"a": 3}}', "weight_map entry 'a' is not a file name"),
        ('{"weight_map": {"a": "../../etc/x.safetensors"}}', "outside the index's folder"),
        ('{"weight_map": {"a": "/abs/x.safetensors"}}', "outside the index's folder"),
    ],
)
def test_a_broken_index_is_an_error(tmp_path: Path, content: str, message: str) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(content)
    report = check([index])
    assert len(report.errors) == 1
    assert report.errors[0].path == str(index)
    assert message in report.errors[0].message
    assert report.exit_code == 2


def test_a_diffusers_pipeline_is_checked_per_component(tmp_path: Path) -> None:
    write(
        tmp_path / "text_encoder" / "model.safetensors",
        quanto_layer("enc.0", scale=T("F32", ())),
        quanto_metadata(QMAP),
    )
    write(tmp_path / "transformer" / "diffusion_pytorch_model.safetensors", comfy_layer("blk"))
    (tmp_path / "tokenizer").mkdir()
    report = check([tmp_path])
    assert _rules(report) == [("model.safetensors", QUANTO_ID)]
    assert len(report.checked) == 2


def test_bad_inputs_are_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = check([tmp_path / "nope.safetensors", tmp_path / "empty"])
    assert _errors(report) == [
        ("nope.safetensors", "no such file or directory"),
        ("empty", "no .safetensors files in this directory"),
    ]
    assert report.checked == ()
    assert report.exit_code == 2


def test_a_broken_config_is_an_error_but_the_weights_are_checked(tmp_path: Path) -> None:
    write(tmp_path / "m.safetensors", comfy_layer("l0", scale=T("F32", (4,))))
    (tmp_path / "config.json").write_text("{not json")
    report = check([tmp_path])
    assert [name for name, _ in _errors(report)] == ["config.json"]
    assert report.errors[0].message.startswith("not valid JSON")
    assert _rules(report) == [("m.safetensors", COMFY_ID)]


def test_a_file_reached_twice_is_checked_once(tmp_path: Path) -> None:
    path = write(tmp_path / "m.safetensors", comfy_layer("l0", scale=T("F32", (4,))))
    report = check([tmp_path, path, str(path)])
    assert len(report.checked) == 1
    assert len(report.findings) == 1


def test_all_layers_is_passed_to_every_check(tmp_path: Path) -> None:
    write(
        tmp_path / "m.safetensors",
        {**comfy_layer("a", scale=T("F32", (4,))), **comfy_layer("b", scale=T("F32", (1, 4)))},
    )
    assert len(check([tmp_path]).findings) == 1
    assert len(check([tmp_path], all_layers=True).findings) == 2


def test_an_oversized_marker_is_an_error_for_its_file(tmp_path: Path) -> None:
    tensors = {**comfy_layer("a", with_marker=False), "a.comfy_quant": T("U8", (2_000_000,))}
    write(tmp_path / "m.safetensors", tensors)
    report = check([tmp_path])
    assert _errors(report) == [
        (
            "m.safetensors",
            "tensor 'a.comfy_quant' is 2000000 bytes; errkb reads at most 1000000 bytes of it",
        )
    ]


def test_no_paths_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        check([])


def test_exit_codes() -> None:
    finding = Finding("p", None, None, "m", None, "quanto", "quanto.missing-map")
    error = FileError("p", "bad")
    assert CheckReport((), (), ()).exit_code == 0
    assert CheckReport((finding,), ("p",), ()).exit_code == 1
    assert CheckReport((), (), (error,)).exit_code == 2
    assert CheckReport((finding,), ("p",), (error,)).exit_code == 2


# The example logs shipped with errkb carry upstream's real messages: a checkpoint built to
# the same shapes must produce the very same text.


def test_quanto_message_matches_the_example_log(tmp_path: Path) -> None:
    prefix = "encoder.block.0.layer.0.SelfAttention.q"
    write(
        tmp_path / "model.safetensors",
        quanto_layer(prefix, 4096, 4, scale=T("F32", (4096,))),
        quanto_metadata({prefix: QMAP["enc.0"]}),
    )
    (finding,) = check([tmp_path]).findings
    assert (
        f"ValueError: {finding.message}\n"
        in (EXAMPLES / "quanto-incompatible-scale.log").read_text()
    )


def test_linear_message_matches_the_example_log(tmp_path: Path) -> None:
    write(
        tmp_path / "model.safetensors",
        {"model.layers.0.mlp.gate_up_proj.weight_scale": T("F32", (16384,))},
    )
    _json(tmp_path / "config.json", {"quantization_config": {"quant_method": "fp8"}})
    (finding,) = check([tmp_path]).findings
    assert (
        f"ValueError: {finding.message}\n"
        in (EXAMPLES / "merged-column-scalar-scale.log").read_text()
    )


def test_the_knowledge_base_check_carries_the_records_its_findings_name(
    kb: errkb.KnowledgeBase, tmp_path: Path
) -> None:
    # errkb.check reads no database: no records. KnowledgeBase.check adds exactly the ones
    # named, as stored, and nothing else changes (the JSON output included).
    alone = check([EXAMPLES / "checkpoints"])
    assert alone.records == {} and set(alone.record_ids) == {QUANTO_ID, COMFY_ID, LINEAR_ID}
    report = kb.check([EXAMPLES / "checkpoints"])
    assert report.findings == alone.findings and report.to_dict() == alone.to_dict()
    assert set(report.records) == set(report.record_ids)
    assert report.records[QUANTO_ID] == kb.store.raw_record(QUANTO_ID)
    # Records the knowledge base lacks are simply not there (their findings show no fix).
    with errkb.open(tmp_path / "empty.sqlite3", bundled=False) as empty:
        assert empty.check([EXAMPLES / "checkpoints"]).records == {}
