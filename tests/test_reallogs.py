"""Real PyTorch CI log fragments (shared/reallogs/drci, see its README): errkb reads them whole.

No crash, no hang, no exact match (none of the seed records' errors is in these logs), and every
Python exception a careful reader lists in ``expected.jsonl`` is among errkb's findings (matched
or unmatched) with its class, the message text of its line, and that line among the finding's
lines. ``expected.jsonl`` gives a message as the text after ``Class: `` on its line only, so a
finding is compared by the first line of its message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb


def _drci() -> Path | None:
    # CI puts a copy of shared/ beside the clone; a developer machine has /work/shared.
    for root in (Path(__file__).resolve().parents[2] / "shared", Path("/work/shared")):
        folder = root / "reallogs" / "drci"
        if (folder / "expected.jsonl").is_file():
            return folder
    return None


DRCI = _drci()
pytestmark = pytest.mark.skipif(
    DRCI is None, reason="shared/reallogs/drci is not beside the repository (nor at /work/shared)"
)
EXPECTED: list[dict[str, Any]] = (
    [json.loads(line) for line in (DRCI / "expected.jsonl").read_text().splitlines() if line]
    if DRCI is not None
    else []
)
#: Seconds one fragment may take at most (the largest is ~4,000 lines with 450 KB lines).


@pytest.fixture(scope="module")
def drci_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("drci") / "kb.sqlite3") as kb:
        yield kb


@pytest.fixture(scope="module")
def reports(drci_kb: errkb.KnowledgeBase) -> dict[str, errkb.Report]:
    assert DRCI is not None
    out = {}
    for row in EXPECTED:
        data = (DRCI / "clean" / row["file"]).read_bytes()
        out[row["file"]] = drci_kb.explain(data)
    return out


def test_corpus_is_complete() -> None:
    assert DRCI is not None
    assert len(EXPECTED) == 43
    assert sum(len(row["python_exceptions"]) for row in EXPECTED) == 47


def _findings(report: errkb.Report) -> list[tuple[str | None, str, int]]:
    out = [(m.exception.cls, m.exception.message, n) for m in report.matches for n in m.lines]
    out += [(u.cls, u.message, n) for u in report.unmatched for n in u.lines]
    return out


@pytest.mark.parametrize("row", EXPECTED, ids=lambda r: r["file"])
def test_fragment(reports: dict[str, errkb.Report], row: dict[str, Any]) -> None:
    report = reports[row["file"]]
    assert report.exact == (), [m.id for m in report.exact]
    findings = _findings(report)
    for exc in row["python_exceptions"]:
        assert any(
            cls == exc["class"]
            and message.split("\n")[0].rstrip() == exc["message"]
            and n == exc["line"]
            for cls, message, n in findings
        ), (exc, [f for f in findings if f[0] == exc["class"]])
    for u in report.unmatched:
        assert u.line == u.lines[0] and u.occurrences == len(u.lines)


def test_messages_are_not_glued_to_what_follows(
    reports: dict[str, errkb.Report],
) -> None:
    report = reports["pytest_failure.txt"]
    by_class = {u.cls: u for u in report.unmatched}
    # A RuntimeError followed by pytest's "---- Captured stdout call ----" sections ...
    runtime = by_class["RuntimeError"]
    assert runtime.message == "Process 0 terminated or timed out after 310.0115718841553 seconds"
    # ... and the pytest summary line of the same failure is the same exception, seen twice.
    assert (runtime.lines, runtime.occurrences) == ((21, 31), 2)
    # An empty KeyboardInterrupt does not swallow the next command's output.
    assert by_class["KeyboardInterrupt"].message == ""
    assert by_class["KeyboardInterrupt"].lines == (44,)


def test_message_that_starts_with_another_class_is_kept(
    reports: dict[str, errkb.Report],
) -> None:
    report = reports["unittest_failed_consistently.txt"]
    (found,) = [
        u for u in report.unmatched if u.cls == "torch._dynamo.exc.InternalTorchDynamoError"
    ]
    assert found.message == "NameError: name 'cell_and_freevars' is not defined"
    assert found.lines == (13,)


def test_repeated_unmatched_exception_lists_every_line(
    reports: dict[str, errkb.Report],
) -> None:
    report = reports["error_log_multiple_matches.txt"]
    (symint,) = [u for u in report.unmatched if u.message == "unhashable type: non-nested SymInt"]
    want = [
        e["line"]
        for row in EXPECTED
        if row["file"] == "error_log_multiple_matches.txt"
        for e in row["python_exceptions"]
        if e["message"] == symint.message
    ]
    assert set(want) <= set(symint.lines) and symint.occurrences == len(symint.lines)
    assert report.to_dict()["unmatched"][report.unmatched.index(symint)]["lines"] == list(
        symint.lines
    )
