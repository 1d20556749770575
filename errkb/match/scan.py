r"""The anchor table: the match index in memory, every message's candidates with no query.

Rank-0 word -> the records it selects, each with its other indexed words; ``candidates`` applies
the rule of ``index.candidate_ids`` (same words, same cap), so every answer is the same whichever
path found it. Entries are parsed on first look-up, at most ``PARSED_ENTRIES_MAX`` kept.

Derived from ``match_tokens``; stored as plain text beside the database (``<db>.anchors``, one of
``errkb.match.beside``'s files), rebuilt when stale or damaged, kept in memory when unwritable.
Its body (UTF-8, ``\n`` line ends)::

    <word> TAB <record id>[:<word>,<word>...] [SPACE <record id>[:...]]...

Words are runs of ``\w`` (no tab, space, colon or comma); record ids are ``[0-9a-f]{16}``.
"""

from __future__ import annotations

import array
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.match.index import message_tokens
from errkb.store.interface import RELATED_COMMON

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from errkb.match.beside import AnchorFault
    from errkb.store import ReadView

#: The kind of file (``beside.Stamp``) the table is stored as.
KIND = "anchors-1"


def anchor_path(db_path: Path) -> Path:
    """Where the anchor table of the database at ``db_path`` is stored."""
    return db_path.with_name(db_path.name + ".anchors")


def build_body(rows: Iterable[tuple[str, str, int]]) -> str:
    """The table's body from (record id, word, rank) rows, ordered by record id then rank."""
    by_word: dict[str, list[str]] = {}
    current: str | None = None
    words: list[str] = []

    def flush() -> None:
        if current is not None and words:
            entry = current if len(words) == 1 else current + ":" + ",".join(words[1:])
            by_word.setdefault(words[0], []).append(entry)

    for rid, word, _rank in rows:
        if rid != current:
            flush()
            current, words = rid, []
        words.append(word)
    flush()
    return "".join(f"{word}\t{' '.join(entries)}\n" for word, entries in sorted(by_word.items()))


#: One record a rank-0 word selects: its id and its other indexed words.
_Entry = tuple[str, tuple[str, ...]]
#: A rank-0 word's records: (position, id) of those with no other word, and the others keyed
#: by their rank-1 word, each with its further words as stored (comma-separated, split late).
_Keyed = dict[str, list[tuple[int, str, str]]]
_Selects = tuple[tuple[tuple[int, str], ...], _Keyed]
#: Parsed entries (records) a table keeps at most; past it the least recently used words go.
PARSED_ENTRIES_MAX = 1 << 18


