"""The render registry: every report type renders in every format it registered, and no other.

Samples come from real library calls on the seed dataset, so each renderer sees a report as a
command would. Every JSON output must be strictly valid JSON, and where a schema exists
(``explain``/``match``: explanation.schema.json; ``show``: record.v2.schema.json) it must
validate against it. A report type added to the registry without a sample here fails
``test_every_registered_type_has_a_sample``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.errors import UsageError
from errkb.maint.lint import lint
from errkb.records import schema_validator
from errkb.render import (
    HUMAN_FORMATS,
    OutputFormat,
    RenderOptions,
    formats,
    registered,
    render,
    sanitize_text,
)
from errkb.report import Diagnostics, RecordList, UpdateCheck
from errkb.triage import triage
from tests.conftest import DATASET, EXAMPLES, LINEAR_ID, QUANTO_ID

V_OLD, V_NEW = "2026-09-01T00:00:00.000Z", "2026-09-02T00:00:00.000Z"
SCHEMAS = {
    "Report": "explanation.schema.json",
    "RecordView": "record.v2.schema.json",
    "SearchReport": "search.schema.json",
    "CheckReport": "check.schema.json",
    "TriageReport": "triage.schema.json",
}
QKV_SIBLING = (
    "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when loaded_shard_id "
    "is None, got shape (3,)"
)


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    db = tmp_path_factory.mktemp("render") / "kb.sqlite3"
    with errkb.open(db) as kb:
        out: dict[str, list[Any]] = {
            "Report": [
                kb.explain((EXAMPLES / "quanto-incompatible-scale.log").read_text()),
                kb.match_message(QKV_SIBLING, "ValueError"),  # similar suggestions only
                kb.explain("nothing to see here"),
            ],
            "RecordView": [kb.view(QUANTO_ID), kb.view(LINEAR_ID)],
            "RecordList": [RecordList.of(kb.records())],
            "Stats": [kb.stats()],
            "IngestReport": [kb.ingest([DATASET])],
            "CheckReport": [kb.check([EXAMPLES / "checkpoints", "/nonexistent.safetensors"])],
            "LintReport": [lint([DATASET])],
            "SyncReport": [kb.sync(str(DATASET), dry_run=True)],
            # What `sync --check` reports, either way (reading a manifest is test_sync_cdn's).
            "UpdateCheck": [
                UpdateCheck("https://mirror.invalid", V_OLD, V_NEW),
                UpdateCheck("https://mirror.invalid", V_NEW, V_NEW),
            ],
            "VersionList": [kb.versions()],
            "RecordHistory": [kb.history(QUANTO_ID)],
            "SearchReport": [kb.search("quanto scale"), kb.search("zzzqqq")],
            "TriageReport": [
                triage(
                    [str(EXAMPLES / "quanto-incompatible-scale.log"), "/nonexistent.log"],
                    db=db,
                    jobs=1,
                ),
                triage([], db=db, jobs=1),
            ],
            # Standard error's lines beside a report: more problems than shown, and untrusted text.
            "Diagnostics": [
                Diagnostics(
                    tuple(f"r{i}.json: bad \x1b]52;c;x\x07" for i in range(25)),
                    ("w.json: odd",),
                    limit=20,
                    before=("source: here",),
                    after=("rejected records written to r.jsonl",),
                ),
            ],
        }
    return out


def test_every_registered_type_has_a_sample(samples: dict[str, list[Any]]) -> None:
    types = {t.__name__ for t, _ in registered()}
    assert types == {name for name in samples if not name.startswith("_")}


PAIRS = [(t.__name__, fmt) for t, fmt in registered()]


@pytest.mark.parametrize(("type_name", "fmt"), PAIRS, ids=[f"{t}-{f.value}" for t, f in PAIRS])
def test_every_report_renders_in_every_registered_format(
    samples: dict[str, list[Any]], type_name: str, fmt: OutputFormat
) -> None:
    for report in samples[type_name]:
        text = render(report, fmt)
        assert isinstance(text, str) and text.endswith("\n"), (type_name, fmt)
        assert isinstance(report.exit_code, int)
        if fmt in (OutputFormat.JSON, OutputFormat.SARIF):
            data = json.loads(text, parse_constant=_refuse)
            if fmt is OutputFormat.JSON and type_name in SCHEMAS:
                schema_validator(SCHEMAS[type_name]).validate(data)
        if fmt in HUMAN_FORMATS:
            assert text == sanitize_text(text) or "\x1b[" in text  # only our own styling


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


@pytest.mark.parametrize("type_name", sorted(SCHEMAS))
def test_every_type_offers_text_and_json(samples: dict[str, list[Any]], type_name: str) -> None:
    assert {OutputFormat.TEXT, OutputFormat.JSON} <= set(formats(type(samples[type_name][0])))


def test_an_unregistered_pair_is_an_error_not_text(samples: dict[str, list[Any]]) -> None:
    stats = samples["Stats"][0]
    assert OutputFormat.MARKDOWN not in formats(type(stats))
    with pytest.raises(UsageError, match="Stats has no markdown output"):
        render(stats, OutputFormat.MARKDOWN)
    with pytest.raises(UsageError, match="unknown output format 'yaml'"):
        render(stats, "yaml")
    with pytest.raises(UsageError, match="str has no text output"):
        render("a string is no report", OutputFormat.TEXT)


def test_similar_suggestions_render_as_text(samples: dict[str, list[Any]]) -> None:
    report = samples["Report"][1]
    assert not report.explained and report.matches
    text = render(report, OutputFormat.TEXT)
    lines = text.splitlines()
    assert lines[0] == "Not recognised. Closest known errors (suggestions only):"
    assert lines[1] == f"  line 1: ValueError: {QKV_SIBLING}"
    assert lines[2].startswith(f"    ~ {LINEAR_ID} expected-scalar-scale-for-fused-in-checkpoint")
    assert "(similarity 0." in lines[2]
    assert lines[-2] == "No known error found."
    assert lines[-1].startswith("Note: this knowledge base holds only the bundled sample")
    assert "Exceptions with no known record" not in text  # the suggestion already lists it


def test_human_formats_escape_controls_but_json_is_exact(samples: dict[str, list[Any]]) -> None:
    base = samples["RecordView"][0]
    hostile = type(base)({**base.record, "documentation": "a\x1b]0;pwned\x07b\r\x9bc"})
    text = render(hostile, OutputFormat.TEXT)
    assert "a\\x1b]0;pwned\\x07b\\x0d\\x9bc" in text and "\x1b" not in text
    markdown = render(hostile, OutputFormat.MARKDOWN)
    assert "\x07" not in markdown and "\\x07" in markdown
    exact = json.loads(render(hostile, OutputFormat.JSON))
    assert exact["documentation"] == "a\x1b]0;pwned\x07b\r\x9bc"


def test_colour_is_only_ours(samples: dict[str, list[Any]]) -> None:
    text = render(samples["Report"][0], OutputFormat.TEXT, RenderOptions(color=True))
    assert "\x1b[" in text  # the renderer's own styling survives sanitising (done before)
    plain = render(samples["Report"][0], OutputFormat.TEXT)
    assert "\x1b" not in plain


def test_nan_becomes_null_in_json(samples: dict[str, list[Any]], tmp_path: Path) -> None:
    base = samples["RecordView"][0]
    nan = type(base)({**base.record, "extraScore": float("nan"), "extraMax": float("-inf")})
    data = json.loads(render(nan, OutputFormat.JSON), parse_constant=_refuse)
    assert data["extraScore"] is None and data["extraMax"] is None
    assert data["id"] == base.record["id"]


def test_diagnostics_list_the_first_problems_escaped_then_count_the_rest() -> None:
    bad = tuple(f"r{i}.json: bad \x1b]52;c;x\x07" for i in range(22))
    text = render(Diagnostics(bad, ("w.json: odd",), limit=20, before=("source: s",)), "text")
    lines = text.splitlines()
    assert lines[0] == "source: s"
    assert lines[1] == "rejected: r0.json: bad \\x1b]52;c;x\\x07"
    assert lines[20:] == [
        "rejected: r19.json: bad \\x1b]52;c;x\\x07",
        "... and 2 more",
        "warning: w.json: odd",
    ]
    assert "\x1b" not in text


def test_the_explanation_schema_resolves_without_a_registry(
    samples: dict[str, list[Any]],
) -> None:
    from jsonschema import Draft202012Validator

    root = Path(__file__).resolve().parent.parent / "schemas"
    schema = json.loads((root / "explanation.schema.json").read_text())
    record = json.loads((root / "record.v2.schema.json").read_text())
    # The embedded record schema is the shipped one (minus $schema): it cannot drift.
    assert schema["$defs"]["record"] == {k: v for k, v in record.items() if k != "$schema"}
    data = json.loads(render(samples["Report"][0], OutputFormat.JSON))
    Draft202012Validator(schema).validate(data)  # no registry: the $ref resolves inside
    data["matches"][0]["record"]["severity"] = "bogus"
    assert not Draft202012Validator(schema).is_valid(data)  # and the record is still checked
