r"""The anchor database: the buffer pass's compiled automaton, stored beside the knowledge base.

The whole-buffer pass (``errkb.match.scan.BufferScan``) looks for every record's scan word (its
longest indexed word, at least ``MIN_SCAN_WORD`` characters) in one native pass. Compiling that
automaton is the pass's one large fixed cost: Hyperscan takes seconds for 150,000 literals
(``SCAN.md``: 24-28 s for 150k-515k literals), so it is compiled once per state of the store
and stored in ``<db>.anchordb``, and every later process loads it (Hyperscan's own
``dumpb``/``loadb``: a byte image the library validates itself, nothing in it is executed; never
pickle). Aho-Corasick (``ahocorasick-rs``, the fallback where Hyperscan's wheel does not
install) has no serialised form; its automaton is built from the word list the same file holds,
which costs well under a second.

A scan word is a run of ``\w``: it reads the same inside a repr, a JSON string or an HTML
page (escaping touches quotes, backslashes, ``<&>`` and non-ASCII only, and non-ASCII words are
not scan words), so the escaped forms of a message hit the same anchors and need no variants.

File format (binary)::

    errkb-anchordb 2 <state> <dataset version or -> <engine> <sha256 of body> <body length>\n
    <body>: <word count>\n<word>\n... then, for hyperscan, the serialised databases:
            <count> <length of each>\n<each image>  (at most ``CHUNK_WORDS`` anchors each)

Reading refuses, with ``AnchorDatabaseError`` naming the file and the fault
(``AnchorFault``), a file that is missing, from another state, dataset version or engine
(stale), shorter than its header says (truncated), or whose body does not hash to its header,
whose word list is broken, or which Hyperscan will not load (corrupt). ``load_anchor_db``
rebuilds on any of these and stores the new file (atomically; a directory that refuses it
keeps the database in memory), unless asked to refuse (``rebuild=False``), where the error
propagates.

Both stored databases (this one and the record-driven scan's ``<db>.recordanchors``) are
built by the write that changes the store's state: ``KnowledgeBase.sync``, ``ingest`` and
``rollback`` call ``KnowledgeBase.build_anchor_files`` after their commit (outside the
transaction, so a SIGKILL there loses only files the next large input rebuilds), so explain
loads them and a knowledge base mounted read-only afterwards compiles nothing. At 150,000
records that build is 10.3 s of CPU (about 7 s of it Hyperscan compiling 214,907 anchors in
parts of at most ``CHUNK_WORDS``; Python preparing them 1.6 s, reading their rows 0.8 s), 42 MB
written, and the process peaks at 494 MB (655 MB compiling one database). The parts compile
one after the other: two at once on two threads (the binding lets go of the GIL) took 12.0 s
of wall time instead of 19.2 on this loaded 2-core machine, for the same CPU and 324 MB of
compile memory instead of 190 (issue 20's sync memory target is 512 MB at 500k records). A
background child after the sync returns would hide the wall time but not the CPU, and a sync
that has returned would leave a knowledge base that is not ready (an image built by ``RUN
errkb sync`` would ship without the files and compile them in every process that mounts it
read-only): the sync waits for them. A knowledge base whose file is missing, stale or
damaged still explains: a writable one rebuilds and stores it (once), a read-only one
compiles it in memory and says so once (a warning on the ``errkb`` logger). PostgreSQL's files
live beside its sync lock in the local data directory (``Store.path``): one set per machine.

Hits are mapped to lines without a Python loop over lines: a newline index of the buffer
(``numpy.flatnonzero``) and ``searchsorted`` of the hit offsets; word-boundary tests are array
operations too. Python then runs once per distinct hit line, not once per hit or per line.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.errors import ErrkbError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FORMAT = b"errkb-anchordb 2"
#: Anchors per Hyperscan database at most (split into equal parts). The 214,907 anchors of
#: 150k records (interleaved runs, loaded machine, CPU): one database compiled in 7.5 s with
#: 451 MB of peak memory beyond the process's, three in 6.8-7.0 s with 230-255 MB (715k
#: anchors, a 500k-record stand-in, as one: 27.3 s and 1.8 GB, inside a sync whose memory
#: target is 512 MB). Each further database is one more pass over the input: ``hits`` on the
#: dense 50 MB log took 0.43-0.45 s with one, 0.46-0.49 s with three (+8%).
CHUNK_WORDS = 100_000
#: Engines of the pass, fastest first.
ENGINES = ("hyperscan", "ahocorasick")
#: Raw hits the pass keeps at most (see ``scan.MAX_SCAN_HITS``): a log of nothing but scan
#: words keeps what it found so far; the pass only adds findings, it never hides one.
MAX_HITS = 2_000_000


class AnchorFault(StrEnum):
    """Why a stored anchor database was not used."""

    MISSING = "missing"
    STALE = "stale"
    TRUNCATED = "truncated"
    CORRUPT = "corrupt"


class AnchorDatabaseError(ErrkbError):
    """A stored anchor database cannot be used (missing, stale, truncated or corrupt)."""

    def __init__(self, path: Path, fault: AnchorFault, detail: str) -> None:
        self.path = path
        self.fault = fault
        super().__init__(f"anchor database {path}: {fault.value}: {detail}")


def anchordb_path(db_path: Path) -> Path:
    """Where the anchor database of the knowledge base at ``db_path`` is stored."""
    return db_path.with_name(db_path.name + ".anchordb")


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


class AnchorDB:
    """A compiled automaton over ``words`` (one engine), safe to share between threads."""

    def __init__(self, words: Sequence[str], engine: str, serialised: bytes | None = None) -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown scan engine {engine!r} (one of {', '.join(ENGINES)})")
        self.words = tuple(words)
        self.engine = engine
        self.serialised: bytes | None = None
        #: True when this process compiled the automaton (Aho-Corasick always: it has no
        #: serialised form); False when Hyperscan loaded a stored image.
        self.compiled = serialised is None or engine != "hyperscan"
        #: Why the stored file was not used, when ``load_anchor_db`` compiled this one.
        self.fault: AnchorFault | None = None
        self._raw: Callable[[bytes], tuple[list[int], list[int]]]
        if not self.words:
            self._raw = lambda _data: ([], [])
        elif engine == "hyperscan":
            self._raw = self._hyperscan(serialised)
        else:
            self._raw = self._ahocorasick()

    def __len__(self) -> int:
        return len(self.words)

    def _ahocorasick(self) -> Callable[[bytes], tuple[list[int], list[int]]]:
        import ahocorasick_rs

        automaton = ahocorasick_rs.BytesAhoCorasick([w.encode() for w in self.words])

        def scan(data: bytes) -> tuple[list[int], list[int]]:
            found = automaton.find_matches_as_indexes(data, overlapping=True)[:MAX_HITS]
            return [i for i, _s, _e in found], [e for _i, _s, e in found]

        return scan

    def _hyperscan(
        self, serialised: bytes | None
    ) -> Callable[[bytes], tuple[list[int], list[int]]]:
        import hyperscan

        databases: list[Any] = []
        if serialised is None:
            images: list[bytes] = []
            # At most ``CHUNK_WORDS`` anchors per database (equal parts), compiled one after
            # the other: the compile's memory follows the part, not the knowledge base.
            encoded = [w.encode() for w in self.words]
            parts = -(-len(encoded) // CHUNK_WORDS)
            size = -(-len(encoded) // parts)
            for base in range(0, len(encoded), size):
                part = encoded[base : base + size]
                database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                database.compile(
                    expressions=part,
                    ids=list(range(base, base + len(part))),
                    elements=len(part),
                    flags=0,
                    literal=True,
                )
                databases.append(database)
                images.append(hyperscan.dumpb(database))
            serialised = _join_images(images)
        else:
            for image in _split_images(serialised):
                databases.append(hyperscan.loadb(image, hyperscan.HS_MODE_BLOCK))
        self.serialised = bytes(serialised)
        scratches = [hyperscan.Scratch(database) for database in databases]
        lock = threading.Lock()  # one scratch space each: scans of one database take turns

        def scan(data: bytes) -> tuple[list[int], list[int]]:
            ids: list[int] = []
            ends: list[int] = []
            add_id, add_end = ids.append, ends.append

            # Nothing but two appends here: the callback runs once per raw hit.
            def on_match(index: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
                add_id(index)
                add_end(end)
                return len(ids) >= MAX_HITS  # True stops the scan

            with lock:
                for database, scratch in zip(databases, scratches, strict=True):
                    database.scratch = scratch
                    with contextlib.suppress(hyperscan.ScanTerminated):
                        database.scan(data, match_event_handler=on_match)
                    if len(ids) >= MAX_HITS:
                        break
            return ids, ends

        return scan

    def hits(
        self,
        data: bytes,
        *,
        whole_words: bool = True,
        newlines: npt.NDArray[np.int64] | None = None,
    ) -> Hits:
        r"""The whole-word hits in ``data``, mapped to lines, each (line, word) once.

        A hit counts when no word byte (ASCII ``\w`` or any byte >= 0x80) touches it on
        either side; with ``whole_words=False`` (the record-driven scan's literal anchors,
        which a placeholder's value may touch) every hit counts. Both engines give the same
        hits, and so do the two mappings: numpy's arrays, or, where numpy cannot be imported
        (a process whose address space is capped below what OpenBLAS maps at import), a
        count of newlines between consecutive hits. ``newlines``: ``data``'s newline offsets
        (``newline_offsets``) when the caller has them already, so they are found once a scan.
        """
        ids, ends = self._raw(data)
        if not ids:
            return Hits([], [], [])
        try:
            _numpy()
            import numpy  # noqa: F401
        except ImportError:
            return _hits_counted(data, ids, ends, self.words, whole_words)
        return self._hits_numpy(data, ids, ends, whole_words, newlines)

    def _hits_numpy(
        self,
        data: bytes,
        ids_list: list[int],
        ends_list: list[int],
        whole_words: bool = True,
        newlines: npt.NDArray[np.int64] | None = None,
    ) -> Hits:
        import numpy as np

        lengths = np.fromiter(
            (len(w.encode()) for w in self.words), dtype=np.int64, count=len(self.words)
        )
        ids = np.asarray(ids_list, dtype=np.int64)
        ends = np.asarray(ends_list, dtype=np.int64)
        starts = ends - lengths[ids]
        buf = np.frombuffer(data, dtype=np.uint8)
        if whole_words:
            word = _word_bytes()
            before = np.zeros(len(ids), dtype=bool)
            inner = starts > 0
            before[inner] = word[buf[starts[inner] - 1]]
            after = np.zeros(len(ids), dtype=bool)
            inside = ends < len(buf)
            after[inside] = word[buf[ends[inside]]]
            keep = ~(before | after)
            ids, starts = ids[keep], starts[keep]
        if newlines is None:
            newlines = newline_offsets(data)
        lines = np.searchsorted(newlines, starts).astype(np.int64)
        # One row per (line, word), ascending: a line holding a word twice is looked at once.
        key = np.unique(lines * len(self.words) + ids)
        lines, ids = key // len(self.words), key % len(self.words)
        line_starts = np.zeros(len(lines), dtype=np.int64)
        later = lines > 0
        line_starts[later] = newlines[lines[later] - 1] + 1
        return Hits(lines.tolist(), line_starts.tolist(), ids.tolist())


def _join_images(images: Sequence[bytes]) -> bytes:
    r"""Hyperscan images as one payload: ``<count> <length>...\n`` then the images."""
    table = b" ".join(b"%d" % n for n in (len(images), *map(len, images)))
    return table + b"\n" + b"".join(images)


def _split_images(payload: bytes) -> list[bytes]:
    """The images of ``_join_images``; ``RuntimeError`` for a payload that is not one."""
    table, newline, rest = payload.partition(b"\n")
    fields = table.split(b" ")
    if not newline or not all(f.isdigit() for f in fields) or int(fields[0]) != len(fields) - 1:
        raise RuntimeError("hyperscan: not a table of database images")
    lengths = [int(f) for f in fields[1:]]
    if sum(lengths) != len(rest):
        raise RuntimeError("hyperscan: image lengths do not add up to the payload")
    images: list[bytes] = []
    at = 0
    for length in lengths:
        images.append(rest[at : at + length])
        at += length
    return images


_WORD_BYTE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _hits_counted(
    data: bytes, ids: list[int], ends: list[int], words: Sequence[str], whole_words: bool = True
) -> Hits:
    """``AnchorDB.hits`` without numpy: per hit, not per line (newlines counted in C)."""
    lengths = [len(w.encode()) for w in words]
    kept: set[tuple[int, int]] = set()
    size = len(data)
    for index, end in zip(ids, ends, strict=True):
        start = end - lengths[index]
        if not whole_words:
            kept.add((start, index))
            continue
        if start > 0 and (data[start - 1] in _WORD_BYTE or data[start - 1] >= 0x80):
            continue
        if end < size and (data[end] in _WORD_BYTE or data[end] >= 0x80):
            continue
        kept.add((start, index))
    by_line: dict[int, set[int]] = {}
    for start, index in kept:
        by_line.setdefault(data.rfind(b"\n", 0, start) + 1, set()).add(index)
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


_WORD_TABLE: npt.NDArray[np.bool_] | None = None


def _numpy() -> None:
    """Prepare numpy's import for one BLAS thread (errkb does no linear algebra).

    OpenBLAS maps a buffer per core at import (40 MB of address space here), which counts
    against the ``RLIMIT_AS`` a hardened caller runs ``errkb explain`` under.
    """
    import os
    import sys

    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            os.environ.setdefault(name, "1")
        if _address_space_left() < _NUMPY_ADDRESS_SPACE:
            # OpenBLAS does not raise when it cannot map its buffers: it prints "Memory
            # allocation still failed" and exits 1, errkb's "nothing known". Count instead.
            raise ImportError("too little address space left under RLIMIT_AS to import numpy")


#: Address space numpy's import maps with one BLAS thread (about 90 MB here), with room to spare.
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
    r"""The offset of every ``\n`` in ``data``, ascending (numpy; the caller imported it).

    Slice by slice: ``frombuffer(data) == 10`` over the whole buffer made a boolean copy of
    it (200 MB more for a 200 MB log); a slice's copy is 8 MiB.
    """
    import numpy as np

    buf = np.frombuffer(data, dtype=np.uint8)
    step = 8 << 20
    parts = [np.flatnonzero(buf[at : at + step] == 10) + at for at in range(0, len(buf), step)]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts).astype(np.int64, copy=False)


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
def _header(state: str, version: str | None, engine: str, body: bytes) -> bytes:
    import hashlib  # OpenSSL costs ~3 ms at import: only a large input gets here

    digest = hashlib.sha256(body).hexdigest()
    return b"%s %s %s %s %s %d\n" % (
        FORMAT,
        state.encode(),
        (version or "-").encode(),
        engine.encode(),
        digest.encode(),
        len(body),
    )


def encode(db: AnchorDB, state: str, version: str | None) -> bytes:
    """The file image of ``db`` for this state and dataset version."""
    words = "".join(w + "\n" for w in db.words).encode("utf-8")
    body = b"%d\n" % len(db.words) + words + (db.serialised or b"")
    return _header(state, version, db.engine, body) + body


def read_anchor_db(path: Path, state: str, version: str | None, engine: str) -> AnchorDB:
    """The database stored at ``path``; ``AnchorDatabaseError`` saying why it cannot be used."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AnchorDatabaseError(path, AnchorFault.MISSING, "no such file") from None
    except OSError as exc:
        raise AnchorDatabaseError(path, AnchorFault.MISSING, exc.strerror or str(exc)) from None
    header, newline, body = data.partition(b"\n")
    fields = header.split(b" ")
    name, version_field = FORMAT.split(b" ")
    if newline and len(fields) >= 2 and fields[0] == name and fields[1] != version_field:
        raise AnchorDatabaseError(
            path,
            AnchorFault.STALE,
            f"format {fields[1].decode('ascii', 'replace')}; this errkb reads "
            f"{version_field.decode()}",
        )
    if not newline or len(fields) != 7 or b" ".join(fields[:2]) != FORMAT:
        fault = AnchorFault.TRUNCATED if not newline and FORMAT.startswith(data[:16]) else None
        raise AnchorDatabaseError(
            path, fault or AnchorFault.CORRUPT, "not an errkb anchor database"
        )
    got_state, got_version, got_engine, _digest, size = (
        f.decode("ascii", "replace") for f in fields[2:]
    )
    want = (state, version or "-", engine)
    if (got_state, got_version, got_engine) != want:
        raise AnchorDatabaseError(
            path,
            AnchorFault.STALE,
            f"built for state {got_state}, dataset {got_version}, engine {got_engine}; "
            f"the knowledge base is at state {state}, dataset {version or '-'}, engine {engine}",
        )
    if not size.isdigit():
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, f"bad body length {size!r}")
    if len(body) < int(size):
        raise AnchorDatabaseError(
            path, AnchorFault.TRUNCATED, f"{len(body)} of {size} body bytes present"
        )
    if len(body) > int(size) or _header(state, version, engine, body) != header + newline:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "body does not match its sha256")
    count, _, rest = body.partition(b"\n")
    try:
        words: list[str] = []
        position = 0
        for _ in range(int(count)):
            end = rest.index(b"\n", position)
            words.append(rest[position:end].decode("utf-8"))
            position = end + 1
        serialised = rest[position:] if engine == "hyperscan" else None
        return AnchorDB(words, engine, serialised)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, f"word list: {exc}") from None
    except Exception as exc:  # hyperscan.error: the engine refused the serialised image
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, f"{engine}: {exc}") from None


