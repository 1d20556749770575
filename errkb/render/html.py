"""One self-contained HTML page for a triage run (``TriageReport``) or one log (``Report``).

Nothing is fetched (CSS, JavaScript and SVG inline); every string from a log or record is
HTML-escaped after :func:`errkb.render.sanitize`. Tables sort by a header click; examples show
what matched or varied in ``<mark>``. An explanation's page shows the log beside it, matched
lines highlighted (:data:`CONTEXT` lines around them in a long log).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from errkb.render import OutputFormat, RenderOptions, renders
from errkb.render.answers import (
    POSSIBLE_TITLE,
    PROSE_SECTIONS,
    Entry,
    entries,
    file_answers,
    omitted_note,
    possible_entries,
)
from errkb.report import Confidence, Diagnosis, Report
from errkb.report.triage import Example, KnownGroup, TriageReport

#: Lines of a log shown around each matched line when the log is long.
CONTEXT = 5
#: Logs up to this many lines are shown whole.
WHOLE_LOG_LINES = 2_000
#: Bars in the chart.
CHART_BARS = 12

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#1d1d1f;background:#fff}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.6em 0 .4em}
table{border-collapse:collapse;width:100%;margin:.4em 0}
th,td{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f6;cursor:pointer;user-select:none;white-space:nowrap}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre,.ex{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.ex{margin:.15em 0;white-space:pre-wrap;overflow-wrap:break-word;color:#444}
td.ex{overflow-wrap:break-word;word-break:normal;min-width:24ch}
section.entry{border:1px solid #e2e2e8;border-radius:6px;padding:.2em 1em .6em;margin:1em 0}
section.entry h2{margin-top:.6em}.meta{color:#555;margin:.1em 0 .5em}
.exc{background:#fff8e1;padding:.4em .6em;border-radius:4px}
table.values{width:auto}details{margin:.5em 0}summary{cursor:pointer;font-weight:600}
pre.example{background:#f6f8fa;padding:.5em;overflow:auto}.note{color:#555}
mark{background:#ffe27a;color:inherit;padding:0 1px;border-radius:2px}
mark.value{background:#bfe3ff}
.new{color:#fff;background:#c62828;border-radius:3px;padding:0 .35em;font-size:.85em}
.summary{color:#333}.err{color:#b00020}
.cut{background:#fff3c4;border-left:4px solid #e0a800;padding:.3em .6em;font-weight:600}
svg text{font:12px system-ui,sans-serif}
pre.log{background:#fafafa;border:1px solid #e5e5e5;padding:.5em;overflow:auto}
pre.log .ln{color:#999;display:inline-block;width:6ch;text-align:right;margin-right:1ch}
pre.log .hit{background:#fff3c4;display:block}
"""

# Click a header: sort the table's rows by that column; a group's example rows move with it.
_JS = """
document.querySelectorAll("table.sortable th").forEach(function(th){
 th.addEventListener("click",function(){
  var table=th.closest("table"),body=table.tBodies[0],col=th.cellIndex;
  var asc=!th.classList.contains("asc");
  table.querySelectorAll("th").forEach(function(h){h.classList.remove("asc","desc")});
  th.classList.add(asc?"asc":"desc");
  var rows=Array.prototype.slice.call(body.rows).filter(function(r){
   return !r.classList.contains("examples")});
  function key(r){var c=r.cells[col];var v=c.getAttribute("data-sort")||c.textContent;
   var n=parseFloat(v);return isNaN(n)||!/^-?[0-9.]+$/.test(v.trim())?v.toLowerCase():n}
  rows.sort(function(a,b){var x=key(a),y=key(b);
   var d=typeof x===typeof y?(x<y?-1:x>y?1:0):(typeof x==="number"?-1:1);
   return d*(asc?1:-1)});
  rows.forEach(function(r){body.appendChild(r);
   var ex=body.querySelector('tr.examples[data-group="'+r.getAttribute("data-group")+'"]');
   if(ex){body.appendChild(ex)}});
 });
});
"""


