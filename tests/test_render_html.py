"""The HTML page (``errkb.render.html``) in a real headless Chromium, not only as a string.

The explain page of the five-ranks × five-layers log (one entry, its fixes and documentation
in ``<details>``, its occurrences sortable, the message column never breaking words) and the
triage page of a 50-log fixture (``tests/test_triage.make_fixture``) is loaded from a file
by Debian's ``chromium`` (``--headless --dump-dom``, scripts running, no network), and the DOM
it built is checked: one table row per group, the examples' highlighted values, the chart's
bars, a click on a header sorting the table; a screenshot must be a real PNG. Without the
browser this module skips with the reason, except in CI (``ERRKB_REQUIRE_EXTRAS=1``), where
``.ci/run`` installs it and a missing browser fails.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import errkb
from errkb.render import OutputFormat, RenderOptions, render
from errkb.report import Report
from errkb.report.triage import LogError, TriageReport
from errkb.triage import triage
from tests.cli import QUANTO_LOG
from tests.conftest import QUANTO_ID
from tests.test_render_answers import ranks_by_layers
from tests.test_triage import make_fixture

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _browser() -> str:
    if CHROMIUM is None:
        if os.environ.get("ERRKB_REQUIRE_EXTRAS") == "1":
            raise RuntimeError(
                "ERRKB_REQUIRE_EXTRAS=1 but chromium is missing: apt-get install chromium"
            )
        pytest.skip("the chromium browser is not installed (Debian package chromium)")
    return CHROMIUM


def chromium(page: Path, profile: Path, *extra: str) -> str:
    """Run headless Chromium on ``page`` with a fresh profile; its standard output."""
    args = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *extra,
        page.as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


class _Dom(html.parser.HTMLParser):
    """Elements as (tag, attributes, text inside) for the checks below."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str], list[str]]] = []
        self.done: list[tuple[str, dict[str, str], str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("meta", "br", "link", "input"):
            return
        self.stack.append((tag, {k: v or "" for k, v in attrs}, []))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            name, attrs, text = self.stack.pop()
            joined = "".join(text)
            self.done.append((name, attrs, joined))
            if self.stack:
                self.stack[-1][2].append(joined)
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.stack:
            self.stack[-1][2].append(data)


def dom(text: str) -> list[tuple[str, dict[str, str], str]]:
    parser = _Dom()
    parser.feed(text)
    return parser.done


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TriageReport]:
    root = tmp_path_factory.mktemp("fifty")
    make_fixture(root, logs=50)
    db = root / "kb.sqlite3"
    errkb.open(db).close()
    report = triage([str(root / "good"), str(root / "bad")], db=db, jobs=1, limit=1 << 20)
    path = root / "triage.html"
    path.write_text(render(report, OutputFormat.HTML), encoding="utf-8")
    return path, report


def _rows(elements: list[tuple[str, dict[str, str], str]]) -> list[dict[str, str]]:
    return [a for tag, a, _ in elements if tag == "tr" and "data-group" in a and "class" not in a]


@pytest.mark.slow
def test_the_triage_page_renders_its_tables_chart_and_highlights(
    page: tuple[Path, TriageReport], tmp_path: Path
) -> None:
    path, report = page
    assert len(report.known) == 1 and len(report.unknown) == 3 and report.errors
    out = chromium(path, tmp_path / "profile", "--dump-dom")
    elements = dom(out)
    groups = [a["data-group"] for a in _rows(elements)]
    assert groups == [k.id for k in report.known] + [u.cluster for u in report.unknown]
    marks = [(a.get("class", ""), text) for tag, a, text in elements if tag == "mark"]
    # Unknown groups: the values that vary are highlighted, in every example shown.
    shown = sum(len(u.examples) for u in report.unknown)
    values = {v for u in report.unknown for slot in u.values for v in slot}
    assert sum(1 for cls, t in marks if cls == "value") >= shown
    assert all(t in values for cls, t in marks if cls == "value")
    # Known groups: the matched message itself.
    assert any(cls == "" and t.startswith("Quanto layer") for cls, t in marks)
    bars = [a for tag, a, _ in elements if tag == "rect" and a.get("class") == "bar"]
    assert sorted((int(b["data-count"]) for b in bars), reverse=True) == sorted(
        [k.occurrences for k in report.known] + [u.count for u in report.unknown], reverse=True
    )
    errors = [t for tag, a, t in elements if tag == "li" and a.get("class") == "err"]
    assert len(errors) == len(report.errors) and any("binary data" in e for e in errors)


@pytest.mark.slow
def test_a_header_click_sorts_the_table_in_the_browser(
    page: tuple[Path, TriageReport], tmp_path: Path
) -> None:
    path, report = page
    # Click "count" of the unknown table once (ascending), as a user would.
    clicked = tmp_path / "clicked.html"
    script = "<script>document.querySelectorAll('#unknown th')[3].click()</script></body>"
    clicked.write_text(path.read_text(encoding="utf-8").replace("</body>", script))
    elements = dom(chromium(clicked, tmp_path / "profile", "--dump-dom"))
    order = [a["data-group"] for a in _rows(elements) if a["data-group"].startswith("t")]
    counts = {u.cluster: u.count for u in report.unknown}
    assert [counts[c] for c in order] == sorted(counts.values())
    headers = [a.get("class", "") for tag, a, t in elements if tag == "th" and t == "count"]
    assert headers == ["asc"]


@pytest.mark.slow
def test_the_page_screenshots_and_needs_no_network(
    page: tuple[Path, TriageReport], tmp_path: Path
) -> None:
    path, _ = page
    text = path.read_text(encoding="utf-8")
    assert "http://" not in text.replace("http://www.w3.org", "") and "src=" not in text
    shot = tmp_path / "page.png"
    chromium(path, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,1600")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_a_log_cannot_inject_markup() -> None:
    hostile = TriageReport("0", None, 1, 10, (), (), (LogError("<script>x()</script>", "<b>"),))
    page = render(hostile, OutputFormat.HTML)
    assert "<script>x()" not in page and "&lt;script&gt;x()&lt;/script&gt;" in page


def test_the_explain_page_shows_the_log_with_matched_lines_marked(tmp_path: Path) -> None:
    text = QUANTO_LOG.read_text()
    with errkb.open(tmp_path / "kb.sqlite3") as kb:
        report = kb.explain(text)
    page = render(report, OutputFormat.HTML, RenderOptions(sources={"quanto.log": text}))
    hits = [a["id"] for tag, a, _ in dom(page) if tag == "span" and a.get("class") == "hit"]
    assert hits == [f"L{n}" for n in report.matches[0].lines]
    assert "<mark>Quanto layer" in page or "<mark>ValueError: Quanto layer" in page


@pytest.fixture(scope="module")
def explain_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """The explain page of the five-ranks × five-layers log read from standard input."""
    root = tmp_path_factory.mktemp("explain")
    text = ranks_by_layers() + "RuntimeError: something nobody documented\n"
    with errkb.open(root / "kb.sqlite3") as kb:
        report = kb.explain(text)
    path = root / "explain.html"
    path.write_text(
        render(report, OutputFormat.HTML, RenderOptions(sources={"-": text})), encoding="utf-8"
    )
    return path, report


#: Appended to a page: the computed styles a reader's eye depends on, written into the DOM.
_STYLES = """<script>
var m=document.querySelector("section.entry .exc"),s=getComputedStyle(m);
document.body.setAttribute("data-word-break",s.wordBreak);
document.body.setAttribute("data-overflow-wrap",s.overflowWrap);
document.body.setAttribute("data-open",Array.prototype.map.call(
 document.querySelectorAll("details"),function(d){return d.className+":"+d.open}).join(" "));
</script></body>"""


@pytest.mark.slow
def test_the_explain_page_is_one_entry_with_its_answer_and_occurrences(
    explain_page: tuple[Path, Report], tmp_path: Path
) -> None:
    path, report = explain_page
    styled = tmp_path / "styled.html"
    styled.write_text(path.read_text(encoding="utf-8").replace("</body>", _STYLES))
    elements = dom(chromium(styled, tmp_path / "profile", "--dump-dom"))
    body = next(a for tag, a, _ in elements if tag == "body")
    assert body["data-word-break"] == "normal"  # words in the message never break
    assert body["data-overflow-wrap"] == "break-word"
    assert body["data-open"].split() == ["fix:true", "docs:false", "occurrences:true"]
    sections = [a for tag, a, _ in elements if tag == "section"]
    assert [a["data-group"] for a in sections] == [QUANTO_ID]
    headings = {tag: t for tag, a, t in elements if tag == "h1"}
    assert headings["h1"] == "errkb explain: standard input"
    assert [t for tag, a, t in elements if tag == "h2" and a.get("class") == "source"] == [
        "standard input"
    ]
    summaries = [t for tag, _, t in elements if tag == "summary"]
    assert summaries == [
        "How to fix",
        "What it means, when it happens, prevention",
        "Occurrences (5)",
    ]
    fixes = [t for tag, a, t in elements if tag == "li"]
    assert any(t.startswith("Reshape/save _scale") for t in fixes)
    links = [a["href"] for tag, a, _ in elements if tag == "a"]
    assert links == [report.exact[0].record["githubUrl"]]
    rows = [t for tag, a, t in elements if tag == "tr"]
    assert sum(1 for t in rows if "SelfAttention.q" in t) == 5
    assert any("something nobody documented" in t for t in rows)  # the unknown exception
    hits = [a["id"] for tag, a, _ in elements if tag == "span" and a.get("class") == "hit"]
    assert len(hits) == 25
    summary = next(t for tag, a, t in elements if a.get("id") == "summary")
    assert summary.startswith("1 known error(s) explained, seen 25×; 1 exception(s)")


@pytest.mark.slow
def test_the_explain_page_sorts_occurrences_and_needs_no_network(
    explain_page: tuple[Path, Report], tmp_path: Path
) -> None:
    path, _ = explain_page
    text = path.read_text(encoding="utf-8")
    assert "http://" not in text.replace("http://www.w3.org", "") and "src=" not in text
    clicked = tmp_path / "clicked.html"
    # The "prefix" header, twice: descending.
    script = (
        "<script>var h=document.querySelectorAll('table.occurrences th')[2];h.click();h.click()"
        "</script></body>"
    )
    clicked.write_text(text.replace("</body>", script))
    elements = dom(chromium(clicked, tmp_path / "profile", "--dump-dom"))
    cells = [t for tag, _, t in elements if tag == "code" and t.startswith("encoder.block.")]
    assert cells == [f"encoder.block.{k}.layer.0.SelfAttention.q" for k in (4, 3, 2, 1, 0)]
    shot = tmp_path / "page.png"
    chromium(path, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1280,1600")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
