"""Applied versions, how one record changed across them, and rolling back to one of them.

A rollback rebuilds the state right after a version (``Store.state_at``) and applies it like a
full snapshot in one transaction, with history rows and a version row of kind "rollback";
nothing is rewritten, so it can itself be rolled back. These take the ``Store`` they use.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from errkb.errors import NotFoundError, UsageError
from errkb.match.feed import FEED
from errkb.report.sync import HistoryEntry, SyncReport, SyncStatus
from errkb.store import Store, VersionInfo, VersionKind


def versions(store: Store) -> list[VersionInfo]:
    """Every applied version, oldest first."""
    return store.versions()


def resolve_version(store: Store, key: str | int) -> int:
    """Map a version row id, or a datasetVersion string (its latest row), to a version row id."""
    text = str(key).strip()
    found = store.resolve_version(text)
    if found is None:
        raise NotFoundError(f"no applied version {text!r} (see `errkb versions`)")
    return found


def record_history(store: Store, key: str) -> list[HistoryEntry]:
    """How one record (by id, or by a slug naming one record) changed, oldest first."""
    record_id = resolve_record(store, key)
    with store.snapshot():  # one committed state for both reads
        changes = store.record_changes(record_id)
        current = store.record(record_id)
    entries = []
    for n, change in enumerate(changes):
        # The content right after this change is what the next change found before it.
        if n + 1 < len(changes):
            after, after_retired = changes[n + 1].previous, changes[n + 1].previous_retired
        elif current is not None:
            after, after_retired = current.content, current.retired
        else:  # pragma: no cover - a record with history rows exists
            continue
        if after is None:  # pragma: no cover - an "added" row is always a record's first
            continue
        entries.append(
            HistoryEntry(
                version_id=change.version_id,
                dataset_version=change.dataset_version,
                kind=change.kind,
                change=change.change,
                at=change.at,
                content=after,
                retired=after_retired,
            )
        )
    return entries


def resolve_record(store: Store, key: str) -> str:
    """The id ``key`` names: an id, or a slug naming one record (UsageError when it names more)."""
    ids = store.find_ids(key)
    if not ids:
        raise NotFoundError(f"no record with id or slug {key!r}")
    if key in ids:
        return key
    if len(ids) > 1:
        raise UsageError(f"slug {key!r} names {len(ids)} records; give an id: {', '.join(ids)}")
    return ids[0]


def rollback_to(store: Store, key: str | int) -> SyncReport:
    """Roll back to the version ``key`` names: a version row id or a datasetVersion."""
    return rollback(store, resolve_version(store, key))


def rollback(store: Store, version_id: int) -> SyncReport:
    """Make the knowledge base what it was right after version ``version_id`` was applied.

    A new "rollback" version row (``restores``), in one transaction; to the latest: nothing.
    """
    started = time.monotonic()
    with store.sync_lock():
        info = {v.id: v for v in versions(store)}
        if version_id not in info:
            raise NotFoundError(f"no applied version {version_id} (see `errkb versions`)")
        target_version = info[version_id]
        effective = _effective_dataset_version(info.values(), version_id)
        previous = store.meta_value("dataset_version")
        source = f"rollback to version {version_id}"
        if version_id == max(info):
            return SyncReport(
                SyncStatus.UP_TO_DATE, VersionKind.ROLLBACK, source, effective, previous
            )
        with store.write() as tx:
            vid, counts = tx.apply(
                store.state_at(version_id),
                kind=VersionKind.ROLLBACK,
                source=source,
                dataset_version=effective,
                feed=FEED,
                full=True,
                partial=target_version.partial,
                restores=version_id,
            )
            if effective is None:
                # The restored state predates every dataset version: forget the newer one.
                tx.set_meta("dataset_version", None)
    return SyncReport(
        SyncStatus.APPLIED,
        VersionKind.ROLLBACK,
        source,
        effective,
        previous,
        counts=counts,
        version_id=vid,
        full=True,
        partial=target_version.partial,
        elapsed=time.monotonic() - started,
    )


def _effective_dataset_version(rows: Iterable[VersionInfo], version_id: int) -> str | None:
    """Return the dataset version in effect right after ``version_id`` (latest named so far)."""
    named = [v for v in rows if v.id <= version_id and v.dataset_version is not None]
    return max(named, key=lambda v: v.id).dataset_version if named else None
