"""The record-driven scan's anchors: every record's anchor, compiled and stored as flat arrays.

``RecordAnchors.hit_lines`` names the lines of a large input that can hold a known message
(issue 21): one native pass over every record's anchor (its longest literal line, stripped)
and escaped forms (repr, JSON, HTML), then the literal rejects: a plain anchor's hit keeps
its line only when the line holds every one-line literal of one of its records (``LINE_START``
ones at its start); a fixed message's only where it ends the line or a quoted value.

Stored beside the knowledge base after a write's commit: ``<db>.recordanchors`` (``anchordb``)
and ``<db>.recordanchors.maps`` (``RecordMaps``, tied to its words by their sha256); either
refused is derived again from ``ReadView.anchor_rows``.
"""

from __future__ import annotations

import array
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.match.anchordb import (
    EDGE_AFTER,
    EDGE_BEFORE,
    ESCAPE_BYTES,
    AnchorDatabaseError,
    AnchorDB,
    AnchorFault,
    Hits,
    default_engine,
    load_anchor_db,
    read_anchor_db,
    release_heap,
    store_compiled,
    stored_words,
    write_anchor_db,
)
from errkb.match.beside import Stamp
from errkb.match.beside import read as read_beside
from errkb.match.beside import write as write_beside
from errkb.parse.text import _ANSI_REMNANT_RE, line_text

if TYPE_CHECKING:
    import ahocorasick_rs
    import numpy as np
    import numpy.typing as npt

    from errkb.store.interface import AnchorRow


def record_anchordb_path(db_path: Path) -> Path:
    """Where the record-driven scan's anchor database of ``db_path`` is stored."""
    return db_path.with_name(db_path.name + ".recordanchors")


#: Printable ASCII without the characters a repr, a JSON string or HTML escapes.
_UNESCAPED = re.compile(r"[^\\'\"&<>]*")
_ESCAPE_CHARS = ESCAPE_BYTES.decode("ascii")


def escaped_forms(anchor: str) -> list[str]:
    """``anchor`` as a repr, a JSON string (both ``ensure_ascii`` ways) and HTML show it.

    Only forms that differ from ``anchor`` are returned, each once.
    """
    if anchor.isascii() and anchor.isprintable() and _UNESCAPED.fullmatch(anchor):
        return []  # nothing a repr, JSON or HTML escapes (most anchors)
    forms = [
        anchor.replace("\\", "\\\\").replace("'", "\\'"),
        anchor.replace("\\", "\\\\").replace('"', '\\"'),
        json.dumps(anchor)[1:-1],
        json.dumps(anchor, ensure_ascii=False)[1:-1],
        anchor.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
        anchor.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;"),
        anchor.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;"),
    ]
    return [f for f in dict.fromkeys(forms) if f != anchor]


def anchor_line(anchor: str) -> str:
    """The part of ``anchor`` one input line holds: its longest line, stripped."""
    return max((part.strip() for part in anchor.split("\n")), key=len, default="")


#: What may follow a fixed message's text on its line (besides nothing).
_CLOSERS = frozenset("'\"\\)]}<&")


def _uints(values: Sequence[int] | None = None) -> array.array[int]:
    """An unsigned 32-bit array (the stored offsets' and record numbers' type)."""
    out = array.array("I")
    if out.itemsize != 4:  # pragma: no cover - every platform errkb runs on
        out = array.array("L")
    if values is not None:
        out.extend(values)
    return out


def _packed(values: array.array[int]) -> bytes:
    """``values`` little-endian, as stored."""
    if sys.byteorder == "big":  # pragma: no cover
        values = array.array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _unpacked(image: bytes) -> array.array[int]:
    out = _uints()
    out.frombytes(image)
    if sys.byteorder == "big":  # pragma: no cover
        out.byteswap()
    return out