def esc(text: object) -> str:
    """``text`` made safe inside HTML text and double-quoted attribute values."""
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def highlight(text: str, spans: Iterable[str], css: str = "") -> str:
    """``text`` escaped, each occurrence of each non-empty span in ``spans`` in a ``<mark>``."""
    marks: list[tuple[int, int]] = []
    for span in sorted({s for s in spans if s}, key=len, reverse=True):
        start = text.find(span)
        while start >= 0:
            end = start + len(span)
            if not any(a < end and start < b for a, b in marks):
                marks.append((start, end))
            start = text.find(span, end)
    out, pos = [], 0
    cls = f' class="{css}"' if css else ""
    for a, b in sorted(marks):
        out.append(esc(text[pos:a]) + f"<mark{cls}>" + esc(text[a:b]) + "</mark>")
        pos = b
    out.append(esc(text[pos:]))
    return "".join(out)


def _page(title: str, body: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        # No network, ever: a strict policy says so to the browser as well.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + f"\n<script>{_JS}</script>\n</body></html>\n"
    )


def chart(bars: Sequence[tuple[str, int]], *, ident: str = "chart") -> str:
    """A horizontal bar chart as inline SVG: one labelled bar per (label, count)."""
    if not bars:
        return ""
    top = max(count for _, count in bars) or 1
    height = 22 * len(bars) + 6
    out = [
        f'<svg id="{ident}" role="img" width="760" height="{height}" viewBox="0 0 760 {height}">'
    ]
    for k, (label, count) in enumerate(bars):
        y = 4 + 22 * k
        width = max(2, round(440 * count / top))
        short = label if len(label) <= 40 else label[:39] + "…"
        out.append(
            f'<text x="0" y="{y + 14}">{esc(short)}</text>'
            f'<rect class="bar" x="280" y="{y}" width="{width}" height="16" fill="#4a78c2"'
            f' data-count="{count}"></rect>'
            f'<text x="{285 + width}" y="{y + 14}">{count}</text>'
        )
    out.append("</svg>")
    return "".join(out)


#: Distinct values of a capture the triage page shows before folding the rest away.
SHOWN_VALUES = 3


def _known_values(k: KnownGroup) -> str:
    """A known group's values and diagnoses, compact: shared values as is, varying ones counted."""
    parts = []
    for name, values in k.captures:
        if len(values) == 1:
            parts.append(f"<code>{esc(name)}</code>: {esc(values[0])}")
        else:
            more = f", … ({len(values)} distinct)" if len(values) > SHOWN_VALUES else ""
            parts.append(f"<code>{esc(name)}</code>: {esc(', '.join(values[:SHOWN_VALUES]))}{more}")
    out = "; ".join(parts)
    if k.diagnoses:
        out += f'<div class="diag">{esc(k.diagnoses[0])}</div>'
        if len(k.diagnoses) > 1:
            out += (
                f'<details class="diag"><summary>{len(k.diagnoses) - 1} more diagnos'
                f"{'is' if len(k.diagnoses) == 2 else 'es'}</summary>"
                + "".join(f'<div class="diag">{esc(d)}</div>' for d in k.diagnoses[1:])
                + "</details>"
            )
    return out


def _examples(
    group: str, examples: Sequence[Example], spans: Iterable[str], css: str, cols: int
) -> str:
    spans = tuple(spans)
    lines = "".join(
        f'<div class="ex"><span class="where">{esc(e.file)}:{e.line}</span> '
        f"{highlight(e.message, spans, css)}</div>"
        for e in examples
    )
    return f'<tr class="examples" data-group="{esc(group)}"><td colspan="{cols}">{lines}</td></tr>'


