from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from errkb.checkpoint.inputs import FileError
from errkb.errors import UsageError
from errkb.render import OutputFormat, formats, render
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


def _with(report: CheckReport, records: Mapping[str, Mapping[str, Any]]) -> CheckReport:
    """``report`` carrying ``records`` (what ``KnowledgeBase.check`` attaches)."""
    return replace(report, records=records)


@pytest.fixture
def with_records(seed_records: dict[str, dict[str, Any]]) -> CheckReport:
    return _with(REPORT, seed_records)


@pytest.mark.parametrize("fmt", formats(CheckReport))
def test_every_format_renders(fmt: OutputFormat, with_records: CheckReport) -> None:
    out = render(with_records, fmt)
    assert out.endswith("\n")
    assert "Quanto layer 'enc.0' has incompatible scale F32 (4,)" in out
    assert "file is empty" in out
    if fmt in (OutputFormat.JSON, OutputFormat.SARIF):
        json.loads(out)
    # the CLI may pass the plain string
    assert render(with_records, fmt.value) == out


def test_format_values_are_the_cli_choices() -> None:
    assert [f.value for f in formats(CheckReport)] == ["text", "json", "sarif", "github"]
    with pytest.raises(UsageError):
        render(REPORT, "xml")
    with pytest.raises(UsageError, match="no markdown output"):
        render(REPORT, OutputFormat.MARKDOWN)


def test_text_reads_like_a_linter(with_records: CheckReport) -> None:
    assert render_text(with_records) == (
        "ckpt/model.safetensors: enc.0: Quanto layer 'enc.0' has incompatible scale F32 (4,) "
        f"[{QUANTO_ID}]\n"
        "    fix: Reshape/save _scale as float32/bfloat16/float16 with shape (out_features, 1)\n"
        "ckpt/model.safetensors: Quanto checkpoint is missing quantization_map_base64 "
        "[quanto.missing-map]\n"
        "ckpt/broken.safetensors: error: file is empty\n"
        "checked 1 file(s): 2 finding(s), 1 error(s)\n"
    )


def test_text_without_a_record_has_no_fix_and_a_clean_summary() -> None:
    assert render_text(REPORT).count("fix:") == 0
    assert render_text(CheckReport((), ("a", "b"), ())) == ("checked 2 file(s): no findings\n")


def test_human_formats_escape_the_records_a_report_carries(
    seed_records: dict[str, dict[str, Any]],
) -> None:
    record = seed_records[QUANTO_ID]
    hostile = {**record, "solutions": ["\x1b]52;c;AAAA\x07 reshape it", *record["solutions"]]}
    report = _with(REPORT, {QUANTO_ID: hostile})
    for fmt in (OutputFormat.TEXT, OutputFormat.GITHUB):
        out = render(report, fmt)
        assert "\x1b" not in out and "\\x1b]52;c;AAAA\\x07 reshape it" in out, fmt
    assert hostile["solutions"][0].startswith("\x1b")  # the report's own values are untouched


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


def test_sarif_document(with_records: CheckReport, seed_records: dict[str, dict[str, Any]]) -> None:
    log = json.loads(render_sarif(with_records))
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
    report = _with(report, {QUANTO_ID: {**seed_records[QUANTO_ID], "severity": severity}})
    log = json.loads(render_sarif(report))
    levels = [r["level"] for r in log["runs"][0]["results"]]
    assert levels == [level, "error"]  # a sibling raises upstream: always an error
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] == level
    lines = render_github(report).splitlines()
    assert lines[0].startswith(f"::{command} ")
    assert lines[1].startswith("::error ")


def test_sarif_uri_of_an_absolute_path_with_spaces() -> None:
    finding = Finding("/data/my model/m.safetensors", None, None, "x", None, "linear", "r")
    log = json.loads(render_sarif(CheckReport((finding,), (), ())))
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": "file:///data/my%20model/m.safetensors"}


def test_github_commands(with_records: CheckReport) -> None:
    assert render_github(with_records).splitlines() == [
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
    (line,) = render_github(CheckReport((finding,), (), ())).splitlines()
    assert line == (
        "::error file=C%3A\\ck%2C1\\m.safetensors,title=errkb comfy [comfy.invalid-marker]::"
        "a: 100%25 bad%0D%0Aline two: yes, really"
    )


def test_escape_helpers() -> None:
    assert escape_data("a%b\rc\nd:e,f") == "a%25b%0Dc%0Ad:e,f"
    assert escape_property("a%b\rc\nd:e,f") == "a%25b%0Dc%0Ad%3Ae%2Cf"
    # % is escaped first, so an escape sequence already in the text survives literally.
    assert escape_data("%0A") == "%250A"


def test_a_comfy_record_links_its_own_source(seed_records: dict[str, Any]) -> None:
    finding = Finding("m.safetensors", "l", "l.weight_scale", "msg", COMFY_ID, "comfy", COMFY_ID)
    log = json.loads(render_sarif(CheckReport((finding,), (), (), seed_records)))
    assert (
        log["runs"][0]["tool"]["driver"]["rules"][0]["helpUri"]
        == seed_records[COMFY_ID]["githubUrl"]
    )
