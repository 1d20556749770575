"""The decision rules of ``errkb.match.decide``: exact only when the evidence carries it.

Each case is one of issue 45's real shapes: a generic template (pydantic's ``Expected {}``,
setuptools' ``error: {}``, numpy's copy of the interpreter's NameError text) beside the log
that wrongly got it as the exact answer at 150k-500k records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.match.decide import class_agrees
from tests.conftest import make_record

MERGED_ID = "129d60f3f6e5f4e0"


def _kb_with(
    empty_kb: errkb.KnowledgeBase,
    tmp_path: Path,
    base: dict[str, Any],
    specs: list[tuple[str, str | None, str]],
) -> list[dict[str, Any]]:
    """Ingest one record per (message, errorClass, filePath); return them."""
    records = []
    for message, cls, path in specs:
        rec = make_record(base, message, file_path=path)
        rec["errorClass"] = cls
        records.append(rec)
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    empty_kb.ingest([tmp_path / "r.jsonl"])
    return records


def _traceback(path: str, func: str, line: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "/srv/venv/lib/python3.11/site-packages/{path}", line 42, in {func}\n'
        "    raise err\n"
        f"{line}\n"
    )


@pytest.fixture
def merged(seed_records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return seed_records[MERGED_ID]


def test_a_generic_template_without_its_frame_is_only_possible(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, merged: dict[str, Any]
) -> None:
    (pydantic,) = _kb_with(
        empty_kb, tmp_path, merged, [("Expected {predicate_err}", "ValueError", "pydantic/x.py")]
    )
    log = _traceback(
        "sglang/srt/layers/linear.py",
        "weight_loader",
        "ValueError: Expected scalar scale for fused-in-checkpoint QKV checkpoint load, got (2,)",
    )
    report = empty_kb.explain(log)
    assert report.exact == ()
    assert report.exit_code == 1
    (m,) = [m for m in report.matches if m.confidence.value == "possible"]
    assert m.id == pydantic["id"]
    assert m.decision is not None and m.decision.rule.value == "generic-without-frame"
    assert m.decision.class_agrees is True and m.decision.generic
    assert any("possible only" in e for e in m.evidence)
    assert m.to_dict()["decision"]["rule"] == "generic-without-frame"
    # Still an unknown exception (triage counts it so), with no similar suggestion beside it.
    assert [u.cls for u in report.unmatched] == ["ValueError"]
    assert all(m.confidence.value != "similar" for m in report.matches)


def test_a_generic_template_with_its_class_and_frame_is_exact(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, merged: dict[str, Any]
) -> None:
    (pydantic,) = _kb_with(
        empty_kb, tmp_path, merged, [("Expected {predicate_err}", "ValueError", "pydantic/x.py")]
    )
    report = empty_kb.explain(_traceback("pydantic/x.py", "check", "ValueError: Expected int"))
    assert [m.id for m in report.exact] == [pydantic["id"]]
    decision = report.exact[0].decision
    assert decision is not None and decision.rule.value == "generic-with-class-and-frame"
    # The same message under another built-in class contradicts the record: never exact.
    other = empty_kb.explain(_traceback("pydantic/x.py", "check", "TypeError: Expected int"))
    assert other.exact == ()
    assert [m.decision.rule.value for m in other.matches if m.decision] == ["class-contradicts"]


def test_a_hard_wrapped_message_is_read_with_the_continuation_that_names_a_specific_record(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, merged: dict[str, Any]
) -> None:
    (pydantic, own) = _kb_with(
        empty_kb,
        tmp_path,
        merged,
        [
            ("Expected {predicate_err}", "ValueError", "pydantic/x.py"),
            (merged["errorMessage"], "ValueError", merged["filePath"]),
        ],
    )
    # Wrapped after ``merged-column`` (an issue body, an email, rich at 80 columns).
    log = _traceback(
        "sglang/srt/layers/linear.py",
        "weight_loader",
        "ValueError: Expected scalar scale for fused-in-checkpoint merged-column\n"
        "checkpoint load, got shape (2,)",
    )
    report = empty_kb.explain(log)
    assert [(m.id, m.capture_dict) for m in report.exact] == [
        (own["id"], {"tuple(loaded_weight.shape)": "(2,)"})
    ]
    assert pydantic["id"] in {a.id for a in report.exact[0].alternatives}
    assert report.exact[0].lines == (4,)


def test_a_template_of_the_interpreters_own_message_needs_its_frame(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, merged: dict[str, Any]
) -> None:
    (numpy,) = _kb_with(
        empty_kb, tmp_path, merged, [("name {col!r} is not defined", "NameError", "numpy/lib.py")]
    )
    raised_by_python = empty_kb.explain(
        _traceback("myapp/run.py", "main", "NameError: name 'pipe' is not defined")
    )
    assert raised_by_python.exact == ()
    assert [m.confidence.value for m in raised_by_python.matches] == ["possible"]
    raised_by_numpy = empty_kb.explain(
        _traceback("numpy/lib.py", "eval_column", "NameError: name 'pipe' is not defined")
    )
    assert [m.id for m in raised_by_numpy.exact] == [numpy["id"]]


def test_generic_templates_are_not_considered_by_the_message_first_pass(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, merged: dict[str, Any]
) -> None:
    _kb_with(
        empty_kb,
        tmp_path,
        merged,
        [
            ("Python {version}", None, "django/views/debug.py"),
            ("error: {msg}", None, "setuptools/errors.py"),
            ("Uvicorn {what}", None, "uvicorn/main.py"),
        ],
    )
    log = (
        "Request Method: GET\n"
        "Python Version: 3.11.7\n"
        "srun: error: node-07: tasks 0-3: Exited with exit code 1\n"
        "INFO:     Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)\n"
    )
    report = empty_kb.explain(log)
    assert [m for m in report.matches if m.confidence.value != "similar"] == []
    assert report.exit_code == 1


def test_a_specific_template_alone_is_exact_and_says_why(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(
        "ERROR: Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
        "got shape (2,)\n"
    )
    (m,) = report.exact
    assert m.id == MERGED_ID
    assert m.decision is not None and m.decision.rule.value == "specific"
    assert m.decision.specificity >= 0.5 and not m.decision.generic


@pytest.mark.parametrize(
    ("printed", "expected", "agrees"),
    [
        ("ValueError", "ValueError", True),
        ("pkg.mod.ValueError", "ValueError", True),
        ("FileNotFoundError", "OSError", True),
        ("OSError", "FileNotFoundError", True),
        ("ray.exceptions.RayTaskError(ValueError)", "ValueError", True),
        ("ray.exceptions.RayTaskError(KeyError)", "ValueError", None),
        ("TypeError", "ValueError", False),
        ("ValueError", "QuantoConfigError", False),
        ("sglang.ComponentCheckpointError", "ValueError", None),
        ("ValueError", "Exception", True),
        (None, "ValueError", None),
        ("ValueError", None, None),
        ("ExceptionGroup", "ValueError", None),
    ],
)
def test_class_agrees(printed: str | None, expected: str | None, agrees: bool | None) -> None:
    assert class_agrees(printed, expected) is agrees


def test_an_exception_only_possible_matches_explain_is_marked_so_its_batches_agree() -> None:
    # The scan decides in batches and asks for suggestions at the end: the leftovers say which
    # exceptions only possible matches explained (no suggestions for them, as on a paste).
    from errkb.match.decide import _dedupe_unmatched
    from errkb.parse.events import EventKind, LogEvent

    plain = LogEvent(EventKind.BARE, "KeyError", "'k'", (2,))
    explained = LogEvent(EventKind.BARE, "RuntimeError", "wrapped: inner", (4,))
    both = LogEvent(EventKind.BARE, "OSError", "disk", (6,))
    again = LogEvent(EventKind.BARE, "OSError", "disk", (8,))
    out = {u.message: u for u in _dedupe_unmatched([plain, both], [explained, again])}
    assert not out["'k'"].possible and out["wrapped: inner"].possible
    assert not out["disk"].possible and out["disk"].lines == (6, 8)
    assert out["wrapped: inner"].to_dict() == {  # never serialized
        "class": "RuntimeError",
        "message": "wrapped: inner",
        "line": 4,
        "lines": [4],
        "occurrences": 1,
    }
