"""Rendering explanations (``Report``) and records (``RecordView``) as text, Markdown or JSON.

The last step of text -> events -> matches -> report -> render. Rendering is pure: it takes
values and returns strings; the CLI decides where they go and whether colour is allowed. The
functions register themselves in :mod:`errkb.render`'s registry, which also sanitises the
report before a human-facing renderer sees it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from errkb.render import OutputFormat, RenderOptions, json_text, renders
from errkb.render.answers import omitted_note
from errkb.report import Confidence, Diagnosis, Match, RecordView, Report

Style = Callable[..., str]


def _plain(text: str, **_kw: Any) -> str:
    return text


@renders(Report, OutputFormat.JSON)
def report_json(report: Report, options: RenderOptions) -> str:
    """``Report.to_dict()``, indented: the ``schemas/explanation.schema.json`` object."""
    return json_text(report.to_dict())


@renders(Report, OutputFormat.TEXT)
def report_text(report: Report, options: RenderOptions) -> str:
    """The terminal rendering: each explained error with its record's documentation."""
    return _text_report(report, _style(options.color))


@renders(Report, OutputFormat.MARKDOWN)
def report_markdown(report: Report, options: RenderOptions) -> str:
    """Markdown for pasting into an issue or a chat."""
    return _markdown_report(report)


def _style(color: bool) -> Style:
    if not color:
        return _plain
    import click

    return click.style


# ---------------------------------------------------------------------------------------- text
def _text_report(report: Report, style: Style) -> str:
    out: list[str] = []
    cut = omitted_note(report.omitted)
    if cut:
        out += [style(cut, bold=True), ""]
    exact = [m for m in report.matches if m.confidence is Confidence.EXACT]
    similar = [m for m in report.matches if m.confidence is Confidence.SIMILAR]
    for match in exact:
        out.append(_text_match(match, style))
    if similar:
        out.append(style("Not recognised. Closest known errors (suggestions only):", bold=True))
        for m in similar:
            exc = f"{m.exception.cls}: " if m.exception.cls else ""
            out.append(f"  line {_lines(m.lines)}: {exc}{_clip(m.exception.message)}")
            out.append(f"    ~ {m.id} {m.slug} (similarity {m.score:.2f})")
        out.append("")
    unexplained = [
        u for u in report.unmatched if not any(s.lines[:1] == (u.line,) for s in similar)
    ]
    if unexplained:
        out.append(style("Exceptions with no known record:", bold=True))
        for u in unexplained:
            exc = f"{u.cls}: " if u.cls else ""
            out.append(f"  line {u.line}: {exc}{_clip(u.message)}")
        out.append("")
    if not exact:
        out.append("No known error found.")
    else:
        out.append(f"{len(exact)} known error(s) explained (dataset {report.dataset_version}).")
    if cut:
        out.append(cut)
    note = report.knowledge_base.note() if report.knowledge_base else None
    if note:
        out.append(note)
    return "\n".join(out) + "\n"


def _text_match(m: Match, style: Style) -> str:
    rec = m.record
    lines = [
        style(f"● {rec.get('errorClass') or 'error'}: {m.slug}", fg="red", bold=True),
        f"  record {m.id}  ({m.confidence.value}, score {m.score:.2f})",
        f"  seen {m.occurrences}× at line{'s' if len(m.lines) > 1 else ''} {_lines(m.lines)}"
        + (f" of {m.source}" if m.source else "")
        + ("  (root cause)" if m.root_cause else ""),
        "",
        "  " + style(_exception_line(m), fg="yellow"),
        "",
        f"  Raised at {rec.get('filePath')}:{rec.get('lineNumber')}",
        f"  {rec.get('githubUrl')}",
    ]
    if m.validated:
        lines.append("  Checked by a reference validator (errkb check).")
    if m.captures:
        lines += ["", style("  Captured values", bold=True)]
        width = max(len(k) for k, _ in m.captures)
        lines += [f"    {k.ljust(width)}  {v}" for k, v in m.captures]
    if m.diagnosis is not None:
        lines += ["", style("  Diagnosis", bold=True), *_wrap(_diagnosis_text(m.diagnosis), 4)]
    lines += _record_sections(rec, style)
    if m.alternatives:
        alts = ", ".join(f"{a.id} ({a.slug})" for a in m.alternatives)
        lines += ["", f"  Also matched, less specific: {alts}"]
    return "\n".join(lines) + "\n"


def _record_sections(rec: Mapping[str, Any], style: Style) -> list[str]:
    lines: list[str] = []
    for title, key in (
        ("What it means", "documentation"),
        ("When it happens", "triggerScenarios"),
        ("Common situations", "commonSituations"),
    ):
        if rec.get(key):
            lines += ["", style(f"  {title}", bold=True), *_wrap(str(rec[key]), 4)]
    solutions: Sequence[str] = rec.get("solutions") or ()
    if solutions:
        lines += ["", style("  How to fix", bold=True)]
        for i, s in enumerate(solutions, 1):
            lines += _wrap(s, 7, first=f"    {i}. ")
    if rec.get("exampleFix"):
        lines += ["", style("  Example fix", bold=True)]
        lines += ["    " + line for line in str(rec["exampleFix"]).splitlines()]
    tips: Sequence[str] = rec.get("preventionTips") or ()
    if tips:
        lines += ["", style("  Prevention", bold=True)]
        for tip in tips:
            lines += _wrap(tip, 6, first="    - ")
    return lines


@renders(RecordView, OutputFormat.JSON)
def record_json(view: RecordView, options: RenderOptions) -> str:
    """The record's JSON object, exactly."""
    return json_text(view.to_dict())


