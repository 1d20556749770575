"""Incremental record anchors: a write compiles the records it added or changed, not all (issue 48).

The record anchors' files beside the database (``<db>.recordanchors`` and its maps,
``errkb.match.recordanchors``) are built by every write that moves the anchor key. Here a
write whose files for the previous key are intact extends them instead of compiling every
record again: a third file, ``<db>.recordanchors.hashes`` (kind ``HASHES_KIND``, keyed like
the others), lists the records the files hold with their content hash and the compiler that
derived their specs; the live records' hashes (``ReadView.live_hashes``, an index read) name
those added, changed or retired since. Only the added and changed records' anchor rows are
read (``ReadView.anchor_rows_of``); their words are compiled alone, numbered after the held
words (``anchordb.store_extended``: the held Hyperscan images are kept as they are, the
delta's follow them in the same file); the maps are the held maps with every retired or
changed record masked out (it keeps no line: a word left with no record never keeps one) and
the delta's records merged in, in the byte order of their ids (``merged_maps``). The files a
reader loads keep their shape: one anchor database, one ``RecordMaps``, each one file under
one header, so a reader sees the old key's files or the new key's, and a file of another
key is refused as before (the rows are read then). Past a share of the words in delta parts
or a number of delta images (``Compaction``), or when the held files cannot be used (missing,
stale, of another compiler, not ``complete``), the write compiles every record: the
compaction, which ``errkb maint compact`` also asks for (``compact``).
"""

from __future__ import annotations

import array
import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.match.anchordb import (
    AnchorDatabaseError,
    StoredWords,
    default_engine,
    release_heap,
    store_extended,
    stored_words,
)
from errkb.match.beside import Stamp, key_of
from errkb.match.beside import read as read_beside
from errkb.match.beside import write as write_beside
from errkb.match.recordanchors import (
    RecordMaps,
    maps_path,
    read_maps,
    record_maps,
    store_record_anchors,
    write_maps,
)

if TYPE_CHECKING:
    from errkb.store.interface import ReadView

#: The kind of file (``beside.Stamp``) the held records' hashes are stored as.
HASHES_KIND = "recordhashes-1"
#: Meta key of the compiler every stored spec row is of (``store.engine.COMPILER_KEY``).
COMPILER_KEY = "compiler"
#: Bytes of a content hash kept per record (a prefix of its hex digest: 64 bits).
HASH_CHARS = 16


@dataclass(frozen=True)
class Compaction:
    """When a write compiles every record instead of a delta.

    ``share``: past this share of the anchor words in delta parts; ``images``: past this many
    delta Hyperscan images (each is one more pass over an input).
    """

    share: float = 0.10
    images: int = 12


DEFAULT_COMPACTION = Compaction()


class BuildKind(StrEnum):
    """What a build of the record anchors did."""

    CURRENT = "current"  #: the files were current: nothing compiled
    DELTA = "delta"  #: the changed records compiled alone, after the held words
    WHOLE = "whole"  #: every record compiled (a first build, or a compaction)


@dataclass(frozen=True)
class AnchorBuild:
    """What ``build_record_anchors`` did: its kind, and the records and words it compiled.

    ``words``: the words a delta compiled; ``delta_words``: the anchor words now in delta
    parts (0 after a whole build).
    """

    kind: BuildKind
    records: int = 0
    words: int = 0
    delta_words: int = 0


def hashes_path(anchordb_path: Path) -> Path:
    """Where the held records' hashes of the anchor database at ``anchordb_path`` are stored."""
    return anchordb_path.with_name(anchordb_path.name + ".hashes")


def encode_hashes(hashes: dict[str, str], compiler: str) -> bytes:
    r"""``<count> <compiler or ->\n`` then ``<id> <hash prefix>\n`` per record, by id."""
    lines = [f"{rid} {hashes[rid][:HASH_CHARS]}\n" for rid in sorted(hashes)]
    return f"{len(lines)} {compiler or '-'}\n{''.join(lines)}".encode()


def read_hashes(path: Path, key: str, version: str | None) -> tuple[dict[str, str], str] | None:
    """(id -> hash prefix, compiler) stored at ``path`` for this key, else None."""
    try:
        body = bytes(read_beside(path, Stamp(HASHES_KIND, key, version), verify=True))
    except AnchorDatabaseError:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head, _, rest = text.partition("\n")
    fields = head.split(" ")
    if len(fields) != 2 or not fields[0].isdigit():
        return None
    pairs = [line.split(" ") for line in rest.split("\n")[:-1]]
    if len(pairs) != int(fields[0]) or any(len(pair) != 2 for pair in pairs):
        return None
    return {pair[0]: pair[1] for pair in pairs}, ("" if fields[1] == "-" else fields[1])


