"""Renderers of the smaller reports: list, stats, ingest, lint, and stderr's diagnostics."""

from __future__ import annotations

from collections.abc import Sequence

from errkb.render import OutputFormat, RenderOptions, renders, renders_json, text_lines
from errkb.report.diagnostics import Diagnostics
from errkb.report.ingest import IngestReport
from errkb.report.lint import LintReport, Severity
from errkb.report.records import RecordList, Stats


@renders(RecordList, OutputFormat.TEXT)
def list_text(report: RecordList, options: RenderOptions) -> str:
    """One ``id  repo  class  slug`` line per record."""
    return text_lines(
        [f"{r.id}  {r.repo}  {r.error_class or '-'}  {r.slug}" for r in report.records]
    )


renders_json(RecordList, RecordList.to_dict, ensure_ascii=False)


@renders(Stats, OutputFormat.TEXT)
def stats_text(s: Stats, options: RenderOptions) -> str:
    """Counts, one per line, then the ten largest error classes."""
    return text_lines(
        [
            f"database:        {s.path}",
            f"dataset version: {s.dataset_version or '-'}",
            f"records:         {s.records} live, {s.retired} retired, {s.repos} repositories",
            f"versions:        {s.versions} applied",
            *(f"  {n:>7}  {cls}" for cls, n in s.by_class),
        ]
    )


renders_json(Stats, Stats.to_dict)


@renders(IngestReport, OutputFormat.TEXT)
def ingest_text(report: IngestReport, options: RenderOptions) -> str:
    """The one summary line (rejects and warnings go to standard error, see :func:`problems`)."""
    c = report.counts
    return f"added {c.added}, updated {c.updated}, unchanged {c.unchanged}, rejected {c.rejected}\n"


renders_json(IngestReport, IngestReport.to_dict, ensure_ascii=False)


@renders(LintReport, OutputFormat.TEXT)
def lint_text(report: LintReport, options: RenderOptions) -> str:
    """One ``path location [id] rule: message`` line per finding, then the counts."""
    lines = [str(f) for f in report.findings]
    errors, warnings = report.count(Severity.ERROR), report.count(Severity.WARNING)
    lines.append(
        f"{report.records} record(s): {errors} error(s), {warnings} warning(s)"
        if report.findings
        else f"{report.records} record(s): clean"
    )
    return text_lines(lines)


renders_json(LintReport, LintReport.to_dict, ensure_ascii=False)


def _problems(items: Sequence[str], *, label: str, limit: int | None = None) -> list[str]:
    shown = [f"{label}: {p}" for p in (items if limit is None else items[:limit])]
    if limit is not None and len(items) > limit:
        shown.append(f"... and {len(items) - limit} more")
    return shown


@renders(Diagnostics, OutputFormat.TEXT)
def diagnostics_text(report: Diagnostics, options: RenderOptions) -> str:
    """Standard error's ``rejected: ...`` and ``warning: ...`` lines beside a report."""
    return text_lines(
        [
            *report.before,
            *_problems(report.problems, label="rejected", limit=report.limit),
            *_problems(report.warnings, label="warning"),
            *report.after,
        ]
    )
