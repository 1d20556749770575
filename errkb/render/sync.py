"""Renderers of the sync family's reports: sync and rollback, versions, and history.

Registered in :mod:`errkb.render`'s registry for text and JSON; pure like every renderer.
"""

from __future__ import annotations

from errkb.render import OutputFormat, RenderOptions, renders, renders_json, text_lines
from errkb.report.sync import RecordHistory, SyncReport, UpdateCheck, VersionList


@renders(SyncReport, OutputFormat.TEXT)
def sync_text(report: SyncReport, options: RenderOptions) -> str:
    """The summary line; a rollback's names the version it restored (its source)."""
    if report.kind.value == "rollback":
        return f"{report.source}: {report.summary()}\n"
    return report.summary() + "\n"


renders_json(SyncReport, SyncReport.to_dict)


@renders(UpdateCheck, OutputFormat.TEXT)
def update_check_text(report: UpdateCheck, options: RenderOptions) -> str:
    """``sync --check``: both versions and the verdict on one line."""
    return report.summary() + "\n"


renders_json(UpdateCheck, UpdateCheck.to_dict)


@renders(VersionList, OutputFormat.TEXT)
def versions_text(report: VersionList, options: RenderOptions) -> str:
    """A table of the applied versions, oldest first."""
    lines = [
        f"{'id':>4}  {'kind':<8}  {'datasetVersion':<24}  {'added':>7} {'updated':>7} "
        f"{'unchanged':>9} {'retired':>7} {'rejected':>8}  applied"
    ]
    for v in report.versions:
        c = v.counts
        notes = " partial" if v.partial else ""
        notes += f" (restores {v.restores})" if v.restores is not None else ""
        lines.append(
            f"{v.id:>4}  {v.kind.value:<8}  {v.dataset_version or '-':<24}  {c.added:>7} "
            f"{c.updated:>7} {c.unchanged:>9} {c.retired:>7} {c.rejected:>8}  "
            f"{v.finished_at}{notes}"
        )
    return text_lines(lines)


renders_json(VersionList, VersionList.to_json)


@renders(RecordHistory, OutputFormat.TEXT)
def history_text(report: RecordHistory, options: RenderOptions) -> str:
    """One line per change: version, kind, dataset version, change, state, content digest."""
    lines = []
    for e in report.entries:
        digest = e.content_hash[:12]  # the stored content_hash's function, not a look-alike
        state = "retired" if e.retired else "live"
        lines.append(
            f"version {e.version_id:>4}  {e.kind.value:<8}  {e.dataset_version or '-':<24}  "
            f"{e.change.value:<8}  {state:<7}  content {digest}"
        )
    return text_lines(lines)


renders_json(RecordHistory, RecordHistory.to_json, ensure_ascii=False)
