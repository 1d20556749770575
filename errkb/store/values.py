"""The store's values of writes, history and inventory, and what result rows mean for them.

They cross the seam between the store and sync, ingest, history and inventory;
``record_changes_from`` ... ``diff_from`` turn both backends' rows into them. Kept apart from
``errkb.store.interface`` (which re-exports them on first use) so a cold explain creates none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from errkb.records import decode_json
from errkb.store.interface import NO_KEEP, ChangeKind, Keep, RecordJSON, VersionKind


@dataclass(frozen=True)
class Ending:
    """What a streamed apply learns only once its records have all come (``Streamed``)."""

    keep: Keep = NO_KEEP
    partial: bool = False
    rejected: int = 0


@dataclass(frozen=True)
class ApplyCounts:
    """What one unit of work did to the records."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    retired: int = 0
    rejected: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "retired": self.retired,
            "rejected": self.rejected,
        }


@dataclass(frozen=True)
class Diff:
    """Which record ids a unit of work adds, updates, leaves unchanged and retires."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()  #: changed content, or a retired record coming back
    unchanged: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()

    def counts(self, rejected: int = 0) -> ApplyCounts:
        return ApplyCounts(
            len(self.added), len(self.updated), len(self.unchanged), len(self.retired), rejected
        )

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "updated": list(self.updated),
            "unchanged": list(self.unchanged),
            "retired": list(self.retired),
        }


@dataclass(frozen=True)
class Derived:
    """What the caller computed about one record to keep: ``spec`` columns and index ``words``."""

    spec: tuple[object, ...]
    words: tuple[str, ...]


@dataclass(frozen=True)
class Incoming:
    """A validated record on its way into the store (``data`` or its packed JSON text)."""

    data: RecordJSON | str
    dataset_version: str | None
    packed_id: str | None = None  #: the record's id, kept beside packed text
    retired: bool = False
    #: ``records.content_hash`` of the record when the sync computed it while planning.
    content_hash: str | None = None
    #: The record's compiled matcher and index words, when the caller computed them already.
    derived: Derived | None = None

    @property
    def id(self) -> str:
        return self.packed_id if self.packed_id is not None else str(self.obj["id"])

    @property
    def obj(self) -> RecordJSON:
        if isinstance(self.data, str):
            decoded: RecordJSON = decode_json(self.data)
            return decoded
        return self.data


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
class RecordChange:
    """One ``record_history`` row: a change, and the record's state just before it."""

    version_id: int
    dataset_version: str | None  #: of the version row that made the change
    kind: VersionKind
    at: str  #: when that version was applied
    change: ChangeKind
    previous: RecordJSON | None  #: None when the change added the record
    previous_retired: bool


@dataclass(frozen=True)
class StoredRecord:
    """A record's current content and state."""

    id: str
    content: RecordJSON
    retired: bool
    content_hash: str
    dataset_version: str | None


@dataclass(frozen=True)
class Inventory:
    """What a sync needs to decide what to fetch: live ids by repository, every stored hash."""

    live_by_repo: Mapping[str, frozenset[str]]
    hashes: Mapping[str, str]  #: content hash of every stored record (retired too)


@dataclass(frozen=True)
class StoreCounts:
    """Counts describing the stored records."""

    records: int
    retired: int
    repos: int
    versions: int
    dataset_version: str | None
    by_class: tuple[tuple[str, int], ...]  #: the ten most common error classes of live records


# What each backend's rows mean is written once, here.
def record_changes_from(rows: Iterable[Sequence[Any]]) -> list[RecordChange]:
    """History rows (version id, dataset version, kind, finished, change, previous) as values."""
    return [
        RecordChange(
            version_id=int(vid),
            dataset_version=dataset_version,
            kind=VersionKind(kind),
            at=str(at),
            change=ChangeKind(change),
            previous=json.loads(previous) if previous is not None else None,
            previous_retired=bool(was_retired),
        )
        for vid, dataset_version, kind, at, change, previous, was_retired in rows
    ]


def inventory_from(rows: Iterable[Sequence[Any]]) -> Inventory:
    """(id, repo, retired, content hash) rows as the store's ``Inventory``."""
    by_repo: dict[str, set[str]] = {}
    hashes: dict[str, str] = {}
    for rid, repo, retired, content_hash in rows:
        hashes[rid] = content_hash
        if not retired:
            by_repo.setdefault(repo, set()).add(rid)
    return Inventory({r: frozenset(ids) for r, ids in by_repo.items()}, hashes)


def state_from(
    first_after: Iterable[Sequence[Any]], current: Iterable[Sequence[Any]]
) -> list[Incoming]:
    """Every record as it was right after a version (later additions left out)."""
    before: dict[str, tuple[str | None, bool, str | None]] = {}
    for rid, previous, was_retired, dataset_version in first_after:
        before[str(rid)] = (previous, bool(was_retired), dataset_version)
    out: list[Incoming] = []
    for rid, raw, retired, dataset_version in current:
        if rid in before:
            previous, was_retired, old_version = before[rid]
            if previous is None:
                continue  # added after the version
            out.append(Incoming(previous, old_version, str(rid), retired=was_retired))
        else:
            out.append(Incoming(raw, dataset_version, str(rid), retired=bool(retired)))
    return out


def diff_from(
    classified: Iterable[tuple[str, str]],
    kept: Callable[[set[str]], Iterable[str]],
    to_retire: Callable[[set[str]], Iterable[str]] | None,
) -> Diff:
    """The ``Diff`` of classified (id, outcome) pairs, by the rules ``apply`` follows."""
    found: dict[str, dict[str, None]] = {
        k: {} for k in ("added", "updated", "unchanged", "retired", "")
    }
    seen: set[str] = set()
    for rid, outcome in classified:
        if rid not in seen:
            seen.add(rid)
            found[outcome][rid] = None
    found["unchanged"].update(dict.fromkeys(kept(seen)))
    if to_retire is not None:
        found["retired"].update(dict.fromkeys(to_retire(seen | found["unchanged"].keys())))
    return Diff(*(tuple(sorted(found[k])) for k in ("added", "updated", "unchanged", "retired")))


__all__ = [
    "ApplyCounts",
    "Derived",
    "Diff",
    "Ending",
    "Incoming",
    "Inventory",
    "RecordChange",
    "StoreCounts",
    "StoredRecord",
    "VersionInfo",
    "diff_from",
    "inventory_from",
    "record_changes_from",
    "state_from",
]
