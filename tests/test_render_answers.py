"""What every human format of an explanation says alike (``errkb.render.answers``).

Nothing is cut in silence: a report that left entries out says so, with how to get them, at the
top and at the end of text, Markdown and HTML. One entry per record: the five-ranks ×
five-layers log reads as one answer and a table of its occurrences.
"""

from __future__ import annotations

import json

import pytest

import errkb
from errkb.match.recordscan import Limits
from errkb.render import OutputFormat, render
from errkb.render.answers import entries, omitted_note
from errkb.report import Report
from tests.conftest import QUANTO_ID

FORMATS = (OutputFormat.TEXT, OutputFormat.MARKDOWN, OutputFormat.HTML)


def ranks_by_layers(ranks: int = 5, layers: int = 5, scale: str = "(4096,)") -> str:
    """Every rank failing on every layer with the one quanto record: a log of ranks×layers."""
    out = []
    for r in range(ranks):
        for layer in range(layers):
            out += [
                f"[rank{r}]: Traceback (most recent call last):",
                f'[rank{r}]:   File "/x/quanto_int8_config.py", line 168, in inspect',
                f"[rank{r}]:     raise ValueError(",
                f"[rank{r}]: ValueError: Quanto layer 'encoder.block.{layer}.layer.0."
                f"SelfAttention.q' has incompatible scale F32 {scale}",
            ]
    return "\n".join(out) + "\n"


@pytest.fixture
def cut(kb: errkb.KnowledgeBase) -> Report:
    report = kb.explain(ranks_by_layers(), limits=Limits(matches_per_record=2))
    assert report.omitted is not None and report.omitted.matches == 3
    return report


def test_the_note_says_what_was_cut_and_how_to_get_it(cut: Report) -> None:
    note = omitted_note(cut.omitted)
    assert note is not None
    assert "3 more match(es) (15 occurrence(s)) of 1 record(s)" in note
    assert "errkb explain --all" in note and "`omitted`" in note
    assert omitted_note(None) is None


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.value for f in FORMATS])
def test_every_human_format_says_it_at_the_top_and_at_the_end(cut: Report, fmt: str) -> None:
    text = render(cut, fmt)
    assert text.count("errkb explain --all") == 2, text
    first, last = text.find("errkb explain --all"), text.rfind("errkb explain --all")
    answer = "encoder.block.0.layer.0"  # the first answer's values
    assert first < text.find(answer) and last > text.rfind(answer)  # before and after them


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.value for f in FORMATS])
def test_a_whole_report_says_nothing_of_cuts(kb: errkb.KnowledgeBase, fmt: str) -> None:
    report = kb.explain(ranks_by_layers())
    assert report.omitted is None
    assert "--all" not in render(report, fmt)


def test_json_keeps_its_omitted_object(cut: Report) -> None:
    data = json.loads(render(cut, OutputFormat.JSON))
    assert data["omitted"]["matches"] == 3 and "--all" in data["omitted"]["how"]


def test_entries_fold_a_records_matches_into_one(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(ranks_by_layers())
    assert len(report.exact) == 5  # one match per layer (distinct captures)
    (entry,) = entries(report.exact)
    assert entry.first.id == QUANTO_ID
    assert entry.count == 25
    assert entry.varying == ("prefix",)
    assert dict(entry.common) == {"scale_slice.get_dtype()": "F32", "scale_shape": "(4096,)"}
    assert [o.values for o in entry.occurrences][:2] == [
        (("prefix", "encoder.block.0.layer.0.SelfAttention.q"),),
        (("prefix", "encoder.block.1.layer.0.SelfAttention.q"),),
    ]
    assert entry.diagnosis is not None  # one condition for all: said once
    assert all(o.diagnosis is None for o in entry.occurrences)
