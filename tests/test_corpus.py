"""The labelled log corpus (tests/data/corpus): every expectation, and the corpus-wide figures.

Each log is a shape from shared/notes/LOGS.md; ``expectations.json`` lists the exact matches
each must give (record id, captures, and where known occurrences and lines). Negatives (``"matches":
[]``) are near-misses built from sibling messages and look-alike text: they must explain nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.explain import Thresholds

CORPUS = Path(__file__).parent / "data" / "corpus"
EXPECTATIONS: dict[str, Any] = json.loads((CORPUS / "expectations.json").read_text())


@pytest.fixture(scope="module")
def corpus_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("corpus") / "kb.sqlite3") as kb:
        yield kb


def test_corpus_size_and_coverage() -> None:
    positives = [f for f, e in EXPECTATIONS.items() if e["matches"]]
    negatives = [f for f, e in EXPECTATIONS.items() if not e["matches"]]
    assert len(EXPECTATIONS) >= 40 and len(negatives) >= 15
    ids = {m["id"] for f in positives for m in EXPECTATIONS[f]["matches"]}
    assert ids == {"5c84e15f4be2c1a6", "b9825390f5c3ae68", "129d60f3f6e5f4e0"}
    assert sorted(p.name for p in CORPUS.glob("*.log")) == sorted(EXPECTATIONS)


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_corpus_log(
    corpus_kb: errkb.KnowledgeBase, name: str, thresholds: Thresholds | None = None
) -> None:
    expected = EXPECTATIONS[name]["matches"]
    report = corpus_kb.explain((CORPUS / name).read_bytes(), thresholds=thresholds)
    got = [{"id": m.id, "captures": m.capture_dict} for m in report.exact]
    assert got == [{"id": e["id"], "captures": e["captures"]} for e in expected], name
    for match, exp in zip(report.exact, expected, strict=True):
        if "occurrences" in exp:
            assert match.occurrences == exp["occurrences"], name
        if "lines" in exp:
            assert list(match.lines) == exp["lines"], name


def corpus_figures(kb: errkb.KnowledgeBase) -> dict[str, float]:
    """Precision, recall and capture accuracy of exact matches over the whole corpus."""
    tp = fp = fn = captures_ok = 0
    for name, exp in EXPECTATIONS.items():
        report = kb.explain((CORPUS / name).read_bytes())
        want = {(m["id"], json.dumps(m["captures"], sort_keys=True)) for m in exp["matches"]}
        want_ids = [m["id"] for m in exp["matches"]]
        got = {(m.id, json.dumps(m.capture_dict, sort_keys=True)) for m in report.exact}
        got_ids = [m.id for m in report.exact]
        tp += len([i for i in got_ids if i in want_ids])
        fp += len([i for i in got_ids if i not in want_ids])
        fn += len([i for i in want_ids if i not in got_ids])
        captures_ok += len(got & want)
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "capture_accuracy": captures_ok / tp if tp else 1.0,
    }


def test_corpus_figures(corpus_kb: errkb.KnowledgeBase) -> None:
    figures = corpus_figures(corpus_kb)
    assert figures == {"precision": 1.0, "recall": 1.0, "capture_accuracy": 1.0}


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_corpus_log_when_narrowed(corpus_kb: errkb.KnowledgeBase, name: str) -> None:
    """Large inputs are scanned (or parsed region by region): the corpus must explain exactly
    the same."""
    test_corpus_log(corpus_kb, name, Thresholds(scan_from=0, paste_upto=0))
