from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errkb.records import KNOWN_FIELDS, Record, check_envelope, check_record, content_hash
from tests.conftest import QUANTO_ID
from tests.tiers import examples


def test_schema_accepts_every_seed(envelopes: list[dict[str, Any]]) -> None:
    for env in envelopes:
        checked = check_record(env["record"], source="seed")
        assert checked.ok, checked.problems
        assert checked.warnings == ()
        assert check_envelope(env, source="seed", location="") == []


@pytest.mark.parametrize(
    ("mutate", "path", "rule"),
    [
        (lambda r: r.update(id="XYZ"), "$.id", "pattern"),
        (lambda r: r.update(repo="no-slash"), "$.repo", "pattern"),
        (lambda r: r.update(slug="Not A Slug"), "$.slug", "pattern"),
        (lambda r: r.update(errorType="boom"), "$.errorType", "enum"),
        (lambda r: r.update(severity="fatal"), "$.severity", "enum"),
        (lambda r: r.update(httpStatus=700), "$.httpStatus", "maximum"),
        (lambda r: r.update(lineNumber="168"), "$.lineNumber", "type"),
        (lambda r: r.update(githubUrl="not a url"), "$.githubUrl", "format"),
        (lambda r: r.update(documentation=""), "$.documentation", "minLength"),
        (lambda r: r.update(solutions="fix it"), "$.solutions", "type"),
        (lambda r: r.update(tags=["Has Space"]), "$.tags[0]", "pattern"),
        (lambda r: r.update(handlingStrategy="pray"), "$.handlingStrategy", "enum"),
        (lambda r: r.update(analyzedSha="abc"), "$.analyzedSha", "pattern"),
        (lambda r: r.update(analyzedAt="yesterday"), "$.analyzedAt", "format"),
        (lambda r: r.update(schemaVersion=3), "$.schemaVersion", "const"),
        (lambda r: r.update(backgroundTag="Not Kebab"), "$.backgroundTag", "pattern"),
        (lambda r: r.update(contentChangedAt="soon"), "$.contentChangedAt", "format"),
        (lambda r: r.pop("errorMessage"), "$", "required"),
        (lambda r: r.update(sourceCode="x\n" * 41), "$.sourceCode", "more than 40 lines"),
        (lambda r: r.update(lineNumber=10), "$.lineNumber", "before sourceCodeStart"),
        (lambda r: r.update(sourceCodeEnd=100), "$.sourceCodeEnd", "before sourceCodeStart"),
    ],
)
def test_schema_rejects_each_violation_with_its_path(
    seed_records: dict[str, dict[str, Any]], mutate: Any, path: str, rule: str
) -> None:
    rec = copy.deepcopy(seed_records[QUANTO_ID])
    mutate(rec)
    checked = check_record(rec, source="f.jsonl", location="line 7")
    assert not checked.ok
    hits = [p for p in checked.problems if p.json_path == path and rule in p.rule]
    assert hits, [str(p) for p in checked.problems]
    assert hits[0].source == "f.jsonl" and hits[0].location == "line 7"
    assert str(hits[0]).startswith("f.jsonl line 7")


def test_every_violation_is_reported_not_only_the_first(
    seed_records: dict[str, dict[str, Any]],
) -> None:
    rec = copy.deepcopy(seed_records[QUANTO_ID])
    rec.update(severity="fatal", errorType="boom", tags=[1])
    paths = {p.json_path for p in check_record(rec, source="x").problems}
    assert {"$.severity", "$.errorType", "$.tags[0]"} <= paths


def test_unknown_fields_are_accepted_and_missing_background_tag_is_fine(
    seed_records: dict[str, dict[str, Any]],
) -> None:
    rec = copy.deepcopy(seed_records[QUANTO_ID])
    rec["someNewField"] = {"nested": [1, 2]}
    rec["contentChangedAt"] = None
    del rec["backgroundTag"]
    assert check_record(rec, source="x").ok


def test_id_formula_mismatch_is_a_warning(seed_records: dict[str, dict[str, Any]]) -> None:
    rec = copy.deepcopy(seed_records[QUANTO_ID])
    rec["id"] = "0123456789abcdef"
    checked = check_record(rec, source="x")
    assert checked.ok
    assert len(checked.warnings) == 1 and QUANTO_ID in checked.warnings[0].rule


