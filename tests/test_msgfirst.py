"""The message-first pass (errkb.match.msgfirst): known messages on lines nothing else explained.

Structure-first parsing leaves no event for a message printed with no class, no error level and
no container field; the pass finds it at a message boundary (after a recognised prefix or a
separator), never inside a word run and never on a source line. Small inputs are read line by
line, large ones on the record anchors' hit lines.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.explain import DEFAULT_THRESHOLDS, Thresholds
from errkb.match.anchordb import ENGINES
from errkb.match.decide import BASE_EXACT, CLASS_BONUS, MESSAGE_FIRST_PENALTY
from errkb.match.msgfirst import covered_lines, message_starts
from errkb.parse.events import EventKind, Frame, LogEvent
from errkb.parse.prefixes import RULES
from tests.cli import run
from tests.conftest import require_extra
from tests.test_wrapping import COMFY, near_misses, positives
from tests.tiers import examples

MESSAGE = "Comfy INT8 layer 'x' has incompatible weight/scale shapes: (4096, 4096) and (4096, 2)"
CAPTURES = {"prefix": "x", "weight_shape": "(4096, 4096)", "scale_shape": "(4096, 2)"}
EXAMPLES = [
    f"[worker 3] {MESSAGE}",
    f"2026-12-01 10:00:01 INFO loading done; {MESSAGE}",
]


@pytest.fixture(scope="module")
def mf_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("msgfirst") / "kb.sqlite3") as kb:
        yield kb


def _exact(
    kb: errkb.KnowledgeBase, text: str | bytes
) -> list[tuple[str, dict[str, str], list[int]]]:
    return [(m.id, m.capture_dict, list(m.lines)) for m in kb.explain(text).exact]


@pytest.mark.parametrize("line", EXAMPLES)
def test_a_bare_message_is_found_with_exact_captures(mf_kb: errkb.KnowledgeBase, line: str) -> None:
    report = mf_kb.explain(line + "\n")
    assert [(m.id, m.capture_dict, m.lines, m.occurrences) for m in report.exact] == [
        (COMFY, CAPTURES, (1,), 1)
    ]
    match = report.exact[0]
    # Honest: no class and no error level back it, so it scores below a match with its class.
    assert match.score == round(BASE_EXACT - MESSAGE_FIRST_PENALTY, 3)
    with_class = mf_kb.explain(f"ValueError: {MESSAGE}\n").exact[0]
    assert with_class.score == round(BASE_EXACT + CLASS_BONUS, 3) > match.score
    assert any("message-first" in note for note in match.evidence)
    assert report.exit_code == 0


@pytest.mark.parametrize("line", EXAMPLES)
def test_the_cli_explains_a_bare_message(tmp_path: Path, line: str) -> None:
    db = tmp_path / "kb.sqlite3"
    result = run(db, "explain", "--format", "json", "-", input=line + "\n")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(m["id"], m["captures"], m["lines"]) for m in out["matches"]] == [
        (COMFY, CAPTURES, [1])
    ]
    human = run(db, "explain", "-", input=line + "\n")
    assert human.exit_code == 0 and COMFY in human.stdout


def test_a_bare_message_inside_a_json_value(mf_kb: errkb.KnowledgeBase) -> None:
    doc = {"level": "info", "event": f"[worker 3] {MESSAGE}", "step": 3}
    text = json.dumps({"ts": 1}) + "\n" + json.dumps(doc) + "\n"
    assert _exact(mf_kb, text) == [(COMFY, CAPTURES, [2])]


def test_a_bare_message_inside_an_html_page(mf_kb: errkb.KnowledgeBase) -> None:
    page = (
        "<!DOCTYPE html>\n<html><head><title>run 7</title></head>\n<body>\n"
        "<h1>Loading</h1>\n"
        f"<p>[worker 3] {html.escape(MESSAGE)}</p>\n"
        "<pre>done</pre>\n</body></html>\n"
    )
    assert _exact(mf_kb, page) == [(COMFY, CAPTURES, [5])]


def _big_log(message_line: int, message: str) -> bytes:
    # INFO lines full of the records' own words, so the buffer pass has hits to reject.
    filler = (
        "2026-12-01 10:00:{s:02d} INFO layer {n} loaded weight and scale shapes (4096, 4096) "
        "for checkpoint load of the Comfy model, incompatible flags none\n"
    )
    lines = [filler.format(s=n % 60, n=n) for n in range(1, 20001)]
    lines[message_line - 1] = f"2026-12-01 10:00:00 INFO step 3; {message}\n"
    data = "".join(lines).encode()
    assert len(data) > 2_000_000 > DEFAULT_THRESHOLDS.scan_from
    return data


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bare_message_in_a_2mb_log_is_found_on_its_line(
    mf_kb: errkb.KnowledgeBase, engine: str
) -> None:
    if engine == "hyperscan":
        require_extra("hyperscan", "fast")
    mf_kb.scan_engine = engine
    try:
        data = _big_log(12345, MESSAGE)
        report = mf_kb.explain(data)
        assert [(m.id, m.capture_dict, m.lines) for m in report.exact] == [
            (COMFY, CAPTURES, (12345,))
        ]
        # The record-driven scan ran, with this engine.
        assert mf_kb._engine._anchors is not None and mf_kb._engine._anchors.engine == engine
        # A near-miss sibling in the same place is never the record.
        sibling = MESSAGE.replace("INT8", "W4A4")
        assert mf_kb.explain(_big_log(12345, sibling)).exact == ()
    finally:
        mf_kb.scan_engine = None


def test_both_engines_give_the_same_report(mf_kb: errkb.KnowledgeBase) -> None:
    require_extra("hyperscan", "fast")
    data = _big_log(777, MESSAGE) + _big_log(5, "Quanto layer 'q' has incompatible scale F32 (16,)")
    reports = []
    for engine in ENGINES:
        mf_kb.scan_engine = engine
        try:
            reports.append(mf_kb.explain(data).to_dict())
        finally:
            mf_kb.scan_engine = None
    assert reports[0] == reports[1]
    assert [(m["id"], m["lines"]) for m in reports[0]["matches"]] == [
        (COMFY, [777]),
        ("5c84e15f4be2c1a6", [20005]),
    ]


NEAR_MISSES = [
    "Comfy W4A4 layer 'x' has incompatible weight/scale shapes: (4096, 4096) and (4096, 2)",
    "Comfy W4A8 layer 'x' has incompatible weight/scale shapes: (8, 8), (8, 1), and (8, 8)",
    "MXFP8 layer 'x' has incompatible weight/scale metadata: (4096, 4096) and (4096, 2)",
    "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when loaded_shard_id is "
    "None, got shape (3,)",
    "Quanto layer 'x' needs a 2D I8 weight, got F32 (4096,)",
]


@pytest.mark.parametrize("sibling", NEAR_MISSES)
@pytest.mark.parametrize("shape", ["{m}", "[worker 3] {m}", "INFO step 3; {m}", "note - {m}"])
def test_near_miss_siblings_never_match(
    mf_kb: errkb.KnowledgeBase, sibling: str, shape: str
) -> None:
    assert mf_kb.explain(shape.format(m=sibling) + "\n").exact == ()


@pytest.mark.parametrize(
    "line",
    [
        # rich / stackprinter show the f-string; a diff shows the template; a literal in a raise
        # or an assignment; a message glued to a word run.
        '    raise ValueError(f"Comfy INT8 layer {name!r} has incompatible weight/scale shapes: '
        '{weight_shape} and {scale_shape}")',
        '+            f"Comfy INT8 layer {prefix!r} has incompatible weight/scale shapes: '
        '{weight_shape} and {scale_shape}"',
        f"    raise ValueError({MESSAGE!r})",
        f"msg = {MESSAGE!r}",
        f"INFO loaded x{MESSAGE}",
        f"INFO loadedComfy{MESSAGE[5:]}",
    ],
)
def test_source_text_and_word_runs_never_match(mf_kb: errkb.KnowledgeBase, line: str) -> None:
    assert mf_kb.explain(line + "\n").exact == ()


def test_a_tracebacks_source_lines_are_covered() -> None:
    frame = Frame("a.py", 3, "f", 'raise ValueError("...")', input_line=2)
    event = LogEvent(EventKind.TRACEBACK, "ValueError", "m", (6,), frames=(frame,))
    assert covered_lines([event]) == {2, 3, 4, 5, 6}


def test_message_starts() -> None:
    text = "[worker 3] step: a; b - c"
    assert [text[s:] for s in message_starts(text)] == [
        text,
        "step: a; b - c",
        "a; b - c",
        "b - c",
        "c",
    ]
    assert len(message_starts("a: " * 1000)) == 16


#: Prefixes from the prefix table's own examples: what the rule strips off its example line.
KNOWN_PREFIXES = sorted(
    {
        rule.example[: len(rule.example) - len(rule.remainder)]
        for rule in RULES
        if rule.example.endswith(rule.remainder) and not rule.indented
    }
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=positives(), prefix=st.sampled_from(KNOWN_PREFIXES))
def test_any_positive_after_a_known_prefix_matches(
    mf_kb: errkb.KnowledgeBase, case: tuple[str, str, dict[str, str]], prefix: str
) -> None:
    which, message, captures = case
    line = f"{prefix}{message}"
    assert [(m.id, m.capture_dict, m.lines) for m in mf_kb.explain(line + "\n").exact] == [
        (which, captures, (1,))
    ], line


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(sibling=near_misses(), prefix=st.sampled_from(KNOWN_PREFIXES))
def test_any_sibling_after_a_known_prefix_never_matches(
    mf_kb: errkb.KnowledgeBase, sibling: str, prefix: str
) -> None:
    assert mf_kb.explain(f"{prefix}{sibling}\n").exact == ()


def test_the_pass_runs_when_structure_first_explains_nothing(mf_kb: errkb.KnowledgeBase) -> None:
    # An unknown traceback (unmatched, with its suggestions) and a bare known message: the pass
    # finds the message and the unmatched exception stays listed.
    text = f"ValueError: something else entirely went wrong here\n[worker 3] {MESSAGE}\n"
    report = mf_kb.explain(text)
    assert [(m.id, m.lines) for m in report.exact] == [(COMFY, (2,))]
    assert [(u.cls, u.line) for u in report.unmatched] == [("ValueError", 1)]
    # Once structure-first parsing explained something, the pass does not run (issue 10's
    # rule: it is the fallback for input nothing else explained).
    quanto = "ValueError: Quanto layer 'q' has incompatible scale F32 (16,)"
    both = mf_kb.explain(f"{quanto}\n[worker 3] {MESSAGE}\n")
    assert [(m.id, m.lines) for m in both.exact] == [("5c84e15f4be2c1a6", (1,))]


def test_a_bare_message_beside_a_parsed_one_is_read_alike_by_the_scan_and_the_region_parse(
    mf_kb: errkb.KnowledgeBase,
) -> None:
    # A parsed, explained exception elsewhere in the log hides the bare message from the
    # fallback (it runs only when nothing was explained), on both large-input routes.
    data = _big_log(12345, MESSAGE) + b"\nValueError: " + MESSAGE.encode() + b"\n"
    scanned = mf_kb.explain(data)  # the record-driven scan: the same rule as the region path
    regions = mf_kb.explain(data, thresholds=Thresholds(scan_from=len(data) + 1))
    assert scanned.to_dict() == regions.to_dict()
    assert [m.lines[0] for m in regions.exact] == [data.count(b"\n")]


def test_a_large_container_s_message_first_lines_are_the_record_anchors_hit_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large markup page (the region parse reads it: the scan cannot) whose one known message
    # is a bare paragraph: the message-first pass reads the record anchors' hit lines, the
    # scan's one whole-buffer pass, not every line.
    from errkb.match import msgfirst

    sizes = Thresholds(scan_from=4096, paste_upto=4096)
    filler = "".join(f"<p>step {n} loaded the weights and moved on</p>\n" for n in range(400))
    page = f"<html><body>\n{filler}<p>{MESSAGE}</p>\n{filler}</body></html>\n"
    read: list[int] = []
    real = msgfirst.found_at

    def counted(data: bytes, lines: list[tuple[int, int]], matcher: object) -> list[LogEvent]:
        read.append(len(lines))
        return real(data, lines, matcher)  # type: ignore[arg-type]

    monkeypatch.setattr(msgfirst, "found_at", counted)
    with errkb.open(tmp_path / "kb.sqlite3", thresholds=sizes) as kb:
        report = kb.explain(page)
        assert kb._engine._anchors is not None  # the record anchors, as the scan loads them
    assert [(m.id, m.lines) for m in report.exact] == [(COMFY, (402,))]
    assert read and read[0] < 10  # the hit lines, not the page's 800 lines
