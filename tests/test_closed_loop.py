"""Validators and matcher agree: every finding that maps to a record is explained as that record.

For each checkpoint that fails a check with a record behind it, ``kb.explain(finding.message)``
must return exactly that record, its captured prefix must be the finding's layer, and rendering
the record's template with the captures must give back the finding's message word for word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import errkb
from errkb.records.template import parse_template
from tests.checkpoints import T, comfy_layer, quanto_layer, quanto_metadata, write
from tests.conftest import COMFY_ID, EXAMPLES, LINEAR_ID, QUANTO_ID

PREFIXES = ["enc.0", "model.layers.10.self_attn.o_proj", "it's.a'layer", 'with"double', "ünï.cödé"]


def _quanto(tmp: Path, prefix: str, scale: T) -> Path:
    qmap = {prefix: {"weights": "qint8", "activations": "none"}}
    return write(
        tmp / "q.safetensors", quanto_layer(prefix, 6, 4, scale=scale), quanto_metadata(qmap)
    )


def _comfy(tmp: Path, prefix: str, weight: T, scale: T) -> Path:
    return write(tmp / "c.safetensors", comfy_layer(prefix, weight=weight, scale=scale))


def _linear(tmp: Path, prefix: str, scale: T) -> Path:
    model = tmp / "model"
    model.mkdir()
    config = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}
    (model / "config.json").write_text(json.dumps(config))
    write(model / "model.safetensors", {
        f"{prefix}.gate_up_proj.weight": T("F8_E4M3", (8, 4)),
        f"{prefix}.gate_up_proj.weight_scale": scale,
    })  # fmt: skip
    return model


CASES = [
    *[(QUANTO_ID, "quanto", p, T("F32", ())) for p in PREFIXES],
    (QUANTO_ID, "quanto", "enc.1", T("F32", (1, 6))),
    (QUANTO_ID, "quanto", "enc.1", T("F64", (6, 1))),
    (QUANTO_ID, "quanto", "enc.1", T("I32", (6, 1, 1))),
    *[(COMFY_ID, "comfy", p, T("F32", (1, 4))) for p in PREFIXES],
    (COMFY_ID, "comfy", "blk.0", T("F32", (4,))),
    (COMFY_ID, "comfy", "blk.0", T("F32", (4, 2))),
    (LINEAR_ID, "linear", "model.layers.0.mlp", T("F32", (2,))),
    (LINEAR_ID, "linear", "model.layers.3.mlp", T("BF16", (1, 2))),
    (LINEAR_ID, "linear", "model.layers.3.mlp", T("F32", (0,))),
]


@pytest.mark.parametrize(("record_id", "kind", "prefix", "scale"), CASES)
def test_finding_is_explained_as_its_record(
    kb: errkb.KnowledgeBase, tmp_path: Path, record_id: str, kind: str, prefix: str, scale: T
) -> None:
    if kind == "quanto":
        path = _quanto(tmp_path, prefix, scale)
    elif kind == "comfy":
        path = _comfy(tmp_path, prefix, T("I8", (4, 8)), scale)
    else:
        path = _linear(tmp_path, prefix, scale)
    report = errkb.check([path])
    (finding,) = [f for f in report.findings if f.record_id]
    assert finding.record_id == record_id
    explained = kb.match_message(finding.message, "ValueError")
    (match,) = explained.exact
    assert match.id == record_id
    if "prefix" in match.capture_dict:
        assert match.capture_dict["prefix"] == finding.prefix
    template = parse_template(match.record["errorMessage"])
    assert template.render(match.capture_dict) == finding.message
    assert match.diagnosis is not None and match.diagnosis.record_id == record_id


def test_shipped_example_checkpoints(kb: errkb.KnowledgeBase) -> None:
    report = errkb.check([EXAMPLES / "checkpoints"])
    assert sorted(f.record_id or "" for f in report.findings) == sorted(
        [QUANTO_ID, COMFY_ID, LINEAR_ID]
    )
    assert report.exit_code == 1
    for finding in report.findings:
        assert [m.id for m in kb.match_message(finding.message).exact] == [finding.record_id]