@renders(TriageReport, OutputFormat.HTML)
def triage_html(report: TriageReport, options: RenderOptions) -> str:
    """The triage page: summary, chart, sortable known and unknown tables, examples, errors."""
    from errkb.render.triage import summary

    new = '<span class="new">new</span>'
    body = [
        "<h1>errkb triage</h1>",
        f'<p class="summary" id="summary">{esc(summary(report))}'
        + (f" (new since {esc(report.baseline)})" if report.baseline else "")
        + "</p>",
    ]
    bars = [(k.slug, k.occurrences) for k in report.known] + [
        (f"{u.error_class or ''}: {u.template}", u.count) for u in report.unknown
    ]
    bars.sort(key=lambda b: -b[1])
    if bars:
        body.append("<h2>Occurrences, largest groups</h2>" + chart(bars[:CHART_BARS]))
    body.append(f"<h2>Known errors ({len(report.known)})</h2>")
    body.append(
        '<table class="sortable" id="known"><thead><tr><th>record</th><th>slug</th><th>logs</th>'
        "<th>occurrences</th><th>first seen</th><th>last seen</th><th>values</th></tr></thead>"
        "<tbody>"
    )
    for k in report.known:
        body.append(
            f'<tr data-group="{esc(k.id)}"><td><code>{esc(k.id)}</code>'
            f"{' ' + new if k.new else ''}</td>"
            f'<td>{esc(k.slug)}</td><td class="num">{k.logs}</td>'
            f'<td class="num">{k.occurrences}</td><td>{esc(k.first_seen or "")}</td>'
            f"<td>{esc(k.last_seen or '')}</td><td>{_known_values(k)}</td></tr>"
        )
        spans = [e.message for e in k.examples]
        body.append(_examples(k.id, k.examples, spans, "", 7))
    body.append("</tbody></table>")
    body.append(f"<h2>Unknown errors, grouped ({len(report.unknown)})</h2>")
    body.append(
        '<table class="sortable" id="unknown"><thead><tr><th>cluster</th><th>class</th>'
        "<th>template</th><th>count</th><th>logs</th><th>first seen</th></tr></thead><tbody>"
    )
    for u in report.unknown:
        body.append(
            f'<tr data-group="{esc(u.cluster)}"><td><code>{esc(u.cluster)}</code>'
            f"{' ' + new if u.new else ''}</td><td>{esc(u.error_class or '')}</td>"
            f'<td><code>{esc(u.template)}</code></td><td class="num">{u.count}</td>'
            f'<td class="num">{u.logs}</td><td>{esc(u.first_seen or "")}</td></tr>'
        )
        spans = [v for slot in u.values for v in slot]
        body.append(_examples(u.cluster, u.examples, spans, "value", 6))
    body.append("</tbody></table>")
    if report.errors:
        body.append(f'<h2>Logs not triaged ({len(report.errors)})</h2><ul id="errors">')
        body.extend(f'<li class="err">{esc(e.file)}: {esc(e.reason)}</li>' for e in report.errors)
        body.append("</ul>")
    return _page("errkb triage", body)


@renders(Report, OutputFormat.HTML)
def report_html(report: Report, options: RenderOptions) -> str:
    """One explanation's page: a section per record, the unexplained, the suggestions, the log."""
    from errkb.render.explain import summary_line

    names = sorted((options.sources or {}).keys())
    shown = [STDIN_NAME if n == "-" else n for n in names]
    exact = [m for m in report.matches if m.confidence is Confidence.EXACT]
    title = "errkb explain" + (f": {', '.join(shown)}" if shown else "")
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="summary" id="summary">{esc(summary_line(report))}</p>',
    ]
    cut = omitted_note(report.omitted)
    if cut:
        body.append(f'<p class="cut" id="omitted-top">{esc(cut)}</p>')
    files = file_answers(report)
    if files:
        body.append(
            '<table id="files"><thead><tr><th>file</th><th>answer</th></tr></thead><tbody>'
            + "".join(
                ("<tr>" if read else '<tr class="err">') + f"<td>{esc(_shown_name(name))}</td>"
                f"<td>{esc(answer)}</td></tr>"
                for name, answer, read in files
            )
            + "</tbody></table>"
        )
    for entry in entries(exact):
        body.append(_entry_html(entry))
    possible = possible_entries(report)
    if possible:
        body.append(f'<h2>{esc(POSSIBLE_TITLE)}</h2><ul id="possible">')
        body.extend(
            f"<li><code>{esc(e.first.id)}</code> {esc(e.first.slug)} (score "
            f"{e.first.score:.2f}), line {esc(_first_lines(e))}: "
            f'<span class="ex">{esc(e.first.exception.message)}</span></li>'
            for e in possible
        )
        body.append("</ul>")
    body += _suggestions_html(report)
    if report.unmatched:
        sources = any(u.source for u in report.unmatched)
        body.append(
            f"<h2>Exceptions with no known record ({len(report.unmatched)})</h2>"
            '<table class="sortable" id="unknown"><thead><tr>'
            + ("<th>file</th>" if sources else "")
            + "<th>line</th><th>occurrences</th><th>class</th><th>message</th></tr></thead><tbody>"
        )
        body.extend(
            "<tr>"
            + (f"<td>{esc(_shown_name(u.source))}</td>" if sources else "")
            + f'<td class="num">{u.line}</td><td class="num">{u.occurrences}</td>'
            f'<td>{esc(u.cls or "")}</td><td class="ex">{esc(u.message)}</td></tr>'
            for u in report.unmatched
        )
        body.append("</tbody></table>")
    for name in names:
        hits: dict[int, str] = {}
        for m in exact:
            if m.source in (None, name):
                for n in m.lines:
                    hits[n] = m.exception.message
        text = (options.sources or {})[name]
        body.append(f'<h2 class="source">{esc(_shown_name(name))}</h2>' + _log(text, hits))
    note = report.knowledge_base.note() if report.knowledge_base else None
    if note:
        body.append(f'<p class="note">{esc(note)}</p>')
    if cut:
        body.append(f'<p class="cut" id="omitted-end">{esc(cut)}</p>')
    return _page(title, body)


