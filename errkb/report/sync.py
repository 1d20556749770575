"""The sync family's values: ``SyncReport``, ``UpdateCheck``, the version list and history."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from errkb.report.diagnostics import MAX_SHOWN_PROBLEMS, Diagnostics
from errkb.store.interface import ApplyCounts

if TYPE_CHECKING:
    from errkb.errors import Problem
    from errkb.store.interface import ChangeKind, Diff, RecordJSON, VersionInfo, VersionKind


@dataclass(frozen=True)
class VersionList:
    """The applied versions, oldest first (``errkb versions``)."""

    versions: tuple[VersionInfo, ...]

    exit_code = 0

    def to_json(self) -> list[dict[str, Any]]:
        """The JSON output: a list (not an object), as ``errkb versions`` has always printed."""
        return [v.to_dict() for v in self.versions]


@dataclass(frozen=True)
class RecordHistory:
    """How one record changed across versions, oldest first (``errkb history``)."""

    key: str  #: the id or slug asked for
    entries: tuple[HistoryEntry, ...]

    exit_code = 0

    def to_json(self) -> list[dict[str, Any]]:
        """The JSON output: a list (not an object), as ``errkb history`` has always printed."""
        return [e.to_dict() for e in self.entries]


def parse_version(text: str) -> dt.datetime | None:
    """Parse a datasetVersion (an ISO timestamp); None when it is not one."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class Revalidation:
    """Unchanged repositories asked again for in-place rewrites (``checked`` is the three sums)."""

    checked: int = 0
    not_modified: int = 0
    same_body: int = 0
    rewritten: int = 0

    def summary(self) -> str:
        """One line: ``1,812 checked, 1,790 unchanged (304), 22 rewritten``."""
        parts = [f"{self.checked:,} checked", f"{self.not_modified:,} unchanged (304)"]
        if self.same_body:
            parts.append(f"{self.same_body:,} unchanged (same records)")
        parts.append(f"{self.rewritten:,} rewritten")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, int]:
        return {
            "checked": self.checked,
            "notModified": self.not_modified,
            "sameBody": self.same_body,
            "rewritten": self.rewritten,
        }


class SyncStatus(enum.StrEnum):
    """What a sync (or rollback) ended up doing."""

    APPLIED = "applied"  #: a new version row was written
    UP_TO_DATE = "up-to-date"  #: the source is the version we have: nothing to do
    DRY_RUN = "dry-run"  #: the diff was computed; nothing was written


@dataclass(frozen=True)
class SyncReport:
    """What a sync or rollback did (or, for a dry run, would do)."""

    status: SyncStatus
    kind: VersionKind
    source: str
    dataset_version: str | None  #: the version the source holds (or the rollback restored)
    previous_version: str | None  #: the knowledge base's dataset version before
    counts: ApplyCounts = field(default_factory=ApplyCounts)
    version_id: int | None = None  #: the dataset_versions row written
    full: bool = False
    partial: bool = False  #: some records were rejected (``skip_invalid``)
    elapsed: float = 0.0
    problems: tuple[Problem, ...] = ()
    reject_report: str | None = None
    diff: Diff | None = None  #: set for dry runs
    repos_fetched: int = 0
    repos_skipped: int = 0  #: unchanged since the last sync: not downloaded
    hashes: tuple[tuple[str, str], ...] = ()
    repos_cached: int = 0  #: verified by an earlier, interrupted sync: taken from the cache
    bytes_downloaded: int = 0
    #: manifest ``files`` entries errkb does not read: (name, path)
    other_files: tuple[tuple[str, str | None], ...] = ()
    #: repositories at the same commit revalidated with conditional requests
    revalidation: Revalidation = field(default_factory=Revalidation)
    #: what the site's schema.json requires that errkb does not know (never fatal)
    warnings: tuple[str, ...] = ()
    #: records recompiled though the dataset was current (another ``COMPILER_VERSION``)
    recompiled: int = 0

    @property
    def changed(self) -> bool:
        return self.status is SyncStatus.APPLIED

    @property
    def exit_code(self) -> int:
        """Return 0 when applied or already current, 1 when ``skip_invalid`` rejected records."""
        return 1 if self.counts.rejected else 0

    def summary(self) -> str:
        """Return the one line the CLI prints at the end."""
        if self.status is SyncStatus.UP_TO_DATE:
            current = f"already at {self.dataset_version or 'that version'}"
            if self.recompiled:
                return f"{current}; {self.recompiled} records compiled again for this errkb"
            return f"{current}: nothing to do"
        c = self.counts
        line = (
            f"added {c.added}, updated {c.updated}, unchanged {c.unchanged}, "
            f"retired {c.retired}, rejected {c.rejected} in {self.elapsed:.1f}s"
        )
        if self.revalidation.checked:
            line += f"; repositories at the same commit: {self.revalidation.summary()}"
        return f"dry run, nothing changed: {line}" if self.status is SyncStatus.DRY_RUN else line

    def diagnostics(self, *, verbose: bool = False) -> Diagnostics:
        """Standard error's lines: the first problems and the rejects (``verbose``: more detail)."""
        before: list[str] = [f"warning: {w}" for w in self.warnings]
        if verbose:
            before.append(f"source: {self.source}")
            before.append(
                f"repositories: {self.repos_fetched} downloaded "
                f"({self.bytes_downloaded} bytes), {self.repos_cached} from the cache, "
                f"{self.repos_skipped} unchanged"
            )
            before += [
                f"manifest also lists {name}: {path or '(no path)'} (not used)"
                for name, path in self.other_files
            ]
        after = (f"rejected records written to {self.reject_report}",) if self.reject_report else ()
        return Diagnostics(
            tuple(map(str, self.problems)),
            limit=MAX_SHOWN_PROBLEMS,
            before=tuple(before),
            after=after,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "kind": self.kind.value,
            "source": self.source,
            "datasetVersion": self.dataset_version,
            "previousVersion": self.previous_version,
            **self.counts.to_dict(),
            "versionId": self.version_id,
            "full": self.full,
            "partial": self.partial,
            "elapsed": round(self.elapsed, 3),
            "problems": [str(p) for p in self.problems],
            "rejectReport": self.reject_report,
            "diff": self.diff.to_dict() if self.diff is not None else None,
            "reposFetched": self.repos_fetched,
            "reposSkipped": self.repos_skipped,
            "reposCached": self.repos_cached,
            "bytesDownloaded": self.bytes_downloaded,
            "hashes": dict(self.hashes),
            "otherFiles": [{"name": n, "path": p} for n, p in self.other_files],
            "revalidated": self.revalidation.to_dict(),
            "warnings": list(self.warnings),
            "recompiled": self.recompiled,
        }


