"""One repository file of a published tree: read, cross-checked against the index, validated.

The caller and the sync's workers use these same functions (the same records and problems);
valid records leave as spool lines (``spool_line``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from errkb import records as rec
from errkb.errors import IntegrityError, Problem
from errkb.match.feed import derive
from errkb.records.patterns import record_spec_key
from errkb.records.reader import Item, read_file
from errkb.store.engine import compact_json
from errkb.sync import publish

if TYPE_CHECKING:
    from errkb.store.values import Derived


def spool_line(
    rid: str,
    content_hash: str,
    text: str,
    version: str | None,
    derived: Derived | None = None,
    *,
    same_spec: bool = False,
) -> str:
    """One tab-separated spool line: id, datasetVersion, content hash, derived, the record's JSON.

    ``derived``: the record's ``Derived``; "" for stored content; ``SAME_SPEC`` for same inputs.
    """
    if derived is not None:
        extra = compact_json([derived.words, derived.spec])
    else:
        extra = SAME_SPEC if same_spec else ""
    return f"{rid}\t{json.dumps(version)}\t{content_hash}\t{extra}\t{text}\n"


#: A spool line's fourth field for new content compiled as stored (``spool_line``).
SAME_SPEC = "="


def derived_from(text: str) -> Derived | None:
    """The ``Derived`` of a spool line's fourth field; None for "" or ``SAME_SPEC``."""
    if not text or text == SAME_SPEC:
        return None
    from errkb.store.values import Derived

    words, spec = rec.decode_json(text)
    return Derived(tuple(spec), tuple(words))


@dataclass(frozen=True)
class Listed:
    """What ``repos.json`` says of a repository when the manifest lists no index."""

    error_count: int | None  #: the entry's ``errorCount``; None: not given


@dataclass(frozen=True)
class RepoFile:
    """One fetched repository file: its records, parsed and cross-checked, not yet validated."""

    where: str  #: URL or path, for messages
    items: tuple[Item, ...]
    to_check: tuple[int, ...]  #: indices of the items whose content is new
    broken: tuple[Problem, ...]  #: the file could not be read as records at all
    #: Each item's content hash, taken once.
    hashes: tuple[str, ...] = ()
    #: Indices of the new items whose matcher inputs are the stored ones (spooled uncompiled).
    same_spec: frozenset[int] = frozenset()


def read_repo(
    path: Path,
    where: str,
    repo: str,
    index_ids: Sequence[str],
    stored: Mapping[str, str],
    *,
    max_bytes: int,
    max_values: int,
    index_digest: str | None = None,
    listed: Listed | None = None,
    specs: Mapping[str, str] | None = None,
) -> RepoFile:
    """Read the repository file at ``path`` (named ``where``) and cross-check it.

    Against the index's ids for ``repo``, or without an index its ``repos.json`` entry. Stored
    content is not validated again; ``specs``: stored spec keys (the same key: not compiled).
    """
    publish.check_value_count(path, where, max_values, max_bytes)
    items = tuple(read_file(path, max_bytes=max_bytes))
    broken = tuple(replace(it.problem, source=where) for it in items if it.problem is not None)
    if broken:
        return RepoFile(where, (), (), broken)  # every record it should hold is rejected
    if listed is not None:
        _cross_check_listed(items, repo, listed, where)
    else:
        _cross_check(items, repo, index_ids, where)
    if index_digest is not None:
        _check_rows(items, repo, index_digest, where)
    hashes = tuple(rec.content_hash(it.obj, floatless=it.floatless) for it in items)
    to_check = tuple(n for n, it in enumerate(items) if stored.get(it.obj["id"]) != hashes[n])
    known = specs or {}
    same = (
        frozenset(
            n for n in to_check if known.get(items[n].obj["id"]) == record_spec_key(items[n].obj)
        )
        if known
        else frozenset()
    )
    return RepoFile(where, items, to_check, (), hashes, same)


@dataclass(frozen=True)
class Checked:
    """One repository file, validated: its valid records as spool lines, and its problems."""

    lines: tuple[tuple[str, str], ...]  #: (id, ``spool_line``) of each valid record
    problems: tuple[Problem, ...]
    bad: frozenset[str]  #: ids rejected (every id the index lists, when the file is broken)
    broken: bool  #: the file could not be read as records at all


