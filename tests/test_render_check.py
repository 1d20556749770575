from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from errkb.checkpoint.inputs import FileError
from errkb.errors import UsageError
from errkb.render import OutputFormat, RenderOptions, formats, render
from errkb.render.check import (
    escape_data,
    escape_property,
    render_github,
    render_json,
    render_sarif,
    render_text,
)
from errkb.report import CheckReport, Finding

QUANTO_ID = "5c84e15f4be2c1a6"
COMFY_ID = "b9825390f5c3ae68"

RECORD = Finding(
    path="ckpt/model.safetensors",
    prefix="enc.0",
    tensor="enc.0.weight._scale",
    message="Quanto layer 'enc.0' has incompatible scale F32 (4,)",
    record_id=QUANTO_ID,
    check="quanto",
    rule=QUANTO_ID,
)
SIBLING = Finding(
    path="ckpt/model.safetensors",
    prefix=None,
    tensor=None,
    message="Quanto checkpoint is missing quantization_map_base64",
    record_id=None,
    check="quanto",
    rule="quanto.missing-map",
)
ERROR = FileError("ckpt/broken.safetensors", "file is empty")
REPORT = CheckReport((RECORD, SIBLING), ("ckpt/model.safetensors",), (ERROR,))


@pytest.fixture
def lookup(seed_records: dict[str, dict[str, Any]]) -> Any:
    return seed_records.get


def _with_severity(seed_records: dict[str, dict[str, Any]], severity: str) -> Any:
    def lookup(record_id: str) -> Mapping[str, Any] | None:
        record = seed_records.get(record_id)
        return None if record is None else {**record, "severity": severity}

    return lookup


@pytest.mark.parametrize("fmt", formats(CheckReport))
def test_every_format_renders(fmt: OutputFormat, lookup: Any) -> None:
    out = render(REPORT, fmt, RenderOptions(records=lookup))
    assert out.endswith("\n")
    assert "Quanto layer 'enc.0' has incompatible scale F32 (4,)" in out
    assert "file is empty" in out
    if fmt in (OutputFormat.JSON, OutputFormat.SARIF):
        json.loads(out)
    # the CLI may pass the plain string
    assert render(REPORT, fmt.value, RenderOptions(records=lookup)) == out


def test_format_values_are_the_cli_choices() -> None:
    assert [f.value for f in formats(CheckReport)] == ["text", "json", "sarif", "github"]
    with pytest.raises(UsageError):
        render(REPORT, "xml")
    with pytest.raises(UsageError, match="no markdown output"):
        render(REPORT, OutputFormat.MARKDOWN)


def test_text_reads_like_a_linter(lookup: Any) -> None:
    assert render_text(REPORT, lookup) == (
        "ckpt/model.safetensors: enc.0: Quanto layer 'enc.0' has incompatible scale F32 (4,) "
        f"[{QUANTO_ID}]\n"
        "    fix: Reshape/save _scale as float32/bfloat16/float16 with shape (out_features, 1)\n"
        "ckpt/model.safetensors: Quanto checkpoint is missing quantization_map_base64 "
        "[quanto.missing-map]\n"
        "ckpt/broken.safetensors: error: file is empty\n"
        "checked 1 file(s): 2 finding(s), 1 error(s)\n"
    )


def test_text_without_a_record_has_no_fix_and_a_clean_summary() -> None:
    assert render_text(REPORT, lambda _: None).count("fix:") == 0
    assert render_text(CheckReport((), ("a", "b"), ()), lambda _: None) == (
        "checked 2 file(s): no findings\n"
    )


def test_text_accepts_the_envelope_shape(seed_records: dict[str, dict[str, Any]]) -> None:
    envelope = {"record": seed_records[QUANTO_ID], "datasetVersion": "2026-08-28T06:17:29.519Z"}
    out = render_text(CheckReport((RECORD,), (), ()), lambda _: envelope)
    assert "    fix: Reshape/save _scale" in out


def test_json_is_the_report_dict() -> None:
    assert json.loads(render_json(REPORT)) == REPORT.to_dict()
    assert json.loads(render_json(REPORT))["findings"][1] == {
        "path": "ckpt/model.safetensors",
        "prefix": None,
        "tensor": None,
        "message": "Quanto checkpoint is missing quantization_map_base64",
        "recordId": None,
        "check": "quanto",
        "rule": "quanto.missing-map",
    }


