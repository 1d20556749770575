"""The files beside the database (errkb.match.beside): untrusted input, one header, one writer.

Each test reproduces an attack of issue 50 (rows 5-8 and 15) on the three files a write
compiles beside the knowledge base (``<db>.recordanchors``, its ``.maps``, ``<db>.anchors``):
a 4 GiB file of zeros, a file copied from another knowledge base of the same dataset version,
a FIFO, a link at the path. Each must be refused from its header and size (never read whole,
never waited on), rebuilt by a writable knowledge base with one warning, and never written
through.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.explain import Thresholds
from errkb.match import beside
from errkb.match.beside import AnchorDatabaseError, AnchorFault, Stamp
from errkb.match.recordanchors import maps_path, record_anchordb_path
from errkb.match.scan import anchor_path

#: Inputs above 4 KiB are large: the scan reads them, with the files beside the database.
SMALL = Thresholds(scan_from=4097, paste_upto=4096)
STAMP = Stamp("recordanchors", "7.abcdef", "v1", "ahocorasick")


def _files(db: Path) -> dict[str, Path]:
    record = record_anchordb_path(db)
    return {"recordanchors": record, "maps": maps_path(record), "anchors": anchor_path(db)}


def _large_log() -> bytes:
    from tests.test_recordscan import _mixed_log

    return _mixed_log().encode()


def _explained(db: Path) -> dict[str, Any]:
    with errkb.open(db, thresholds=SMALL) as kb:
        report = kb.explain(_large_log())
        kb.prepare()  # the anchor table too
        return report.to_dict()


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A knowledge base of the bundled records, its files built, and its report of the log."""
    db = tmp_path / "kb.sqlite3"
    with errkb.open(db) as kb:
        kb.build_anchor_files()
    assert all(path.is_file() for path in _files(db).values())
    return db, _explained(db)


# ------------------------------------------------------------------------------ the format
def test_a_written_file_reads_back_and_its_header_names_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite3.x"
    assert beside.write(path, STAMP, b"body bytes", tmp_path / "kb.sqlite3")
    assert bytes(beside.read(path, STAMP, verify=True)) == b"body bytes"
    header = path.read_bytes().split(b"\n")[0].split(b" ")
    assert header[:7] == [b"errkb-beside", b"2", b"recordanchors", b"7.abcdef", b"v1",
                          b"ahocorasick", beside.platform_name().encode()]  # fmt: skip
    for other in (
        Stamp("anchors-1", "7.abcdef", "v1", "ahocorasick"),  # another kind of file
        Stamp("recordanchors", "7.fedcba", "v1", "ahocorasick"),  # another knowledge base
        Stamp("recordanchors", "7.abcdef", "v2", "ahocorasick"),
        Stamp("recordanchors", "7.abcdef", "v1", "hyperscan"),
    ):
        with pytest.raises(AnchorDatabaseError) as info:
            beside.read(path, other)
        assert info.value.fault is AnchorFault.STALE


def test_the_cheap_check_on_open_finds_a_changed_byte_the_whole_check_too(tmp_path: Path) -> None:
    path = tmp_path / "f"
    body = b"alpha\nbeta\n" * 100 + b"IMAGES" * 10
    assert beside.write(path, STAMP, body, tmp_path / "db", checked=1100)
    image = bytearray(path.read_bytes())
    image[len(image) - 2000] ^= 1  # a checked byte: the CRC-32 on every open
    path.write_bytes(bytes(image))
    with pytest.raises(AnchorDatabaseError, match="CRC-32"):
        beside.read(path, STAMP)
    image[len(image) - 2000] ^= 1
    image[-3] ^= 1  # an unchecked one (an engine's image): only the whole check sees it
    path.write_bytes(bytes(image))
    assert bytes(beside.read(path, STAMP))[-6:] != b"IMAGES"
    with pytest.raises(AnchorDatabaseError, match="sha256"):
        beside.read(path, STAMP, verify=True)