def write_anchor_db(path: Path, db: AnchorDB, state: str, version: str | None) -> bool:
    """Store ``db`` atomically (a temporary file renamed over ``path``); False when refused.

    A directory that refuses the file costs only the rebuild next time: nothing half-written
    is ever left at ``path`` (a reader would refuse it anyway: length and sha256).
    """
    return store_beside(path, encode(db, state, version), path.with_suffix(""))


def store_beside(path: Path, image: bytes, database: Path) -> bool:
    """Write ``image`` to ``path`` atomically, readable as ``database`` is; False when refused.

    What every file derived from a knowledge base is written with (the anchor databases, the
    record scan's maps): a temporary name in the same directory, synced, renamed over
    ``path``; never a temporary file left behind, a Ctrl-C included.
    """
    import os
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            # Whoever may read the database may read what is derived from it: its permission
            # bits (a temporary file is created 0600).
            try:
                mode = database.stat().st_mode & 0o666
            except OSError:
                mode = 0o644
            os.fchmod(fh.fileno(), mode)
            fh.write(image)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            return False
        raise
    return True


def load_anchor_db(
    path: Path | None,
    words: Callable[[], Sequence[str]],
    state: str,
    version: str | None,
    engine: str | None = None,
    *,
    rebuild: bool = True,
) -> AnchorDB:
    """The stored database if usable; else one compiled from ``words()`` (and stored).

    ``rebuild=False`` refuses instead: the ``AnchorDatabaseError`` saying what was wrong.
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
    db = AnchorDB(words(), engine)
    db.fault = fault
    if path is not None:
        write_anchor_db(path, db, state, version)
    return db