@dataclass(frozen=True)
class RecordMaps:
    """What the anchor pass's rejects need of every live record, as flat arrays.

    Words are the anchor database's (by number); records in row order.
    ``word_records[word_offsets[w]:word_offsets[w + 1]]``: word ``w``'s records;
    ``plain[w]``: 1 for an anchor as printed (not only an escaped form); ``sure[w]``: 1 when
    any plain hit keeps its line; ``ends[w]``: 1 when all its records are fixed messages;
    ``edges[w]``: ``EDGE_BEFORE``/``EDGE_AFTER`` bits (``record_edges``).
    ``literals[literal_offsets[r]:literal_offsets[r + 1]]``: record ``r``'s one-line literals,
    each followed by a newline (UTF-8; ``LINE_START`` first where it must begin its line);
    ``fixed[r]``: 1 for no placeholder; ``ids[id_offsets[r]:id_offsets[r + 1]]``: its id.
    """

    complete: bool
    plain: bytes
    sure: bytes
    ends: bytes
    edges: bytes
    word_offsets: array.array[int]
    word_records: array.array[int]
    literal_offsets: array.array[int]
    literals: bytes
    fixed: bytes
    id_offsets: array.array[int]
    ids: bytes

    def __len__(self) -> int:
        return len(self.plain)

    def _parts(self, record: int) -> list[str]:
        chunk = self.literals[self.literal_offsets[record] : self.literal_offsets[record + 1]]
        return chunk.decode("utf-8").split("\n")[:-1]

    def record_literals(self, record: int) -> tuple[str, ...]:
        """Record ``record``'s one-line literals."""
        return tuple(part.removeprefix(LINE_START) for part in self._parts(record))

    def record_line_starts(self, record: int) -> tuple[str, ...]:
        """The cores of record ``record``'s literals that begin a line (``LINE_START``)."""
        return tuple(
            part[1:].strip(" ") for part in self._parts(record) if part.startswith(LINE_START)
        )

    def record_id(self, record: int) -> str:
        """Record ``record``'s id."""
        return self.ids[self.id_offsets[record] : self.id_offsets[record + 1]].decode("utf-8")

    def position(self, rid: str) -> int | None:
        """The number of record ``rid`` (a bisection of the ids as UTF-8 bytes), or None.

        Where a backend's collation ordered the ids otherwise, None, never another record's.
        """
        key = rid.encode("utf-8")
        ids, offsets = self.ids, self.id_offsets
        lo, hi = 0, len(offsets) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if ids[offsets[mid] : offsets[mid + 1]] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(offsets) - 1 and ids[offsets[lo] : offsets[lo + 1]] == key:
            return lo
        return None


def one_line_literal(literal: str) -> str:
    """What the one-line rejects test of a template literal: "" when it cannot be tested.

    The literal stripped, but for one lone space at an edge, which is kept (the pattern
    matches it wherever the message is printed on one line). A literal over several lines: "".
    """
    core = literal.strip()
    if not core or "\n" in core:
        return ""
    lead = literal[0] == " " and literal[1:2] != " " and literal[1:2].strip() != ""
    trail = literal[-1] == " " and literal[-2:-1] != " " and literal[-2:-1].strip() != ""
    return (" " if lead else "") + core + (" " if trail else "")


def holds(text: str, literal: str) -> bool:
    """Whether one line's ``text`` may print ``literal`` (a kept edge space: or the line's edge)."""
    if literal in text:
        return True
    lead, trail = literal[:1] == " ", literal[-1:] == " "
    if not (lead or trail):
        return False
    core = literal.strip(" ")
    body = text.strip()
    if lead and trail:
        return body == core or body.startswith(core + " ") or body.endswith(" " + core)
    return body.startswith(core) if lead else body.endswith(core)


#: Bytes a message span decodes or the parser cuts out of a line (escapes, controls).
_NOT_VERBATIM = bytes([*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F, ord("\\"), ord("&")])


def verbatim(line: bytes) -> bool:
    """Whether every message the parser reads on ``line`` is a substring of it (nothing cleaned)."""
    if len(line.translate(None, _NOT_VERBATIM)) != len(line):
        return False
    # A colour's remnant (``[31m``) is cut out of the line's text.
    return not (
        b"[" in line
        and b"m" in line
        and _ANSI_REMNANT_RE.search(line.decode("utf-8", "replace")) is not None
    )


#: Marks, in the maps' literals, one after a template's line break (``begins_a_line``).
LINE_START = "\x01"


def begins_a_line(line: bytes, text: str, cores: Sequence[str]) -> bool:
    """Whether one of ``cores`` begins ``line`` once cleaned; True where the line cannot tell."""
    if line.endswith(b"\r"):
        line, text = line[:-1], text[:-1]
    if not verbatim(line):
        return True
    start = line_text(text).lstrip(" \t>")
    return any(start.startswith(core) for core in cores)


