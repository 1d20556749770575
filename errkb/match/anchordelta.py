"""Incremental record anchors: a write compiles the records it added or changed, not all (issue 48).

A write whose files for the previous anchor key are intact extends them: a third file,
``<db>.recordanchors.hashes`` (``HASHES_KIND``), lists the held records' content hashes and
compiler; against ``ReadView.live_hashes`` they name the records added, changed or retired.
Only the added and changed records are compiled, their words numbered after the held ones
(``anchordb.store_extended``); the maps are the held ones with retired and changed records
masked out and the delta's merged in (``merged_maps``). A reader still loads one anchor
database and one ``RecordMaps`` of one key. Past ``Compaction``'s limits, or when the held
files cannot be used, every record is compiled (also ``compact``: ``errkb maint compact``).
"""

from __future__ import annotations

import array
import hashlib
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    import numpy as np
    import numpy.typing as npt

    from errkb.store.interface import ReadView

#: The kind of file (``beside.Stamp``) the held records' hashes are stored as.
HASHES_KIND = "recordhashes-1"
#: Meta key of the compiler every stored spec row is of (``store.engine.COMPILER_KEY``).
COMPILER_KEY = "compiler"
#: Bytes of a content hash kept per record (a prefix of its hex digest: 64 bits).
HASH_CHARS = 16


@dataclass(frozen=True)
class Compaction:
    """When a write compiles every record: past ``share`` of words or ``images`` in delta parts."""

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
    """What ``build_record_anchors`` did: its kind, records and words compiled, words in deltas."""

    kind: BuildKind
    records: int = 0
    words: int = 0
    delta_words: int = 0


def hashes_path(anchordb_path: Path) -> Path:
    """Where the held records' hashes of the anchor database at ``anchordb_path`` are stored."""
    return anchordb_path.with_name(anchordb_path.name + ".hashes")


@dataclass(frozen=True)
class Hashes:
    """Records by id (sorted, as fixed-width bytes) and a prefix of their content hash."""

    ids: npt.NDArray[np.bytes_]
    digests: npt.NDArray[np.bytes_]
    compiler: str


def hashes_of(pairs: Iterable[tuple[str, str]], compiler: str) -> Hashes:
    """The ``Hashes`` of (id, content hash) pairs (``ReadView.live_hashes``), sorted by id."""
    import numpy as np

    rows = list(pairs)
    rids: list[str] = [rid for rid, _ in rows]
    digests: list[str] = [digest for _, digest in rows]
    del rows
    array_ids = _fixed(rids)
    hashes = _fixed(digests).astype(f"S{HASH_CHARS}")
    order = np.argsort(array_ids, kind="stable")
    return Hashes(array_ids[order], hashes[order], compiler)


def _fixed(texts: list[str]) -> npt.NDArray[np.bytes_]:
    """``texts`` as a fixed-width bytes array (UTF-8)."""
    import numpy as np

    widths = set(map(len, texts))
    if len(widths) == 1:
        blob = "".join(texts).encode("utf-8")
        (width,) = widths
        if width and len(blob) == width * len(texts):
            return np.frombuffer(blob, dtype=f"S{width}")
    encoded = [text.encode("utf-8") for text in texts]
    return np.array(encoded, dtype=f"S{max(map(len, encoded), default=1)}")


def encode_hashes(hashes: Hashes) -> bytes:
    r"""``<count> <id width> <compiler or ->\n``, the ids (fixed width), then their hashes."""
    head = f"{len(hashes.ids)} {hashes.ids.dtype.itemsize} {hashes.compiler or '-'}\n"
    return head.encode() + hashes.ids.tobytes() + hashes.digests.tobytes()


def read_hashes(path: Path, key: str, version: str | None) -> Hashes | None:
    """The ``Hashes`` stored at ``path`` for this key, else None (refused or inconsistent)."""
    import numpy as np

    try:
        body = bytes(read_beside(path, Stamp(HASHES_KIND, key, version), verify=True))
    except AnchorDatabaseError:
        return None
    head, _, rest = body.partition(b"\n")
    fields = head.decode("utf-8", "replace").split(" ")
    if len(fields) != 3 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    count, width = int(fields[0]), int(fields[1])
    if width < 1 or len(rest) != count * (width + HASH_CHARS):
        return None
    ids = np.frombuffer(rest[: count * width], dtype=f"S{width}")
    digests = np.frombuffer(rest[count * width :], dtype=f"S{HASH_CHARS}")
    if count > 1 and not bool(np.all(ids[:-1] < ids[1:])):
        return None
    return Hashes(ids, digests, "" if fields[2] == "-" else fields[2])


def write_hashes(path: Path, hashes: Hashes, key: str, version: str | None) -> bool:
    """Store the held records' hashes beside the database; False if refused."""
    body = encode_hashes(hashes)
    return write_beside(
        path, Stamp(HASHES_KIND, key, version), body, path.with_suffix("").with_suffix("")
    )


