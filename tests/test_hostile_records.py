"""Hostile records: oversize and uncompilable patterns, placeholder explosions, trailing
newlines in shaped fields, bogus dataset versions, deep nesting, lone surrogates, duplicate keys.

Whatever a record holds, ingest, lint and sync refuse it with its id and JSON path in bounded
time and memory, and explain never fails because of one stored record.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from errkb.errors import SyncError
from errkb.records import (
    _COMPILE_CHECK_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_PLACEHOLDERS,
    check_envelope,
    check_record,
    dataset_version_problem,
    fast_valid,
    schema_validator,
)
from errkb.records.patterns import compile_error, template_regex
from errkb.records.template import parse_template
from errkb.sync.publish import parse_manifest
from tests.conftest import QUANTO_ID, make_record
from tests.hostile import run_errkb


def _write_jsonl(path: Path, objs: list[Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


@pytest.fixture
def base(seed_records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return seed_records[QUANTO_ID]


def _paths(record: dict[str, Any]) -> dict[str, str]:
    checked = check_record(record, source="t")
    return {p.json_path: p.rule for p in checked.problems}


# --------------------------------------------------------------- sizes and placeholders
def test_two_megabyte_message_is_refused_with_id_and_path(tmp_path: Path, base: dict) -> None:
    rec = make_record(base, "Connection refused by peer " + "!#%&,;.*+?" * 200_000)
    out = run_errkb(
        [
            "--db",
            str(tmp_path / "kb.sqlite3"),
            "ingest",
            str(_write_jsonl(tmp_path / "r.jsonl", [rec])),
        ],
        timeout=60,
    )
    assert out.returncode == 1, out
    assert not out.crashed
    assert f"[{rec['id']}] $.errorMessage: 2000027 characters, over the" in out.stderr
    assert f"[{rec['id']}] $.messagePattern:" in out.stderr


@pytest.mark.parametrize("count", [5_000, 30_000])
def test_placeholder_explosion_is_refused(tmp_path: Path, base: dict, count: int) -> None:
    rec = make_record(base, "Tensor shape mismatch " + " ".join(["{v}"] * count))
    if len(rec["errorMessage"]) > MAX_MESSAGE_CHARS:
        rule = _paths(rec)["$.errorMessage"]
        assert "characters, over" in rule
    rec2 = make_record(base, "Tensor shape mismatch " + "{v}" * (MAX_PLACEHOLDERS + 1))
    assert "placeholders, over the limit of 64" in _paths(rec2)["$.errorMessage"]
    # and the CLI path, bounded: lint and ingest both answer quickly
    src = _write_jsonl(tmp_path / "r.jsonl", [rec, rec2])
    for args in (["lint", str(src)], ["ingest", str(src)]):
        out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), *args], timeout=60)
        assert out.returncode == 1, out
        assert not out.crashed


def test_capture_groups_in_message_pattern_are_capped(base: dict) -> None:
    rec = make_record(base, "Tensor shape mismatch {v}")
    rec["messagePattern"] = "Tensor shape mismatch " + "(x)" * (MAX_PLACEHOLDERS + 1)
    assert "65 capture groups, over the limit of 64" in _paths(rec)["$.messagePattern"]


def test_records_up_to_the_limits_compile(base: dict) -> None:
    # The pin behind _COMPILE_CHECK_CHARS: below it a template regex always compiles, and at the
    # size limit with the most placeholders and the worst characters it still does.
    nasty = "\\.*+?()[]|^$"
    small = "x" + (nasty * 400)[: _COMPILE_CHECK_CHARS - 200] + "{!r}" * MAX_PLACEHOLDERS
    assert compile_error(template_regex(parse_template(small))) is None
    biggest = (nasty * 2000)[: MAX_MESSAGE_CHARS - 4 * MAX_PLACEHOLDERS] + "{!r}" * MAX_PLACEHOLDERS
    assert compile_error(template_regex(parse_template(biggest))) is None
    # A whole record near the limits (its derived messagePattern escapes, so doubles, symbols).
    half = "Error " + (nasty * 2000)[: MAX_MESSAGE_CHARS // 2 - 400] + "{!r}" * MAX_PLACEHOLDERS
    rec = make_record(base, half)
    assert check_record(rec, source="t").ok, check_record(rec, source="t").problems


def test_a_stored_matcher_re2_refuses_is_one_log_line_not_the_pattern(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # In process, the engine's own logging (fd 2) included: RE2 would echo the whole pattern,
    # a line per newline in it, on every compile of it.
    from errkb.match.matcher import _compile_or_skip
    from errkb.records.patterns import PatternOrigin, PatternSpec

    regex = "(?s)^(?:" + "(?P<c0>.+?)" + "a\n" * 3000 + "a{1000}{1000})$"
    spec = PatternSpec(
        "f" * 16,
        regex,
        ("x",),
        (False,),
        "",
        0,
        PatternOrigin.TEMPLATE,
        None,
        None,
        "x.py",
        None,
        (),
        "x",
    )
    assert _compile_or_skip(spec) is None
    assert _compile_or_skip(spec) is None
    err = capfd.readouterr().err
    assert err.count("\n") < 2 and len(err) < 500, err[:300]
    assert [r.getMessage()[:46] for r in caplog.records] == [
        f"record {'f' * 16} skipped: its matcher d"
    ] * 2


@pytest.mark.slow
def test_explain_skips_a_stored_record_that_does_not_compile(tmp_path: Path, base: dict) -> None:
    db = tmp_path / "kb.sqlite3"
    rec = make_record(base, "Connection refused by peer {host}")
    out = run_errkb(["--db", str(db), "ingest", str(_write_jsonl(tmp_path / "r.jsonl", [rec]))])
    assert out.returncode == 0, out
    # A database written before validation had limits: the record's matcher is too big for RE2.
    # RE2 logs the whole pattern with each error (a line per newline in it) unless told not to.
    huge = "Connection refused by peer {host}" + "a\n" * 25_000 + "a" * 950_000
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE records SET error_message = ?, message_pattern = ? WHERE id = ?",
            (huge, huge, rec["id"]),
        )
        # Its stored matcher (migration 0006's pattern_specs) is the one such a record got.
        conn.execute(
            "UPDATE pattern_specs SET template = ?, regex = ? WHERE record_id = ?",
            (huge, "(?s)^(?:" + huge.replace("{host}", "(?P<c0>.+?)") + ")$", rec["id"]),
        )
    out = run_errkb(
        ["--db", str(db), "explain", "-"],
        stdin=b"ValueError: Connection refused by peer db.local" + b"a" * 1000 + b"\n",
        timeout=120,
    )
    assert out.returncode in (1, 2), out  # refused as an invalid record, named
    assert not out.crashed
    assert f"record {rec['id']} skipped: its matcher does not compile under RE2" in out.stderr
    # RE2's own diagnostics stay quiet: no pattern echoed (25,000 lines, a megabyte).
    assert out.stderr.count("\n") < 20 and len(out.stderr) < 4000, len(out.stderr)


def test_lint_on_ten_megabyte_fields_is_bounded(tmp_path: Path, base: dict) -> None:
    a = make_record(base, "Connection refused by peer {host}")
    a["messagePattern"] = "Connection refused " + "x" * 10_000_000
    b = make_record(base, "Connection refused by peer {host}" + " y" * 5_000_000)
    src = _write_jsonl(tmp_path / "r.jsonl", [a, b])
    out = run_errkb(["lint", str(src)], memory=int(1.2 * (1 << 30)), timeout=120)
    assert out.returncode == 1, out
    assert not out.crashed
    assert out.stdout.count("over the 16384-character limit") == 3, out.stdout


# --------------------------------------------------------------- trailing newlines
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", "7735cad3a6addf3e\n"),
        ("repo", "evil/repo\n"),
        ("slug", "some-slug\n"),
        ("tags", ["tag\n"]),
        ("backgroundTag", "bg\n"),
        ("analyzedSha", "0" * 40 + "\n"),
    ],
)
def test_trailing_newline_is_refused(base: dict, field: str, value: Any) -> None:
    rec = copy.deepcopy(base)
    rec[field] = value
    assert not fast_valid(rec)
    errors = list(schema_validator("record.v2.schema.json").iter_errors(rec))
    assert errors, f"the schema accepts {field}={value!r}"
    assert any(p.startswith(f"$.{field}") for p in _paths(rec)), _paths(rec)


def test_shapes_without_newline_still_pass(base: dict) -> None:
    assert fast_valid(base)
    assert not list(schema_validator("record.v2.schema.json").iter_errors(base))


def test_ingest_refuses_a_newline_id(tmp_path: Path, base: dict) -> None:
    rec = copy.deepcopy(base)
    rec["id"] = "7735cad3a6addf3e\n"
    src = _write_jsonl(tmp_path / "r.jsonl", [rec])
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(src)])
    assert out.returncode == 1, out
    assert "$.id" in out.stderr


# --------------------------------------------------------------- dataset versions
NOW = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "version", ["2026-09-02", "2026-W36-3", "2026-09-02T10:00:00", "2026-09-02 10:00", 20260902]
)
def test_loose_dataset_versions_are_refused(version: object) -> None:
    assert "not an ISO timestamp" in (dataset_version_problem(version, now=NOW) or "")


@pytest.mark.parametrize("version", ["9999-12-31T23:59:59.999Z", "2026-12-03T08:00:01Z"])
def test_far_future_versions_are_refused(version: str) -> None:
    assert "in the future" in (dataset_version_problem(version, now=NOW) or "")


@pytest.mark.parametrize("version", ["2026-09-02T10:00:00Z", "2026-12-02T08:00:00+02:00"])
def test_real_versions_pass(version: str) -> None:
    assert dataset_version_problem(version, now=NOW) is None


def test_envelope_and_manifest_refuse_future_versions(base: dict) -> None:
    env = {"record": base, "datasetVersion": "9999-12-31T23:59:59.999Z"}
    problems = check_envelope(env, source="t", location="")
    assert [p.json_path for p in problems] == ["$.datasetVersion"]
    for version in ("9999-12-31T23:59:59.999Z", "2026-W36-3", "2026-09-02"):
        manifest = json.dumps({"schemaVersion": 2, "datasetVersion": version, "files": {}})
        with pytest.raises(SyncError, match="datasetVersion"):
            parse_manifest(manifest.encode(), "manifest.json")


# --------------------------------------------------------------- JSON structure
@pytest.mark.parametrize("command", ["ingest", "lint"])
@pytest.mark.parametrize("shape", ["jsonl", "document"])
def test_deep_nesting_is_a_clear_error(tmp_path: Path, command: str, shape: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    src = tmp_path / ("r.jsonl" if shape == "jsonl" else "r.json")
    if shape == "jsonl":
        src.write_text('{"a": 1}\n{"x": ' + deep + "}\n")
        where = "line 2"
    else:
        src.write_text('[\n{"x":\n' + deep + "}]\n")
        where = "line 3"
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), command, str(src)], timeout=60)
    assert out.returncode == 1, out
    assert not out.crashed
    text = out.stderr + out.stdout
    assert f"{src} {where}" in text and "nested too deeply" in text, text


@pytest.mark.parametrize("field", ["errorMessage", "repo", "solutions", "unknownExtra"])
def test_lone_surrogate_is_rejected_with_id_and_path(
    tmp_path: Path, base: dict, field: str
) -> None:
    text = json.dumps(base)
    if field == "solutions":
        text = text.replace('"solutions": [', '"solutions": ["bad \\udc80 fix", ', 1)
        path = "$.solutions[0]"
    elif field == "unknownExtra":
        text = text[:-1] + ', "unknownExtra": "x\\ud800"}'
        path = "$.unknownExtra"
    else:
        text = text.replace(f'"{field}": "', f'"{field}": "\\udfff', 1)
        path = f"$.{field}"
    src = tmp_path / "r.jsonl"
    src.write_text(text + "\n")
    for command in ("ingest", "lint"):
        out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), command, str(src)])
        assert out.returncode == 1, out
        assert not out.crashed
        assert path in out.stderr + out.stdout


def test_lone_surrogate_in_a_python_object_is_a_problem(base: dict) -> None:
    rec = copy.deepcopy(base)
    rec["filePath"] = "src/\udc80.py"
    checked = check_record(rec, source="t")
    assert [p.json_path for p in checked.problems] == ["$.filePath"]


def test_valid_surrogate_pairs_are_fine(tmp_path: Path, base: dict) -> None:
    rec = make_record(base, "Emoji \U0001f600 refused by {v}")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(rec, ensure_ascii=True) + "\n")  # written as \ud83d\ude00
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(src)])
    assert out.returncode == 0, out


def test_duplicate_keys_warn_in_ingest_and_fail_lint(tmp_path: Path, base: dict) -> None:
    text = json.dumps(base)
    src = tmp_path / "r.jsonl"
    src.write_text(text[:-1] + f', "severity": {json.dumps(base["severity"])}}}\n')
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(src)])
    assert out.returncode == 0, out
    assert "duplicate JSON key 'severity'" in out.stderr
    out = run_errkb(["lint", str(src)])
    assert out.returncode == 1, out
    assert "duplicate JSON key 'severity'" in out.stdout


# --------------------------------------------------------------- numbers and sizes
_TOO_BIG = [
    ("lineNumber", 10**30),
    ("sourceCodeStart", 2**31),
    ("sourceCodeEnd", 2**63),
    ("documentation", "d" * (20 << 20)),
    ("exampleFix", "x" * 65_537),
    ("solutions", ["try again"] * 10_000),
    ("preventionTips", ["t" * 4_097]),
    ("tags", ["tag"] * 10_000),
    ("tags", ["t" * 101]),
]


@pytest.mark.parametrize(("field", "value"), _TOO_BIG, ids=[f for f, _ in _TOO_BIG])
def test_out_of_range_numbers_and_oversize_fields_are_one_invalid_record(
    base: dict, field: str, value: Any
) -> None:
    rec = copy.deepcopy(base)
    rec[field] = value
    assert not fast_valid(rec)
    assert any(p.startswith(f"$.{field}") for p in _paths(rec)), _paths(rec)


def test_a_huge_line_number_is_skipped_not_fatal(tmp_path: Path, base: dict) -> None:
    # On main the store raised OverflowError: the whole run failed, the record unnamed.
    bad = copy.deepcopy(base)
    bad["lineNumber"] = 10**30
    bad["sourceCodeStart"] = None
    bad["id"] = "0123456789abcdef"
    src = _write_jsonl(tmp_path / "r.jsonl", [bad, base])
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "ingest", str(src)], timeout=90)
    assert not out.crashed, out.stderr
    assert "unexpected" not in out.stderr, out.stderr
    assert "lineNumber" in out.stderr and "0123456789abcdef" in out.stderr, out.stderr
    assert out.returncode in (1, 2), out  # refused as an invalid record, named