def record_edges(line: str, kept: Sequence[str]) -> int:
    """The ``edges`` bits of anchor ``line``: the edge spaces of its literal among ``kept``."""
    for part in kept:
        if part.strip(" ") == line:
            return (EDGE_BEFORE if part[0] == " " else 0) | (EDGE_AFTER if part[-1] == " " else 0)
    return 0


def _stands_for(
    by_word: dict[str, int], more: dict[str, list[int]], word: str, record: int
) -> None:
    """Note that ``word`` stands for ``record`` (after the records it stood for before)."""
    first = by_word.get(word)
    if first is None:
        by_word[word] = record
    else:
        more.setdefault(word, [first]).append(record)


def record_maps(rows: Iterable[AnchorRow]) -> tuple[RecordMaps, tuple[str, ...]]:
    """The maps of ``rows`` (``ReadView.anchor_rows``) and their words: no template parsed."""
    from errkb.records.patterns import re2_escape

    # A word's one record as the value, a list only where it has more (``more``).
    by_word: dict[str, int] = {}
    more: dict[str, list[int]] = {}
    plain: set[str] = set()
    literal_offsets = _uints([0])
    literals = bytearray()
    size = 0
    id_offsets = _uints([0])
    ids = bytearray()
    id_size = 0
    fixed = bytearray()
    edge_of = bytearray()  # per record: its anchor's ``record_edges`` (0 when fixed)
    sure_of: list[bool] = []  # per record: not fixed and its literals all inside its anchor
    unescaped = _UNESCAPED.fullmatch
    complete = True  # every row read once: ``rows`` may be the store's stream
    for rid, anchor, lits, regex, template in rows:
        if anchor is None:
            complete = False
        if not anchor:
            continue  # no usable literal: never a candidate (the matcher's rule)
        line = anchor_line(anchor) if "\n" in anchor else anchor.strip()
        if not line:
            continue
        record = len(fixed)
        encoded_id = rid.encode("utf-8")
        ids += encoded_id
        id_size += len(encoded_id)
        id_offsets.append(id_size)
        _stands_for(by_word, more, line, record)
        plain.add(line)
        # One-line literals; one after a template's line break marked (``LINE_START``).
        kept: list[str] = []
        marked: list[str] = []
        starts = False
        for lit in lits:
            part = one_line_literal(lit).lstrip(LINE_START)
            if part:
                kept.append(part)
                if lit.lstrip(" \t").startswith("\n"):
                    starts = True
                    part = LINE_START + part
                marked.append(part)
        encoded = "".join(part + "\n" for part in marked).encode("utf-8")
        literals += encoded
        size += len(encoded)
        literal_offsets.append(size)
        is_fixed = (
            "(?P<" not in regex  # a placeholder's group: never the escaped template
            and "\n" not in template
            and regex == f"(?s)^(?:{re2_escape(template)})$"
        )
        fixed.append(1 if is_fixed else 0)
        edge_of.append(0 if is_fixed else record_edges(line, kept))
        # Never sure: a literal with an edge space, or one that must begin the line.
        sure_of.append(not is_fixed and not starts and all(part in line for part in kept))
        if line.isascii() and line.isprintable() and unescaped(line):
            continue  # every escaped form is the line itself (``escaped_forms``)
        for form in escaped_forms(line):
            _stands_for(by_word, more, form, record)
    words = tuple(sorted(by_word))
    word_offsets = _uints([0])
    word_records = _uints()
    plain_flags = bytearray(len(words))
    sure = bytearray(len(words))
    ends = bytearray(len(words))
    edges = bytearray(len(words))
    for w, word in enumerate(words):
        first = by_word.pop(word)
        records = more.pop(word, None) or [first]
        word_records.extend(records)
        word_offsets.append(len(word_records))
        if word in plain:
            plain_flags[w] = 1
            # A plain hit checks every record the word stands for (escaped-form ones too).
            sure[w] = any(sure_of[r] for r in records)
            ends[w] = all(fixed[r] for r in records)
            # A word without ``ESCAPE_BYTES`` is each record's own line: the sides all need.
            if not any(char in word for char in _ESCAPE_CHARS):
                side = EDGE_BEFORE | EDGE_AFTER
                for r in records:
                    side &= edge_of[r]
                edges[w] = side
    maps = RecordMaps(
        complete=complete,
        plain=bytes(plain_flags),
        sure=bytes(sure),
        ends=bytes(ends),
        edges=bytes(edges),
        word_offsets=word_offsets,
        word_records=word_records,
        literal_offsets=literal_offsets,
        literals=bytes(literals),
        fixed=bytes(fixed),
        id_offsets=id_offsets,
        ids=bytes(ids),
    )
    return maps, words