def changes(held: Hashes, live: Hashes) -> tuple[list[str], list[str]]:
    """(ids live and added or changed since ``held``, ids of ``held`` retired or changed)."""
    import numpy as np

    width = max(held.ids.dtype.itemsize, live.ids.dtype.itemsize)
    old, new = held.ids.astype(f"S{width}"), live.ids.astype(f"S{width}")

    def same(
        a: npt.NDArray[np.bytes_],
        a_digests: npt.NDArray[np.bytes_],
        b: npt.NDArray[np.bytes_],
        b_digests: npt.NDArray[np.bytes_],
    ) -> npt.NDArray[np.bool_]:
        # Whether each of ``a`` is in ``b`` with the same digest.
        if not len(b):
            return np.zeros(len(a), dtype=bool)
        at = np.minimum(np.searchsorted(b, a), len(b) - 1)
        found: npt.NDArray[np.bool_] = (b[at] == a) & (b_digests[at] == a_digests)
        return found

    changed = new[~same(new, live.digests, old, held.digests)]
    gone = old[~same(old, held.digests, new, live.digests)]
    return (
        [rid.decode("utf-8") for rid in changed.tolist()],
        [rid.decode("utf-8") for rid in gone.tolist()],
    )


def _uints(values: npt.NDArray[np.int64]) -> array.array[int]:
    import numpy as np

    out = array.array("I")
    if out.itemsize != 4:  # pragma: no cover - every platform errkb runs on
        out = array.array("L")
    out.frombytes(np.asarray(values, dtype=f"<u{out.itemsize}").tobytes())
    if sys.byteorder == "big":  # pragma: no cover
        out.byteswap()
    return out


def _ids(maps: RecordMaps) -> npt.NDArray[np.bytes_]:
    """The records' ids as one fixed-width array (a view of the blob where they are one width)."""
    import numpy as np

    offsets = np.asarray(maps.id_offsets, dtype=np.int64)
    count = len(offsets) - 1
    if count > 0 and offsets[1] > 0 and bool(np.all(np.diff(offsets) == offsets[1])):
        return np.frombuffer(maps.ids, dtype=f"S{offsets[1]}")
    ids = [maps.ids[offsets[r] : offsets[r + 1]] for r in range(count)]
    return np.array(ids, dtype=f"S{max(map(len, ids), default=1)}")


def _pick(
    is_new: npt.NDArray[np.bool_],
    source: npt.NDArray[np.int64],
    old_values: npt.NDArray[Any],
    new_values: npt.NDArray[Any],
) -> npt.NDArray[np.int64]:
    """Per merged record, ``new_values[source]`` where it is new, else ``old_values[source]``."""
    import numpy as np

    # A value appended to each (index -1): what the other side's records read, never kept.
    olds = np.append(np.asarray(old_values, dtype=np.int64), 0)[np.where(is_new, -1, source)]
    news = np.append(np.asarray(new_values, dtype=np.int64), 0)[np.where(is_new, source, -1)]
    picked: npt.NDArray[np.int64] = np.where(is_new, news, olds)
    return picked


def _runs(
    is_new: npt.NDArray[np.bool_], source: npt.NDArray[np.int64]
) -> list[tuple[bool, int, int]]:
    """(from the delta, first, last + 1) of each run of consecutive records of one source."""
    import numpy as np

    if not len(source):
        return []
    cut = np.flatnonzero((is_new[1:] != is_new[:-1]) | (source[1:] != source[:-1] + 1)) + 1
    firsts = np.concatenate([[0], cut])
    lasts = np.concatenate([cut, [len(source)]]) - 1
    return list(
        zip(
            is_new[firsts].tolist(),
            source[firsts].tolist(),
            (source[lasts] + 1).tolist(),
            strict=True,
        )
    )


def _gathered(
    runs: list[tuple[bool, int, int]],
    old: tuple[bytes, array.array[int]],
    new: tuple[bytes, array.array[int]],
) -> bytes:
    """The blob of each record's slice (``offsets``) in the merged order, one slice a run."""
    pieces = []
    for from_new, first, stop in runs:
        blob, offsets = new if from_new else old
        pieces.append(blob[offsets[first] : offsets[stop]])
    return b"".join(pieces)