class UpdateStatus(enum.StrEnum):
    """What the source holds compared with the knowledge base."""

    CURRENT = "current"  #: the same version (or an older one): nothing to sync
    AVAILABLE = "available"  #: a newer version: ``errkb sync`` would apply it


class Pending(enum.StrEnum):
    """What a newer version changes, as far as its hashed ``repos.json`` tells."""

    REPOSITORIES = "repositories"  #: some repository's commit (or the set) changed
    #: every repository is at the commit applied: only records rewritten in place can differ
    REWRITES_ONLY = "rewrites-only"


@dataclass(frozen=True)
class UpdateCheck:
    """The knowledge base's dataset version and the one the source publishes."""

    source: str
    current: str | None  #: None: the knowledge base has no dataset version yet
    available: str
    pending: Pending | None = None  #: set when a newer version is available

    @property
    def rewrites_only(self) -> bool:
        return self.update_available and self.pending is Pending.REWRITES_ONLY

    @property
    def status(self) -> UpdateStatus:
        new = parse_version(self.available)
        old = parse_version(self.current) if self.current is not None else None
        if old is None or (new is not None and new > old):
            return UpdateStatus.AVAILABLE
        return UpdateStatus.CURRENT

    @property
    def update_available(self) -> bool:
        return self.status is UpdateStatus.AVAILABLE

    @property
    def exit_code(self) -> int:
        """0 when current, 1 when a newer version is available (2, an error, is raised)."""
        return 1 if self.update_available else 0

    def summary(self) -> str:
        state = "newer version available" if self.update_available else "up to date"
        if self.rewrites_only:
            state += (
                " (every repository is at the commit applied: only records rewritten in place "
                "may be pending; errkb sync revalidates them with conditional requests)"
            )
        return f"current {self.current or '(none)'}, available {self.available}: {state}"

    def to_dict(self) -> dict[str, str | bool | None]:
        return {
            "source": self.source,
            "current": self.current,
            "available": self.available,
            "status": self.status.value,
            "updateAvailable": self.update_available,
            "pending": self.pending.value if self.update_available and self.pending else None,
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One change to a record: the version that made it, and the record right after it."""

    version_id: int
    dataset_version: str | None  #: of the version row that made the change
    kind: VersionKind  #: how that version came to be (ingest, sync, rollback)
    change: ChangeKind
    at: str  #: when the version was applied
    content: RecordJSON  #: the record right after the change
    retired: bool  #: whether the record was retired right after the change

    @property
    def content_hash(self) -> str:
        """The content's hash, by the function that computes the stored ``content_hash``."""
        from errkb.records import content_hash

        return content_hash(self.content)

    def to_dict(self) -> dict[str, Any]:
        return {
            "versionId": self.version_id,
            "datasetVersion": self.dataset_version,
            "kind": self.kind.value,
            "change": self.change.value,
            "at": self.at,
            "retired": self.retired,
            "record": dict(self.content),
        }
