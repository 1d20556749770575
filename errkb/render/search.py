"""Rendering search reports: one line per record for people, the report's JSON for tools."""

from __future__ import annotations

from errkb.render import OutputFormat, RenderOptions, renders, renders_json
from errkb.search import SearchReport

renders_json(SearchReport, SearchReport.to_dict)  # schemas/search.schema.json


@renders(SearchReport, OutputFormat.TEXT)
def search_text(report: SearchReport, options: RenderOptions) -> str:
    """Score, id, repository and message template of each record; its slug and severity below."""
    if not report.results:
        return "no records found\n"
    lines = []
    for r in report.results:
        head = f"{r.error_class}: " if r.error_class else ""
        # One line per record: a template with newlines would break the layout.
        message = " ".join(r.error_message.split())
        lines.append(f"{r.score:.2f}  {r.id}  {r.repo}  {head}{message}")
        lines.append(f"      {r.slug} ({r.severity})")
    return "\n".join(lines) + "\n"
