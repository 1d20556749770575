"""Applied versions, how one record changed across them, and rolling back to one of them.

The store never deletes a record; each change adds a ``record_history`` row holding the
content *before* it (None when the change added the record). So the content of record ``r``
right after version ``V`` is the ``previous_json`` of ``r``'s first history row with a version
id greater than ``V`` (a row of change "added" there means ``r`` did not exist yet), or, with no
such row, its current content. A rollback rebuilds that whole state and applies it like a full
snapshot, through ``Store.apply`` in one transaction: records that differ are restored with
history rows, records added after ``V`` are retired, and a new version row of kind "rollback"
records it. Nothing is rewritten, so a rollback can itself be rolled back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from errkb.errors import NotFoundError, UsageError
from errkb.store import ApplyCounts, Incoming, Store
from errkb.store.models import ChangeKind, VersionKind
from errkb.sync import SyncReport, SyncStatus, sync_lock

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase


@dataclass(frozen=True)
class VersionInfo:
    """One applied version (a ``dataset_versions`` row)."""

    id: int
    dataset_version: str | None
    kind: VersionKind
    source: str
    full: bool
    partial: bool
    counts: ApplyCounts
    started_at: str
    finished_at: str
    restores: int | None  #: for a rollback: the version id it restored
    hashes: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "datasetVersion": self.dataset_version,
            "kind": self.kind.value,
            "source": self.source,
            "full": self.full,
            "partial": self.partial,
            **self.counts.to_dict(),
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "restores": self.restores,
            "hashes": dict(self.hashes),
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One change to a record: the version that made it, and the record right after it."""

    version_id: int
    dataset_version: str | None  #: of the version row that made the change
    kind: VersionKind  #: how that version came to be (ingest, sync, rollback)
    change: ChangeKind
    at: str  #: when the version was applied
    content: Mapping[str, Any]  #: the record right after the change
    retired: bool  #: whether the record was retired right after the change

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


def _store(target: Store | KnowledgeBase) -> Store:
    return target if isinstance(target, Store) else target.store


def versions(target: Store | KnowledgeBase) -> list[VersionInfo]:
    """Every applied version, oldest first."""
    rows = (
        _store(target)
        .reader()
        .execute(
            "SELECT id, dataset_version, kind, source, full, partial, added, updated, unchanged, "
            "retired, rejected, started_at, finished_at, restores, hashes_json "
            "FROM dataset_versions ORDER BY id"
        )
    )
    out = []
    for row in rows:
        hashes = json.loads(row[14]) if row[14] else {}
        out.append(
            VersionInfo(
                id=int(row[0]),
                dataset_version=row[1],
                kind=VersionKind(row[2]),
                source=str(row[3]),
                full=bool(row[4]),
                partial=bool(row[5]),
                counts=ApplyCounts(*(int(n) for n in row[6:11])),
                started_at=str(row[11]),
                finished_at=str(row[12]),
                restores=row[13],
                hashes=tuple(sorted((str(k), str(v)) for k, v in hashes.items())),
            )
        )
    return out


def resolve_version(target: Store | KnowledgeBase, key: str | int) -> int:
    """Map a version row id, or a datasetVersion string, to a version row id.

    A datasetVersion applied more than once (synced, then rolled back to) names its latest row.
    """
    conn = _store(target).reader()
    text = str(key).strip()
    if text.isdigit():
        row = conn.execute("SELECT id FROM dataset_versions WHERE id = ?", (int(text),)).fetchone()
    else:
        row = conn.execute(
            "SELECT max(id) FROM dataset_versions WHERE dataset_version = ?", (text,)
        ).fetchone()
    if not row or row[0] is None:
        raise NotFoundError(f"no applied version {text!r} (see `errkb versions`)")
    return int(row[0])