def check_repo(part: RepoFile, index_ids: Sequence[str], version: str | None) -> Checked:
    """Validate what ``read_repo`` read and encode the valid records for the spool."""
    found = [*part.broken, *check_items(part.items, part.to_check, part.where)]
    bad = {p.record_id for p in found if p.record_id} if not part.broken else set(index_ids)
    lines = []
    new = set(part.to_check)
    for n, item in enumerate(part.items):
        obj = item.obj
        rid = obj["id"]
        if rid not in bad:
            text = rec.verbatim_json(obj, floatless=item.floatless)
            # Compiled only where its matcher inputs changed; the store keeps the others' spec rows.
            same = n in part.same_spec
            derived = derive(obj) if n in new and not same else None
            content_hash = (
                part.hashes[n] if part.hashes else rec.content_hash(obj, floatless=item.floatless)
            )
            line = spool_line(rid, content_hash, text, version, derived, same_spec=same)
            lines.append((rid, line))
    return Checked(tuple(lines), tuple(found), frozenset(bad), bool(part.broken))


def check_items(items: Sequence[Item], indices: Iterable[int], where: str) -> list[Problem]:
    """Validate the records ``items[i]`` for each index; every problem, named by ``where``."""
    problems: list[Problem] = []
    for n in indices:
        item = items[n]
        checked = rec.check_record(
            item.obj, source=where, location=item.location, path_prefix=item.path_prefix
        )
        problems.extend(checked.problems)
        if item.envelope is not None:
            problems.extend(rec.check_envelope(item.envelope, source=where, location=item.location))
    return problems


def _ids_of(items: Sequence[Item], repo: str) -> tuple[list[str], list[str], list[str]]:
    """The records' ids in order, the faults (no string id, another repository) and repeats."""
    found: list[str] = []
    faults: list[str] = []
    duplicates: list[str] = []
    seen: set[str] = set()
    for item in items:
        rid = item.obj.get("id")
        if not isinstance(rid, str):
            faults.append(f"a record without a string id at {item.location or 'top level'}")
            continue
        found.append(rid)
        if rid in seen:
            duplicates.append(rid)
        seen.add(rid)
        if item.obj.get("repo") != repo:
            faults.append(f"record {rid} claims repo {item.obj.get('repo')!r}")
    return found, faults, duplicates


def _cross_check(items: Sequence[Item], repo: str, index_ids: Sequence[str], where: str) -> None:
    """Every id the (hashed) index lists for ``repo`` is in its file, and nothing else."""
    expected = set(index_ids)
    found, faults, duplicates = _ids_of(items, repo)
    seen = set(found)
    missing = sorted(expected - seen)
    extra = sorted(seen - expected)
    if missing:
        faults.append(f"missing ids listed in the index: {publish.some_ids(missing)}")
    if extra:
        faults.append(f"ids the index does not list: {publish.some_ids(extra)}")
    if duplicates:
        faults.append(f"ids repeated: {publish.some_ids(duplicates)}")
    if faults:
        raise IntegrityError(
            f"{where}: repository {repo} does not match the hashed index: "
            + "; ".join(faults[:10])
            + "; nothing changed"
        )


def _cross_check_listed(items: Sequence[Item], repo: str, listed: Listed, where: str) -> None:
    """With no index: the records claim ``repo``, no id twice, ``errorCount`` of them."""
    _found, faults, duplicates = _ids_of(items, repo)
    if duplicates:
        faults.append(f"ids repeated: {publish.some_ids(duplicates)}")
    if listed.error_count is not None and listed.error_count != len(items):
        faults.append(f"{len(items)} records, but repos.json counts {listed.error_count}")
    if faults:
        raise IntegrityError(
            f"{where}: repository {repo} does not match its repos.json entry (the manifest "
            "lists no index): " + "; ".join(faults[:10]) + "; nothing changed"
        )


def _check_rows(items: Sequence[Item], repo: str, index_digest: str, where: str) -> None:
    """The records' errorMessage, messagePattern and errorClass are the hashed index rows'."""
    found = publish.rows_digest(
        (
            it.obj.get("id"),
            it.obj.get("errorMessage"),
            it.obj.get("messagePattern"),
            it.obj.get("errorClass"),
        )
        for it in items
    )
    if found != index_digest:
        raise IntegrityError(
            f"{where}: repository {repo} does not match the hashed index: the errorMessage, "
            "messagePattern or errorClass of a record differs from its index row (msg, "
            "pattern, cls); nothing changed"
        )