def _first_lines(entry: Entry) -> str:
    lines = sorted({n for o in entry.occurrences for n in o.lines})
    return ", ".join(str(n) for n in lines[:6]) + (" …" if len(lines) > 6 else "")


#: How the page names standard input (``-`` on the command line).
STDIN_NAME = "standard input"


def _shown_name(name: str | None) -> str:
    return STDIN_NAME if name == "-" else (name or "")


def _entry_html(entry: Entry) -> str:
    m = entry.first
    rec = m.record
    many = len(entry.occurrences) > 1
    captures = [v for _, v in m.captures]
    meta = (
        f"record <code>{esc(m.id)}</code> · {esc(m.confidence.value)}, score {m.score:.2f} · "
        f"seen {entry.count}×"
        + (f" with {len(entry.occurrences)} sets of values" if many else "")
        + (" · root cause" if entry.root_cause else "")
        + (" · checked by a reference validator" if m.validated else "")
    )
    out = [
        f'<section class="entry" id="record-{esc(m.id)}" data-group="{esc(m.id)}">',
        f"<h2>{esc(rec.get('errorClass') or 'Error')}: <code>{esc(m.slug)}</code></h2>",
        f'<p class="meta">{meta}</p>',
        f'<div class="ex exc">{esc(m.exception.cls or "")}{": " if m.exception.cls else ""}'
        f"{highlight(m.exception.message, captures, 'value')}</div>",
    ]
    url = rec.get("githubUrl")
    where = f"{rec.get('filePath')}:{rec.get('lineNumber')}"
    out.append(
        "<p>Raised at "
        + (
            f'<a class="link" href="{esc(url)}" rel="noreferrer"><code>{esc(where)}</code></a>'
            if isinstance(url, str) and url.startswith("https://")
            else f"<code>{esc(where)}</code>"
        )
        + "</p>"
    )
    if entry.common:
        out.append(
            '<table class="values"><thead><tr><th>value</th><th>'
            + ("captured (every occurrence)" if many else "captured")
            + "</th></tr></thead><tbody>"
            + "".join(
                f"<tr><td><code>{esc(k)}</code></td><td><code>{esc(v)}</code></td></tr>"
                for k, v in entry.common
            )
            + "</tbody></table>"
        )
    if entry.diagnosis is not None:
        first = " (the first occurrence's; all have its condition)" if many else ""
        out.append(
            f'<p class="diag"><strong>Diagnosis{first}:</strong> '
            f"{esc(_diagnosis(entry.diagnosis))}</p>"
        )
    out.append(_record_html(rec))
    if many:
        out.append(_occurrences_html(entry))
    out.append("</section>")
    return "\n".join(out)


