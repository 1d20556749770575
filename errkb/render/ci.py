"""What CI reads: annotations and SARIF for an explanation; annotations and a PR comment for triage.

``explain --format github``: one workflow command per record and file on its first line
(record, exception line, cause, first fix, link), warnings for unexplained exceptions,
unreadable inputs and cuts; ``--format sarif``: SARIF 2.1.0, a rule per record and a result
per match. A file's name comes from ``RenderOptions.inputs`` (stdin: none). ``triage --format
github`` opens with the verdict; ``--format markdown`` is a PR comment led by the verdict.
Escaping is :mod:`errkb.render.check`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from errkb.render import OutputFormat, RenderOptions, json_text, renders
from errkb.render.answers import entries, omitted_note
from errkb.render.check import SARIF_SCHEMA, escape_data, escape_property, sarif_run
from errkb.render.check import _uri as file_uri
from errkb.report import Match, Report
from errkb.report.triage import KnownGroup, TriageReport, UnknownGroup

#: Rule id of an exception no record explains (SARIF).
UNKNOWN_RULE = "errkb.unknown-exception"
#: Groups a PR comment lists in each folded table (the JSON has them all).
COMMENT_ROWS = 50
#: Annotations ``triage --format github`` prints at most (GitHub shows 10 errors a step).
ANNOTATIONS = 50


def _one_line(text: object, width: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _first_solution(record: Mapping[str, Any]) -> str | None:
    solutions = record.get("solutions")
    if isinstance(solutions, list) and solutions and isinstance(solutions[0], str):
        return _one_line(solutions[0])
    return None


def cause(record: Mapping[str, Any]) -> str | None:
    """The record's one-line cause: the first sentence of its documentation."""
    doc = record.get("documentation")
    if not isinstance(doc, str) or not doc.strip():
        return None
    flat = " ".join(doc.split())
    end = flat.find(". ")
    return _one_line(flat if end < 0 else flat[: end + 1])


def _link(record: Mapping[str, Any]) -> str | None:
    url = record.get("githubUrl")
    return url if isinstance(url, str) else None


def _exception(m: Match) -> str:
    exc = m.exception
    return _one_line(f"{exc.cls}: {exc.message}" if exc.cls else exc.message)


def _source(m_source: str | None, options: RenderOptions) -> str | None:
    if m_source is not None:
        return None if m_source == "-" else m_source
    names = options.inputs
    return names[0] if len(names) == 1 and names[0] != "-" else None


def _command(level: str, message: str, *, file: str | None, line: int | None, title: str) -> str:
    props = []
    if file is not None:
        props.append(f"file={escape_property(file)}")
        if line is not None:
            props.append(f"line={line}")
    props.append(f"title={escape_property(title)}")
    return f"::{level} {','.join(props)}::{escape_data(message)}"


@renders(Report, OutputFormat.GITHUB)
def report_github(report: Report, options: RenderOptions) -> str:
    """GitHub workflow commands: one annotation per record and file, on its first line."""
    out: list[str] = []
    cut = omitted_note(report.omitted)
    if cut:
        out.append(_command("notice", cut, file=None, line=None, title="errkb: not listed"))
    for entry in entries(report.exact):
        m = entry.first
        rec = m.record
        by_source: dict[str | None, list[int]] = {}
        counts: dict[str | None, int] = {}
        for o in entry.occurrences:
            by_source.setdefault(o.source, []).extend(o.lines)
            counts[o.source] = counts.get(o.source, 0) + o.count
        for source, lines in by_source.items():
            first = min(lines) if lines else None
            parts = [_exception(m)]
            if (why := cause(rec)) is not None:
                parts.append(f"Cause: {why}")
            if (fix := _first_solution(rec)) is not None:
                parts.append(f"Fix: {fix}")
            if (url := _link(rec)) is not None:
                parts.append(url)
            seen = counts[source]
            title = f"errkb: {rec.get('errorClass') or 'error'} {m.slug} ({m.id})" + (
                f", seen {seen}×" if seen > 1 else ""
            )
            out.append(
                _command(
                    "error",
                    "\n".join(parts),
                    file=_source(source, options),
                    line=first,
                    title=title,
                )
            )
    for u in report.unmatched:
        exc = f"{u.cls}: {u.message}" if u.cls else u.message
        out.append(
            _command(
                "warning",
                _one_line(exc),
                file=_source(u.source, options),
                line=u.line,
                title="errkb: an exception no known record explains",
            )
        )
    for f in report.unreadable:
        out.append(
            _command(
                "error",
                f.error or "",
                file=None if f.source == "-" else f.source,
                line=None,
                title="errkb: cannot read",
            )
        )
    if cut:
        out.append(_command("notice", cut, file=None, line=None, title="errkb: not listed"))
    from errkb.render.explain import summary_line

    out.append(_command("notice", summary_line(report), file=None, line=None, title="errkb"))
    return "".join(line + "\n" for line in out)


def _uri(name: str | None) -> str:
    return file_uri(name) if name is not None else "stdin"


