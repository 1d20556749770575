"""Ingest: validate every record of some files, then upsert the valid ones in one transaction.

Every problem is collected before the database is touched; valid records apply together or
not at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from errkb import records as rec
from errkb.errors import Problem
from errkb.match.feed import FEED
from errkb.records.reader import Item, read_sources
from errkb.report.ingest import IngestReport
from errkb.store import ApplyCounts, Incoming, Store, VersionKind


@dataclass(frozen=True)
class Validated:
    """The outcome of reading and validating sources, before anything is written."""

    incoming: tuple[Incoming, ...]  #: empty when a ``sink`` took the valid records
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...]
    rejected: int
    #: The newest datasetVersion among the valid records' envelopes (ISO strings sort by time).
    dataset_version: str | None = None
    accepted: int = 0  #: valid records (kept in ``incoming`` or handed to the sink)


#: Where valid records go instead of memory: (record, its envelope's datasetVersion).
Sink = Callable[[Mapping[str, Any], str | None], None]


def validate_sources(
    paths: Iterable[str | os.PathLike[str]], *, sink: Sink | None = None
) -> Validated:
    """Read and validate every item of ``paths``, writing nothing (``sink``: receives the valid)."""
    incoming: list[Incoming] = []
    problems: list[Problem] = []
    warnings: list[Problem] = []
    rejected = 0
    accepted = 0
    newest: str | None = None
    for item, checked, envelope_problems in _checked(paths):
        if item.problem is not None:
            problems.append(item.problem)
            rejected += 1
            continue
        problems.extend(envelope_problems)
        warnings.extend(item.warnings)
        warnings.extend(checked.warnings)
        unknown = rec.unknown_fields(item.obj)
        if unknown:
            warnings.append(
                Problem(
                    item.source,
                    item.location,
                    item.obj.get("id"),
                    item.path_prefix,
                    f"unknown field(s) kept verbatim: {', '.join(unknown)}",
                )
            )
        if checked.ok and not envelope_problems:
            version = item.dataset_version if isinstance(item.dataset_version, str) else None
            if version and (newest is None or version > newest):
                newest = version
            accepted += 1
            if sink is None:
                incoming.append(Incoming(item.obj, version))
            else:
                sink(item.obj, version)
        else:
            problems.extend(checked.problems)
            rejected += 1
    return Validated(tuple(incoming), tuple(problems), tuple(warnings), rejected, newest, accepted)


def _checked(
    paths: Iterable[str | os.PathLike[str]],
) -> Iterator[tuple[Item, rec.Checked, list[Problem]]]:
    for item in read_sources(paths):
        if item.problem is not None:
            yield item, rec.Checked((), ()), []
            continue
        checked = rec.check_record(
            item.obj, source=item.source, location=item.location, path_prefix=item.path_prefix
        )
        envelope = (
            rec.check_envelope(item.envelope, source=item.source, location=item.location)
            if item.envelope is not None
            else []
        )
        yield item, checked, envelope


def ingest_paths(
    store: Store, paths: Iterable[str | os.PathLike[str]], *, only_if_empty: bool = False
) -> IngestReport:
    """Validate ``paths`` and apply the valid records in one write transaction."""
    paths = list(paths)
    validated = validate_sources(paths)
    source = ", ".join(str(p) for p in paths)
    counts = ApplyCounts(rejected=validated.rejected)
    version_id: int | None = None
    if validated.incoming:
        with store.write() as tx:
            if only_if_empty and tx.version_count():
                # Another process seeded it first: nothing to do.
                return IngestReport(counts, (), (), None, None)
            version_id, counts = tx.apply(
                validated.incoming,
                kind=VersionKind.INGEST,
                source=source,
                dataset_version=validated.dataset_version,
                feed=FEED,
                rejected=validated.rejected,
            )
    return IngestReport(
        counts, validated.problems, validated.warnings, version_id, validated.dataset_version
    )