#: The kind of file (``beside.Stamp``) the maps are stored as (its body's version in its name).
MAPS_KIND = "recordmaps-6"


def maps_path(anchordb_path: Path) -> Path:
    """Where the maps of the anchor database stored at ``anchordb_path`` are stored."""
    return anchordb_path.with_name(anchordb_path.name + ".maps")


def encode_maps(maps: RecordMaps, words_digest: str) -> bytes:
    r"""The stored body of ``maps``: a table line, then the arrays (data only).

    Table: ``<words> <records> <word records> <literal bytes> <id bytes> <complete 0/1> <words
    sha256>``; then plain, sure, ends, edges (a byte per word), fixed (a byte per record), word
    offsets, word records, literal offsets, id offsets (little-endian uint32), the literals
    and the ids.
    """
    table = b"%d %d %d %d %d %d %s\n" % (
        len(maps),
        len(maps.fixed),
        len(maps.word_records),
        len(maps.literals),
        len(maps.ids),
        1 if maps.complete else 0,
        words_digest.encode(),
    )
    body = b"".join(
        (
            table,
            maps.plain,
            maps.sure,
            maps.ends,
            maps.edges,
            maps.fixed,
            _packed(maps.word_offsets),
            _packed(maps.word_records),
            _packed(maps.literal_offsets),
            _packed(maps.id_offsets),
            maps.literals,
            maps.ids,
        )
    )
    return body


def read_maps(
    path: Path,
    state: str,
    version: str | None,
    words_digest: str,
    *,
    verify: bool = False,
    faults: dict[Path, AnchorFault] | None = None,
) -> RecordMaps | None:
    """The maps stored at ``path`` for this key and words (``words_digest``), else None.

    ``verify``: the body's sha256 is checked; ``faults``: why the file was not used is noted.
    """
    try:
        body = bytes(read_beside(path, Stamp(MAPS_KIND, state, version), verify=verify))
        maps = _maps_of(body, words_digest)
    except AnchorDatabaseError as exc:
        if faults is not None:
            faults[path] = exc.fault
        return None
    if maps is None and faults is not None:
        faults[path] = AnchorFault.CORRUPT
    return maps


def _maps_of(body: bytes, words_digest: str) -> RecordMaps | None:
    """The maps ``body`` holds when it is consistent and made for these words, else None."""
    table, newline, rest = body.partition(b"\n")
    fields = table.split(b" ")
    if not newline or len(fields) != 7 or not all(f.isdigit() for f in fields[:6]):
        return None
    words, records, entries, size, id_size, complete = map(int, fields[:6])
    if fields[6].decode("ascii", "replace") != words_digest or complete > 1:
        return None
    cut = [words, words, words, words, records, 4 * (words + 1), 4 * entries]
    cut += [4 * (records + 1), 4 * (records + 1), size, id_size]
    if sum(cut) != len(rest):
        return None
    parts: list[bytes] = []
    at = 0
    for length in cut:
        parts.append(rest[at : at + length])
        at += length
    plain, sure, ends, edges, fixed = parts[:5]
    word_offsets, word_records, literal_offsets, id_offsets = map(_unpacked, parts[5:9])
    # A file that passes these indexes nothing outside itself.
    if (
        word_offsets[0] != 0
        or word_offsets[-1] != entries
        or literal_offsets[0] != 0
        or literal_offsets[-1] != size
        or id_offsets[0] != 0
        or id_offsets[-1] != id_size
        or (entries and max(word_records) >= records)
        or any(flags.strip(b"\x00\x01") for flags in (plain, sure, ends, fixed))
        or edges.strip(b"\x00\x01\x02\x03")
    ):
        return None
    return RecordMaps(
        complete=complete == 1,
        plain=plain,
        sure=sure,
        ends=ends,
        edges=edges,
        word_offsets=word_offsets,
        word_records=word_records,
        literal_offsets=literal_offsets,
        literals=parts[9],
        fixed=fixed,
        id_offsets=id_offsets,
        ids=parts[10],
    )