def _rule(m: Match) -> dict[str, Any]:
    rec = m.record
    rule: dict[str, Any] = {
        "id": m.id,
        "name": m.slug,
        "shortDescription": {"text": _one_line(rec.get("errorMessage") or m.slug)},
        "defaultConfiguration": {"level": "error"},
    }
    if isinstance(rec.get("documentation"), str):
        rule["fullDescription"] = {"text": rec["documentation"]}
    solutions = rec.get("solutions")
    if isinstance(solutions, list) and solutions:
        rule["help"] = {"text": "\n".join(f"- {s}" for s in solutions if isinstance(s, str))}
    if (url := _link(rec)) is not None:
        rule["helpUri"] = url
    return rule


def _location(source: str | None, line: int | None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(source)}}
    if line is not None:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def sarif_explanation(report: Report, options: RenderOptions) -> dict[str, Any]:
    """The explanation as a SARIF 2.1.0 log (a dict; :func:`report_sarif` serialises it)."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for m in report.exact:
        if m.id not in index:
            index[m.id] = len(rules)
            rules.append(_rule(m))
        results.append(
            {
                "ruleId": m.id,
                "ruleIndex": index[m.id],
                "level": "error",
                "message": {"text": _exception(m)},
                "locations": [
                    _location(_source(m.source, options), m.lines[0] if m.lines else None)
                ],
                "properties": {
                    "lines": list(m.lines),
                    "occurrences": m.occurrences,
                    "captures": dict(m.captures),
                    "rootCause": m.root_cause,
                    "fix": _first_solution(m.record),
                },
            }
        )
    if report.unmatched:
        index[UNKNOWN_RULE] = len(rules)
        rules.append(
            {
                "id": UNKNOWN_RULE,
                "name": "unknown-exception",
                "shortDescription": {"text": "An exception no known record explains"},
                "defaultConfiguration": {"level": "warning"},
            }
        )
    for u in report.unmatched:
        results.append(
            {
                "ruleId": UNKNOWN_RULE,
                "ruleIndex": index[UNKNOWN_RULE],
                "level": "warning",
                "message": {"text": _one_line(f"{u.cls}: {u.message}" if u.cls else u.message)},
                "locations": [_location(_source(u.source, options), u.line)],
                "properties": {"lines": list(u.lines or (u.line,)), "occurrences": u.occurrences},
            }
        )
    notifications = [
        {
            "level": "error",
            "message": {"text": f.error or ""},
            "locations": [_location(None if f.source == "-" else f.source, None)],
        }
        for f in report.unreadable
    ]
    run = sarif_run(rules, results, notifications)
    if report.omitted is not None:
        run["properties"] = {"omitted": report.omitted.to_dict()}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


@renders(Report, OutputFormat.SARIF)
def report_sarif(report: Report, options: RenderOptions) -> str:
    """A SARIF 2.1.0 log: a rule per record, a result per match at its first line."""
    return json_text(sarif_explanation(report, options))


def verdict(report: TriageReport) -> str:
    """One line a CI owner reads first: what is new or unknown, what is known, what is unread."""
    unread = f", {len(report.errors)} unreadable" if report.errors else ""
    empty = f", {len(report.empty)} empty" if report.empty else ""
    if report.baseline is not None:
        new: list[KnownGroup | UnknownGroup] = [k for k in report.known if k.new]
        new += [u for u in report.unknown if u.new]
        logs = _logs_of(new, report)
        seen = len(report.known) + len(report.unknown) - len(new)
        head = f"{len(new)} new error(s) in {logs} log(s)" if new else "No new error"
        return f"{head}, {seen} known{unread}{empty} ({report.logs} log(s) triaged)"
    logs = _logs_of(list(report.unknown), report)
    head = (
        f"{len(report.unknown)} unknown error(s) in {logs} log(s)"
        if report.unknown
        else "No unknown error"
    )
    return f"{head}, {len(report.known)} known{unread}{empty} ({report.logs} log(s) triaged)"


def _logs_of(groups: Sequence[KnownGroup | UnknownGroup], report: TriageReport) -> int:
    """Logs holding any of ``groups`` (from the rows: every occurrence's file)."""
    ids = {g.id if isinstance(g, KnownGroup) else g.cluster for g in groups}
    if report.rows:
        return len({r.file for r in report.rows if r.id in ids})
    return max((g.logs for g in groups), default=0)


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("`", "'").replace("\n", " ")


@renders(TriageReport, OutputFormat.MARKDOWN)
def triage_markdown(report: TriageReport, options: RenderOptions) -> str:
    """A pull-request comment: the verdict first, each table folded in ``<details>``."""
    mark = "❌" if report.found else ("⚠️" if report.errors else "✅")
    out = [f"### {mark} errkb triage: {verdict(report)}", ""]
    if report.baseline is not None:
        out += [f"Compared with the baseline `{_md(report.baseline)}`.", ""]
    new_known = [k for k in report.known if k.new]
    new_unknown = [u for u in report.unknown if u.new or report.baseline is None]
    if new_unknown or new_known:
        label = "New errors" if report.baseline is not None else "Unknown errors"
        out += [
            f"<details open><summary><b>{label} ({len(new_unknown) + len(new_known)})</b>"
            "</summary>",
            "",
        ]
        out += _unknown_table(new_unknown) if new_unknown else []
        out += _known_table(new_known) if new_known else []
        out += ["</details>", ""]
    known = [k for k in report.known if not k.new]
    if known:
        out += [f"<details><summary>Known errors ({len(known)})</summary>", ""]
        out += _known_table(known)
        out += ["</details>", ""]
    seen = [u for u in report.unknown if not u.new and report.baseline is not None]
    if seen:
        out += [f"<details><summary>Unknown, seen in the baseline ({len(seen)})</summary>", ""]
        out += _unknown_table(seen)
        out += ["</details>", ""]
    if report.errors:
        out += [f"<details><summary>Logs not read ({len(report.errors)})</summary>", ""]
        out += [f"- `{_md(e.file)}`: {_md(e.reason)}" for e in report.errors[:COMMENT_ROWS]]
        if len(report.errors) > COMMENT_ROWS:
            out.append(f"- … and {len(report.errors) - COMMENT_ROWS} more")
        out += ["", "</details>", ""]
    cut = _comment_cut(report)
    if cut:
        out += [f"_{cut}_", ""]
    out.append(f"<sub>errkb {report.errkb_version}, dataset {report.dataset_version or '-'}</sub>")
    return "\n".join(out) + "\n"


def _comment_cut(report: TriageReport) -> str | None:
    over = [n for n in (len(report.known), len(report.unknown)) if n > COMMENT_ROWS]
    if not over:
        return None
    return (
        f"Not listed: groups past the first {COMMENT_ROWS} of each table; "
        "`errkb triage --format json` lists every group."
    )


def _known_table(groups: Sequence[KnownGroup]) -> list[str]:
    out = ["| record | logs | occurrences | fix | first seen at |", "|---|---|---|---|---|"]
    for k in groups[:COMMENT_ROWS]:
        name = f"[`{k.id}`]({k.link}) {_md(k.slug)}" if k.link else f"`{k.id}` {_md(k.slug)}"
        where = f"`{_md(k.examples[0].file)}:{k.examples[0].line}`" if k.examples else ""
        out.append(f"| {name} | {k.logs} | {k.occurrences} | {_md(k.fix or '')} | {where} |")
    return [*out, ""]


def _unknown_table(groups: Sequence[UnknownGroup]) -> list[str]:
    out = [
        "| cluster | class | template | count | logs | first seen at |",
        "|---|---|---|---|---|---|",
    ]
    for u in groups[:COMMENT_ROWS]:
        where = f"`{_md(u.examples[0].file)}:{u.examples[0].line}`" if u.examples else ""
        out.append(
            f"| `{u.cluster}` | {_md(u.error_class or '')} | `{_md(_one_line(u.template, 160))}` "
            f"| {u.count} | {u.logs} | {where} |"
        )
    return [*out, ""]


@renders(TriageReport, OutputFormat.GITHUB)
def triage_github(report: TriageReport, options: RenderOptions) -> str:
    """Workflow commands: the verdict, then each group's first example annotated, new first."""
    level = "error" if report.found else ("warning" if report.errors else "notice")
    out = [_command(level, verdict(report), file=None, line=None, title="errkb triage")]
    items: list[tuple[int, str]] = []
    for u in report.unknown:
        if not u.examples:
            continue
        e = u.examples[0]
        new = u.new or report.baseline is None
        kind = "new" if u.new else "unknown"
        title = f"errkb: {kind} error {u.cluster}, {u.count}× in {u.logs} log(s)"
        message = _one_line(f"{u.error_class}: {e.message}" if u.error_class else e.message)
        items.append(
            (
                0 if new else 2,
                _command(
                    "error" if new else "warning", message, file=e.file, line=e.line, title=title
                ),
            )
        )
    for k in report.known:
        if not k.examples:
            continue
        e = k.examples[0]
        parts = [_one_line(f"{k.error_class}: {e.message}" if k.error_class else e.message)]
        if k.fix:
            parts.append(f"Fix: {k.fix}")
        if k.link:
            parts.append(k.link)
        kind = "new known" if k.new else "known"
        title = f"errkb: {kind} error {k.slug} ({k.id}), {k.occurrences}× in {k.logs} log(s)"
        items.append(
            (
                1 if k.new else 3,
                _command(
                    "error" if k.new else "notice",
                    "\n".join(parts),
                    file=e.file,
                    line=e.line,
                    title=title,
                ),
            )
        )
    items.sort(key=lambda item: item[0])
    out += [text for _, text in items[:ANNOTATIONS]]
    if len(items) > ANNOTATIONS:
        out.append(
            _command(
                "notice",
                f"Not listed: {len(items) - ANNOTATIONS} more group(s); "
                "`errkb triage --format json` lists every group.",
                file=None,
                line=None,
                title="errkb: not listed",
            )
        )
    out += [
        _command("warning", e.reason, file=e.file, line=None, title="errkb: cannot read")
        for e in report.errors
    ]
    return "".join(line + "\n" for line in out)
