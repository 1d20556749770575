"""What every human format of an explanation says alike (``errkb.render.answers``).

Nothing is cut in silence: a report that left entries out says so, with how to get them, at the
top and at the end of text, Markdown and HTML. One entry per record: the five-ranks ×
five-layers log reads as one answer and a table of its occurrences.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import errkb
from errkb.match.recordscan import Limits
from errkb.render import OutputFormat, render
from errkb.render.answers import entries, omitted_note
from errkb.report import Confidence, Report
from errkb.report.triage import KnownGroup, TriageReport
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


def test_the_five_layers_log_reads_in_one_screen(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(ranks_by_layers())
    text = render(report, OutputFormat.TEXT)
    assert text.count("● ValueError") == 1 and text.count("What it means") == 1
    assert len(text.splitlines()) <= 60  # one entry per occurrence printed 252 lines
    table = text[text.index("  Occurrences") :].splitlines()
    assert table[1].split() == ["lines", "prefix"]
    assert table[2].split() == ["4,", "24,", "44,", "64,", "84", QUANTO_PREFIX.format(0)]
    assert text.rstrip().splitlines()[-2].startswith("1 known error(s) explained, seen 25×")
    markdown = render(report, OutputFormat.MARKDOWN)
    assert markdown.count("### ValueError") == 1 and markdown.count("**How to fix**") == 1
    assert f"| 4, 24, 44, 64, 84 | `{QUANTO_PREFIX.format(0)}` |" in markdown
    page = render(report, OutputFormat.HTML)
    assert page.count('<section class="entry"') == 1 and page.count("<summary>How to fix") == 1
    assert page.count(QUANTO_PREFIX.format(4)) == 1  # its row in the occurrences table


QUANTO_PREFIX = "encoder.block.{}.layer.0.SelfAttention.q"


def test_diagnoses_that_differ_are_shown_per_occurrence(kb: errkb.KnowledgeBase) -> None:
    text = ranks_by_layers(1, 2) + ranks_by_layers(1, 1, scale="(1, 4096)").replace(
        "block.0.", "block.7."
    )
    report = kb.explain(text)
    (entry,) = entries(report.exact)
    assert entry.diagnosis is None and entry.varying == ("prefix", "scale_shape")
    assert [o.diagnosis is not None for o in entry.occurrences] == [True, True, True]
    out = render(report, OutputFormat.TEXT)
    assert out.count("      → ") == 3
    assert "| diagnosis |" in render(report, OutputFormat.MARKDOWN)


def test_several_files_are_a_column_of_the_table(kb: errkb.KnowledgeBase) -> None:
    one, two = ranks_by_layers(1, 2), ranks_by_layers(2, 1)
    report = Report.merge([("a.log", kb.explain(one)), ("b.log", kb.explain(two))])
    (entry,) = entries(report.exact)
    assert entry.sources == ("a.log", "b.log")
    table = render(report, OutputFormat.TEXT).split("  Occurrences\n")[1].splitlines()
    assert table[0].split() == ["file", "lines", "prefix"]
    assert table[1].split()[0] == "a.log" and table[3].split()[0] == "b.log"


def test_possible_matches_follow_the_answers_and_are_not_counted(
    kb: errkb.KnowledgeBase,
) -> None:
    report = kb.explain(ranks_by_layers(1, 1))
    maybe = dataclasses.replace(report.matches[0], confidence=Confidence.POSSIBLE)
    only = dataclasses.replace(report, matches=(maybe,))
    assert not only.explained and only.exit_code == 1
    for fmt in FORMATS:
        text = render(only, fmt)
        assert "Possible, not counted" in text and QUANTO_ID in text
        assert "1 known error" not in text
    both = dataclasses.replace(report, matches=(*report.matches, maybe))
    text = render(both, OutputFormat.TEXT)
    assert text.index("● ValueError") < text.index("Possible, not counted")


def test_the_triage_page_folds_a_records_diagnoses(tmp_path: Path) -> None:
    group = KnownGroup(
        QUANTO_ID, "slug", "ValueError", 197, 985, ("a.log",), None, None,
        (("prefix", tuple(f"layer.{k}" for k in range(20))), ("scale_shape", ("(4096,)",))),
        tuple(f"In layer 'layer.{k}', reshape the scale." for k in range(20)),
        (),
    )  # fmt: skip
    page = render(TriageReport("0", None, 197, 1, (group,), (), ()), OutputFormat.HTML)
    assert "… (20 distinct)" in page and "layer.3" not in page.split("<details")[0]
    assert "<summary>19 more diagnoses</summary>" in page
    assert "<code>scale_shape</code>: (4096,)" in page


def test_markdown_carries_the_unknown_exceptions_and_the_summary(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(ranks_by_layers(1, 1) + "RuntimeError: nobody documented this\n")
    markdown = render(report, OutputFormat.MARKDOWN)
    assert "### Exceptions with no known record" in markdown
    assert "- line 5: `RuntimeError: nobody documented this`" in markdown
    assert "**1 known error(s) explained; 1 exception(s) with no known record (dataset" in markdown
    assert "**How to fix**" in markdown and "Raised at [`" in markdown