def write_maps(
    path: Path, maps: RecordMaps, state: str, version: str | None, words_digest: str
) -> bool:
    """Store ``maps`` beside the database (``beside.write``); False if refused."""
    return write_beside(
        path,
        Stamp(MAPS_KIND, state, version),
        encode_maps(maps, words_digest),
        path.with_suffix("").with_suffix(""),
    )


def store_record_anchors(
    rows: Callable[[], Iterable[AnchorRow]],
    engine: str | None,
    *,
    store_at: Path,
    state: str,
    dataset_version: str | None,
    whole: bool = False,
) -> int:
    """Make the files ``RecordAnchors`` loads for this state current, loading nothing to scan.

    Returns the records compiled (0: current). ``whole``: delta parts are not current. The
    maps are written and dropped before the compile (``anchordb.store_compiled``).
    """
    engine = engine or default_engine()
    if engine != "hyperscan":
        if whole:
            _remove_file(store_at)
        built = RecordAnchors(
            rows, engine, store_at=store_at, state=state, dataset_version=dataset_version
        )
        return 0 if built.db.fault is None else len(built.maps.fixed)
    import hashlib

    # Checked as ``RecordAnchors`` reads them, and by their sha256; images not loaded.
    db = stored_words(store_at, state, dataset_version, engine, verify=True)
    where = maps_path(store_at)
    if db is not None:
        words_digest = hashlib.sha256(db.blob).hexdigest()
        stored = read_maps(where, state, dataset_version, words_digest, verify=True)
        current = stored is not None and len(stored) == len(db.ends) and stored.ends == db.ends
        if current and not (whole and db.delta != (0, 0)):
            return 0
    # What the write left behind goes back to the system first: the compile is the peak.
    import gc

    gc.collect()
    release_heap()
    maps, words = record_maps(rows())
    compiled = len(maps.fixed)
    ends = maps.ends
    blob = "".join(w + "\n" for w in words).encode("utf-8")
    del words
    digest = hashlib.sha256(blob).hexdigest()
    write_maps(where, maps, state, dataset_version, digest)
    del maps
    if (
        db is not None
        and db.blob == blob
        and db.ends == ends
        and stored_words(store_at, state, dataset_version, engine, verify=True) is not None
        and not whole
    ):
        return compiled  # the stored database holds these very words: only the maps were missing
    del db
    release_heap()
    store_compiled(store_at, blob, ends, state, dataset_version, store_at.with_suffix(""))
    return compiled


def _remove_file(path: Path) -> None:
    """Remove ``path`` when it is a regular file (never a link's target)."""
    try:
        if path.is_file() and not path.is_symlink():
            path.unlink()
    except OSError:
        pass


#: Literal groups a hit line is checked against one by one at most; past it, by key.
CROWD = 8


