"""The anchor database (errkb.match.anchordb): the buffer pass's automaton stored beside the KB."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.explain import Thresholds
from errkb.match import anchordb, beside
from errkb.match.anchordb import AnchorDatabaseError, AnchorDB, AnchorFault
from errkb.store import anchors_key
from tests.conftest import DATASET, require_extra

WORDS = ["Traceback", "alpha_beta", "gamma", "delta9", "epsilon", "zeta_eta_theta"]


def _engines() -> list[str]:
    engines = ["ahocorasick"]
    try:
        import hyperscan  # noqa: F401
    except ImportError:  # pragma: no cover - CI installs errkb[fast]
        return engines
    return ["hyperscan", *engines]


def _naive(words: list[str], data: bytes) -> list[tuple[int, int, int]]:
    """(line index, line start, word index) of every whole-word hit, each once, by brute force."""
    out = set()
    word_byte = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
    for index, at, end in _occurrences(words, data):
        before = at > 0 and (data[at - 1] in word_byte or data[at - 1] >= 0x80)
        after = end < len(data) and (data[end] in word_byte or data[end] >= 0x80)
        if not before and not after:
            out.add((*_row_of(data, at), index))
    return sorted(out)


def _log(seed: int) -> bytes:
    rng = random.Random(seed)
    pieces = [*WORDS, "x" + WORDS[1], WORDS[2] + "s", "é" + WORDS[4], " ", " ", "\n", ".", "'"]
    return "".join(rng.choice(pieces) for _ in range(4000)).encode()


@pytest.mark.parametrize("engine", _engines())
def test_hits_are_every_whole_word_on_its_line(engine: str) -> None:
    db = AnchorDB(WORDS, engine)
    for seed in range(5):
        data = _log(seed)
        hits = db.hits(data)
        got = list(zip(hits.lines, hits.line_starts, hits.words, strict=True))
        assert got == _naive(WORDS, data)


def test_both_engines_give_the_same_hits() -> None:
    engines = _engines()
    if len(engines) < 2:  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")
    data = _log(11) + b"\n" + _log(12)
    hs, ac = (AnchorDB(WORDS, e).hits(data) for e in engines)
    assert hs.lines == ac.lines
    assert hs.words == ac.words
    assert len(hs.lines) > 100


def test_escaped_forms_hit_the_same_anchor() -> None:
    # A word anchor reads the same inside a repr, a JSON string and an HTML page.
    db = AnchorDB(["unexpected_keyword"], "ahocorasick")
    for text in (
        b"ValueError('unexpected_keyword \\'x\\'')",
        b'{"detail": "unexpected_keyword \\"x\\""}',
        b"<pre>unexpected_keyword &#x27;x&#x27;</pre>",
    ):
        assert db.hits(text).words == [0], text


@pytest.mark.parametrize("engine", _engines())
def test_a_stored_database_loads_with_the_same_hits(tmp_path: Path, engine: str) -> None:
    path = tmp_path / "kb.sqlite3.anchordb"
    built = anchordb.load_anchor_db(path, lambda: WORDS, "7", "v1", engine)
    assert path.exists()
    calls: list[int] = []

    def words() -> list[str]:
        calls.append(1)
        return WORDS

    loaded = anchordb.load_anchor_db(path, words, "7", "v1", engine)
    assert calls == []  # read, not compiled again
    data = _log(3)
    assert loaded.hits(data).words == built.hits(data).words


@pytest.mark.parametrize("engine", _engines())
def test_a_database_of_no_words_is_stored_and_read_back(tmp_path: Path, engine: str) -> None:
    # A knowledge base whose records have no scan word (every word under six letters): the
    # write after its commit stored the empty database (it raised for Hyperscan: no image).
    path = tmp_path / "kb.sqlite3.anchordb"
    built = anchordb.load_anchor_db(path, lambda: [], "7", "v1", engine)
    assert len(built) == 0 and path.exists()
    loaded = anchordb.read_anchor_db(path, "7", "v1", engine)
    assert len(loaded) == 0 and loaded.hits(_log(3)).words == []


def _stored(tmp_path: Path, engine: str = "ahocorasick") -> Path:
    path = tmp_path / "kb.sqlite3.anchordb"
    assert anchordb.write_anchor_db(path, AnchorDB(WORDS, engine), "7", "v1")
    return path


def _fault(path: Path, state: str = "7", version: str | None = "v1") -> AnchorDatabaseError:
    with pytest.raises(AnchorDatabaseError) as info:
        anchordb.read_anchor_db(path, state, version, "ahocorasick")
    assert str(path) in str(info.value)
    return info.value


def test_a_file_of_another_format_is_stale(tmp_path: Path) -> None:
    path = _stored(tmp_path)
    path.write_bytes(path.read_bytes().replace(beside.FORMAT, b"errkb-beside 1", 1))
    error = _fault(path)
    assert error.fault is AnchorFault.STALE and "format 1" in str(error)


def test_many_anchors_compile_in_chunks_with_the_same_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "hyperscan" not in _engines():  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")
    whole = AnchorDB(WORDS, "hyperscan")
    monkeypatch.setattr(anchordb, "CHUNK_WORDS", 2)
    path = tmp_path / "kb.sqlite3.anchordb"
    chunked = anchordb.load_anchor_db(path, lambda: WORDS, "7", "v1", "hyperscan")
    assert chunked.serialised is not None and chunked.serialised.startswith(b"3 ")
    loaded = anchordb.read_anchor_db(path, "7", "v1", "hyperscan")
    assert not loaded.compiled
    # Loaded, it keeps no view into the file read (Hyperscan copied each image), so it is
    # never written back without its images.
    assert loaded.serialised is None
    with pytest.raises(ValueError, match="not stored again"):
        anchordb.encode(loaded)
    for seed in range(3):
        data = _log(seed + 40)
        want = whole.hits(data)
        assert chunked.hits(data) == want == loaded.hits(data)
        assert want.words  # not vacuous


def test_a_missing_file_is_named_missing(tmp_path: Path) -> None:
    assert _fault(tmp_path / "none.anchordb").fault is AnchorFault.MISSING


def test_another_state_version_or_engine_is_stale(tmp_path: Path) -> None:
    path = _stored(tmp_path)
    error = _fault(path, state="8")
    assert error.fault is AnchorFault.STALE and "recordanchors 7 v1" in str(error)
    assert _fault(path, version="v2").fault is AnchorFault.STALE
    with pytest.raises(AnchorDatabaseError) as info:
        anchordb.read_anchor_db(path, "7", "v1", "hyperscan")
    assert info.value.fault is AnchorFault.STALE


def test_a_cut_file_is_truncated(tmp_path: Path) -> None:
    path = _stored(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    error = _fault(path)
    assert error.fault is AnchorFault.TRUNCATED and "present" in str(error)
    path.write_bytes(data[:8])  # cut inside the header
    assert _fault(path).fault is AnchorFault.TRUNCATED


def test_a_changed_byte_or_foreign_file_is_corrupt(tmp_path: Path) -> None:
    path = _stored(tmp_path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x20
    path.write_bytes(bytes(data))
    assert _fault(path).fault is AnchorFault.CORRUPT
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    assert _fault(path).fault is AnchorFault.CORRUPT


def test_a_serialised_image_hyperscan_refuses_is_corrupt(tmp_path: Path) -> None:
    if "hyperscan" not in _engines():  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")
    db = AnchorDB(WORDS, "hyperscan")
    # A well-formed file (its hash matches) around an image that is not a database.
    broken = AnchorDB(WORDS, "ahocorasick")
    broken.serialised = b"\x00" * 64
    path = tmp_path / "kb.sqlite3.anchordb"
    stamp = beside.Stamp(anchordb.KIND, "7", "v1", "hyperscan")
    assert beside.write(path, stamp, anchordb.encode(broken), tmp_path / "kb.sqlite3")
    with pytest.raises(AnchorDatabaseError) as info:
        anchordb.read_anchor_db(path, "7", "v1", "hyperscan")
    assert info.value.fault is AnchorFault.CORRUPT and "hyperscan" in str(info.value)
    # ... and loading rebuilds it, so the next process reads a good one.
    anchordb.load_anchor_db(path, lambda: WORDS, "7", "v1", "hyperscan")
    assert anchordb.read_anchor_db(path, "7", "v1", "hyperscan").words == db.words


@pytest.mark.parametrize("damage", ["missing", "stale", "truncated", "corrupt"])
def test_loading_rebuilds_a_bad_file_or_refuses_when_asked(tmp_path: Path, damage: str) -> None:
    path = _stored(tmp_path)
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "corrupt":
        path.write_bytes(data.replace(b"gamma", b"GAMMA"))
    state = "8" if damage == "stale" else "7"
    with pytest.raises(AnchorDatabaseError) as info:
        anchordb.load_anchor_db(path, lambda: WORDS, state, "v1", "ahocorasick", rebuild=False)
    assert info.value.fault.value == damage
    db = anchordb.load_anchor_db(path, lambda: WORDS, state, "v1", "ahocorasick")
    assert db.words == tuple(WORDS)
    assert anchordb.read_anchor_db(path, state, "v1", "ahocorasick").words == tuple(WORDS)


def test_an_unwritable_directory_keeps_the_database_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "kb.sqlite3.anchordb"
    db = anchordb.load_anchor_db(path, lambda: WORDS, "7", "v1", "ahocorasick")
    assert db.hits(b"a gamma b").words == [WORDS.index("gamma")]
    assert not path.exists()


@pytest.mark.parametrize("engine", _engines())
def test_the_mapping_without_numpy_gives_the_same_hits(engine: str) -> None:
    # A process whose address space is capped cannot import numpy: newlines are counted instead.
    db = AnchorDB(WORDS, engine)
    for seed in range(3):
        data = _log(seed + 20)
        ids, ends = db._raw(data)
        counted = anchordb._hits_counted(data, ids, ends, db)
        assert counted == db._hits_numpy(data, ids, ends) == db.hits(data)


#: Words with an end condition (``AnchorDB.ends``): a fixed message's anchor, and a word
#: that holds a regex metacharacter and a non-ASCII byte (Hyperscan compiles them as regexes).
ENDED = ["call", "Tr.e (é)", "gamma"]


def _occurrences(words: list[str], data: bytes) -> Iterator[tuple[int, int, int]]:
    """(word index, start, end) of every occurrence of each word in ``data``, by brute force."""
    for index, word in enumerate(words):
        needle = word.encode()
        at = data.find(needle)
        while at >= 0:
            yield index, at, at + len(needle)
            at = data.find(needle, at + 1)


def _row_of(data: bytes, at: int) -> tuple[int, int]:
    """(line index, line start) of offset ``at``."""
    return data.count(b"\n", 0, at), data.rfind(b"\n", 0, at) + 1


def _naive_ended(data: bytes) -> list[tuple[int, int, int]]:
    """(line, line start, word) of every hit of ``ENDED`` where its condition holds."""
    out = set()
    for index, at, end in _occurrences(ENDED, data):
        stop = data.find(b"\n", end)
        rest = data[end : len(data) if stop < 0 else stop]
        closer = rest[:1] in [bytes((b,)) for b in anchordb.CLOSER_BYTES]
        begins = rest[:1] in [bytes((b,)) for b in anchordb.START_BYTES]
        trailing = begins and not rest.strip(anchordb.TRAILING_BYTES)
        # A word of 2 has none: every hit counts.
        if index == 2 or closer or not rest or trailing:
            out.add((*_row_of(data, at), index))
    return sorted(out)


def _ended_log(seed: int) -> bytes:
    rng = random.Random(seed)
    pieces = [*ENDED, "x", "'", ")", " ", "\t", "\r", "\n", "\r\n", ".", "é", "\u3000", "\x1f"]
    spaces = " " * 40  # a run longer than the array walk's steps
    return "".join(rng.choice([*pieces, spaces]) for _ in range(3000)).encode()


@pytest.mark.parametrize("engine", _engines())
def test_a_word_with_an_end_condition_hits_only_where_it_ends_a_message(engine: str) -> None:
    db = AnchorDB(ENDED, engine, ends=b"\x01\x01\x00")
    for seed in range(5):
        data = _ended_log(seed)
        hits = db.hits(data, whole_words=False)
        got = list(zip(hits.lines, hits.line_starts, hits.words, strict=True))
        assert got == _naive_ended(data), seed
        ids, ends = db._raw(data)
        assert anchordb._hits_counted(data, ids, ends, db, whole_words=False) == hits
    tail = db.hits(b"a call\nb call x\nc call \r\nd (call) e\nf call", whole_words=False)
    assert tail.lines == [0, 2, 3, 4]  # the end of the buffer ends the last line
    for end in (b"call\r", b"call \t", b"call\r\r", b"call\xe3\x80\x80"):
        assert db.hits(b"x\n" + end, whole_words=False).lines == [1], end
        assert db.hits(b"x\n" + end + b"\n", whole_words=False).lines == [1], end
        assert db.hits(b"x\n" + end + b"\r\n", whole_words=False).lines == [1], end


def test_the_short_words_are_found_the_same_with_and_without_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    words = ["call", "cafe é", "é", "gamma", "long enough words", "tab\t", "x"]
    db = AnchorDB(words, "ahocorasick", ends=b"\x01\x01\x01\x00\x01\x01\x01")
    with_numpy = db._short_ended()
    assert [w for _i, w in with_numpy] == [b"call", b"x"]  # short, ended, no trailing byte

    def no_numpy() -> None:
        raise ImportError("capped")

    monkeypatch.setattr(anchordb, "_numpy", no_numpy)
    again = AnchorDB(words, "ahocorasick", ends=db.ends)
    assert again._short_ended() == with_numpy


def test_both_engines_give_the_same_hits_with_end_conditions(tmp_path: Path) -> None:
    engines = _engines()
    if len(engines) < 2:  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")
    path = tmp_path / "kb.sqlite3.recordanchors"
    assert anchordb.write_anchor_db(
        path, AnchorDB(ENDED, "hyperscan", ends=b"\x01\x01\x00"), "7", "v1"
    )
    loaded = anchordb.read_anchor_db(path, "7", "v1", "hyperscan")
    assert loaded.ends == b"\x01\x01\x00" and loaded.words == tuple(ENDED)
    fallback = AnchorDB(ENDED, "ahocorasick", ends=loaded.ends)
    for seed in range(5, 10):
        data = _ended_log(seed)
        assert loaded.hits(data, whole_words=False) == fallback.hits(data, whole_words=False)


#: Words with ``edges`` bits (``AnchorDB.hits``): a space before, after, both; two with none.
EDGED = ["side", "Pending:", "usage", "back", "call"]
EDGE_FLAGS = bytes(
    [anchordb.EDGE_BEFORE, anchordb.EDGE_AFTER, anchordb.EDGE_BEFORE | anchordb.EDGE_AFTER, 0, 0]
)


def _naive_edged(data: bytes) -> list[tuple[int, int, int]]:
    """(line, line start, word) of every hit of ``EDGED`` whose sides hold, by brute force."""
    out = set()
    for index, at, end in _occurrences(EDGED, data):
        before_ok = at == 0 or data[at - 1] in anchordb.EDGE_BYTES
        after_ok = end == len(data) or data[end] in anchordb.EDGE_BYTES
        flags = EDGE_FLAGS[index]
        if (before_ok or not flags & anchordb.EDGE_BEFORE) and (
            after_ok or not flags & anchordb.EDGE_AFTER
        ):
            out.add((*_row_of(data, at), index))
    return sorted(out)


def _edged_log(seed: int) -> bytes:
    rng = random.Random(seed)
    pieces = [*EDGED, "x", ":", " ", "\t", "\r\n", "\n", "é", "\u00a0", "\x1f", "'"]
    return "".join(rng.choice(pieces) for _ in range(3000)).encode()


@pytest.mark.parametrize("engine", _engines())
def test_a_word_with_edge_bits_hits_only_where_its_sides_hold(engine: str) -> None:
    db = AnchorDB(EDGED, engine)
    for seed in range(5):
        data = _edged_log(seed)
        hits = db.hits(data, whole_words=False, edges=EDGE_FLAGS)
        got = list(zip(hits.lines, hits.line_starts, hits.words, strict=True))
        assert got == _naive_edged(data), seed
        ids, ends = db._raw(data)
        counted = anchordb._hits_counted(data, ids, ends, db, False, EDGE_FLAGS)
        assert counted == hits, seed
        # Edges only take hits away: without them every hit of these words counts.
        assert len(db.hits(data, whole_words=False).words) > len(hits.words)
    # The buffer's or the line's edge, CRLF and a non-ASCII space count as a side's space.
    for text, lines in [
        (b"side", [0]),
        (b"xside\nside x\n\tside\n\xc2\xa0side", [1, 2, 3]),
        (b"usage\r\nx usage: 1\nusage", [0, 2]),
        (b"Pending:3\nPending: 3\nPending:", [1, 2]),
        (b"back:x\nxback", [0, 1]),
    ]:
        assert db.hits(text, whole_words=False, edges=EDGE_FLAGS).lines == lines, text


def test_bad_end_flags_are_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite3.anchordb"
    db = AnchorDB(ENDED, "ahocorasick", ends=b"\x01\x02\x00")  # a flag is 0 or 1
    assert anchordb.write_anchor_db(path, db, "7", "v1")
    assert _fault(path).fault is AnchorFault.CORRUPT


def test_the_stored_file_has_the_databases_permissions(tmp_path: Path) -> None:
    db_file = tmp_path / "kb.sqlite3"
    db_file.write_bytes(b"")
    db_file.chmod(0o640)
    path = db_file.with_name(db_file.name + ".recordanchors")
    assert anchordb.write_anchor_db(path, AnchorDB(WORDS, "ahocorasick"), "7", "v1")
    assert path.stat().st_mode & 0o777 == 0o640


def test_too_little_address_space_for_numpy_counts_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under an RLIMIT_AS too small for OpenBLAS's buffers, importing numpy would print "Memory
    # allocation still failed" and exit 1 ("nothing known"): errkb counts newlines instead.
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    monkeypatch.setattr(anchordb, "_address_space_left", lambda: 100 << 20)
    with pytest.raises(ImportError, match="RLIMIT_AS"):
        anchordb._numpy()
    used: list[bool] = []
    real = anchordb._hits_counted
    monkeypatch.setattr(
        anchordb, "_hits_counted", lambda *a, **k: used.append(True) or real(*a, **k)
    )
    db = AnchorDB(WORDS, _engines()[0])
    data = _log(7)
    assert db.hits(data).lines and used == [True]


def test_the_address_space_left_is_the_cap_less_what_is_mapped() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    left = anchordb._address_space_left()
    assert left == 1 << 62 if soft == resource.RLIM_INFINITY else 0 < left < soft


def test_newline_offsets_are_every_newline_across_slices() -> None:
    data = b"a\nbb\n\nccc" * 5_000_000  # 45 MB: several 8 MiB slices
    found = anchordb.newline_offsets(data)
    assert len(found) == data.count(b"\n")
    assert found[:3].tolist() == [1, 4, 5] and int(found[-1]) == data.rindex(b"\n")
    assert anchordb.newline_offsets(b"").tolist() == []


# ------------------------------------------------------------------ built at sync time (issue 21)
#: Inputs above 4 KiB are 'large' (the record-driven scan reads them), in a cheap test.
SMALL = Thresholds(scan_from=4097, paste_upto=4096)


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The anchor count of every Hyperscan database compiled (not loaded) from now on."""
    pytest.importorskip("hyperscan")  # CI installs errkb[fast]; Aho-Corasick has no image
    seen: list[int] = []
    real = anchordb.compile_images

    def counted(encoded: list[bytes], ends: bytes, first: int = 0) -> Iterator[tuple[bytes, bytes]]:
        seen.append(len(encoded))
        return real(encoded, ends, first)

    monkeypatch.setattr(anchordb, "compile_images", counted)
    return seen