@renders(RecordView, OutputFormat.MARKDOWN)
def record_markdown(view: RecordView, options: RenderOptions) -> str:
    """One record as Markdown."""
    rec = view.record
    head = [f"## `{rec['id']}` {rec['slug']}", "", f"```\n{rec['errorMessage']}\n```", ""]
    return "\n".join(head + _markdown_record(rec, view.validated)) + "\n"


@renders(RecordView, OutputFormat.TEXT)
def record_text(view: RecordView, options: RenderOptions) -> str:
    """One record (``errkb show``) rendered like an explanation."""
    rec, validated, retired = view.record, view.validated, view.retired
    style = _style(options.color)
    lines = [
        style(f"● {rec.get('errorClass') or 'error'}: {rec['slug']}", fg="red", bold=True),
        f"  record {rec['id']}  repo {rec['repo']}  severity {rec['severity']}"
        + ("  (retired)" if retired else ""),
        "",
        "  " + style(str(rec["errorMessage"]), fg="yellow"),
        f"  pattern: {rec['messagePattern']}",
        "",
        f"  Raised at {rec.get('filePath')}:{rec.get('lineNumber')}",
        f"  {rec.get('githubUrl')}",
    ]
    if validated:
        lines.append("  Checked by a reference validator (errkb check).")
    lines += _record_sections(rec, style)
    for title, key in (
        ("Validation code (dataset text, never executed)", "validationCode"),
        ("Type guard (dataset text, never executed)", "typeGuard"),
        ("Try/except pattern (dataset text, never executed)", "tryCatchPattern"),
    ):
        if rec.get(key):
            lines += ["", style(f"  {title}", bold=True)]
            lines += ["    " + line for line in str(rec[key]).splitlines()]
    return "\n".join(lines) + "\n"


def _exception_line(m: Match) -> str:
    exc = m.exception
    return _clip(f"{exc.cls}: {exc.message}" if exc.cls else exc.message, 300)


def _diagnosis_text(diagnosis: Diagnosis) -> str:
    parts = [diagnosis.explanation or diagnosis.condition.value]
    if diagnosis.expected:
        parts.append(f"Expected: {diagnosis.expected}.")
    return " ".join(p for p in parts if p)


def _lines(lines: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:12])
    return shown + (f" (+{len(lines) - 12} more)" if len(lines) > 12 else "")


def _clip(text: str, width: int = 160) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= width and "\n" not in text else first[: width - 1] + "…"


def _wrap(text: str, indent: int, first: str | None = None) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for para in str(text).splitlines() or [""]:
        out += textwrap.wrap(
            para, width=96, initial_indent=first if first and not out else pad,
            subsequent_indent=pad, break_long_words=False, break_on_hyphens=False,
        ) or [pad]  # fmt: skip
    return out


# ------------------------------------------------------------------------------------ markdown
def _markdown_report(report: Report) -> str:
    out: list[str] = []
    cut = omitted_note(report.omitted)
    if cut:
        out += [f"> **{cut}**", ""]
    exact = [m for m in report.matches if m.confidence is Confidence.EXACT]
    similar = [m for m in report.matches if m.confidence is Confidence.SIMILAR]
    for m in exact:
        rec = m.record
        out += [
            f"### {rec.get('errorClass') or 'Error'}: `{m.slug}`",
            "",
            f"**Record** `{m.id}` · exact match, score {m.score:.2f} · seen {m.occurrences}× "
            f"(line{'s' if len(m.lines) > 1 else ''} {_lines(m.lines)})"
            + (" · root cause" if m.root_cause else ""),
            "",
            "```",
            _exception_line(m),
            "```",
            "",
            f"Raised at [`{rec.get('filePath')}:{rec.get('lineNumber')}`]({rec.get('githubUrl')})",
            "",
        ]
        if m.captures:
            out += ["| value | captured |", "|---|---|"]
            out += [f"| `{k}` | `{_md_cell(v)}` |" for k, v in m.captures]
            out.append("")
        if m.diagnosis is not None:
            out += [f"**Diagnosis:** {_diagnosis_text(m.diagnosis)}", ""]
        out += _markdown_record(rec, m.validated)
    if similar:
        out += ["### Not recognised — closest known errors (suggestions only)", ""]
        out += [
            f"- line {_lines(m.lines)}: `{_md_cell(_clip(m.exception.message))}` ~ `{m.id}` "
            f"{m.slug} (similarity {m.score:.2f})"
            for m in similar
        ]
        out.append("")
    if not exact:
        out.append("_No known error found._")
    if cut:
        out += ["", f"> **{cut}**"]
    note = report.knowledge_base.note() if report.knowledge_base else None
    if note:
        out += ["", f"_{note}_"]
    return "\n".join(out) + "\n"


def _markdown_record(rec: Mapping[str, Any], validated: bool) -> list[str]:
    out: list[str] = []
    if validated:
        out += ["_Checked by a reference validator (`errkb check`)._", ""]
    for title, key in (
        ("What it means", "documentation"),
        ("When it happens", "triggerScenarios"),
        ("Common situations", "commonSituations"),
    ):
        if rec.get(key):
            out += [f"**{title}.** {rec[key]}", ""]
    if rec.get("solutions"):
        out += ["**How to fix**", ""]
        out += [f"{i}. {s}" for i, s in enumerate(rec["solutions"], 1)]
        out.append("")
    if rec.get("exampleFix"):
        out += ["**Example fix**", "", "```python", str(rec["exampleFix"]), "```", ""]
    if rec.get("preventionTips"):
        out += ["**Prevention**", ""]
        out += [f"- {t}" for t in rec["preventionTips"]]
        out.append("")
    return out


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")
