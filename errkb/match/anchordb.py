r"""The anchor database: the record anchors' compiled automaton, stored beside the knowledge base.

The record scan (``recordanchors.RecordAnchors``) finds every record's anchor and its escaped
forms in one native pass over the buffer (Hyperscan, else Aho-Corasick). The automaton is
compiled once per anchor key (``store.anchors_key``) by the write that moves the key and
stored in ``<db>.recordanchors`` (``beside``: one header; Hyperscan's own ``dumpb``/``loadb``
images, never pickle); Aho-Corasick is built from the stored word list. Body::

    <word count> <word bytes> <SHORT_ENDED> <delta words> <delta images>\n<word>\n...<end flags>
    then, for hyperscan: <count> <length of each> <gate letters>\n<each image>

A file that cannot be used raises ``AnchorDatabaseError`` (``AnchorFault``); ``load_anchor_db``
rebuilds and stores it unless ``rebuild=False``. Parts whose words hold a gate's byte
(``GATES``) are scanned over the lines holding it alone. Hits map to lines by array operations.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.match.beside import AnchorDatabaseError as AnchorDatabaseError
from errkb.match.beside import AnchorFault as AnchorFault
from errkb.match.beside import Stamp
from errkb.match.beside import read as read_beside
from errkb.match.beside import write as write_beside

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The kind of file (``beside.Stamp``) the record anchors' automaton is stored as.
KIND = "recordanchors"
#: Anchors per Hyperscan database at most (equal parts): bounds a part's compile memory.
CHUNK_WORDS = 100_000
#: Engines of the pass, fastest first.
ENGINES = ("hyperscan", "ahocorasick")
#: Raw hits the pass keeps at most (as ``scan.MAX_SCAN_HITS``).
MAX_HITS = 2_000_000


def default_engine() -> str:
    """``hyperscan`` when it imports, else ``ahocorasick``."""
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return "ahocorasick"
    return "hyperscan"


@dataclass(frozen=True)
class Hits:
    """The pass's whole-word hits: parallel lists, in ascending (line, word) order."""

    #: 0-based index of the line holding each hit.
    lines: list[int]
    #: Start offset of that line in the buffer.
    line_starts: list[int]
    #: Index of the scan word hit (into ``AnchorDB.words``).
    words: list[int]


#: Bytes that, right after a fixed message's anchor (``ends``), make the hit count.
CLOSER_BYTES = b"'\"\\)]}<&"
#: Bytes that may trail a fixed message on its line (ASCII whitespace and separators, every
#: non-ASCII byte): a superset of ``recordanchors._ends_message``'s test.
TRAILING_BYTES = b" \t\r\x0b\x0c\x1c\x1d\x1e\x1f" + bytes(range(0x80, 0x100))
#: The bytes such a run may begin with (with the lead bytes of Unicode spaces: C2, E1-E3).
START_BYTES = b" \t\r\x0b\x0c\x1c\x1d\x1e\x1f\xc2\xe1\xe2\xe3"
#: Words with an end condition at most this long (bytes), ending in a byte not in
#: ``TRAILING_BYTES``, are compiled as their two-part literals (the word, then a closer, a
#: newline or a CR LF): such short words otherwise hit inside filler lines.
SHORT_ENDED = 8
#: Hyperscan's id of a two-part literal: the word's number plus this times the bytes it adds.
VARIANT_STRIDE = 1 << 26
_FOLLOWS = [bytes((b,)) for b in CLOSER_BYTES + b"\n"]
#: ``edges`` bits (``AnchorDB.hits``): a space or the line's edge must be before/after a hit.
EDGE_BEFORE, EDGE_AFTER = 1, 2
#: The bytes that may stand on such a side of a hit.
EDGE_BYTES = TRAILING_BYTES + b"\n"
#: Steps of the array walk back over trailing bytes before the rest go one by one.
_TRAIL_STEPS = 32