def test_a_file_cut_or_grown_is_refused_from_its_size(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert beside.write(path, STAMP, b"x" * 1000, tmp_path / "db")
    image = path.read_bytes()
    path.write_bytes(image[:-1])
    with pytest.raises(AnchorDatabaseError) as info:
        beside.read(path, STAMP)
    assert info.value.fault is AnchorFault.TRUNCATED
    path.write_bytes(image + b"\x00")
    with pytest.raises(AnchorDatabaseError) as info:
        beside.read(path, STAMP)
    assert info.value.fault is AnchorFault.CORRUPT


# ------------------------------------------------------------- rows 5 and 8: 4 GiB of zeros
def test_four_gib_of_zeros_is_refused_from_its_first_bytes(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite3.recordanchors"
    with path.open("wb") as fh:
        fh.truncate(4 << 30)  # sparse: no disk, reads as zeros
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for stamp in (STAMP, Stamp("recordmaps-6", "7.abcdef", "v1"), Stamp("anchors-1", "7", None)):
        with pytest.raises(AnchorDatabaseError) as info:
            beside.read(path, stamp)
        assert info.value.fault is AnchorFault.CORRUPT
    # Nothing was read past the header's bytes (a read of the body would be 4 GiB).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 64 << 10  # KiB


@pytest.mark.parametrize("name", ["recordanchors", "maps", "anchors"])
def test_a_file_of_zeros_at_each_path_is_rebuilt_with_one_warning(
    built: tuple[Path, dict[str, Any]], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    db, expected = built
    path = _files(db)[name]
    with path.open("wb") as fh:
        fh.truncate(4 << 30)
    with caplog.at_level("WARNING", "errkb"):
        assert _explained(db) == expected
    assert path.stat().st_size < 1 << 30  # rebuilt, not the zeros
    beside.read(path, _stamp(db, name))
    said = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(said) == 1 and "corrupt" in said[0] and "rebuilt" in said[0]


def _stamp(db: Path, name: str) -> Stamp:
    from errkb.match.anchordb import default_engine
    from errkb.store import anchors_key

    with errkb.open(db) as kb:
        key, version = anchors_key(kb.store.meta_value)
    kind = {"recordanchors": "recordanchors", "maps": "recordmaps-6", "anchors": "anchors-1"}
    engine = default_engine() if name == "recordanchors" else "-"
    return Stamp(kind[name], key, version, engine)


# ---------------------------------------------------- row 6: another knowledge base's files
def _one_record_db(tmp_path: Path, n: int) -> Path:
    from published import make_record

    source = tmp_path / f"record-{n}.jsonl"
    source.write_text(json.dumps(make_record(n, f"org/repo-{n}")) + "\n", encoding="utf-8")
    db = tmp_path / f"kb-{n}.sqlite3"
    with errkb.open(db, bundled=False) as kb:
        assert not kb.ingest([source]).problems  # one write: the same state counter in each
    return db


def test_files_copied_from_another_knowledge_base_are_never_used(tmp_path: Path) -> None:
    ours, theirs = _one_record_db(tmp_path, 1), _one_record_db(tmp_path, 2)
    message = "ValueError: Generated failure number 1 in layer 'x' of org/repo-1\n"
    data = b"".join(b"2026-12-01 INFO step %d ok\n" % k for k in range(400))
    data += message.encode() + data
    with errkb.open(ours, thresholds=SMALL) as kb:
        assert len(kb.explain(data).exact) == 1
        state = kb.store.meta_value("state")
    with errkb.open(theirs) as kb:
        assert kb.store.meta_value("state") == state  # the key once was this alone
    for name, path in _files(theirs).items():
        shutil.copyfile(path, _files(ours)[name])
    with errkb.open(ours, thresholds=SMALL) as kb:
        report = kb.explain(data)
    assert [m.lines for m in report.exact] == [(401,)]  # its own anchors, not theirs


# ------------------------------------------------------------------------ row 7: a FIFO
@pytest.mark.parametrize("name", ["recordanchors", "maps", "anchors"])
def test_a_fifo_at_a_path_is_refused_never_waited_on_and_replaced(
    built: tuple[Path, dict[str, Any]], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    db, expected = built
    path = _files(db)[name]
    path.unlink()
    os.mkfifo(path)  # no writer: an open that blocked would hang this test
    with pytest.raises(AnchorDatabaseError) as info:
        beside.read(path, _stamp(db, name))
    assert info.value.fault is AnchorFault.NOT_REGULAR
    with caplog.at_level("WARNING", "errkb"):
        assert _explained(db) == expected
    assert path.is_file() and not path.is_symlink()  # rebuilt, renamed over the FIFO
    said = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(said) == 1 and "not a regular file" in said[0]


# ------------------------------------------------------------- row 15: a link at the path
@pytest.mark.parametrize("name", ["recordanchors", "maps", "anchors"])
def test_a_link_at_a_path_is_never_written_through(
    built: tuple[Path, dict[str, Any]], name: str, tmp_path: Path
) -> None:
    db, expected = built
    path = _files(db)[name]
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(AnchorDatabaseError) as info:
        beside.read(path, _stamp(db, name))
    assert info.value.fault is AnchorFault.NOT_REGULAR
    assert _explained(db) == expected
    with errkb.open(db) as kb:
        kb.build_anchor_files()
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert path.is_file() and not path.is_symlink()


def test_a_read_only_knowledge_base_uses_the_rows_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.test_anchordb import _mounted_read_only

    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    with errkb.open(src / "kb.sqlite3") as kb:
        kb.build_anchor_files()
    expected = _explained(src / "kb.sqlite3")
    path = _files(src / "kb.sqlite3")["recordanchors"]
    path.unlink()
    os.mkfifo(path)
    with _mounted_read_only(src, ro), errkb.open(ro / "kb.sqlite3", thresholds=SMALL) as kb:
        assert kb.read_only
        with caplog.at_level("WARNING", "errkb"):
            assert kb.explain(_large_log()).to_dict() == expected
            kb.explain(_large_log())
    said = [r.getMessage() for r in caplog.records if "anchor database" in r.getMessage()]
    assert len(said) == 1 and "read-only" in said[0] and "not a regular file" in said[0]
    assert not path.is_file()  # a read-only knowledge base writes nothing