class AnchorTable:
    """Rank-0 word -> the records it selects (parsed on first look-up). Thread-safe for reads."""

    def __init__(self, body: str, parsed_max: int = PARSED_ENTRIES_MAX) -> None:
        # Entries stay unparsed strings until a message holds their word.
        self._raw: dict[str, str] = {}
        for line in body.splitlines():
            word, _, entries = line.partition("\t")
            self._raw[word] = entries
        self._parsed: dict[str, _Selects] = {}
        self._held = 0  # entries in _parsed
        self._parsed_max = max(1, parsed_max)
        # One string per distinct word across parsed entries (interned).
        self._words: dict[str, str] = {}
        self._lock = threading.Lock()
        self._related: _Related | None = None

    def __len__(self) -> int:
        return len(self._raw)

    @property
    def parsed_entries(self) -> int:
        """How many records' entries are held parsed now (about ``PARSED_ENTRIES_MAX`` at most)."""
        return self._held

    def words(self) -> list[str]:
        """Every rank-0 word of the table."""
        return list(self._raw)

    def entries(self, word: str) -> tuple[tuple[str, frozenset[str]], ...]:
        """(record id, its other indexed words) of every record ``word`` selects, in order."""
        bare, keyed = self._build(word)
        rows = [(pos, rid, frozenset[str]()) for pos, rid in bare]
        rows += [
            (p, r, frozenset((k, *rest.split(","))) if rest else frozenset((k,)))
            for k, group in keyed.items()
            for p, r, rest in group
        ]
        rows.sort(key=lambda row: row[0])
        return tuple((rid, others) for _pos, rid, others in rows)

    def _build(self, word: str) -> _Selects:
        intern = self._words.setdefault
        bare: list[tuple[int, str]] = []
        keyed: _Keyed = {}
        for pos, entry in enumerate(self._raw[word].split(" ")):
            rid, _, others = entry.partition(":")
            if others:
                first, _, rest = others.partition(",")
                group = keyed.get(first)
                if group is None:
                    group = keyed[intern(first, first)] = []
                group.append((pos, rid, rest))
            else:
                bare.append((pos, rid))
        return tuple(bare), keyed

    def warm(self) -> int:
        """Parse the largest words' entries ahead, up to half the bound; the entries held.

        Below half the bound nothing is dropped or reordered: answers are unchanged.
        """
        raw = self._raw
        budget = self._parsed_max // 2
        # Most records first (one space between two entries): parsing costs per entry.
        for word in sorted(raw, key=lambda w: raw[w].count(" "), reverse=True):
            if self._held >= budget:
                break
            self._selects(word)
        return self._held

    def _selects(self, word: str) -> _Selects:
        parsed = self._parsed.get(word)
        if parsed is not None:
            if self._held > self._parsed_max // 2:  # near the bound: mark recently used
                with self._lock:
                    if word in self._parsed:
                        self._parsed[word] = self._parsed.pop(word)
            return parsed
        parsed = self._build(word)
        size = len(parsed[0]) + sum(map(len, parsed[1].values()))
        with self._lock:
            if self._held + size > self._parsed_max and self._parsed:
                # The least recently used words go until a quarter of the bound is free.
                while self._parsed and self._held + size > self._parsed_max * 3 // 4:
                    old_bare, old_keyed = self._parsed.pop(next(iter(self._parsed)))
                    self._held -= len(old_bare) + sum(map(len, old_keyed.values()))
                self._words.clear()  # bounded with the entries it serves
            if word not in self._parsed:
                self._parsed[word] = parsed
                self._held += size
        return parsed

    def related(
        self, tokens: Sequence[str], limit: int, *, common: int = RELATED_COMMON
    ) -> list[str] | None:
        """``ReadView.related_ids`` from memory (the same ids); None before ``build_related``."""
        related = self._related
        return None if related is None else related.top(tokens, limit, common)

    def build_related(self) -> bool:
        """Build what ``related`` reads, once per table; False without numpy."""
        if self._related is not None:
            return True
        from errkb.match.anchordb import _numpy

        try:
            _numpy()
            import numpy  # noqa: F401
        except ImportError:
            return False
        with self._lock:
            if self._related is None:
                self._related = _Related(self._raw)
        return True

    def candidates(self, text: str) -> list[str]:
        """Ids of the records that may match ``text`` (``index.candidate_ids``'s rule and order)."""
        tokens = message_tokens(text)
        present: frozenset[str] | None = None
        found: list[str] = []
        raw = self._raw
        for word in tokens:
            if word not in raw:
                continue
            bare, keyed = self._selects(word)
            if not keyed:
                found.extend(rid for _pos, rid in bare)
                continue
            if present is None:
                present = frozenset(tokens)
            hits = list(bare)
            for key in keyed.keys() & present:
                for pos, rid, rest in keyed[key]:
                    if not rest or present.issuperset(rest.split(",")):
                        hits.append((pos, rid))
            if len(hits) > 1:
                hits.sort()
            found.extend(rid for _pos, rid in hits)
        return found


