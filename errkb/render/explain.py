"""Rendering explanations (``Report``) and records (``RecordView``) as text, Markdown or JSON.

Pure, registered in :mod:`errkb.render`'s registry (which sanitises for human formats).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from errkb.render import OutputFormat, RenderOptions, renders, renders_json
from errkb.render.answers import (
    POSSIBLE_TITLE,
    PROSE_SECTIONS,
    Entry,
    entries,
    file_answers,
    omitted_note,
    possible_entries,
)
from errkb.report import Confidence, Diagnosis, Match, RecordView, Report

Style = Callable[..., str]


def _plain(text: str, **_kw: Any) -> str:
    return text


renders_json(Report, Report.to_dict)  # schemas/explanation.schema.json


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


def _text_report(report: Report, style: Style) -> str:
    out: list[str] = []
    cut = omitted_note(report.omitted)
    if cut:
        out += [style(cut, bold=True), ""]
    files = file_answers(report)
    if files:
        out.append(style("Files:", bold=True))
        width = max(len(name) for name, _, _ in files)
        for name, answer, read in files:
            line = f"  {name.ljust(width)}  {answer}"
            out.append(line if read else style(line, fg="red"))
        out.append("")
    exact = [m for m in report.matches if m.confidence is Confidence.EXACT]
    similar = [m for m in report.matches if m.confidence is Confidence.SIMILAR]
    for entry in entries(exact):
        out.append(_text_entry(entry, style))
    possible = possible_entries(report)
    if possible:
        out.append(style(POSSIBLE_TITLE + ":", bold=True))
        for e in possible:
            out.append(f"  {_possible_line(e)}")
        out.append("")
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
            where = f"{u.source}:" if u.source else ""
            out.append(f"  {where}line {_lines(u.lines or (u.line,))}: {exc}{_clip(u.message)}")
        out.append("")
    out.append(summary_line(report))
    if cut:
        out.append(cut)
    note = report.knowledge_base.note() if report.knowledge_base else None
    if note:
        out.append(note)
    return "\n".join(out) + "\n"


def _possible_line(entry: Entry) -> str:
    m = entry.first
    where = ", ".join(entry.sources)
    lines = sorted({n for o in entry.occurrences for n in o.lines})
    return (
        f"line {_lines(lines, 6)}{' of ' + where if where else ''}: {m.id} {m.slug} "
        f"(score {m.score:.2f}): {_clip(_exception_line(m), 100)}"
    )


def summary_line(report: Report) -> str:
    """The one line every human format ends with: records explained (not matches), the rest."""
    exact = report.exact
    unread = len(report.unreadable)
    lost = f" {unread} of {len(report.files)} input(s) could not be read." if unread else ""
    if not exact:
        return "No known error found." + lost
    records = len({m.id for m in exact})
    count = sum(m.occurrences for m in exact)
    seen = f", seen {count}×" if count > records else ""
    unknown = len(report.unmatched)
    tail = f"; {unknown} exception(s) with no known record" if unknown else ""
    return (
        f"{records} known error(s) explained{seen}{tail} (dataset {report.dataset_version})." + lost
    )


def _text_entry(entry: Entry, style: Style) -> str:
    m = entry.first
    rec = m.record
    many = len(entry.occurrences) > 1
    where = entry.sources
    lines = [
        style(f"● {rec.get('errorClass') or 'error'}: {m.slug}", fg="red", bold=True),
        f"  record {m.id}  ({m.confidence.value}, score {m.score:.2f})"
        + ("  (root cause)" if entry.root_cause else ""),
        f"  seen {entry.count}×"
        + (
            f" at line{'s' if len(m.lines) > 1 else ''} {_lines(m.lines)}"
            if not many
            else f", {len(entry.occurrences)} distinct values (below)"
        )
        + (f" of {', '.join(where)}" if where else ""),
        "",
        "  " + style(_exception_line(m), fg="yellow"),
        "",
        f"  Raised at {rec.get('filePath')}:{rec.get('lineNumber')}",
        f"  {rec.get('githubUrl')}",
    ]
    if m.validated:
        lines.append("  Checked by a reference validator (errkb check).")
    if entry.common:
        title = "Captured values" + (" (the same in every occurrence)" if many else "")
        lines += ["", style(f"  {title}", bold=True)]
        width = max(len(k) for k, _ in entry.common)
        lines += [f"    {k.ljust(width)}  {v}" for k, v in entry.common]
    if entry.diagnosis is not None:
        title = "Diagnosis" + (" (the first occurrence's; all have its condition)" if many else "")
        lines += ["", style(f"  {title}", bold=True), *_wrap(_diagnosis_text(entry.diagnosis), 4)]
    lines += _record_sections(rec, style)
    if many:
        lines += ["", style("  Occurrences", bold=True), *_occurrence_table(entry)]
    if m.alternatives:
        alts = ", ".join(f"{a.id} ({a.slug})" for a in m.alternatives)
        lines += ["", f"  Also matched, less specific: {alts}"]
    return "\n".join(lines) + "\n"


def _occurrence_table(entry: Entry) -> list[str]:
    """The text table of an entry's occurrences: source, lines, the values that differ."""
    sources = bool(entry.sources)
    head = (["file"] if sources else []) + ["lines", *entry.varying]
    rows = [
        ([o.source or "-"] if sources else [])
        + [_lines(o.lines, 6), *(_clip(v, 60) for _, v in o.values)]
        for o in entry.occurrences
    ]
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head))]
    out = ["    " + "  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)).rstrip()]
    for o, row in zip(entry.occurrences, rows, strict=True):
        out.append(
            "    " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
        if o.diagnosis is not None:
            out += _wrap(_diagnosis_text(o.diagnosis), 8, first="      → ")
    return out


def _record_sections(rec: Mapping[str, Any], style: Style) -> list[str]:
    lines: list[str] = []
    for title, key in PROSE_SECTIONS:
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


renders_json(RecordView, RecordView.to_dict)


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


def _lines(lines: Sequence[int], most: int = 12) -> str:
    shown = ", ".join(str(n) for n in lines[:most])
    return shown + (f" (+{len(lines) - most} more)" if len(lines) > most else "")


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


def _markdown_report(report: Report) -> str:
    out: list[str] = []
    cut = omitted_note(report.omitted)
    if cut:
        out += [f"> **{cut}**", ""]
    files = file_answers(report)
    if files:
        out += ["| file | answer |", "|---|---|"]
        out += [
            f"| `{_md_cell(name)}` | {_md_cell(answer) if read else f'**{_md_cell(answer)}**'} |"
            for name, answer, read in files
        ]
        out.append("")
    exact = [m for m in report.matches if m.confidence is Confidence.EXACT]
    similar = [m for m in report.matches if m.confidence is Confidence.SIMILAR]
    for entry in entries(exact):
        out += _markdown_entry(entry)
    possible = possible_entries(report)
    if possible:
        out += [f"### {POSSIBLE_TITLE}", ""]
        out += [f"- {_md_cell(_possible_line(e))}" for e in possible]
        out.append("")
    if similar:
        out += ["### Not recognised — closest known errors (suggestions only)", ""]
        out += [
            f"- line {_lines(m.lines)}: `{_md_cell(_clip(m.exception.message))}` ~ `{m.id}` "
            f"{m.slug} (similarity {m.score:.2f})"
            for m in similar
        ]
        out.append("")
    unexplained = [
        u for u in report.unmatched if not any(s.lines[:1] == (u.line,) for s in similar)
    ]
    if unexplained:
        out += ["### Exceptions with no known record", ""]
        for u in unexplained:
            exc = f"{u.cls}: " if u.cls else ""
            where = f"`{_md_cell(u.source)}` " if u.source else ""
            seen = f" ({u.occurrences}×)" if u.occurrences > 1 else ""
            out.append(
                f"- {where}line {_lines(u.lines or (u.line,), 6)}{seen}: "
                f"`{_md_cell(_clip(exc + u.message))}`"
            )
        out.append("")
    out.append(f"**{summary_line(report)}**")
    if cut:
        out += ["", f"> **{cut}**"]
    note = report.knowledge_base.note() if report.knowledge_base else None
    if note:
        out += ["", f"_{note}_"]
    return "\n".join(out) + "\n"


def _markdown_entry(entry: Entry) -> list[str]:
    m = entry.first
    rec = m.record
    many = len(entry.occurrences) > 1
    seen = (
        f"seen {entry.count}× in {len(entry.occurrences)} distinct values (table below)"
        if many
        else f"seen {m.occurrences}× (line{'s' if len(m.lines) > 1 else ''} {_lines(m.lines)})"
    )
    where = f" in {', '.join(f'`{_md_cell(s)}`' for s in entry.sources)}" if entry.sources else ""
    out = [
        f"### {rec.get('errorClass') or 'Error'}: `{m.slug}`",
        "",
        f"**Record** `{m.id}` · {m.confidence.value} match, score {m.score:.2f} · {seen}{where}"
        + (" · root cause" if entry.root_cause else ""),
        "",
        "```",
        _exception_line(m),
        "```",
        "",
        f"Raised at [`{rec.get('filePath')}:{rec.get('lineNumber')}`]({rec.get('githubUrl')})",
        "",
    ]
    if entry.common:
        title = "captured (every occurrence)" if many else "captured"
        out += [f"| value | {title} |", "|---|---|"]
        out += [f"| `{k}` | `{_md_cell(v)}` |" for k, v in entry.common]
        out.append("")
    if entry.diagnosis is not None:
        first = " (the first occurrence's; all have its condition)" if many else ""
        out += [f"**Diagnosis{first}:** {_diagnosis_text(entry.diagnosis)}", ""]
    out += _markdown_record(rec, m.validated)
    if m.alternatives:
        alts = ", ".join(f"`{a.id}` ({a.slug})" for a in m.alternatives)
        out += [f"_Also matched, less specific:_ {alts}", ""]
    if many:
        out += ["**Occurrences**", "", *_markdown_occurrences(entry), ""]
    return out


def _markdown_occurrences(entry: Entry) -> list[str]:
    sources = bool(entry.sources)
    diagnoses = any(o.diagnosis is not None for o in entry.occurrences)
    head = (
        (["file"] if sources else [])
        + ["lines"]
        + [f"`{_md_cell(k)}`" for k in entry.varying]
        + (["diagnosis"] if diagnoses else [])
    )
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in entry.occurrences:
        cells = (
            ([f"`{_md_cell(o.source or '-')}`"] if sources else [])
            + [_lines(o.lines, 6)]
            + [f"`{_md_cell(_clip(v, 80))}`" for _, v in o.values]
            + ([_md_cell(_diagnosis_text(o.diagnosis)) if o.diagnosis else ""] if diagnoses else [])
        )
        out.append("| " + " | ".join(cells) + " |")
    return out


def _markdown_record(rec: Mapping[str, Any], validated: bool) -> list[str]:
    out: list[str] = []
    if validated:
        out += ["_Checked by a reference validator (`errkb check`)._", ""]
    for title, key in PROSE_SECTIONS:
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
