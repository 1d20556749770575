"""The anchor database (errkb.match.anchordb): the buffer pass's automaton stored beside the KB."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from errkb.match import anchordb
from errkb.match.anchordb import AnchorDatabaseError, AnchorDB, AnchorFault

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
    for index, word in enumerate(words):
        needle = word.encode()
        at = data.find(needle)
        while at >= 0:
            end = at + len(needle)
            before = at > 0 and (data[at - 1] in word_byte or data[at - 1] >= 0x80)
            after = end < len(data) and (data[end] in word_byte or data[end] >= 0x80)
            if not before and not after:
                line_start = data.rfind(b"\n", 0, at) + 1
                out.add((data.count(b"\n", 0, at), line_start, index))
            at = data.find(needle, at + 1)
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
        pytest.fail("hyperscan is not installed: install errkb[fast] to compare the engines")
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


def _stored(tmp_path: Path, engine: str = "ahocorasick") -> Path:
    path = tmp_path / "kb.sqlite3.anchordb"
    assert anchordb.write_anchor_db(path, AnchorDB(WORDS, engine), "7", "v1")
    return path


def _fault(path: Path, state: str = "7", version: str | None = "v1") -> AnchorDatabaseError:
    with pytest.raises(AnchorDatabaseError) as info:
        anchordb.read_anchor_db(path, state, version, "ahocorasick")
    assert str(path) in str(info.value)
    return info.value


def test_a_missing_file_is_named_missing(tmp_path: Path) -> None:
    assert _fault(tmp_path / "none.anchordb").fault is AnchorFault.MISSING


def test_another_state_version_or_engine_is_stale(tmp_path: Path) -> None:
    path = _stored(tmp_path)
    error = _fault(path, state="8")
    assert error.fault is AnchorFault.STALE and "state 7" in str(error)
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
        pytest.fail("hyperscan is not installed")
    db = AnchorDB(WORDS, "hyperscan")
    # A well-formed file (its hash matches) around an image that is not a database.
    broken = AnchorDB(WORDS, "ahocorasick")
    broken.serialised = b"\x00" * 64
    image = anchordb.encode(broken, "7", "v1").replace(b" ahocorasick ", b" hyperscan ", 1)
    path = tmp_path / "kb.sqlite3.anchordb"
    path.write_bytes(image)
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
        counted = anchordb._hits_counted(data, ids, ends, db.words)
        assert counted == db._hits_numpy(data, ids, ends) == db.hits(data)


def test_the_stored_file_has_the_databases_permissions(tmp_path: Path) -> None:
    db_file = tmp_path / "kb.sqlite3"
    db_file.write_bytes(b"")
    db_file.chmod(0o640)
    path = anchordb.anchordb_path(db_file)
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