def test_sarif_document(lookup: Any, seed_records: dict[str, dict[str, Any]]) -> None:
    log = json.loads(render_sarif(REPORT, lookup))
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [QUANTO_ID, "quanto.missing-map"]
    assert rules[0]["helpUri"] == seed_records[QUANTO_ID]["githubUrl"]
    assert rules[0]["name"] == "quanto.incompatible-scale"
    assert rules[0]["shortDescription"]["text"] == seed_records[QUANTO_ID]["errorMessage"]
    assert "helpUri" not in rules[1]
    results = run["results"]
    assert [(r["ruleId"], r["ruleIndex"], r["level"]) for r in results] == [
        (QUANTO_ID, 0, "error"),
        ("quanto.missing-map", 1, "error"),
    ]
    first = results[0]
    assert first["message"]["text"] == RECORD.message
    location = first["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "ckpt/model.safetensors"
    assert location["logicalLocations"] == [{"name": "enc.0", "kind": "module"}]
    assert first["properties"] == {
        "check": "quanto",
        "recordId": QUANTO_ID,
        "tensor": "enc.0.weight._scale",
    }
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"] == "file is empty"


@pytest.mark.parametrize(
    ("severity", "level", "command"),
    [
        ("critical", "error", "error"),
        ("error", "error", "error"),
        ("warning", "warning", "warning"),
        ("info", "note", "notice"),
    ],
)
def test_levels_follow_the_record_severity(
    seed_records: dict[str, dict[str, Any]], severity: str, level: str, command: str
) -> None:
    report = CheckReport((RECORD, SIBLING), (), ())
    lookup = _with_severity(seed_records, severity)
    log = json.loads(render_sarif(report, lookup))
    levels = [r["level"] for r in log["runs"][0]["results"]]
    assert levels == [level, "error"]  # a sibling raises upstream: always an error
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] == level
    lines = render_github(report, lookup).splitlines()
    assert lines[0].startswith(f"::{command} ")
    assert lines[1].startswith("::error ")


def test_sarif_uri_of_an_absolute_path_with_spaces() -> None:
    finding = Finding("/data/my model/m.safetensors", None, None, "x", None, "linear", "r")
    log = json.loads(render_sarif(CheckReport((finding,), (), ()), lambda _: None))
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": "file:///data/my%20model/m.safetensors"}


def test_github_commands(lookup: Any) -> None:
    assert render_github(REPORT, lookup).splitlines() == [
        f"::error file=ckpt/model.safetensors,title=errkb quanto [{QUANTO_ID}]::"
        "enc.0: Quanto layer 'enc.0' has incompatible scale F32 (4,)%0A"
        "fix: Reshape/save _scale as float32/bfloat16/float16 with shape (out_features, 1)",
        "::error file=ckpt/model.safetensors,title=errkb quanto [quanto.missing-map]::"
        "Quanto checkpoint is missing quantization_map_base64",
        "::error file=ckpt/broken.safetensors,title=errkb%3A cannot check::file is empty",
    ]


def test_github_escapes_data_and_properties() -> None:
    finding = Finding(
        "C:\\ck,1\\m.safetensors",
        "a",
        None,
        "100% bad\r\nline two: yes, really",
        None,
        "comfy",
        "comfy.invalid-marker",
    )
    (line,) = render_github(CheckReport((finding,), (), ()), lambda _: None).splitlines()
    assert line == (
        "::error file=C%3A\\ck%2C1\\m.safetensors,title=errkb comfy [comfy.invalid-marker]::"
        "a: 100%25 bad%0D%0Aline two: yes, really"
    )


def test_escape_helpers() -> None:
    assert escape_data("a%b\rc\nd:e,f") == "a%25b%0Dc%0Ad:e,f"
    assert escape_property("a%b\rc\nd:e,f") == "a%25b%0Dc%0Ad%3Ae%2Cf"
    # % is escaped first, so an escape sequence already in the text survives literally.
    assert escape_data("%0A") == "%250A"


def test_a_comfy_record_links_its_own_source(lookup: Any, seed_records: dict[str, Any]) -> None:
    finding = Finding("m.safetensors", "l", "l.weight_scale", "msg", COMFY_ID, "comfy", COMFY_ID)
    log = json.loads(render_sarif(CheckReport((finding,), (), ()), lookup))
    assert (
        log["runs"][0]["tool"]["driver"]["rules"][0]["helpUri"]
        == seed_records[COMFY_ID]["githubUrl"]
    )
