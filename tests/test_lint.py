"""Tests for errkb.maint.lint: one crafted record per rule, the seeds, rendering, scale, the CLI."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from errkb.errors import InputError
from errkb.maint.extract import extract, github_url
from errkb.maint.lint import lint
from errkb.match.matcher import Matcher
from errkb.records import upstream
from errkb.records.patterns import compile_re2
from errkb.render import OutputFormat, formats, render
from errkb.report import RULE_SEVERITY, LintFinding, LintReport, LintRule, Severity

SEEDS = Path(__file__).parent.parent / "data" / "dataset"
EXTRACT_SAMPLE = Path(__file__).parent / "data" / "extract" / "sample"
SHA = "0132848349585cfe6aae51c4941cbae872505f8a"
LAZY = LintRule.LAZY_CAPTURE


def make_record(message: str, **overrides: Any) -> dict[str, Any]:
    """A schema-valid record whose id, slug, pattern and URL all follow the formulas."""
    repo = overrides.pop("repo", "acme/widgets")
    path = overrides.pop("filePath", "pkg/mod.py")
    record: dict[str, Any] = {
        "id": upstream.record_id(repo, None, message, path),
        "repo": repo,
        "slug": upstream.slug(None, message),
        "errorCode": None,
        "errorMessage": message,
        "messagePattern": upstream.message_pattern(message),
        "errorType": "exception",
        "errorClass": "ValueError",
        "httpStatus": None,
        "severity": "error",
        "filePath": path,
        "lineNumber": 20,
        "sourceCode": "raise ValueError(...)",
        "sourceCodeStart": 20,
        "sourceCodeEnd": 20,
        "githubUrl": github_url(repo, SHA, path, 2, 38),
        "documentation": "Doc.",
        "triggerScenarios": "Trigger.",
        "commonSituations": "Situations.",
        "solutions": [],
        "exampleFix": None,
        "handlingStrategy": None,
        "validationCode": None,
        "typeGuard": None,
        "tryCatchPattern": None,
        "preventionTips": [],
        "tags": ["test"],
        "backgroundTag": None,
        "analyzedSha": SHA,
        "analyzedAt": "2026-08-28T05:10:05.995Z",
        "schemaVersion": 2,
    }
    record.update(overrides)
    return record


CLEAN = "Layer {prefix!r} has incompatible scale {dtype} for this checkpoint"


def write(tmp_path: Path, *records: dict[str, Any], name: str = "records.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def rules(report: LintReport) -> Counter[LintRule]:
    return Counter(f.rule for f in report.findings)


# --- baselines ------------------------------------------------------------------------------


def test_clean_record_is_clean(tmp_path: Path) -> None:
    report = lint([write(tmp_path, make_record(CLEAN))])
    assert report.findings == ()
    assert report.records == 1
    assert report.exit_code == 0


def test_seeds_have_exactly_the_upstream_lazy_capture_flaw() -> None:
    # The seeds are valid; every one ends with a placeholder, and upstream's unanchored
    # trailing (.+?) captures a single character there. That is real, so it is reported.
    report = lint([SEEDS])
    assert report.records == 3
    assert [(Path(f.source).name, f.record_id, f.rule) for f in report.findings] == [
        ("000_a7ac2d40740eeeb5.txt", "5c84e15f4be2c1a6", LAZY),
        ("003_a920e8c742a5f565.txt", "b9825390f5c3ae68", LAZY),
        ("004_ab71de788ff7b754.txt", "129d60f3f6e5f4e0", LAZY),
    ]
    assert "captures 'v' for {scale_shape} where the message has 'v2x'" in (
        report.findings[0].message
    )
    assert all(f.severity is Severity.WARNING for f in report.findings)
    assert report.exit_code == 1
    assert lint([SEEDS], ignore=[LAZY]).exit_code == 0


def test_extracted_drafts_have_no_errors(tmp_path: Path) -> None:
    drafts = list(extract([EXTRACT_SAMPLE], repo="acme/widgets"))
    report = lint([write(tmp_path, *drafts)])
    assert report.records == len(drafts)
    assert report.count(Severity.ERROR) == 0


# --- one crafted record (or pair) per rule --------------------------------------------------

Mutate = Callable[[], list[dict[str, Any]]]


def one(message: str = CLEAN, **overrides: Any) -> Mutate:
    return lambda: [make_record(message, **overrides)]


def drop_severity() -> list[dict[str, Any]]:
    r = make_record(CLEAN)
    r["severity"] = "fatal"
    del r["tags"]
    return [r]


def duplicate() -> list[dict[str, Any]]:
    return [make_record(CLEAN), make_record(CLEAN)]


def ambiguous() -> list[dict[str, Any]]:
    general = make_record("Invalid value {v} in the config file")
    specific = make_record("Invalid value for key {k} in the config file")
    return [general, specific]


CASES: list[tuple[str, Mutate, dict[LintRule, int], str]] = [
    ("schema", drop_severity, {LintRule.SCHEMA: 2}, "$.severity: 'fatal' is not one of"),
    (
        "duplicate-id",
        duplicate,
        # Two copies of one message: each also matches the other's pattern.
        {LintRule.DUPLICATE_ID: 1, LintRule.AMBIGUOUS: 2},
        "id already used by the record at",
    ),
    ("id-formula", one(id="0123456789abcdef"), {LintRule.ID_FORMULA: 1}, "expected "),
    ("slug-formula", one(slug="some-other-slug"), {LintRule.SLUG_FORMULA: 1}, "expected 'layer"),
    (
        "unknown-field",
        one(futureField=1, contentChangedAt=None),
        {LintRule.UNKNOWN_FIELD: 1},
        "unknown field(s), kept verbatim: futureField",
    ),
    (
        "pattern-re2",
        one(messagePattern="Layer (?<=x)(.+?) has incompatible scale (.+?) for this checkpoint"),
        {LintRule.PATTERN_RE2: 1},
        "does not compile under RE2: invalid perl operator: (?<=",
    ),
    (
        "pattern-mismatch",
        one(messagePattern="Layer (.+?) has compatible scale (.+?) for this checkpoint"),
        {LintRule.PATTERN_MISMATCH: 1},
        "does not match its own errorMessage",
    ),
    (
        "pattern-mismatch-groups",
        one(messagePattern="Layer has incompatible scale for this checkpoint"),
        {LintRule.PATTERN_MISMATCH: 1},
        "0 capture group(s) but errorMessage has 2 placeholder(s)",
    ),
    (
        "lazy-capture-trailing",
        one("Expected a scalar scale, got shape {shape}"),
        {LAZY: 1},
        "captures 'v' for {shape} where the message has 'v0x' (a lazy (.+?)",
    ),
    (
        "lazy-capture-adjacent",
        one("Scale {dtype}{shape} is incompatible with this checkpoint"),
        {LAZY: 1},
        "captures 'v' for {dtype} where the message has 'v0x'",
    ),
    (
        "low-specificity-no-anchor",
        one("{a}: {b}.", messagePattern=r"(.+?): (.+?)\."),
        {LintRule.LOW_SPECIFICITY: 1},
        "no literal run of 4+ characters",
    ),
    (
        "low-specificity-short",
        one("{a}fail{b}.", messagePattern=r"(.+?)fail(.+?)\."),
        {LintRule.LOW_SPECIFICITY: 1},
        "only 5 literal character(s) (upstream needs 6)",
    ),
    (
        "ambiguous",
        ambiguous,
        {LintRule.AMBIGUOUS: 1},
        "'Invalid value for key v0x in the config file') is also matched by 1 other record(s)",
    ),
    (
        "generic-slot",
        lambda: [make_record("Could not load {thing} from disk")],
        {LintRule.GENERIC_SLOT: 1},
        "slot {thing} stays generic: nothing says what {thing} prints",
    ),
    (
        "github-url-sha",
        one(githubUrl=github_url("acme/widgets", "f" * 40, "pkg/mod.py", 2, 38)),
        {LintRule.GITHUB_URL: 1},
        f"is pinned to {'f' * 40}, the record's analyzedSha is {SHA}",
    ),
    (
        "github-url-repo",
        one(githubUrl=github_url("acme/gadgets", SHA, "pkg/mod.py", 2, 38)),
        {LintRule.GITHUB_URL: 1},
        "names repository acme/gadgets, the record's repo is acme/widgets",
    ),
    (
        "github-url-path",
        one(githubUrl=github_url("acme/widgets", SHA, "pkg/other.py", 2, 38)),
        {LintRule.GITHUB_URL: 1},
        "points at pkg/other.py, the record's filePath is pkg/mod.py",
    ),
    (
        "github-url-coverage",
        one(githubUrl=github_url("acme/widgets", SHA, "pkg/mod.py", 21, 38)),
        {LintRule.GITHUB_URL: 1},
        "line anchor #L21-L38 does not cover lineNumber 20",
    ),
    (
        "github-url-single-line",
        one(githubUrl=github_url("acme/widgets", SHA, "pkg/mod.py", 19)),
        {LintRule.GITHUB_URL: 1},
        "line anchor #L19 does not cover lineNumber 20",
    ),
    (
        "github-url-no-anchor",
        one(githubUrl=f"https://github.com/acme/widgets/blob/{SHA}/pkg/mod.py"),
        {LintRule.GITHUB_URL: 1},
        "has no #L line anchor for lineNumber 20",
    ),
    (
        "github-url-reversed",
        one(githubUrl=github_url("acme/widgets", SHA, "pkg/mod.py", 30, 10)),
        {LintRule.GITHUB_URL: 1},
        "line anchor #L30-L10 is reversed",
    ),
    (
        "github-url-form",
        one(githubUrl="https://gitlab.com/acme/widgets/-/blob/main/pkg/mod.py#L20"),
        {LintRule.GITHUB_URL: 1},
        "githubUrl is not of the form https://github.com/<repo>/blob/<analyzedSha>/",
    ),
]


@pytest.mark.parametrize(
    ("records", "expected", "fragment"),
    [
        pytest.param(records, expected, fragment, id=name)
        for name, records, expected, fragment in CASES
    ],
)
def test_rule(
    tmp_path: Path, records: Mutate, expected: dict[LintRule, int], fragment: str
) -> None:
    # Most crafted records have an untyped slot; that rule is counted only where it is tested.
    generic = [] if LintRule.GENERIC_SLOT in expected else [LintRule.GENERIC_SLOT]
    report = lint([write(tmp_path, *records())], ignore=generic)
    assert rules(report) == Counter(expected)
    assert any(fragment in f.message for f in report.findings), [f.message for f in report.findings]
    assert report.exit_code == 1
    for finding in report.findings:
        assert finding.source.endswith("records.jsonl")
        assert finding.location.startswith("line ")
        assert finding.severity is RULE_SEVERITY[finding.rule]


def test_unreadable_items(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(make_record(CLEAN)) + "\n{not json\n[1]\n", encoding="utf-8")
    report = lint([path])
    assert [(f.location, f.rule, f.record_id) for f in report.findings] == [
        ("line 2", LintRule.UNREADABLE, None),
        ("line 3", LintRule.UNREADABLE, None),
    ]
    assert report.records == 3


def test_envelope_problems_are_schema_findings(tmp_path: Path) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"record": make_record(CLEAN), "datasetVersion": "yesterday"}))
    (finding,) = lint([path]).findings
    assert finding.rule is LintRule.SCHEMA
    assert finding.message.startswith("$.datasetVersion: ")


def test_checks_continue_after_schema_errors(tmp_path: Path) -> None:
    # A record with a schema problem still gets its other checks (maintainers fix all at once).
    record = make_record("Expected a scalar scale, got shape {shape}", severity="fatal")
    record["id"] = "ffffffffffffffff"
    report = lint([write(tmp_path, record)])
    assert rules(report) == Counter({LintRule.SCHEMA: 1, LintRule.ID_FORMULA: 1, LAZY: 1})


def test_ambiguity_lists_others_and_counts_the_rest(tmp_path: Path) -> None:
    records = [make_record(CLEAN, filePath=f"pkg/m{i}.py") for i in range(6)]
    report = lint([write(tmp_path, *records)])
    assert rules(report) == Counter({LintRule.AMBIGUOUS: 6})
    assert "also matched by 5 other record(s)" in report.findings[0].message
    assert report.findings[0].message.endswith("and 2 more")
    assert records[1]["id"] in report.findings[0].message
    assert records[0]["id"] not in report.findings[0].message


def test_ambiguity_uses_the_prefilter_not_all_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Distinct anchors: no record's message contains another's anchor, so the ambiguity pass
    # must compile nothing. All pairs would compile n regexes more.
    n = 400
    words = [f"{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}qz{i}" for i in range(n)]
    records = [
        make_record(f"Layer {w} failed with {{err}} here", filePath=f"{w}.py") for w in words
    ]
    calls: list[str] = []
    verified: list[int] = []
    real = compile_re2

    def counting(regex: str) -> Any:
        calls.append(regex)
        return real(regex)

    class CountingMatcher(Matcher):
        # Every (text, record) pair the ambiguity pass verifies goes through regex(): an
        # all-pairs pass makes n * (n - 1) of these, the prefilter none (no shared anchors).
        def regex(self, index: int) -> Any:
            verified.append(index)
            return super().regex(index)

    monkeypatch.setattr("errkb.maint.lint.compile_re2", counting)
    monkeypatch.setattr("errkb.maint.lint.Matcher", CountingMatcher)
    report = lint([write(tmp_path, *records)], ignore=[LintRule.GENERIC_SLOT])
    assert report.findings == ()
    assert len(calls) == n  # one raw-pattern compile per record (lazy-capture), nothing else
    assert len(verified) < n  # far below the n * (n - 1) pairs of an all-pairs pass


def test_ignore(tmp_path: Path) -> None:
    path = write(tmp_path, *duplicate())
    report = lint([path], ignore=[LintRule.AMBIGUOUS])
    assert rules(report) == Counter({LintRule.DUPLICATE_ID: 1})


def test_missing_path_raises() -> None:
    with pytest.raises(InputError):
        lint(["/nonexistent/records.jsonl"])


def test_findings_are_in_source_order(tmp_path: Path) -> None:
    first = make_record("Expected a scalar scale, got shape {shape}", slug="x")
    second = make_record(CLEAN, id="0000000000000000")
    report = lint([write(tmp_path, first, second)])
    assert [(f.location, f.rule) for f in report.findings] == [
        ("line 1", LintRule.SLUG_FORMULA),
        ("line 1", LAZY),
        ("line 2", LintRule.ID_FORMULA),
    ]


def test_every_rule_has_a_crafted_case() -> None:
    covered = {rule for _, _, expected, _ in CASES for rule in expected} | {LintRule.UNREADABLE}
    assert covered == set(LintRule)
    assert set(RULE_SEVERITY) == set(LintRule)


# --- rendering ------------------------------------------------------------------------------

REPORT = LintReport(
    (
        LintFinding("d/a.jsonl", "line 3", "0123456789abcdef", LintRule.ID_FORMULA, "id is off"),
        LintFinding("d/b.json", "", None, LintRule.UNREADABLE, "invalid JSON: Expecting value"),
    ),
    records=4,
)


def test_render_text() -> None:
    assert render(REPORT, OutputFormat.TEXT) == (
        "d/a.jsonl line 3 [0123456789abcdef] id-formula: id is off\n"
        "d/b.json unreadable: invalid JSON: Expecting value\n"
        "4 record(s): 1 error(s), 1 warning(s)\n"
    )
    assert render(LintReport((), 2), OutputFormat.TEXT) == "2 record(s): clean\n"


@pytest.mark.parametrize("fmt", formats(LintReport))
def test_every_format_renders(fmt: OutputFormat) -> None:
    text = render(REPORT, fmt)
    assert "0123456789abcdef" in text and text.endswith("\n")


def test_render_json() -> None:
    data = json.loads(render(REPORT, OutputFormat.JSON))
    assert data["records"] == 4 and data["errors"] == 1 and data["warnings"] == 1
    assert data["findings"][0] == {
        "source": "d/a.jsonl",
        "location": "line 3",
        "recordId": "0123456789abcdef",
        "rule": "id-formula",
        "severity": "warning",
        "message": "id is off",
    }


# --- the CLI --------------------------------------------------------------------------------