def write_hashes(
    path: Path, hashes: dict[str, str], compiler: str, key: str, version: str | None
) -> bool:
    """Store the held records' hashes beside the database; False if refused."""
    body = encode_hashes(hashes, compiler)
    return write_beside(
        path, Stamp(HASHES_KIND, key, version), body, path.with_suffix("").with_suffix("")
    )


def _uints(values: Iterable[int]) -> array.array[int]:
    out = array.array("I")
    if out.itemsize != 4:  # pragma: no cover - every platform errkb runs on
        out = array.array("L")
    out.extend(values)
    return out


def _slices(blob: bytes, offsets: array.array[int], records: Iterable[int]) -> list[bytes]:
    return [blob[offsets[r] : offsets[r + 1]] for r in records]


def merged_maps(old: RecordMaps, gone: Collection[str], delta: RecordMaps) -> RecordMaps:
    """``old`` with the records ``gone`` masked out and ``delta``'s merged in (numpy).

    ``delta``'s words are numbered after ``old``'s; the records are renumbered in the byte
    order of their ids. A word that lost a record is no longer ``sure`` (its other records'
    literals are tested); one left with no record is plain and not sure, so its hits keep no
    line. What ``record_maps`` of the live rows gives, but for the words it would not hold
    and those flags, which only send more hits to the rejects.
    """
    import numpy as np

    old_ids = _slices(old.ids, old.id_offsets, range(len(old.fixed)))
    gone_ids = {rid.encode("utf-8") for rid in gone}
    keep = [r for r, rid in enumerate(old_ids) if rid not in gone_ids]
    new_ids = _slices(delta.ids, delta.id_offsets, range(len(delta.fixed)))
    merged = [old_ids[r] for r in keep] + new_ids
    order = sorted(range(len(merged)), key=merged.__getitem__)
    number = np.empty(len(merged), dtype=np.int64)
    number[np.asarray(order, dtype=np.int64)] = np.arange(len(merged), dtype=np.int64)
    of_old = np.full(len(old.fixed), -1, dtype=np.int64)
    of_old[np.asarray(keep, dtype=np.int64)] = number[: len(keep)]
    of_delta = number[len(keep) :]
    old_words, new_words = len(old), len(delta)
    old_entries = of_old[np.asarray(old.word_records, dtype=np.int64)]
    old_word = np.repeat(np.arange(old_words), np.diff(np.asarray(old.word_offsets)))
    held = old_entries >= 0
    new_entries = of_delta[np.asarray(delta.word_records, dtype=np.int64)]
    new_word = np.repeat(np.arange(new_words), np.diff(np.asarray(delta.word_offsets)))
    words = np.concatenate([old_word[held], new_word + old_words])
    records = np.concatenate([old_entries[held], new_entries])
    by = np.lexsort((records, words))
    words, records = words[by], records[by]
    counts = np.bincount(words, minlength=old_words + new_words)
    lost = counts[:old_words] < np.diff(np.asarray(old.word_offsets))
    plain = np.frombuffer(old.plain, dtype=np.uint8).copy()
    sure = np.frombuffer(old.sure, dtype=np.uint8).copy()
    sure[lost] = 0
    plain[counts[:old_words] == 0] = 1
    sources = [(old, r) for r in keep] + [(delta, r) for r in range(len(delta.fixed))]
    ordered = [sources[k] for k in order]
    return RecordMaps(
        complete=old.complete and delta.complete,
        plain=plain.tobytes() + delta.plain,
        sure=sure.tobytes() + delta.sure,
        ends=old.ends + delta.ends,
        edges=old.edges + delta.edges,
        word_offsets=_uints(np.concatenate([[0], np.cumsum(counts)]).tolist()),
        word_records=_uints(records.tolist()),
        literal_offsets=_offsets(
            m.literal_offsets[r + 1] - m.literal_offsets[r] for m, r in ordered
        ),
        literals=b"".join(
            m.literals[m.literal_offsets[r] : m.literal_offsets[r + 1]] for m, r in ordered
        ),
        fixed=bytes(m.fixed[r] for m, r in ordered),
        id_offsets=_offsets(len(merged[k]) for k in order),
        ids=b"".join(merged[k] for k in order),
    )