class WordRecords:
    """The records one anchor word stands for, grouped for the literal rejects.

    Fixed records apart, the others grouped by their one-line literals and line starts (equal
    sets checked once). Past ``CROWD`` groups each is reached through a key, its longest
    literal not inside the word, found by one Aho-Corasick pass over the line (issue 50).
    """

    __slots__ = ("_always", "_by_key", "_finder", "bare", "fixed", "groups", "word")

    def __init__(self, maps: RecordMaps, word: int, text: str) -> None:
        records = maps.word_records[maps.word_offsets[word] : maps.word_offsets[word + 1]]
        fixed: list[int] = []
        grouped: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = {}
        for record in records:
            if maps.fixed[record]:
                fixed.append(record)
            else:
                key = (maps.record_literals(record), maps.record_line_starts(record))
                grouped.setdefault(key, []).append(record)
        #: The fixed records' numbers, and the word's text.
        self.fixed, self.word = tuple(fixed), text
        #: (literals, line starts, record numbers) of each group.
        self.groups = tuple((lits, starts, tuple(rs)) for (lits, starts), rs in grouped.items())
        #: Whether some record has no one-line literal (a hand-written pattern).
        self.bare = any(not lits for lits, _, _ in self.groups)
        self._finder: ahocorasick_rs.AhoCorasick | None = None
        self._by_key: list[list[int]] = []
        self._always: list[int] = []
        if len(self.groups) > CROWD:
            self._index(text)

    def _index(self, text: str) -> None:
        import ahocorasick_rs

        keys: dict[str, int] = {}
        for number, (lits, _, _) in enumerate(self.groups):
            # A literal's core is on every line that holds it (``holds``): a sound key.
            outside = [core for core in (lit.strip(" ") for lit in lits) if core not in text]
            if not outside:
                self._always.append(number)  # every literal inside the word: checked always
                continue
            at = keys.setdefault(max(outside, key=len), len(keys))
            if at == len(self._by_key):
                self._by_key.append([])
            self._by_key[at].append(number)
        self._finder = ahocorasick_rs.AhoCorasick(list(keys))

    def holding(self, line: bytes, text: str, *, starts: bool = True) -> Iterator[int]:
        """The groups (by index) whose literals ``text`` holds; ``starts``: line starts too."""
        return (n for n in self._chosen(text) if self._holds(n, line, text, starts))

    def keeps(self, line: bytes, text: str) -> bool:
        """Whether some group's literals and line starts hold on ``line`` (``text``, decoded)."""
        groups = self.groups
        for n in self._chosen(text):  # a loop: this runs once a hit in the rejects
            lits, begins, _ = groups[n]
            if _holds_all(text, lits) and (not begins or begins_a_line(line, text, begins)):
                return True
        return False

    def _holds(self, number: int, line: bytes, text: str, starts: bool) -> bool:
        lits, begins, _ = self.groups[number]
        return _holds_all(text, lits) and (
            not starts or not begins or begins_a_line(line, text, begins)
        )

    def _chosen(self, text: str) -> Iterable[int]:
        """The groups a line's ``text`` may hold: all, or past ``CROWD`` those its keys name."""
        finder = self._finder
        if finder is None:
            return range(len(self.groups))
        found = {key for key, _, _ in finder.find_matches_as_indexes(text, overlapping=True)}
        return [*self._always, *(g for key in found for g in self._by_key[key])]


def _holds_all(text: str, literals: Sequence[str]) -> bool:
    """Whether ``text`` may print each of ``literals`` (``holds``; the substring test first)."""
    # A loop, not ``all`` over a generator: this runs once a hit in the rejects.
    for literal in literals:  # noqa: SIM110
        if literal not in text and not holds(text, literal):
            return False
    return True