def _synced(path: Path) -> None:
    """A knowledge base at ``path`` synced from the bundled dataset (closed)."""
    with errkb.open(path, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        assert kb.sync(DATASET).changed


def _files(db: Path) -> dict[str, Path]:
    from errkb.match.recordanchors import record_anchordb_path
    from errkb.match.scan import anchor_path

    return {
        "recordanchors": record_anchordb_path(db),
        "anchors": anchor_path(db),
    }


def _large_log() -> bytes:
    from tests.test_recordscan import _mixed_log

    return _mixed_log().encode()


def _damage(path: Path, damage: str) -> None:
    """Make the stored file at ``path`` missing, stale, truncated or corrupt."""
    image = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "stale":  # another state: "9" prefixed to the header's
        path.write_bytes(image.replace(beside.FORMAT + b" ", beside.FORMAT + b" 9", 1))
    elif damage == "truncated":
        path.write_bytes(image[: len(image) // 2])
    else:  # one byte of the body flipped (the image ends in padding: not there)
        middle = len(image) // 2
        path.write_bytes(image[:middle] + bytes([image[middle] ^ 0xFF]) + image[middle + 1 :])


def _explained(db: Path) -> dict[str, Any]:
    with errkb.open(db) as kb:
        kb.scan_engine = "hyperscan"
        report = kb.explain(_large_log(), thresholds=SMALL).to_dict()
        assert kb._engine._anchors is not None  # the record-driven scan read it
        return report


def test_a_sync_builds_every_anchor_file_for_its_state(db_target: str, compiles: list[int]) -> None:
    # SQLite: beside the file; PostgreSQL: beside its sync lock in the local data directory.
    with errkb.open(db_target, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        assert kb.sync(DATASET).changed
        assert compiles  # the sync compiled them, after its commit
        state, version = anchors_key(kb.store.meta_value)
        db = kb.path
    assert state is not None
    files = _files(db)
    assert all(p.is_file() for p in files.values())
    stored = anchordb.read_anchor_db(files["recordanchors"], state, version, "hyperscan")
    assert stored.words and not stored.compiled
    assert not [p for p in db.parent.iterdir() if p.name.endswith(".tmp")]
    compiles.clear()
    with errkb.open(db_target) as kb:  # another process's view: it loads them
        kb.scan_engine = "hyperscan"
        assert (
            kb.explain(_large_log(), thresholds=SMALL).matches and kb._engine._anchors is not None
        )
    assert compiles == []


def test_a_sync_that_compiles_the_records_again_builds_the_anchor_files_again(
    db_target: str, compiles: list[int], tmp_path: Path
) -> None:
    import json

    from published import build_tree

    records = [json.loads(p.read_text())["record"] for p in sorted(DATASET.glob("*.txt"))]
    tree = build_tree(tmp_path / "site", records, "2026-09-01T00:00:00.000Z")
    with errkb.open(db_target, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        assert kb.sync(tree).changed
        with kb.store.write() as tx:
            tx.set_meta("compiler", "0")  # what an older errkb noted
        compiles.clear()
        report = kb.sync(tree)  # the same version: nothing to apply, all to compile again
        assert report.recompiled and not report.changed
        assert compiles  # for the new state: the anchors come from the new specs
        state, version = anchors_key(kb.store.meta_value)
        db = kb.path
    assert state is not None
    stored = anchordb.read_anchor_db(_files(db)["recordanchors"], state, version, "hyperscan")
    assert stored.words


def test_explain_after_a_sync_compiles_nothing(tmp_path: Path, compiles: list[int]) -> None:
    db = tmp_path / "kb.sqlite3"
    _synced(db)
    compiles.clear()
    report = _explained(db)  # a new KnowledgeBase, as a new process would open it
    assert compiles == []
    assert any(m["confidence"] == "exact" for m in report["matches"])


def _src_and_ro(tmp_path: Path) -> tuple[Path, Path]:
    """A directory for the knowledge base and an empty one to mount it on, read-only."""
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    return src, ro


@contextlib.contextmanager
def _mounted_read_only(src: Path, ro: Path) -> Iterator[None]:
    """``src`` bind-mounted read-only on ``ro`` for the block (unmounted after it)."""
    from tests.test_store_readonly import _mount_read_only

    if not _mount_read_only(src, ro):
        pytest.skip("no read-only mount here")  # CI runs as root, which can mount
    try:
        yield
    finally:
        subprocess.run(["umount", str(ro)], check=False)


def test_a_read_only_knowledge_base_uses_the_sync_built_database(
    tmp_path: Path, compiles: list[int]
) -> None:
    src, ro = _src_and_ro(tmp_path)
    _synced(src / "kb.sqlite3")
    expected = _explained(src / "kb.sqlite3")
    before = sorted(p.name for p in src.iterdir())
    with _mounted_read_only(src, ro):
        compiles.clear()
        with errkb.open(ro / "kb.sqlite3") as kb:
            assert kb.read_only
        assert _explained(ro / "kb.sqlite3") == expected
        assert compiles == []
        assert sorted(p.name for p in ro.iterdir()) == before


@pytest.mark.parametrize("damage", ["missing", "stale", "truncated", "corrupt"])
def test_a_read_only_knowledge_base_without_a_good_file_compiles_in_memory_and_says_so_once(
    tmp_path: Path,
    compiles: list[int],
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    src, ro = _src_and_ro(tmp_path)
    _synced(src / "kb.sqlite3")
    expected = _explained(src / "kb.sqlite3")
    path = _files(src / "kb.sqlite3")["recordanchors"]
    _damage(path, damage)
    damaged = path.read_bytes() if path.exists() else None
    with _mounted_read_only(src, ro):
        compiles.clear()
        with errkb.open(ro / "kb.sqlite3") as kb, caplog.at_level("WARNING", "errkb"):
            kb.scan_engine = "hyperscan"
            assert kb.explain(_large_log(), thresholds=SMALL).to_dict() == expected
            assert kb.explain(_large_log(), thresholds=SMALL).to_dict() == expected
        assert len(compiles) == 1  # once, in memory, for the process
        said = [r.getMessage() for r in caplog.records if "anchor database" in r.getMessage()]
        assert len(said) == 1 and damage in said[0] and "read-only" in said[0]
        assert (path.read_bytes() if path.exists() else None) == damaged  # nothing written


def test_errkb_explain_on_a_read_only_kb_without_the_file_says_so_once_on_stderr(
    tmp_path: Path,
) -> None:
    from errkb.parse import regions
    from tests.test_recordscan import _mixed_log

    require_extra("hyperscan", "fast")  # the message it checks is Hyperscan's compile
    src, ro = _src_and_ro(tmp_path)
    _synced(src / "kb.sqlite3")
    _files(src / "kb.sqlite3")["recordanchors"].unlink()
    log = tmp_path / "big.log"
    log.write_bytes(_mixed_log(scale=150).encode())
    assert log.stat().st_size > regions.NARROW_ABOVE  # the record-driven scan reads it
    with _mounted_read_only(src, ro):
        # A process of its own: the warning goes where an unconfigured process logs, stderr.
        done = subprocess.run(
            [sys.executable, "-m", "errkb", "--db", str(ro / "kb.sqlite3"), "explain", str(log)],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "anchor database" in line]
    assert len(said) == 1 and "missing" in said[0] and "read-only" in said[0]


@pytest.mark.parametrize("damage", ["missing", "stale", "truncated", "corrupt"])
def test_a_writable_knowledge_base_rebuilds_a_bad_file_once(
    tmp_path: Path, compiles: list[int], damage: str
) -> None:
    db = tmp_path / "kb.sqlite3"
    _synced(db)
    expected = _explained(db)
    path = _files(db)["recordanchors"]
    image = path.read_bytes()
    _damage(path, damage)
    compiles.clear()
    assert _explained(db) == expected
    assert len(compiles) == 1 and path.read_bytes() == image  # rebuilt and stored
    assert _explained(db) == expected
    assert len(compiles) == 1  # the next process loads it


def test_ctrl_c_while_building_after_the_commit_says_the_sync_was_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.errors import SyncInterruptedError
    from errkb.match import recordanchors

    def interrupted(*_args: Any, **_kwargs: Any) -> None:
        raise KeyboardInterrupt

    db = tmp_path / "kb.sqlite3"
    with errkb.open(db, bundled=False) as kb:
        # Every build derives the maps from the rows first, whichever engine compiles.
        monkeypatch.setattr(recordanchors, "record_maps", interrupted)
        with pytest.raises(SyncInterruptedError, match="interrupted after the sync was applied"):
            kb.sync(DATASET)
        monkeypatch.undo()
        assert kb.stats().records > 0  # the version stands
    assert not _files(db)["recordanchors"].exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_interrupted_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    path = tmp_path / "kb.sqlite3.anchordb"

    def interrupted(_fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        anchordb.write_anchor_db(path, AnchorDB(WORDS, "ahocorasick"), "7", "v1")
    assert list(tmp_path.iterdir()) == []


#: Plain words, words holding a backslash or an ampersand (a repr's or an HTML page's escaped
#: form) and a word holding a quote: each gated one hits only on a line holding its byte.
ESCAPED = ["load", "can\\'t load", "a &amp; b", "x\\n", "gamma", "it's"]


def _escaped_log(seed: int) -> bytes:
    """Lines of plain pieces, one in five with gated ones among them."""
    rng = random.Random(seed)
    plain = ["load", "gamma", "can", "t load", " ", "x", "é", "s"]
    gated = [*plain, *ESCAPED, "\\", "&", "'", "can't load"]
    lines = [
        "".join(rng.choice(gated if n % 5 == 0 else plain) for _ in range(rng.randrange(9)))
        for n in range(600)
    ]
    return "\n".join(lines).encode()


def test_gated_words_compile_in_parts_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("hyperscan", "fast")
    assert [anchordb.gate_of(w.encode()) for w in ESCAPED] == [
        *(b"p", b"e", b"e", b"e", b"p", b"q")
    ]
    monkeypatch.setattr(anchordb, "CHUNK_WORDS", 2)
    words = [w.encode() for w in ESCAPED]
    gates = [gate for _image, gate in anchordb.compile_images(words, bytes(len(ESCAPED)))]
    assert gates == [b"p", b"e", b"e", b"q"]
    # A table whose letters do not name every image, or name no gate, is not one.
    payload = anchordb._join_images([(b"ab", b"p"), (b"c", b"e")])
    assert payload.startswith(b"2 2 1 pe\n")
    assert anchordb._split_images(payload) == [(b"ab", b"p"), (b"c", b"e")]
    for bad in (b"2 2 1 p\nabc", b"2 2 1 px\nabc", b"2 2 1\nabc", b"1 3 -\nabc", b"0 p\n"):
        with pytest.raises(RuntimeError, match="not a table"):
            anchordb._split_images(bad)


def test_gated_parts_scan_only_the_lines_that_hold_their_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if "hyperscan" not in _engines():  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")
    monkeypatch.setattr(anchordb, "CHUNK_WORDS", 2)  # parts: one plain, two "e", one "q"
    monkeypatch.setattr(anchordb, "GATE_LINE_BYTES", 8)  # a small log's lines gathered
    db = AnchorDB(ESCAPED, "hyperscan")
    fallback = AnchorDB(ESCAPED, "ahocorasick")
    for seed in range(6):
        data = _escaped_log(seed)
        for whole_words in (True, False):
            assert db.hits(data, whole_words=whole_words) == fallback.hits(
                data, whole_words=whole_words
            ), seed
        assert {1, 2, 3} & set(db.hits(data, whole_words=False).words)  # not vacuous
        assert 5 in db.hits(data, whole_words=False).words
        escapes = anchordb.gated_lines(data, anchordb.GATES[b"e"]).text
        quotes = anchordb.gated_lines(data, anchordb.GATES[b"q"]).text
        assert 0 < len(escapes) < len(data) / 3 and 0 < len(quotes) < len(data) / 3
        db.hits(data)
        assert db.scanned == len(data) + 2 * len(escapes) + len(quotes)  # work counted
    # Gated bytes at the buffer's edges, and a last line without its newline.
    for data in (b"\\can\\'t load", b"can\\'t load\\", b"x\nload &amp; a &amp; b", b"&", b"it's"):
        assert db.hits(data) == fallback.hits(data), data
    plain = b"load gamma\n" * 50
    db.hits(plain)
    assert db.scanned == len(plain)  # no gated byte: the gated parts scan nothing
    # Too many such lines to gather: the gated parts scan the whole input, same hits.
    monkeypatch.setattr(anchordb, "GATE_LINE_BYTES", 1_000_000)
    data = _escaped_log(9)
    assert anchordb.gated_lines(data, b"'").starts is None
    assert db.hits(data) == fallback.hits(data)
    assert db.scanned == 4 * len(data)
