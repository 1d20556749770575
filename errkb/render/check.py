"""Render a :class:`~errkb.report.CheckReport` as text, JSON, SARIF 2.1.0 or GitHub annotations.

A finding's record comes with the report (``CheckReport.records``; absent: no fix shown); a
sibling condition's finding is shown under its stable rule id (``quanto.missing-tensors``) as
an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from errkb import __version__
from errkb.render import OutputFormat, RenderOptions, json_text, renders
from errkb.report import Finding
from errkb.report.check import CheckReport

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/standardbeagle/err-lookup"


def _record(report: CheckReport, record_id: str | None) -> Mapping[str, Any] | None:
    return None if record_id is None else report.records.get(record_id)


def _first_solution(record: Mapping[str, Any] | None) -> str | None:
    if record is None:
        return None
    solutions = record.get("solutions")
    if isinstance(solutions, list) and solutions and isinstance(solutions[0], str):
        return " ".join(solutions[0].split())  # one line, whatever the record holds
    return None


def _severity(record: Mapping[str, Any] | None) -> str:
    severity = record.get("severity") if record is not None else None
    return severity if isinstance(severity, str) else "error"


_SARIF_LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "note"}
_GITHUB_COMMAND = {"critical": "error", "error": "error", "warning": "warning", "info": "notice"}


@renders(CheckReport, OutputFormat.TEXT)
def render_text(report: CheckReport, options: RenderOptions | None = None) -> str:
    """Render like a linter: ``path: prefix: message [rule]`` and an indented one-line fix."""
    lines: list[str] = []
    for finding in report.findings:
        where = f"{finding.path}: {finding.prefix}" if finding.prefix else finding.path
        lines.append(f"{where}: {finding.message} [{finding.rule}]")
        fix = _first_solution(_record(report, finding.record_id))
        if fix:
            lines.append(f"    fix: {fix}")
    for error in report.errors:
        lines.append(f"{error.path}: error: {error.message}")
    files = len(report.checked)
    counts = [f"{len(report.findings)} finding(s)"] if report.findings else ["no findings"]
    if report.errors:
        counts.append(f"{len(report.errors)} error(s)")
    lines.append(f"checked {files} file(s): {', '.join(counts)}")
    return "\n".join(lines) + "\n"


@renders(CheckReport, OutputFormat.JSON)
def render_json(report: CheckReport, options: RenderOptions | None = None) -> str:
    """Render ``report.to_dict()`` as indented JSON."""
    return json_text(report.to_dict())


def _uri(path: str) -> str:
    pure = PurePath(path)
    if pure.is_absolute():
        return "file://" + quote(pure.as_posix())
    return quote(pure.as_posix())


def _sarif_rule(rule_id: str, finding: Finding, record: Mapping[str, Any] | None) -> dict[str, Any]:
    from errkb.validators import rule_for  # the validators only when SARIF is asked for

    rule = rule_for(rule_id)
    entry: dict[str, Any] = {"id": rule_id}
    if rule is not None:
        entry["name"] = rule.name
        entry["shortDescription"] = {"text": rule.template}
    entry["properties"] = {"check": finding.check}
    entry["defaultConfiguration"] = {"level": _SARIF_LEVEL.get(_severity(record), "error")}
    if record is not None:
        url = record.get("githubUrl")
        if isinstance(url, str):
            entry["helpUri"] = url
        if isinstance(record.get("documentation"), str):
            entry["fullDescription"] = {"text": record["documentation"]}
        solutions = record.get("solutions")
        if isinstance(solutions, list) and solutions:
            entry["help"] = {"text": "\n".join(f"- {s}" for s in solutions if isinstance(s, str))}
    return entry


def sarif_document(report: CheckReport) -> dict[str, Any]:
    """Build the SARIF 2.1.0 log as a dict (``render_sarif`` serialises it)."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for finding in report.findings:
        record = _record(report, finding.record_id)
        if finding.rule not in index:
            index[finding.rule] = len(rules)
            rules.append(_sarif_rule(finding.rule, finding, record))
        location: dict[str, Any] = {
            "physicalLocation": {"artifactLocation": {"uri": _uri(finding.path)}}
        }
        if finding.prefix:
            location["logicalLocations"] = [{"name": finding.prefix, "kind": "module"}]
        results.append(
            {
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": _SARIF_LEVEL.get(_severity(record), "error"),
                "message": {"text": finding.message},
                "locations": [location],
                "properties": {
                    "check": finding.check,
                    "recordId": finding.record_id,
                    "tensor": finding.tensor,
                },
            }
        )
    notifications = [
        {
            "level": "error",
            "message": {"text": error.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(error.path)}}}],
        }
        for error in report.errors
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [sarif_run(rules, results, notifications)],
    }


def sarif_run(
    rules: list[dict[str, Any]],
    results: list[dict[str, Any]],
    notifications: list[dict[str, Any]],
) -> dict[str, Any]:
    """One SARIF run of errkb: its rules, results and notifications (failed if there are any)."""
    return {
        "tool": {
            "driver": {
                "name": "errkb",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        "invocations": [
            {
                "executionSuccessful": not notifications,
                "toolExecutionNotifications": notifications,
            }
        ],
        "results": results,
    }


@renders(CheckReport, OutputFormat.SARIF)
def render_sarif(report: CheckReport, options: RenderOptions | None = None) -> str:
    """Render the report as a SARIF 2.1.0 log (ruleId = record id, or the sibling rule id)."""
    return json_text(sarif_document(report))


def escape_data(text: str) -> str:
    """Escape a workflow command's message, as GitHub's runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command property value (``file=``, ``title=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


@renders(CheckReport, OutputFormat.GITHUB)
def render_github(report: CheckReport, options: RenderOptions | None = None) -> str:
    """Render GitHub Actions workflow commands: one ``::error file=...,title=...::`` per item."""
    lines: list[str] = []
    for finding in report.findings:
        record = _record(report, finding.record_id)
        command = _GITHUB_COMMAND.get(_severity(record), "error")
        title = f"errkb {finding.check} [{finding.rule}]"
        message = f"{finding.prefix}: {finding.message}" if finding.prefix else finding.message
        fix = _first_solution(record)
        if fix:
            message += f"\nfix: {fix}"
        lines.append(
            f"::{command} file={escape_property(finding.path)},"
            f"title={escape_property(title)}::{escape_data(message)}"
        )
    for error in report.errors:
        lines.append(
            f"::error file={escape_property(error.path)},"
            f"title={escape_property('errkb: cannot check')}::{escape_data(error.message)}"
        )
    return "".join(line + "\n" for line in lines)