def _diagnosis(d: Diagnosis) -> str:
    return " ".join(
        p
        for p in (d.explanation or d.condition.value, d.expected and f"Expected: {d.expected}.")
        if p
    )


def _record_html(rec: Mapping[str, Any]) -> str:
    """The record's documentation and fixes, collapsible; the fix open by default."""
    parts: list[str] = []
    solutions = rec.get("solutions") or []
    if solutions:
        parts.append(
            '<details class="fix" open><summary>How to fix</summary><ol>'
            + "".join(f"<li>{esc(s)}</li>" for s in solutions)
            + "</ol>"
            + (
                f'<pre class="example">{esc(rec["exampleFix"])}</pre>'
                if rec.get("exampleFix")
                else ""
            )
            + "</details>"
        )
    docs = [(title, rec.get(key)) for title, key in PROSE_SECTIONS if rec.get(key)]
    tips = rec.get("preventionTips") or []
    if docs or tips:
        parts.append(
            '<details class="docs"><summary>What it means, when it happens, prevention</summary>'
            + "".join(f"<p><strong>{t}.</strong> {esc(v)}</p>" for t, v in docs)
            + ("<ul>" + "".join(f"<li>{esc(t)}</li>" for t in tips) + "</ul>" if tips else "")
            + "</details>"
        )
    return "\n".join(parts)


def _occurrences_html(entry: Entry) -> str:
    sources = bool(entry.sources)
    diagnoses = any(o.diagnosis is not None for o in entry.occurrences)
    head = (
        (["file"] if sources else [])
        + ["lines", "count"]
        + list(entry.varying)
        + (["diagnosis"] if diagnoses else [])
    )
    rows = []
    for o in entry.occurrences:
        cells = (
            ([f"<td>{esc(_shown_name(o.source))}</td>"] if sources else [])
            + [
                f'<td class="num" data-sort="{o.lines[0] if o.lines else 0}">'
                + esc(", ".join(str(n) for n in o.lines[:12]))
                + (f" (+{len(o.lines) - 12} more)" if len(o.lines) > 12 else "")
                + "</td>",
                f'<td class="num">{o.count}</td>',
            ]
            + [f"<td><code>{esc(v)}</code></td>" for _, v in o.values]
            + (
                [f"<td>{esc(_diagnosis(o.diagnosis)) if o.diagnosis else ''}</td>"]
                if diagnoses
                else []
            )
        )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<details class="occurrences" open><summary>Occurrences ({len(entry.occurrences)})'
        '</summary><table class="sortable occurrences"><thead><tr>'
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></details>"
    )


def _suggestions_html(report: Report) -> list[str]:
    similar = [m for m in report.matches if m.confidence is Confidence.SIMILAR]
    if not similar:
        return []
    return [
        "<h2>Not recognised: closest known errors (suggestions only)</h2>"
        '<ul id="similar">'
        + "".join(
            f'<li><span class="ex">{esc(m.exception.cls or "")}'
            f"{': ' if m.exception.cls else ''}{esc(m.exception.message)}</span> "
            f"~ <code>{esc(m.id)}</code> {esc(m.slug)} (similarity {m.score:.2f})</li>"
            for m in similar
        )
        + "</ul>"
    ]


def _log(text: str, hits: dict[int, str]) -> str:
    lines = text.splitlines()
    if len(lines) <= WHOLE_LOG_LINES:
        shown = range(1, len(lines) + 1)
    else:
        keep = sorted(
            {k for n in hits for k in range(n - CONTEXT, n + CONTEXT + 1) if 1 <= k <= len(lines)}
        )
        shown = keep  # type: ignore[assignment]
    out, last = ['<pre class="log">'], 0
    for n in shown:
        if last and n != last + 1:
            out.append('<span class="gap">…</span>\n')
        last = n
        line = lines[n - 1]
        if n in hits:
            first = hits[n].splitlines()[0] if hits[n] else ""
            out.append(
                f'<span class="hit" id="L{n}"><span class="ln">{n}</span>'
                f"{highlight(line, [first])}</span>"
            )
        else:
            out.append(f'<span class="ln">{n}</span>{esc(line)}\n')
    out.append("</pre>")
    return "".join(out)