class AnchorDB:
    """A compiled automaton over ``words`` (one engine), safe to share between threads.

    ``ends[i]`` (1 or 0): with ``whole_words=False``, word ``i`` counts only where a
    ``CLOSER_BYTES`` byte or nothing but ``TRAILING_BYTES`` to its line's end follows it.
    The words are held as one blob (each word and a newline), decoded only when asked.
    """

    def __init__(
        self,
        words: Sequence[str],
        engine: str,
        serialised: bytes | memoryview | None = None,
        *,
        ends: bytes | None = None,
        blob: bytes | None = None,
        delta: tuple[int, int] = (0, 0),
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown scan engine {engine!r} (one of {', '.join(ENGINES)})")
        if blob is None:
            self._words: tuple[str, ...] | None = None
            blob = "".join(w + "\n" for w in words).encode("utf-8")
            self._count = blob.count(b"\n")
        else:
            self._words = None
            self._count = blob.count(b"\n")
        #: Every word, UTF-8, each followed by a newline (no word holds one).
        self.blob = blob
        self.ends = ends if ends is not None else bytes(self._count)
        if len(self.ends) != self._count:
            raise ValueError("one end flag per word")
        self.engine = engine
        #: The Hyperscan images this process compiled, to be stored (``encode``); None if loaded.
        self.serialised: bytes | memoryview | None = None
        #: False when Hyperscan loaded a stored image.
        self.compiled = serialised is None or engine != "hyperscan"
        #: Why the stored file was not used, when ``load_anchor_db`` compiled this one.
        self.fault: AnchorFault | None = None
        #: (words, Hyperscan images) compiled as delta parts after a base (``store_extended``).
        self.delta = delta
        self._lengths: npt.NDArray[np.int64] | None = None
        self._stop_at: npt.NDArray[np.int64] | None = None
        self._short: list[tuple[int, bytes]] | None = None
        self._digest: str | None = None
        self._raw: Callable[[bytes], tuple[list[int], list[int]]]
        #: Bytes the last Hyperscan pass handed its databases (work counted, for the tests).
        self.scanned = 0
        if not self._count:
            self._raw = lambda _data: ([], [])
        elif engine == "hyperscan":
            self._raw = self._hyperscan(serialised)
        else:
            self._raw = self._ahocorasick()

    def __len__(self) -> int:
        return self._count

    @property
    def words(self) -> tuple[str, ...]:
        """Every word, in id order (decoded from the blob on first use)."""
        if self._words is None:
            self._words = tuple(self.blob.decode("utf-8", "replace").split("\n")[:-1])
        return self._words

    @property
    def digest(self) -> str:
        """The sha256 of the words (their blob): what files derived from them are tied to."""
        if self._digest is None:
            import hashlib

            self._digest = hashlib.sha256(self.blob).hexdigest()
        return self._digest

    def prepare(self) -> bool:
        """Derive now the arrays a first pass would (``KnowledgeBase.prepare``); False: no numpy."""
        try:
            _numpy()
            import numpy  # noqa: F401
        except ImportError:
            return False
        self.lengths()
        self._short_ended()
        return True

    def word(self, index: int) -> str:
        """Word ``index``, decoded alone (numpy; the caller imported it)."""
        if self._words is not None:
            return self._words[index]
        stops = self._stops()
        start = int(stops[index - 1]) + 1 if index else 0
        return self.blob[start : int(stops[index])].decode("utf-8", "replace")

    def _stops(self) -> npt.NDArray[np.int64]:
        if self._stop_at is None:
            import numpy as np

            self._stop_at = np.flatnonzero(np.frombuffer(self.blob, dtype=np.uint8) == 10)
        return self._stop_at

    def _short_ended(self) -> list[tuple[int, bytes]]:
        """(number, word) of the words Hyperscan holds as ``SHORT_ENDED`` variants."""
        if self._short is None:
            if not self.ends.count(1):
                self._short = []
                return self._short
            try:
                _numpy()
                import numpy as np
            except ImportError:
                self._short = [
                    (index, word)
                    for index, word in enumerate(self._encoded())
                    if _short_ended(word, self.ends[index])
                ]
                return self._short
            stops = self._stops()
            lengths = self.lengths()
            last = np.frombuffer(self.blob, dtype=np.uint8)[np.maximum(stops - 1, 0)]
            chosen = np.flatnonzero(
                (np.frombuffer(self.ends, dtype=np.uint8) == 1)
                & (lengths <= SHORT_ENDED)
                & (lengths > 0)
                & ~_byte_table(TRAILING_BYTES)[last]
            )
            self._short = [
                (index, self.blob[stop - length : stop])
                for index, stop, length in zip(
                    chosen.tolist(), stops[chosen].tolist(), lengths[chosen].tolist(), strict=True
                )
            ]
        return self._short

    def _encoded(self) -> list[bytes]:
        return self.blob.split(b"\n")[:-1]

    def lengths(self) -> npt.NDArray[np.int64]:
        """Each word's length in bytes (numpy; the caller imported it)."""
        if self._lengths is None:
            import numpy as np

            self._lengths = np.diff(self._stops(), prepend=-1).astype(np.int64) - 1
        return self._lengths

    def _ahocorasick(self) -> Callable[[bytes], tuple[list[int], list[int]]]:
        import ahocorasick_rs

        automaton = ahocorasick_rs.BytesAhoCorasick(self._encoded())

        def scan(data: bytes) -> tuple[list[int], list[int]]:
            found = automaton.find_matches_as_indexes(data, overlapping=True)[:MAX_HITS]
            return [i for i, _s, _e in found], [e for _i, _s, e in found]

        return scan

    def _hyperscan(
        self, serialised: bytes | memoryview | None
    ) -> Callable[[bytes], tuple[list[int], list[int]]]:
        import hyperscan

        databases: list[Any] = []
        compiling = serialised is None
        if serialised is None:
            serialised = _join_images(list(compile_images(self._encoded(), self.ends)))
        gates: list[bytes] = []
        for image, gate in _split_images(serialised):
            databases.append(hyperscan.loadb(image, hyperscan.HS_MODE_BLOCK))
            gates.append(gate)
        self.serialised = serialised if compiling else None
        del serialised
        scratches = [hyperscan.Scratch(database) for database in databases]
        lock = threading.Lock()  # one scratch space each: scans of one database take turns

        def scan(data: bytes) -> tuple[list[int], list[int]]:
            ids: list[int] = []
            ends: list[int] = []
            add_id, add_end = ids.append, ends.append

            def on_match(index: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
                add_id(index)
                add_end(end)
                return len(ids) >= MAX_HITS  # True stops the scan

            with lock:
                scanned = 0
                gathered: dict[bytes, GatedLines] = {}
                for database, scratch, gate in zip(databases, scratches, gates, strict=True):
                    database.scratch = scratch
                    text, first, lines = data, len(ends), None
                    if gate != PLAIN:
                        lines = gathered.get(gate)
                        if lines is None:
                            lines = gathered[gate] = gated_lines(data, GATES[gate])
                        text = lines.text
                    if not text:
                        continue
                    with contextlib.suppress(hyperscan.ScanTerminated):
                        database.scan(text, match_event_handler=on_match)
                    scanned += len(text)
                    if lines is not None:
                        lines.map_back(ends, first)
                    if len(ids) >= MAX_HITS:
                        break
                self.scanned = scanned
            if data and data[-1] != 10:
                # A short ended word ending the buffer: none of its literals can hit.
                for index, word in self._short_ended():
                    if data.endswith(word):
                        add_id(index)
                        add_end(len(data))
            return ids, ends

        return scan

    def hits(
        self,
        data: bytes,
        *,
        whole_words: bool = True,
        newlines: npt.NDArray[np.int64] | None = None,
        edges: bytes | None = None,
    ) -> Hits:
        r"""The whole-word hits in ``data``, mapped to lines, each (line, word) once.

        A hit counts when no word byte (ASCII ``\w`` or >= 0x80) touches it; with
        ``whole_words=False`` when its word's ``ends`` condition and ``edges`` bits hold.
        Same hits with either engine, with or without numpy. ``newlines``: if known.
        """
        ids, ends = self._raw(data)
        if not ids and (whole_words or self.engine != "hyperscan" or not self._short_ended()):
            return Hits([], [], [])  # (a short word may still end a line before trailing bytes)
        try:
            _numpy()
            import numpy  # noqa: F401
        except ImportError:
            return _hits_counted(data, ids, ends, self, whole_words, edges)
        return self._hits_numpy(data, ids, ends, whole_words, newlines, edges)

    def _hits_numpy(
        self,
        data: bytes,
        ids_list: list[int],
        ends_list: list[int],
        whole_words: bool = True,
        newlines: npt.NDArray[np.int64] | None = None,
        edges: bytes | None = None,
    ) -> Hits:
        lines, ids, line_starts = self.hit_arrays(
            data, ids_list, ends_list, whole_words, newlines, edges
        )
        return Hits(lines.tolist(), line_starts.tolist(), ids.tolist())

    def hit_arrays(
        self,
        data: bytes,
        ids_list: list[int] | None = None,
        ends_list: list[int] | None = None,
        whole_words: bool = True,
        newlines: npt.NDArray[np.int64] | None = None,
        edges: bytes | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``hits`` as numpy arrays (0-based lines, word ids, line starts), for array callers.

        The raw pass runs here unless its ``ids_list`` and ``ends_list`` are given.
        """
        import numpy as np

        if ids_list is None or ends_list is None:
            ids_list, ends_list = self._raw(data)
        ids = np.asarray(ids_list, dtype=np.int64)
        ends = np.asarray(ends_list, dtype=np.int64)
        buf = np.frombuffer(data, dtype=np.uint8)
        if newlines is None:
            newlines = newline_offsets(data)
        if self.engine == "hyperscan" and not whole_words and self._short_ended():
            # Two-part literals back to their words; short words ending before trailing bytes.
            variant = ids >= VARIANT_STRIDE
            if variant.any():
                shift = ids[variant] // VARIANT_STRIDE
                ids[variant] -= shift * VARIANT_STRIDE
                ends[variant] -= shift
            extra_ids, extra_ends = self._trailing_hits(data, _trailing_lines(buf, newlines))
            if extra_ids:
                ids = np.concatenate([ids, np.asarray(extra_ids, dtype=np.int64)])
                ends = np.concatenate([ends, np.asarray(extra_ends, dtype=np.int64)])
        if whole_words:
            starts = ends - self.lengths()[ids]
            word = _word_bytes()
            before = np.zeros(len(ids), dtype=bool)
            inner = starts > 0
            before[inner] = word[buf[starts[inner] - 1]]
            after = np.zeros(len(ids), dtype=bool)
            inside = ends < len(buf)
            after[inside] = word[buf[ends[inside]]]
            keep = ~(before | after)
            ids, ends = ids[keep], ends[keep]
        if not whole_words and self.ends.count(1):
            ids, ends = self._ended(data, buf, ids, ends, newlines)
        if not whole_words and edges is not None and len(ids):
            ids, ends = self._edged(buf, ids, ends, edges)
        # The line of a hit's last byte (a word holds no newline).
        lines = np.searchsorted(newlines, ends - 1).astype(np.int64)
        # One row per (line, word), ascending: a line holding a word twice is looked at once.
        count = max(1, self._count)
        key = np.unique(lines * count + ids)
        lines, ids = key // count, key % count
        line_starts = np.zeros(len(lines), dtype=np.int64)
        later = lines > 0
        line_starts[later] = newlines[lines[later] - 1] + 1
        return lines, ids, line_starts

    def _trailing_hits(self, data: bytes, stops: Sequence[int]) -> tuple[list[int], list[int]]:
        """The short ended words that end a line's text before trailing bytes (``stops``)."""
        short = self._short_ended()
        by_length: dict[int, dict[bytes, int]] = {}
        for index, word in short:
            by_length.setdefault(len(word), {})[word] = index
        ids: list[int] = []
        ends: list[int] = []
        for stop in stops:
            start = data.rfind(b"\n", 0, stop) + 1
            text_end = start + len(data[start:stop].rstrip(TRAILING_BYTES))
            if text_end == stop or data[text_end] not in START_BYTES:
                continue  # a two-part literal found it, or the condition fails
            for length, words in by_length.items():
                index = words.get(data[max(start, text_end - length) : text_end], -1)
                if index >= 0:
                    ids.append(index)
                    ends.append(text_end)
        return ids, ends

    def _edged(
        self,
        buf: npt.NDArray[np.uint8],
        ids: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        edges: bytes,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The hits left once words with ``edges`` bits are kept only where the sides hold."""
        import numpy as np

        flags = np.frombuffer(edges, dtype=np.uint8)[ids]
        flagged = np.flatnonzero(flags)
        if not len(flagged):
            return ids, ends
        edge = _byte_table(EDGE_BYTES)
        at, wants = ends[flagged], flags[flagged]
        keep_flagged = np.ones(len(flagged), dtype=bool)
        # After: the byte that follows the hit is an edge byte, or there is none.
        after = (wants & EDGE_AFTER) != 0
        inside = after & (at < len(buf))
        keep_flagged[inside] = edge[buf[at[inside]]]
        # Before: the byte before the hit's first one.
        start = at - self.lengths()[ids[flagged]]
        before = ((wants & EDGE_BEFORE) != 0) & (start > 0)
        keep_flagged[before] &= edge[buf[start[before] - 1]]
        keep = np.ones(len(ids), dtype=bool)
        keep[flagged] = keep_flagged
        return ids[keep], ends[keep]

    def _ended(
        self,
        data: bytes,
        buf: npt.NDArray[np.uint8],
        ids: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        newlines: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The hits left once words with an end condition are kept only where it holds."""
        import numpy as np

        flagged = np.flatnonzero(np.frombuffer(self.ends, dtype=np.uint8)[ids])
        if not len(flagged):
            return ids, ends
        at = ends[flagged]
        # Where each flagged hit's line ends (its newline, or the end of the buffer).
        index = np.searchsorted(newlines, at)
        stop = np.full(len(at), len(buf), dtype=np.int64)
        inside = index < len(newlines)
        stop[inside] = newlines[index[inside]]
        closer = np.zeros(len(at), dtype=bool)
        some = at < stop
        closer[some] = _byte_table(CLOSER_BYTES)[buf[at[some]]]
        # Walk back from the line's end over trailing bytes: a hit counts when reached.
        trailing = _byte_table(TRAILING_BYTES)
        last = stop - 1
        begins = np.zeros(len(at), dtype=bool)
        begins[some] = _byte_table(START_BYTES)[buf[at[some]]]
        last[some & ~begins] = stop[some & ~begins]  # another byte follows: never reached
        active = np.flatnonzero(~closer & begins & (last >= at))
        for _ in range(_TRAIL_STEPS):
            if not len(active):
                break
            active = active[trailing[buf[last[active]]]]
            last[active] -= 1
            active = active[last[active] >= at[active]]
        for k in active.tolist():  # a long run of trailing bytes: finished one by one
            last[k] = at[k] - 1 if not data[at[k] : stop[k]].rstrip(TRAILING_BYTES) else stop[k]
        keep = np.ones(len(ids), dtype=bool)
        keep[flagged] = closer | (last < at)
        return ids[keep], ends[keep]


def release_heap() -> None:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``; else nothing)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # Looked up once: each ``ctypes.CDLL`` made a cycle of nine objects for the collector.
    try:
        import ctypes

        found: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return found


def compile_images(
    encoded: list[bytes], ends: bytes, first: int = 0
) -> Iterator[tuple[bytes, bytes]]:
    """The Hyperscan images of ``encoded`` (end flags ``ends``) in parts, each with its gate.

    ``first``: the first word's number. Plain parts first; ``encoded`` is emptied.
    """
    release_heap()  # what the caller freed before (the rows it derived the words from)
    if first + len(encoded) >= VARIANT_STRIDE:
        raise ValueError(f"more than {VARIANT_STRIDE} anchor words")
    literals: list[bytes] = []
    numbers: list[int] = []
    gated: dict[bytes, tuple[list[bytes], list[int]]] = {gate: ([], []) for gate in GATES}
    for index, word in enumerate(encoded, first):
        if _short_ended(word, ends[index - first]):
            # Never gated: what follows may be a newline, which no gathered line holds.
            literals.extend(word + follow for follow in _FOLLOWS)
            numbers.extend([VARIANT_STRIDE + index] * len(_FOLLOWS))
            literals.append(word + b"\r\n")
            numbers.append(2 * VARIANT_STRIDE + index)
        elif (gate := gate_of(word)) != PLAIN:
            gated[gate][0].append(word)
            gated[gate][1].append(index)
        else:
            literals.append(word)
            numbers.append(index)
    encoded.clear()
    for image in _compiled_parts(literals, numbers):
        yield image, PLAIN
    for gate, (words, ids) in gated.items():
        for image in _compiled_parts(words, ids):
            yield image, gate


def _compiled_parts(literals: list[bytes], numbers: list[int]) -> Iterator[bytes]:
    """The images of ``literals`` (ids ``numbers``) in parts; both lists are emptied."""
    import hyperscan

    # Parts by length, shortest first: a part of long literals scans faster.
    sizes = [len(literal) for literal in literals]
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    del sizes
    parts = -(-len(order) // CHUNK_WORDS) if order else 0
    size = -(-len(order) // parts) if parts else 1
    pending = [
        (
            [literals[k] for k in order[base : base + size]],
            [numbers[k] for k in order[base : base + size]],
        )
        for base in range(0, len(order), size)
    ]
    literals.clear()
    numbers.clear()
    del order
    pending.reverse()  # popped from the end: shortest first
    while pending:
        part, ids = pending.pop()
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(expressions=part, ids=ids, elements=len(part), flags=0, literal=True)
        del part, ids
        image = hyperscan.dumpb(database)
        del database  # only the image is kept while the next part compiles
        release_heap()
        yield image


def store_compiled(
    path: Path,
    blob: bytes,
    ends: bytes,
    state: str,
    version: str | None,
    database: Path,
) -> bool:
    """Compile ``blob``'s words for Hyperscan and store them at ``path``; False if refused.

    Each image is spooled to a temporary file as compiled, never loaded back.
    """
    import tempfile

    count = blob.count(b"\n")
    lengths: list[int] = []
    try:
        with tempfile.TemporaryFile(
            prefix=f".{path.name}.", suffix=".images", dir=path.parent
        ) as spool:
            kinds: list[bytes] = []
            for image, gate in compile_images(blob.split(b"\n")[:-1], ends):
                spool.write(image)
                lengths.append(len(image))
                kinds.append(gate)
                del image

            def images() -> Iterator[bytes]:
                spool.seek(0)
                while chunk := spool.read(1 << 23):
                    yield chunk

            table = _image_table(lengths, kinds)
            head = [_words_table(count, len(blob), (0, 0)), blob, ends, table]
            stamp = Stamp(KIND, state, version, "hyperscan")

            def pieces() -> Iterator[bytes]:
                return itertools.chain(head, images())

            checked = sum(map(len, head[:3]))  # Hyperscan validates its images itself
            return write_beside(path, stamp, pieces, database, checked=checked)
    except OSError:
        return False  # the directory refused the spool (or the disk filled): as refused


def _image_table(lengths: Sequence[int], gates: Sequence[bytes]) -> bytes:
    r"""``<count> <length>... <gates>\n``: a gate's letter per image (``gate_of``), or ``-``."""
    letters = b"".join(gates) or b"-"
    return b" ".join([b"%d" % n for n in (len(lengths), *lengths)] + [letters]) + b"\n"


def _join_images(images: Sequence[tuple[bytes, bytes]]) -> bytes:
    """Hyperscan images and their gates as one payload: ``_image_table``, then the images."""
    table = _image_table([len(i) for i, _k in images], [k for _i, k in images])
    return table + b"".join(image for image, _kind in images)


def _split_images(payload: bytes | memoryview) -> list[tuple[bytes, bytes]]:
    """The images of ``_join_images`` and their gates; ``RuntimeError`` for another payload."""
    view = memoryview(payload)
    cut, lengths, letters = _images_table(view)
    images: list[tuple[bytes, bytes]] = []
    at = cut + 1
    for length, letter in zip(lengths, letters, strict=False):
        images.append((bytes(view[at : at + length]), bytes((letter,))))
        at += length
    return images


def _images_table(view: memoryview) -> tuple[int, list[int], bytes]:
    """(where the table line ends, each image's length, their gates) of a ``_join_images``."""
    head = bytes(view[:4096])
    cut = head.find(b"\n")
    fields = head[:cut].split(b" ")
    numbers, letters = fields[:-1], fields[-1]
    # A gate's letter per image; "-" for no image.
    kinds = len(letters) == len(numbers) - 1 and not letters.strip(PLAIN + b"".join(GATES))
    if (
        cut < 0
        or not numbers
        or not all(f.isdigit() for f in numbers)
        or int(numbers[0]) != len(numbers) - 1
        or not (kinds if len(numbers) > 1 else letters == b"-")
    ):
        raise RuntimeError("hyperscan: not a table of database images")
    lengths = [int(f) for f in numbers[1:]]
    if sum(lengths) != len(view) - cut - 1:
        raise RuntimeError("hyperscan: image lengths do not add up to the payload")
    return cut, lengths, letters if lengths else b""


def store_extended(
    path: Path,
    base: StoredWords,
    blob: bytes,
    ends: bytes,
    state: str,
    version: str | None,
    database: Path,
    engine: str = "hyperscan",
) -> bool:
    """Store at ``path`` the words of ``base`` and then ``blob``'s, compiling only ``blob``'s.

    The base's images (``stored_words``) are kept, the delta's follow; hits are numbered as a
    whole compile's. False when the directory refuses the file.
    """
    count = len(base.ends) + blob.count(b"\n")
    words = base.blob + blob
    flags = base.ends + ends
    delta_words = base.delta[0] + blob.count(b"\n")
    if engine != "hyperscan" or base.serialised is None:  # the words are all it stores
        body = _words_table(count, len(words), (delta_words, 0)) + words + flags
        return write_beside(path, Stamp(KIND, state, version, engine), body, database)
    view = base.serialised
    cut, lengths, letters = _images_table(view)
    fresh: list[tuple[bytes, bytes]] = list(
        compile_images(blob.split(b"\n")[:-1], ends, first=len(base.ends))
    )
    delta_images = base.delta[1] + len(fresh)
    gates = [*(bytes((g,)) for g in letters), *(g for _i, g in fresh)]
    table = _image_table([*lengths, *(len(i) for i, _g in fresh)], gates)
    head = [_words_table(count, len(words), (delta_words, delta_images)), words, flags, table]
    stamp = Stamp(KIND, state, version, "hyperscan")

    def pieces() -> Iterator[bytes | memoryview]:
        return itertools.chain(head, (view[cut + 1 :],), (image for image, _g in fresh))

    checked = sum(map(len, head[:3]))
    return write_beside(path, stamp, pieces, database, checked=checked)


_WORD_BYTE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _hits_counted(
    data: bytes,
    ids: list[int],
    ends: list[int],
    db: AnchorDB,
    whole_words: bool = True,
    edges: bytes | None = None,
) -> Hits:
    """``AnchorDB.hits`` without numpy: per hit, not per line (newlines counted in C)."""
    lengths = [len(w) for w in db._encoded()]
    sides = edges if edges is not None and not whole_words else bytes(len(db))
    flags = db.ends if not whole_words else bytes(len(db))
    kept: set[tuple[int, int]] = set()
    size = len(data)
    if db.engine == "hyperscan" and not whole_words and db._short_ended():
        stride = VARIANT_STRIDE  # as ``AnchorDB.hit_arrays``
        ends = [end - index // stride for index, end in zip(ids, ends, strict=True)]
        ids = [index % stride for index in ids]
        extra_ids, extra_ends = db._trailing_hits(data, _trailing_stops(data))
        ids, ends = ids + extra_ids, ends + extra_ends
    for index, end in zip(ids, ends, strict=True):
        if not whole_words:
            if flags[index] and not _ends_line(data, end):
                continue
            side = sides[index]
            if side & EDGE_AFTER and end < size and data[end] not in EDGE_BYTES:
                continue
            start = end - lengths[index]
            if side & EDGE_BEFORE and start > 0 and data[start - 1] not in EDGE_BYTES:
                continue
            kept.add((end - 1, index))
            continue
        start = end - lengths[index]
        if start > 0 and (data[start - 1] in _WORD_BYTE or data[start - 1] >= 0x80):
            continue
        if end < size and (data[end] in _WORD_BYTE or data[end] >= 0x80):
            continue
        kept.add((start, index))
    by_line: dict[int, set[int]] = {}
    for at, index in kept:
        by_line.setdefault(data.rfind(b"\n", 0, at) + 1, set()).add(index)
    lines: list[int] = []
    line_starts: list[int] = []
    out_words: list[int] = []
    number, position = 0, 0
    for line_start in sorted(by_line):
        number += data.count(b"\n", position, line_start)
        position = line_start
        for index in sorted(by_line[line_start]):
            lines.append(number)
            line_starts.append(line_start)
            out_words.append(index)
    return Hits(lines, line_starts, out_words)


#: The letter of a part scanned over the whole input (``compile_images``).
PLAIN = b"p"
#: The bytes every escaped form of a literal holds one of (``recordanchors.escaped_forms``).
ESCAPE_BYTES = b"\\&"
#: Gates, by letter: a word holding one of a gate's bytes can hit only on a line holding it,
#: so its part scans those lines alone (``gated_lines``). ``e``: escaped forms; ``q``: a quote.
GATES: dict[bytes, bytes] = {b"e": ESCAPE_BYTES, b"q": b"'"}
#: Gated lines, one per this many input bytes at most; past it a gate's parts scan it all.
GATE_LINE_BYTES = 2048


def gate_of(word: bytes) -> bytes:
    """The letter of the first gate (``GATES``) one of whose bytes ``word`` holds; ``PLAIN``."""
    for letter, gate in GATES.items():
        for byte in gate:
            if byte in word:
                return letter
    return PLAIN


@dataclass(frozen=True)
class GatedLines:
    """The input's lines that hold one of a gate's bytes, each with a newline, as ``text``.

    ``starts[k]``/``origins[k]``: line ``k``'s offset in ``text``/the input; None: all of it.
    """

    text: bytes
    starts: list[int] | None
    origins: list[int]

    def map_back(self, ends: list[int], first: int) -> None:
        """Turn ``ends[first:]``, hit ends in ``text``, into ends in the input, in place."""
        starts, origins = self.starts, self.origins
        if starts is None:
            return
        for k in range(first, len(ends)):
            end = ends[k]
            line = bisect.bisect_right(starts, end - 1) - 1  # a hit's last byte is on its line
            ends[k] = origins[line] + end - starts[line]


def gated_lines(data: bytes, gate: bytes) -> GatedLines:
    """The lines of ``data`` that hold one of the bytes of ``gate`` (``GatedLines``)."""
    needles = [bytes((byte,)) for byte in gate]
    if not any(needle in data for needle in needles):
        return GatedLines(b"", [], [])
    limit = len(data) // GATE_LINE_BYTES + 1
    spans: dict[int, int] = {}
    find, rfind = data.find, data.rfind
    for needle in needles:
        at = find(needle)
        while at >= 0:
            start = rfind(b"\n", 0, at) + 1
            end = find(b"\n", at)
            end = len(data) if end < 0 else end
            spans[start] = end
            if len(spans) > limit:
                return GatedLines(data, None, [])
            at = find(needle, end)
    starts: list[int] = []
    origins: list[int] = []
    pieces: list[bytes] = []
    size = 0
    for start in sorted(spans):
        piece = data[start : spans[start]]
        starts.append(size)
        origins.append(start)
        pieces.append(piece)
        size += len(piece) + 1
    return GatedLines(b"\n".join(pieces) + b"\n", starts, origins)


def _short_ended(word: bytes, ends: int) -> bool:
    """Whether Hyperscan holds ``word`` as its two-part literals (``SHORT_ENDED``)."""
    return bool(ends) and len(word) <= SHORT_ENDED and word[-1] not in TRAILING_BYTES


def _trailing_lines(buf: npt.NDArray[np.uint8], newlines: npt.NDArray[np.int64]) -> list[int]:
    """Where each line ending in ``TRAILING_BYTES`` ends (numpy; a CR before a newline not)."""
    import numpy as np

    size = len(buf)
    stops = newlines if size == 0 or buf[-1] == 10 else np.append(newlines, size)
    stops = stops[stops > 0]
    trailing = _byte_table(TRAILING_BYTES)
    last = buf[stops - 1]
    suspect = trailing[last] & ((last != 13) | (stops == size))
    cr = np.flatnonzero((last == 13) & (stops < size))
    if len(cr):
        before = stops[cr] - 2
        ok = before >= 0
        cr, before = cr[ok], before[ok]
        suspect[cr] = trailing[buf[before]]
    return list(stops[suspect].tolist())


def _ends_line(data: bytes, end: int) -> bool:
    """``AnchorDB``'s end condition for a hit ending at ``end``, one hit at a time."""
    if end < len(data) and data[end] in CLOSER_BYTES:
        return True
    if end < len(data) and data[end] != 10 and data[end] not in START_BYTES:
        return False
    stop = data.find(b"\n", end)
    return not data[end : len(data) if stop < 0 else stop].rstrip(TRAILING_BYTES)


def _trailing_stops(data: bytes) -> list[int]:
    """``_trailing_lines`` one line at a time (no numpy)."""
    stops: list[int] = []
    ends = [*iter_find(data, b"\n")]
    if data and data[-1] != 10:
        ends.append(len(data))
    for stop in ends:
        if stop == 0:
            continue
        last = data[stop - 1]
        if last == 13 and stop < len(data):
            if stop >= 2 and data[stop - 2] in TRAILING_BYTES:
                stops.append(stop)
        elif last in TRAILING_BYTES:
            stops.append(stop)
    return stops


def iter_find(data: bytes, needle: bytes) -> Iterator[int]:
    """Every offset of ``needle`` in ``data``, ascending."""
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


_WORD_TABLE: npt.NDArray[np.bool_] | None = None


def sorted_positions(table: npt.NDArray[np.bytes_], keys: Sequence[bytes]) -> list[int | None]:
    """Each key's index in ``table`` (sorted, fixed-width bytes, no entry ending in NUL), or None.

    Keys empty or wider than the table are never found (numpy; the caller imported it).
    """
    import numpy as np

    width = table.dtype.itemsize
    if not len(table):
        return [None] * len(keys)
    wanted = np.array(keys, dtype=table.dtype)
    at = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
    equal = (table[at] == wanted).tolist()
    return [
        int(k) if same and 0 < len(key) <= width else None
        for k, same, key in zip(at.tolist(), equal, keys, strict=True)
    ]


def _numpy() -> None:
    """Prepare numpy's import for one BLAS thread; ``ImportError`` if ``RLIMIT_AS`` is too low."""
    import os
    import sys

    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            os.environ.setdefault(name, "1")
        if _address_space_left() < _NUMPY_ADDRESS_SPACE:
            # OpenBLAS exits 1 (errkb's "nothing known") when it cannot map its buffers.
            raise ImportError("too little address space left under RLIMIT_AS to import numpy")


#: Address space numpy's import needs with one BLAS thread, with room to spare.
_NUMPY_ADDRESS_SPACE = 160 << 20


def _address_space_left() -> int:
    """Bytes of address space this process may still map under its ``RLIMIT_AS``."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return 1 << 62
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 1 << 62  # cannot tell: try the import
    return soft - pages * resource.getpagesize()


def newline_offsets(data: bytes) -> npt.NDArray[np.int64]:
    r"""The offset of every ``\n`` in ``data``, ascending (numpy), slice by slice (bounded copy)."""
    import numpy as np

    buf = np.frombuffer(data, dtype=np.uint8)
    step = 8 << 20
    parts = [np.flatnonzero(buf[at : at + step] == 10) + at for at in range(0, len(buf), step)]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts).astype(np.int64, copy=False)


_BYTE_TABLES: dict[bytes, npt.NDArray[np.bool_]] = {}


def _byte_table(members: bytes) -> npt.NDArray[np.bool_]:
    """A 256-entry table: True for the bytes in ``members``."""
    table = _BYTE_TABLES.get(members)
    if table is None:
        import numpy as np

        table = np.zeros(256, dtype=bool)
        table[list(members)] = True
        _BYTE_TABLES[members] = table
    return table


def _word_bytes() -> npt.NDArray[np.bool_]:
    r"""A 256-entry table: True for the bytes that continue a word (``\w`` ASCII, >= 0x80)."""
    global _WORD_TABLE
    if _WORD_TABLE is None:
        import numpy as np

        table = np.zeros(256, dtype=bool)
        for byte in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
            table[byte] = True
        table[0x80:] = True
        _WORD_TABLE = table
    return _WORD_TABLE


# ---------------------------------------------------------------------------- the stored file
def encode(db: AnchorDB) -> bytes:
    """The stored body of ``db`` (``beside`` puts the header in front)."""
    if db.engine == "hyperscan" and db.serialised is None and len(db):
        raise ValueError("a loaded Hyperscan database is not stored again: its images are gone")
    return _words_part(db) + (db.serialised or b"")


def _words_part(db: AnchorDB) -> bytes:
    """The body's part before the engine's images: its table, words and end flags."""
    return b"".join((_words_table(len(db), len(db.blob), db.delta), db.blob, db.ends))


def _words_table(count: int, size: int, delta: tuple[int, int]) -> bytes:
    """The body's first line: words, their bytes, ``SHORT_ENDED``, the delta's words and images."""
    return b"%d %d %d %d %d\n" % (count, size, SHORT_ENDED, *delta)


def read_anchor_db(path: Path, state: str, version: str | None, engine: str) -> AnchorDB:
    """The database stored at ``path``; ``AnchorDatabaseError`` saying why it cannot be used."""
    stored = _read_stored(path, state, version, engine)
    try:
        return AnchorDB(
            (), engine, stored.serialised, ends=stored.ends, blob=stored.blob, delta=stored.delta
        )
    except Exception as exc:  # hyperscan.error: the engine refused the serialised image
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, f"{engine}: {exc}") from None


@dataclass(frozen=True)
class StoredWords:
    """What a stored anchor database holds, checked but not loaded into its engine."""

    blob: bytes  #: the words, each ended by a newline (``AnchorDB.blob``)
    ends: bytes  #: a flag byte per word (``AnchorDB.ends``)
    serialised: memoryview | None  #: Hyperscan's images (None for another engine)
    delta: tuple[int, int] = (0, 0)  #: ``AnchorDB.delta``


def stored_words(
    path: Path, state: str, version: str | None, engine: str, *, verify: bool = False
) -> StoredWords | None:
    """The words of the database at ``path`` when current and intact (images not loaded), else None.

    ``verify``: the body's sha256 is checked too.
    """
    try:
        return _read_stored(path, state, version, engine, verify=verify)
    except AnchorDatabaseError:
        return None


def _read_stored(
    path: Path, state: str, version: str | None, engine: str, *, verify: bool = False
) -> StoredWords:
    body = read_beside(path, Stamp(KIND, state, version, engine), verify=verify)
    stop = _find(body, b"\n", 0, 64)
    counts = bytes(body[:stop]).split(b" ") if stop >= 0 else []
    if len(counts) == 3:
        raise AnchorDatabaseError(
            path, AnchorFault.STALE, "an older errkb's numbering of the two-part literals"
        )
    if len(counts) != 5 or not all(c.isdigit() for c in counts):
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "word list: bad table")
    count, blob_size, short, delta_words, delta_images = map(int, counts)
    if short != SHORT_ENDED and engine == "hyperscan":
        raise AnchorDatabaseError(
            path,
            AnchorFault.STALE,
            f"its short words with an end condition are those of at most {short} bytes; "
            f"this errkb compiles those of at most {SHORT_ENDED}",
        )
    at = stop + 1
    blob = bytes(body[at : at + blob_size])
    ends = bytes(body[at + blob_size : at + blob_size + count])
    # Not split or decoded here; invalid UTF-8 decodes to replacement characters (never hit).
    if (
        len(blob) != blob_size
        or len(ends) != count
        or blob.count(b"\n") != count
        or (count and not blob.endswith(b"\n"))
        or ends.strip(b"\x00\x01")
    ):
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "word list: bad lengths or flags")
    serialised = body[at + blob_size + count :] if engine == "hyperscan" else None
    if serialised is None and len(body) != at + blob_size + count:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "bytes after the word list")
    if delta_words > count:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "word list: bad delta")
    return StoredWords(blob, ends, serialised, (delta_words, delta_images))


def _find(view: memoryview, needle: bytes, start: int, stop: int) -> int:
    """``bytes.find`` over a memoryview's first bytes (no copy of the rest)."""
    return bytes(view[start:stop]).find(needle)


def write_anchor_db(path: Path, db: AnchorDB, state: str, version: str | None) -> bool:
    """Store ``db`` beside the database (``beside.write``); False when the directory refuses it."""
    stamp = Stamp(KIND, state, version, db.engine)
    checked = len(_words_part(db))  # Hyperscan validates its images itself
    return write_beside(path, stamp, encode(db), path.with_suffix(""), checked=checked)


def load_anchor_db(
    path: Path | None,
    words: Callable[[], Sequence[str]],
    state: str,
    version: str | None,
    engine: str | None = None,
    *,
    rebuild: bool = True,
    ends: bytes | None = None,
    blob: bytes | None = None,
) -> AnchorDB:
    """The stored database if usable; else one compiled from ``words()`` (and stored).

    ``rebuild=False``: raise the ``AnchorDatabaseError`` instead. ``ends``, ``blob``: the
    compile's end flags and words (``AnchorDB``), ``blob`` instead of ``words()``.
    """
    engine = engine or default_engine()
    fault = AnchorFault.MISSING
    if path is not None:
        try:
            return read_anchor_db(path, state, version, engine)
        except AnchorDatabaseError as exc:
            if not rebuild:
                raise
            fault = exc.fault
    db = AnchorDB(() if blob is not None else words(), engine, ends=ends, blob=blob)
    db.fault = fault
    if path is not None:
        write_anchor_db(path, db, state, version)
    return db