class RecordAnchors:
    """Every record's anchor and escaped forms, compiled once; which records each stands for."""

    def __init__(
        self,
        rows: Iterable[AnchorRow] | Callable[[], Iterable[AnchorRow]],
        engine: str | None = None,
        *,
        store_at: Path | None = None,
        state: str = "0",
        dataset_version: str | None = None,
    ) -> None:
        # ``rows`` as a callable: read only when the stored files cannot be used.
        maps = None
        db: AnchorDB | None = None
        #: The files beside the database found bad (not merely missing), and why.
        self.faults: dict[Path, AnchorFault] = {}
        if callable(rows) and store_at is not None:
            try:
                db = read_anchor_db(store_at, state, dataset_version, engine or default_engine())
            except AnchorDatabaseError:
                db = None
            if db is not None:
                maps = read_maps(
                    maps_path(store_at), state, dataset_version, db.digest, faults=self.faults
                )
                if maps is not None and (len(maps) != len(db) or maps.ends != db.ends):
                    maps = None
        if maps is None or db is None:
            maps, words = record_maps(rows() if callable(rows) else rows)
            ends = maps.ends
            blob = "".join(w + "\n" for w in words).encode("utf-8")
            del words
            db = load_anchor_db(
                store_at, tuple, state, dataset_version, engine, ends=ends, blob=blob
            )
            if db.ends != ends or db.blob != blob:
                # Stored for this state from other rows: never scan with it.
                fault = db.fault
                db = AnchorDB((), db.engine, ends=ends, blob=blob)
                db.fault = fault
                if store_at is not None:
                    write_anchor_db(store_at, db, state, dataset_version)
            if store_at is not None:
                write_maps(maps_path(store_at), maps, state, dataset_version, db.digest)
        #: False when some live record has no stored spec (before migration 0006).
        self.complete = maps.complete
        self.maps = maps
        self.db = db
        self._checks: dict[int, WordRecords] = {}
        self._ids: npt.NDArray[np.bytes_] | None = None
        self._ids_built = False

    @property
    def engine(self) -> str:
        return self.db.engine

    @property
    def words(self) -> tuple[str, ...]:
        """Every anchor line and escaped form, sorted (the anchor database's words)."""
        return self.db.words

    def records_of(self, word: int) -> WordRecords:
        """The records ``word`` stands for, grouped for the rejects (built once a word)."""
        got = self._checks.get(word)
        if got is None:
            got = self._checks[word] = WordRecords(self.maps, word, self.db.word(word))
        return got

    def may_match(self, rid: str, text: str) -> bool:
        """False when ``text`` lacks one of record ``rid``'s one-line literals: no match there."""
        return bool(self.matchable([rid], text))

    def matchable(self, rids: Sequence[str], text: str) -> list[str]:
        """``rids``, in order, but those whose held record has a one-line literal ``text`` lacks."""
        maps = self.maps
        kept: list[str] = []
        for rid, record in zip(rids, self._positions(rids), strict=True):
            if record is not None and not all(
                holds(text, part) for part in maps.record_literals(record)
            ):
                continue
            kept.append(rid)
        return kept

    def _positions(self, rids: Sequence[str]) -> list[int | None]:
        """Each id's record number (None: not held), one ``searchsorted`` where ids allow."""
        table = self.id_table()
        if table is None:
            return [self.maps.position(rid) for rid in rids]
        from errkb.match.anchordb import sorted_positions

        return sorted_positions(table, [rid.encode("utf-8") for rid in rids])

    def id_table(self) -> npt.NDArray[np.bytes_] | None:
        """The ids as one sorted fixed-width array, or None (widths differ, unsorted, no numpy)."""
        if not self._ids_built:
            self._ids_built = True
            maps = self.maps
            count = len(maps.id_offsets) - 1
            if count > 0:
                from errkb.match.anchordb import _numpy

                try:
                    _numpy()
                    import numpy as np
                except ImportError:
                    return None
                width = maps.id_offsets[1]
                offsets = np.asarray(maps.id_offsets, dtype=np.int64)
                if width > 0 and bool(np.all(np.diff(offsets) == width)):
                    table = np.frombuffer(maps.ids, dtype=f"S{width}")
                    if count == 1 or bool(np.all(table[:-1] < table[1:])):
                        self._ids = table
        return self._ids

    def passing(self, word: int, text: str) -> list[int] | None:
        """The records of ``word`` that one line's ``text`` may print, by number ascending.

        Fixed records always; the others when ``text`` holds each of their one-line literals
        (line starts not asked). None when one of them has no literal: the index decides.
        """
        check = self.records_of(word)
        if check.bare:
            return None
        found = list(check.fixed)
        groups = check.groups
        for number in check.holding(b"", text, starts=False):
            found.extend(groups[number][2])
        found.sort()
        return found

    def hit_lines(
        self,
        data: bytes,
        newlines: npt.NDArray[np.int64] | None = None,
        raw: list[Hits] | None = None,
    ) -> list[tuple[int, int]]:
        """(1-based line number, start offset) of each line that passes the literal rejects.

        ``newlines``: ``data``'s newline offsets, if known; ``raw``: receives the pass's hits.
        """
        kept, later = self.split_hit_lines(data, newlines, raw)
        return sorted([*kept, *later.take()])

    def split_hit_lines(
        self,
        data: bytes,
        newlines: npt.NDArray[np.int64] | None = None,
        raw: list[Hits] | None = None,
        wanted: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = None,
    ) -> tuple[list[tuple[int, int]], Deferred]:
        """``hit_lines``, the rejects in Python run now only on the lines ``wanted`` names.

        ``wanted`` maps 0-based line numbers to a mask; the lines left out that need a reject
        in Python come back as a ``Deferred``. Without ``wanted`` every line is needed now.
        """
        try:
            from errkb.match.anchordb import _numpy

            _numpy()
            import numpy as np
        except ImportError:
            hits = self.db.hits(data, whole_words=False, edges=self.maps.edges)
            if raw is not None:
                raw.append(hits)
            _ = self.db.words  # decoded once: ``AnchorDB.word`` needs numpy else
            kept = self._rejected(data, hits.lines, hits.line_starts, hits.words)
            return kept, Deferred(self, data)
        lines, ids, starts = self.db.hit_arrays(
            data, whole_words=False, newlines=newlines, edges=self.maps.edges
        )
        if raw is not None:
            raw.append(Hits(lines.tolist(), starts.tolist(), ids.tolist()))
        if not len(lines):
            return [], Deferred(self, data)
        # Escaped forms and ``sure`` words keep their line as arrays; Python sees the rest.
        plain = np.frombuffer(self.maps.plain, dtype=np.uint8)[ids]
        sure = np.frombuffer(self.maps.sure, dtype=np.uint8)[ids]
        quick = (plain == 0) | (sure == 1)
        kept_lines = lines[quick]
        rest = ~quick & ~np.isin(lines, kept_lines)
        sure_lines, sure_at = np.unique(kept_lines, return_index=True)
        sure_kept = zip((sure_lines + 1).tolist(), starts[quick][sure_at].tolist(), strict=True)
        found = dict(sure_kept)
        later = Deferred(self, data, lines[rest], starts[rest], ids[rest])
        found.update(later.take(wanted))
        return sorted(found.items()), later

    def _rejected(
        self,
        data: bytes,
        lines: Sequence[int],
        line_starts: Sequence[int],
        words: Sequence[int],
    ) -> list[tuple[int, int]]:
        """The hit lines among ``lines`` (ascending, 0-based) that pass the literal rejects."""
        plain = self.maps.plain
        out: list[tuple[int, int]] = []
        previous = -1
        keep = False
        line = b""
        text = ""
        start = 0
        for at, line_start, word in zip(lines, line_starts, words, strict=True):
            if at != previous:
                if keep:
                    out.append((previous + 1, start))
                previous, start, keep = at, line_start, False
                end = data.find(b"\n", line_start)
                line = data[line_start : len(data) if end < 0 else end]
                text = ""
            if keep:
                continue
            if not plain[word]:
                keep = True  # an escaped form: its literals are escaped too
                continue
            if not text:
                text = line.decode() if line.isascii() else line.decode("utf-8", "replace")
            check = self.records_of(word)
            keep = bool(check.fixed) and _ends_message(text, check.word)
            keep = keep or check.keeps(line, text)
        if keep:
            out.append((previous + 1, start))
        return out