def merged_maps(old: RecordMaps, gone: Collection[str], delta: RecordMaps) -> RecordMaps:
    """``old`` with the records ``gone`` masked out and ``delta``'s merged in (numpy).

    ``delta``'s words follow ``old``'s; records are renumbered in their ids' byte order. A
    word that lost a record is no longer ``sure``; one left with none keeps no line. Otherwise
    what ``record_maps`` of the live rows gives.
    """
    import numpy as np

    old_ids, new_ids = _ids(old), _ids(delta)
    width = max(old_ids.dtype.itemsize, new_ids.dtype.itemsize)
    gone_ids = np.array([rid.encode("utf-8") for rid in gone], dtype=f"S{width}")
    kept = np.flatnonzero(~np.isin(old_ids.astype(f"S{width}"), gone_ids))
    merged = np.concatenate([old_ids[kept].astype(f"S{width}"), new_ids.astype(f"S{width}")])
    order = np.argsort(merged, kind="stable")
    number = np.empty(len(merged), dtype=np.int64)
    number[order] = np.arange(len(merged), dtype=np.int64)
    of_old = np.full(len(old.fixed), -1, dtype=np.int64)
    of_old[kept] = number[: len(kept)]
    of_delta = number[len(kept) :]
    old_words, new_words = len(old), len(delta)
    old_entries = of_old[np.asarray(old.word_records, dtype=np.int64)]
    old_word = np.repeat(np.arange(old_words), np.diff(np.asarray(old.word_offsets)))
    held = old_entries >= 0
    new_entries = of_delta[np.asarray(delta.word_records, dtype=np.int64)]
    new_word = np.repeat(np.arange(new_words), np.diff(np.asarray(delta.word_offsets)))
    words = np.concatenate([old_word[held], new_word + old_words])
    records = np.concatenate([old_entries[held], new_entries])
    by = np.lexsort((records, words))
    counts = np.bincount(words[by], minlength=old_words + new_words)
    lost = counts[:old_words] < np.diff(np.asarray(old.word_offsets))
    plain = np.frombuffer(old.plain, dtype=np.uint8).copy()
    sure = np.frombuffer(old.sure, dtype=np.uint8).copy()
    sure[lost] = 0
    plain[counts[:old_words] == 0] = 1
    # Where each record of the merged order comes from: a kept record of ``old``, or ``delta``.
    is_new = order >= len(kept)
    source = np.where(is_new, order - len(kept), np.append(kept, 0)[np.where(is_new, -1, order)])
    runs = _runs(is_new, source)

    def offsets(of_old: array.array[int], of_new: array.array[int]) -> array.array[int]:
        sizes_old = np.diff(np.asarray(of_old, dtype=np.int64))
        sizes_new = np.diff(np.asarray(of_new, dtype=np.int64))
        sizes = _pick(is_new, source, sizes_old, sizes_new)
        return _uints(np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))

    fixed = _pick(
        is_new,
        source,
        np.frombuffer(old.fixed, dtype=np.uint8),
        np.frombuffer(delta.fixed, dtype=np.uint8),
    )
    return RecordMaps(
        complete=old.complete and delta.complete,
        plain=plain.tobytes() + delta.plain,
        sure=sure.tobytes() + delta.sure,
        ends=old.ends + delta.ends,
        edges=old.edges + delta.edges,
        word_offsets=_uints(np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])),
        word_records=_uints(records[by]),
        literal_offsets=offsets(old.literal_offsets, delta.literal_offsets),
        literals=_gathered(
            runs, (old.literals, old.literal_offsets), (delta.literals, delta.literal_offsets)
        ),
        fixed=fixed.astype(np.uint8).tobytes(),
        id_offsets=offsets(old.id_offsets, delta.id_offsets),
        ids=_gathered(runs, (old.ids, old.id_offsets), (delta.ids, delta.id_offsets)),
    )


@dataclass(frozen=True)
class _Held:
    """The files of the previous key: its words, maps and records' hashes."""

    key: str
    version: str | None
    words: StoredWords
    maps: RecordMaps
    hashes: Hashes


def _held(
    store_at: Path, engine: str, compiler: str, key: str, version: str | None
) -> _Held | None:
    """The files of ``key`` when all three are intact and agree, else None."""
    stored = read_hashes(hashes_path(store_at), key, version)
    if stored is None or stored.compiler != compiler:
        return None
    words = stored_words(store_at, key, version, engine, verify=True)
    if words is None:
        return None
    digest = hashlib.sha256(words.blob).hexdigest()
    maps = read_maps(maps_path(store_at), key, version, digest, verify=True)
    if maps is None or not maps.complete or len(maps) != len(words.ends) or maps.ends != words.ends:
        return None
    return _Held(key, version, words, maps, stored)


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
    live = hashes_of(view.live_hashes(), compiler)
    changed, gone = changes(held.hashes, live)
    if len(changed) > policy.share * max(len(live.ids), 1) or held.words.delta[1] >= policy.images:
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
    write_hashes(hashes_path(store_at), live, state, dataset_version)
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

    ``compact``: no delta part after (every record compiled unless already so and current).
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
        write_hashes(path, hashes_of(view.live_hashes(), compiler), state, dataset_version)
    if not compiled:
        return AnchorBuild(BuildKind.CURRENT)
    return AnchorBuild(BuildKind.WHOLE, compiled, 0, 0)