def test_envelope_version_must_be_a_timestamp(envelopes: list[dict[str, Any]]) -> None:
    env = {**envelopes[0], "datasetVersion": "latest"}
    problems = check_envelope(env, source="x", location="")
    assert [p.json_path for p in problems] == ["$.datasetVersion"]


def test_record_value_and_content_hash(seed_records: dict[str, dict[str, Any]]) -> None:
    raw = seed_records[QUANTO_ID]
    record = Record.from_json(raw)
    assert record.id == QUANTO_ID and record.error_class == "ValueError"
    assert record.to_json() == raw
    reordered = dict(reversed(list(raw.items())))
    assert content_hash(reordered) == content_hash(raw)
    assert set(raw) <= set(KNOWN_FIELDS)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", "XYZ"), ("id", "0123456789ABCDEF"), ("repo", "no-slash"), ("slug", "Not A Slug"),
        ("slug", "a" * 51), ("errorCode", ""), ("errorMessage", ""), ("errorType", "boom"),
        ("errorClass", ""), ("httpStatus", 99), ("httpStatus", True), ("severity", "fatal"),
        ("lineNumber", 0), ("lineNumber", "1"), ("githubUrl", "not a url"),
        ("githubUrl", "https://x/%zz"), ("documentation", "   "), ("solutions", ["a", 1]),
        ("tags", ["Bad"]), ("handlingStrategy", "pray"), ("backgroundTag", "Bad Tag"),
        ("contentChangedAt", "2026-13-01T00:00:00Z"), ("analyzedAt", "2026-02-30T00:00:00Z"),
        ("analyzedAt", "2026-08-28 05:10:05"), ("analyzedSha", "abc"), ("schemaVersion", 3),
        ("schemaVersion", True), ("sourceCode", 5), ("exampleFix", []),
    ],
)  # fmt: skip
def test_fast_path_refuses_every_known_violation(
    seed_records: dict[str, dict[str, Any]], field: str, value: Any
) -> None:
    from errkb.records import fast_valid, schema_validator

    rec = copy.deepcopy(seed_records[QUANTO_ID])
    assert fast_valid(rec)
    rec[field] = value
    assert not fast_valid(rec)
    # and whatever the fast path refuses, check_record still judges by the schema
    assert check_record(rec, source="x").ok == schema_validator("record.v2.schema.json").is_valid(
        rec
    )


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 700)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=examples(300), deadline=None)
@given(field=st.sampled_from(sorted(KNOWN_FIELDS)), value=_json, drop=st.booleans())
def test_fast_path_never_accepts_what_the_schema_rejects(
    field: str, value: Any, drop: bool
) -> None:
    from errkb.records import fast_valid, schema_validator
    from tests.conftest import load_seed_envelopes

    rec = copy.deepcopy(load_seed_envelopes()[0]["record"])
    if drop:
        rec.pop(field, None)
    else:
        rec[field] = value
    if fast_valid(rec):
        assert schema_validator("record.v2.schema.json").is_valid(rec)


# -- the fast encoders (orjson where installed) write json's text, byte for byte ------------

_JSON_SORTED = (
    __import__("json").JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
)
_JSON_KEPT = __import__("json").JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _every_code_point(end: int = 0x110000) -> list[str]:
    return [chr(c) for c in range(end) if not 0xD800 <= c <= 0xDFFF]


def canonical_json(obj: Mapping[str, Any], *, floatless: bool = False) -> str:
    """Key-sorted compact JSON as ``content_hash`` hashes it (its fast road when ``floatless``)."""
    from errkb import records

    if floatless and (text := records._fast(obj, records._SORT_KEYS)) is not None:
        return text.decode("utf-8")
    return records._CANONICAL(obj)