def _ends_message(text: str, anchor: str) -> bool:
    """Whether some occurrence of ``anchor`` in ``text`` ends the line or a quoted value."""
    at = text.find(anchor)
    while at >= 0:
        rest = text[at + len(anchor) :].rstrip()
        if not rest or rest[0] in _CLOSERS:
            return True
        at = text.find(anchor, at + 1)
    return False


class Deferred:
    """Hit lines whose literal rejects have not run yet (``RecordAnchors.split_hit_lines``).

    Each ``take`` runs them on the lines its predicate names (all left, without one) and
    forgets those: each line rejected at most once, keeping what ``hit_lines`` keeps.
    """

    def __init__(
        self,
        anchors: RecordAnchors,
        data: bytes,
        lines: npt.NDArray[np.int64] | None = None,
        starts: npt.NDArray[np.int64] | None = None,
        ids: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self._anchors = anchors
        self._data = data
        self._lines = lines
        self._starts = starts
        self._ids = ids

    def __len__(self) -> int:
        return 0 if self._lines is None else len(self._lines)

    def take(
        self, wanted: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = None
    ) -> list[tuple[int, int]]:
        """The kept lines among those ``wanted`` names (0-based line numbers in, a mask out)."""
        lines, starts, ids = self._lines, self._starts, self._ids
        if lines is None or starts is None or ids is None or not len(lines):
            return []
        if wanted is None:
            now = None
            self._lines = self._starts = self._ids = None
        else:
            now = wanted(lines)
            later = ~now
            self._lines, self._starts, self._ids = lines[later], starts[later], ids[later]
            lines, starts, ids = lines[now], starts[now], ids[now]
        del now
        return self._anchors._rejected(self._data, lines.tolist(), starts.tolist(), ids.tolist())
