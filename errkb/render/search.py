"""Rendering search reports: one line per record for people, the report's JSON for tools."""

from __future__ import annotations

import enum
import json

from errkb.search import SearchReport


class SearchFormat(enum.StrEnum):
    """Output formats of ``errkb search``."""

    TEXT = "text"
    JSON = "json"


def render_search(report: SearchReport, fmt: SearchFormat) -> str:
    """``report`` as ``fmt``, ending with a newline."""
    if fmt is SearchFormat.JSON:
        return json.dumps(report.to_dict(), ensure_ascii=False, indent=2) + "\n"
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