class _Related:
    """Every indexed word's records as positions in id order (numpy), for ``related``.

    One flat ``int32`` array of positions with each word's bounds; words and ids are
    fixed-width byte arrays searched with ``searchsorted``.
    """

    def __init__(self, raw: dict[str, str]) -> None:
        import numpy as np

        by_word: dict[str, list[str]] = {}
        for word, entries in raw.items():
            for entry in entries.split(" "):
                rid, _, others = entry.partition(":")
                by_word.setdefault(word, []).append(rid)
                if others:
                    for other in others.split(","):
                        by_word.setdefault(other, []).append(rid)
        ids = sorted({rid for rids in by_word.values() for rid in rids})
        position = {rid: n for n, rid in enumerate(ids)}
        flat = array.array("i")
        bounds = array.array("q", [0])
        # Sorted as UTF-8 bytes, the order ``searchsorted`` finds them in.
        words = sorted(w.encode("utf-8") for w in by_word)
        for encoded_word in words:
            flat.extend(position[rid] for rid in by_word.pop(encoded_word.decode("utf-8")))
            bounds.append(len(flat))
        del position, by_word
        self.members = np.frombuffer(flat, dtype=np.int32) if flat else np.zeros(0, np.int32)
        self._bounds = bounds
        # Index words are ``\w+`` runs: none ends in NUL, which a fixed-width array strips.
        self._words = np.array(words) if words else np.zeros(0, "S1")
        del words
        encoded = [rid.encode("utf-8") for rid in ids]
        width = len(encoded[0]) if encoded else 0
        # Ids of one width as one array (decoded per answer); else the strings as they are.
        uniform = width > 0 and all(len(e) == width and e[-1] != 0 for e in encoded)
        self._ids: list[str] | npt.NDArray[np.bytes_] = (
            np.array(encoded, dtype=f"S{width}") if uniform else ids
        )
        self._count = len(ids)

    def _spans(self, tokens: Sequence[str]) -> list[tuple[int, int]]:
        from errkb.match.anchordb import sorted_positions

        keys = [t.encode("utf-8") for t in dict.fromkeys(tokens)]
        bounds = self._bounds
        return [
            (bounds[k], bounds[k + 1]) for k in sorted_positions(self._words, keys) if k is not None
        ]

    def top(self, tokens: Sequence[str], limit: int, common: int = RELATED_COMMON) -> list[str]:
        import numpy as np

        spans = [(a, b) for a, b in self._spans(tokens) if b - a <= common]
        if not spans or limit <= 0:
            return []
        members = self.members
        chosen = np.concatenate([members[a:b] for a, b in spans])
        # SQL's ``ORDER BY count(*) DESC, record_id``: a stable sort over id-ordered positions.
        every = np.bincount(chosen, minlength=self._count)
        present = np.flatnonzero(every)
        counts = every[present]
        order = np.argsort(-counts, kind="stable")[:limit]
        ids = self._ids
        picked = present[order].tolist()
        if isinstance(ids, list):
            return [ids[at] for at in picked]
        return [bytes(ids[at]).decode("utf-8") for at in picked]


def _read_body(
    path: Path,
    state: str,
    dataset_version: str | None,
    *,
    verify: bool = False,
    faults: dict[Path, AnchorFault] | None = None,
) -> str | None:
    from errkb.match.beside import AnchorDatabaseError, AnchorFault, Stamp, read

    try:
        return str(read(path, Stamp(KIND, state, dataset_version), verify=verify), "utf-8")
    except (AnchorDatabaseError, UnicodeDecodeError) as exc:
        if faults is not None:
            bad = exc.fault if isinstance(exc, AnchorDatabaseError) else AnchorFault.CORRUPT
            faults[path] = bad
        return None


def write_table(path: Path, state: str, dataset_version: str | None, body: str) -> bool:
    """Store the table beside the database (``beside.write``); False when refused."""
    from errkb.match.beside import Stamp, write

    return write(
        path, Stamp(KIND, state, dataset_version), body.encode("utf-8"), path.with_suffix("")
    )


def load_table(
    view: ReadView,
    db_path: Path | None,
    state: str,
    dataset_version: str | None,
    faults: dict[Path, AnchorFault] | None = None,
) -> AnchorTable:
    """``view``'s anchor table: from its file, else built and stored (why noted in ``faults``)."""
    path = anchor_path(db_path) if db_path is not None else None
    if path is not None:
        body = _read_body(path, state, dataset_version, faults=faults)
        table = None if body is None else AnchorTable(body)
        if table is not None:
            return table
    body = build_body(view.token_rows())
    if path is not None:
        write_table(path, state, dataset_version, body)
    return AnchorTable(body)


def table_body(view: ReadView, db_path: Path, state: str, dataset_version: str | None) -> str:
    """The table's body for ``view``'s state: its file's if current, else built and stored."""
    path = anchor_path(db_path)
    body = _read_body(path, state, dataset_version, verify=True)
    if body is None:
        body = build_body(view.token_rows())
        write_table(path, state, dataset_version, body)
    return body