def record_history(target: Store | KnowledgeBase, key: str) -> list[HistoryEntry]:
    """How one record (by id, or by a slug naming one record) changed, oldest first."""
    store = _store(target)
    record_id = _record_id(store, key)
    with store.snapshot() as conn:
        rows = conn.execute(
            "SELECT h.version_id, v.dataset_version, v.kind, v.finished_at, h.change, "
            "h.previous_json, h.previous_retired "
            "FROM record_history h JOIN dataset_versions v ON v.id = h.version_id "
            "WHERE h.record_id = ? ORDER BY h.version_id, h.id",
            (record_id,),
        ).fetchall()
        current = conn.execute(
            "SELECT raw_json, retired FROM records WHERE id = ?", (record_id,)
        ).fetchone()
    entries = []
    for n, (vid, dataset_version, kind, at, change, _previous, _was_retired) in enumerate(rows):
        # The content right after this change is what the next change found before it.
        if n + 1 < len(rows):
            after_json, after_retired = rows[n + 1][5], rows[n + 1][6]
        else:
            after_json, after_retired = current
        if after_json is None:  # pragma: no cover - an "added" row is always a record's first
            continue
        entries.append(
            HistoryEntry(
                version_id=int(vid),
                dataset_version=dataset_version,
                kind=VersionKind(kind),
                change=ChangeKind(change),
                at=str(at),
                content=json.loads(after_json),
                retired=bool(after_retired),
            )
        )
    return entries


def _record_id(store: Store, key: str) -> str:
    ids = store.find_ids(key)
    if not ids:
        raise NotFoundError(f"no record with id or slug {key!r}")
    if key in ids:
        return key
    if len(ids) > 1:
        raise UsageError(f"slug {key!r} names {len(ids)} records; give an id: {', '.join(ids)}")
    return ids[0]


def rollback(target: Store | KnowledgeBase, version_id: int) -> SyncReport:
    """Make the knowledge base what it was right after version ``version_id`` was applied.

    Recorded as a new version row of kind "rollback" (``restores`` = ``version_id``), in one
    transaction, with history rows for every record it changes. Rolling back to the latest
    version changes nothing and writes nothing.
    """
    from errkb.store.models import MetaRow, VersionRow

    store = _store(target)
    started = time.monotonic()
    with sync_lock(store.path):
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
        with store.write() as session:
            conn = session.connection()
            at_version = _state_at(conn, version_id)
            vid, counts = store.apply(
                session,
                at_version,
                kind=VersionKind.ROLLBACK.value,
                source=source,
                dataset_version=effective,
                full=True,
                partial=target_version.partial,
            )
            row = session.get(VersionRow, vid)
            assert row is not None  # noqa: S101 - Store.apply just wrote it
            row.restores = version_id
            if effective is None:
                # The restored state predates every dataset version: forget the newer one.
                meta = session.get(MetaRow, "dataset_version")
                if meta is not None:
                    session.delete(meta)
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


def _state_at(conn: Any, version_id: int) -> list[Incoming]:
    """Every record live right after ``version_id``, with its content then."""
    first_after: dict[str, tuple[str | None, bool, str | None]] = {}
    rows = conn.exec_driver_sql(
        "SELECT h.record_id, h.previous_json, h.previous_retired, h.previous_dataset_version "
        "FROM record_history h JOIN ("
        "  SELECT record_id, min(version_id) AS vid FROM record_history "
        "  WHERE version_id > ? GROUP BY record_id"
        ") f ON f.record_id = h.record_id AND f.vid = h.version_id",
        (version_id,),
    )
    for rid, previous, was_retired, dataset_version in rows:
        first_after[str(rid)] = (previous, bool(was_retired), dataset_version)
    out: list[Incoming] = []
    current = conn.exec_driver_sql("SELECT id, raw_json, retired, dataset_version FROM records")
    for rid, raw, retired, dataset_version in current:
        if rid in first_after:
            previous, was_retired, old_version = first_after[rid]
            if previous is None or was_retired:
                continue  # added after the version, or retired at it
            out.append(Incoming(json.loads(previous), old_version))
        elif not retired:
            out.append(Incoming(json.loads(raw), dataset_version))
    return out
