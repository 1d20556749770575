"""Rendering a ``TriageReport``: a text summary, JSON, and one row per occurrence (JSONL, CSV).

The text summary puts the largest groups first and shows at most :data:`TOP` of each kind (the
JSON has them all). The rows are ``TriageReport.rows``: ``file``, ``line``, ``kind`` (``known``
or ``unknown``), ``id`` (record or cluster), ``class``, ``message``. The HTML page is
:mod:`errkb.render.html`.
"""

from __future__ import annotations

import csv
import io

from errkb import _json
from errkb.render import OutputFormat, RenderOptions, renders, renders_json, text_lines
from errkb.report.triage import TriageReport

#: Groups of each kind the text summary lists.
TOP = 20
_ROW_FIELDS = ("file", "line", "kind", "id", "class", "message")


def _clip(text: str, width: int = 100) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width and "\n" not in text else line[: width - 1] + "…"


def summary(report: TriageReport) -> str:
    """One line: what was read and found."""
    logs_known = len({f for k in report.known for f in k.files})
    empty = f", {len(report.empty)} empty" if report.empty else ""
    return (
        f"triaged {report.logs} log(s), {report.bytes / 1e6:.1f} MB: "
        f"{len(report.known)} known error(s) in {logs_known} log(s), "
        f"{len(report.unknown)} unknown group(s), {len(report.errors)} unreadable log(s){empty}"
    )


def _cut_note(report: TriageReport) -> str | None:
    """The line the text summary opens and ends with when it lists only the top groups."""
    if len(report.known) <= TOP and len(report.unknown) <= TOP:
        return None
    return (
        f"Not listed: groups past the top {TOP} of each kind "
        f"({max(0, len(report.known) - TOP)} known, {max(0, len(report.unknown) - TOP)} unknown); "
        "`--format json` or `--format html` lists every group."
    )


@renders(TriageReport, OutputFormat.TEXT)
def triage_text(report: TriageReport, options: RenderOptions) -> str:
    """The summary, then the top known and unknown groups as tables, then the errors."""
    out = [summary(report), ""]
    cut = _cut_note(report)
    if cut:
        out[1:1] = [cut]
    new = report.baseline is not None
    if report.known:
        out.append("Known errors (by logs):")
        out.append(
            f"  {'logs':>6} {'occur.':>7}  {'record':16}  " + ("new  " if new else "") + "slug"
        )
        for k in report.known[:TOP]:
            flag = ("new  " if k.new else "     ") if new else ""
            out.append(f"  {k.logs:>6} {k.occurrences:>7}  {k.id:16}  {flag}{k.slug}")
            out.append(f"  {'':>6} {'':>7}  seen {k.first_seen or '?'} .. {k.last_seen or '?'}")
        out.append("")
    if report.unknown:
        out.append("Unknown errors, grouped (by occurrences):")
        out.append(
            f"  {'count':>6} {'logs':>6}  {'cluster':16}  " + ("new  " if new else "") + "template"
        )
        for u in report.unknown[:TOP]:
            flag = ("new  " if u.new else "     ") if new else ""
            cls = f"{u.error_class}: " if u.error_class else ""
            out.append(
                f"  {u.count:>6} {u.logs:>6}  {u.cluster:16}  {flag}{_clip(cls + u.template)}"
            )
            if u.examples:
                e = u.examples[0]
                out.append(f"  {'':>6} {'':>6}  e.g. {e.file}:{e.line}")
        out.append("")
    if cut:
        out.append(cut)
    if report.workers_lost:
        out.append(f"{report.workers_lost} worker process(es) died; their logs were retried once.")
    if report.errors:
        out.append("Logs not triaged:")
        out.extend(f"  {e.file}: {e.reason}" for e in report.errors)
    while out and not out[-1]:
        out.pop()
    return text_lines(out)


renders_json(TriageReport, TriageReport.to_dict)  # schemas/triage.schema.json


@renders(TriageReport, OutputFormat.JSONL)
def triage_jsonl(report: TriageReport, options: RenderOptions) -> str:
    """One object per occurrence (``schemas/triage-row.schema.json``), then nothing else."""
    return (
        "".join(
            _json.dumps(row.to_dict(), separators=(",", ":"), ensure_ascii=False) + "\n"
            for row in report.rows
        )
        or "\n"
    )


@renders(TriageReport, OutputFormat.CSV)
def triage_csv(report: TriageReport, options: RenderOptions) -> str:
    """A header line, then one row per occurrence (RFC 4180 quoting, newline line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_ROW_FIELDS)
    for row in report.rows:
        d = row.to_dict()
        writer.writerow(["" if d[f] is None else d[f] for f in _ROW_FIELDS])
    return buffer.getvalue()