def _offsets(sizes: Iterable[int]) -> array.array[int]:
    out = _uints([0])
    total = 0
    for size in sizes:
        total += size
        out.append(total)
    return out


@dataclass(frozen=True)
class _Held:
    """The files of the previous key: its words, maps and records' hashes."""

    key: str
    version: str | None
    words: StoredWords
    maps: RecordMaps
    hashes: dict[str, str]


def _held(
    store_at: Path, engine: str, compiler: str, key: str, version: str | None
) -> _Held | None:
    """The files of ``key`` when all three are intact and agree, else None."""
    stored = read_hashes(hashes_path(store_at), key, version)
    if stored is None or stored[1] != compiler:
        return None
    words = stored_words(store_at, key, version, engine, verify=True)
    if words is None:
        return None
    digest = hashlib.sha256(words.blob).hexdigest()
    maps = read_maps(maps_path(store_at), key, version, digest, verify=True)
    if maps is None or not maps.complete or len(maps) != len(words.ends) or maps.ends != words.ends:
        return None
    return _Held(key, version, words, maps, stored[0])


def _extended(
    view: ReadView,
    engine: str,
    store_at: Path,
    state: str,
    dataset_version: str | None,
    policy: Compaction,
) -> AnchorBuild | None:
    """Extend the previous key's files with this write's delta; None: compile every record."""
    found = key_of(hashes_path(store_at), HASHES_KIND)
    if found is None or found == (state, dataset_version):
        return None  # nothing to extend, or this key's files (current, or a build cut short)
    compiler = view.meta_value(COMPILER_KEY) or ""
    held = _held(store_at, engine, compiler, *found)
    if held is None:
        return None
    live = {rid: digest[:HASH_CHARS] for rid, digest in view.live_hashes()}
    changed = [rid for rid, digest in live.items() if held.hashes.get(rid) != digest]
    gone = [rid for rid, digest in held.hashes.items() if live.get(rid) != digest]
    if len(changed) > policy.share * max(len(live), 1) or held.words.delta[1] >= policy.images:
        return None  # compact
    maps, words = record_maps(view.anchor_rows_of(changed))
    blob = "".join(w + "\n" for w in words).encode("utf-8")
    delta_words = held.words.delta[0] + len(words)
    if delta_words > policy.share * (len(held.words.ends) + len(words)) or not maps.complete:
        return None
    new_maps = merged_maps(held.maps, gone, maps)
    digest = hashlib.sha256(held.words.blob + blob).hexdigest()
    write_maps(maps_path(store_at), new_maps, state, dataset_version, digest)
    del new_maps
    release_heap()
    database = store_at.with_suffix("")
    store_extended(store_at, held.words, blob, maps.ends, state, dataset_version, database, engine)
    write_hashes(hashes_path(store_at), live, compiler, state, dataset_version)
    return AnchorBuild(BuildKind.DELTA, len(maps.fixed), len(words), delta_words)


def build_record_anchors(
    view: ReadView,
    engine: str | None,
    *,
    store_at: Path,
    state: str,
    dataset_version: str | None,
    policy: Compaction = DEFAULT_COMPACTION,
    compact: bool = False,
) -> AnchorBuild:
    """Make the record anchors' files current for this key: a delta where it can, else whole.

    ``compact``: every record is compiled (the files hold no delta part after), unless the
    files are current and hold none already.
    """
    engine = engine or default_engine()
    if not compact:
        extended = _extended(view, engine, store_at, state, dataset_version, policy)
        if extended is not None:
            return extended
    compiled = store_record_anchors(
        view.anchor_rows,
        engine,
        store_at=store_at,
        state=state,
        dataset_version=dataset_version,
        whole=compact,
    )
    path = hashes_path(store_at)
    compiler = view.meta_value(COMPILER_KEY) or ""
    if compiled or key_of(path, HASHES_KIND) != (state, dataset_version):
        live = {rid: digest[:HASH_CHARS] for rid, digest in view.live_hashes()}
        write_hashes(path, live, compiler, state, dataset_version)
    if not compiled:
        return AnchorBuild(BuildKind.CURRENT)
    return AnchorBuild(BuildKind.WHOLE, compiled, 0, 0)