@pytest.mark.parametrize(
    "end",
    # The Basic Multilingual Plane (every escape JSON writes, every 3-byte sequence) in the
    # default tier; every plane (4-byte sequences too) in the full one.
    [0x10000, pytest.param(0x110000, marks=pytest.mark.slow)],
)
def test_fast_encoders_write_every_code_point_as_json_does(end: int) -> None:
    pytest.importorskip("orjson")  # CI installs errkb[fast]: the comparison always runs there
    from errkb import records

    points = _every_code_point(end)
    # Each code point as a value and as a key, in one object per block of 4,096 (the key order
    # of the sorted encoder is checked on the way: code point order in both).
    for start in range(0, len(points), 4096):
        block = points[start : start + 4096]
        obj = {f"k{p}": [p, f"x{p}y"] for p in block}
        obj["mixed"] = "".join(block)
        assert canonical_json(obj, floatless=True) == _JSON_SORTED(obj)
        assert records.verbatim_json(obj, floatless=True) == _JSON_KEPT(obj)
        assert records._fast(obj, records._SORT_KEYS) is not None  # the fast road was taken


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        2**63 - 1,
        -(2**63),
        2**64 - 1,
        True,
        False,
        None,
        [],
        {},
        "",
        [[[]]],
        {"b": {"d": None, "c": [1, "x"]}, "a": 2},
    ],
)
def test_fast_encoders_agree_on_plain_values(value: Any) -> None:
    from errkb import records

    obj = {"v": value, "id": "00"}
    assert canonical_json(obj, floatless=True) == _JSON_SORTED(obj)
    assert records.verbatim_json(obj, floatless=True) == _JSON_KEPT(obj)
    assert records.content_hash(obj, floatless=True) == records.content_hash(obj)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [2**64, -(2**63) - 1, 10**40, "\ud800", {"\udfff": 1}, _nested(300)],
    ids=["u64+1", "i64-1", "10**40", "lone-surrogate", "surrogate-key", "nested-300"],
)
def test_what_orjson_refuses_is_written_by_json(value: Any) -> None:
    from errkb import records

    obj = {"v": value}
    if records.orjson_functions() is not None:
        assert records._fast(obj, records._SORT_KEYS) is None  # refused: json writes it
    assert canonical_json(obj, floatless=True) == _JSON_SORTED(obj)
    assert records.verbatim_json(obj, floatless=True) == _JSON_KEPT(obj)


@pytest.mark.parametrize("number", [1e16, 1e-5, 1.5, -0.0, 1e300])
def test_floats_are_written_by_json_unless_floatless_is_claimed(number: float) -> None:
    from errkb import records

    obj = {"v": number}
    # The default (and any caller that saw a float) keeps json's text: ``1e+16``, not ``1e16``.
    assert canonical_json(obj) == _JSON_SORTED(obj)
    assert records.verbatim_json(obj) == _JSON_KEPT(obj)
    assert (
        records.content_hash(obj)
        == __import__("hashlib").sha256(_JSON_SORTED(obj).encode()).hexdigest()
    )


def test_without_orjson_every_encoder_is_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from errkb import records

    monkeypatch.setattr(records, "orjson_functions", lambda: None)
    obj = {"b": "é\u2028", "a": [1, None]}
    assert records._fast(obj, 0) is None
    assert canonical_json(obj, floatless=True) == _JSON_SORTED(obj)
    assert records.decode_json(_JSON_KEPT(obj)) == obj


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"b":[1.5,-0.0,1e16,2.5e-300],"c":null}',
        '{"a":1,"a":2}',
        "[NaN, Infinity]",
        "[18446744073709551616]",
        '["\\ud800"]',
        "[1E400]",
        '{"k":"\\u2028é"}',
        "-0",
    ],
)
def test_decode_json_gives_json_answer(text: str) -> None:
    import json
    import math

    from errkb import records

    got, want = records.decode_json(text), json.loads(text)
    assert repr(got) == repr(want)  # nan != nan: compared by repr, types included
    if isinstance(want, list) and want and isinstance(want[0], float) and math.isnan(want[0]):
        assert math.isnan(got[0])


def test_decode_json_raises_json_error() -> None:
    import json

    from errkb import records

    with pytest.raises(json.JSONDecodeError) as caught:
        records.decode_json('{"a": }')
    assert caught.value.pos == 6  # json's own error, with its position


def test_decode_json_reads_errkb_own_text_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("orjson")
    from errkb import records

    obj = {"id": "0a", "n": [1, 2**64 - 1, -(2**63)], "s": "é\u2028\t", "f": 0.5, "x": None}
    text = records.verbatim_json(obj, floatless=False)

    def refuse(_text: str) -> None:
        raise AssertionError("json.loads was called")

    monkeypatch.setattr(records.json, "loads", refuse)
    assert records.decode_json(text) == obj  # orjson wrote it back as the same text
    with pytest.raises(AssertionError):  # a 65-bit integer: orjson's float is not taken
        records.decode_json('{"n":18446744073709551616}')
