"""The record-driven scan (errkb.match.recordscan): the same report as the region parse, bounded.

Every large plain-text input goes through two native passes (anchors, shapes) and the parser
only on windows around the lines they name. These tests compare it with the word-narrowed
region parse on the same input (``Thresholds`` whose ``scan_from`` no input reaches): the whole
report (matches, captures, lines, scores, unmatched entries, suggestions). The sizes are lowered
(``Thresholds``, passed in) so that both paths run on a few kilobytes in the default tier; one slow
test does the same above the real gate. The bounds on what a report keeps are counted, not
timed: entries kept, what ``omitted`` says was cut, the JSON valid against its schema.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.explain import DEFAULT_THRESHOLDS, Thresholds
from errkb.match import recordanchors, recordscan
from errkb.match.anchordb import ENGINES
from errkb.match.recordanchors import anchor_line, escaped_forms, record_anchordb_path
from errkb.match.recordscan import Limits, exception_of
from errkb.parse import regions
from errkb.records import schema_validator
from errkb.store import anchors_key
from tests.conftest import EXAMPLES, require_extra
from tests.test_wrapping import COMFY

MESSAGE = "Comfy INT8 layer '{p}' has incompatible weight/scale shapes: (4096, 4096) and (4096, 2)"
FILLER = "2026-12-01 10:00:{s:02d} INFO step {n} loss=0.41 lr=2.0e-04 weight and scale loaded\n"


@pytest.fixture(scope="module")
def rs_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("recordscan") / "kb.sqlite3") as kb:
        yield kb


#: Inputs above 4 KiB are 'large': both paths narrow, in a cheap test.
SMALL = Thresholds(scan_from=4097, paste_upto=4096)


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    """A knowledge base whose explain reads inputs above 4 KiB as large (``SMALL``)."""
    path = tmp_path_factory.mktemp("recordscan-small") / "kb.sqlite3"
    with errkb.open(path, thresholds=SMALL) as kb:
        yield kb


def regions_of(thresholds: Thresholds) -> Thresholds:
    """``thresholds`` with the scan never chosen: a large input goes to the region parse."""
    return dataclasses.replace(thresholds, scan_from=1 << 62)


def _filler(count: int, start: int = 0) -> str:
    return "".join(FILLER.format(s=n % 60, n=n) for n in range(start, start + count))


def _traceback(cls: str, message: str, prefix: str = "") -> str:
    return (
        f"{prefix}Traceback (most recent call last):\n"
        f'{prefix}  File "/srv/app/run.py", line 12, in main\n'
        f"{prefix}    load(model)\n"
        f'{prefix}  File "/srv/app/load.py", line 40, in load\n'
        f'{prefix}    raise {cls}(f"{{name}} failed")\n'
        f"{prefix}{cls}: {message}\n"
    )


def _mixed_log(scale: int = 1) -> str:
    """Every shape the scan must read as the parser does, between filler lines."""
    comfy = MESSAGE.format(p="blocks.3")
    quoted = MESSAGE.format(p="it's")
    parts = [
        _filler(40 * scale),
        _traceback("ValueError", comfy),
        _filler(30 * scale, 100),
        # A chain: the cause's traceback, the sentence, the wrapper quoting the cause.
        _traceback("ValueError", MESSAGE.format(p="attn.q")),
        "\nThe above exception was the direct cause of the following exception:\n\n",
        _traceback("RuntimeError", "Cannot load 'unet': " + MESSAGE.format(p="attn.q")),
        _filler(25 * scale, 200),
        # A prefix that changes per line (kubectl's timestamps) and an unknown exception.
        _traceback("KeyError", "'session_27'", "[pod/x-0/app] 2026-12-01T10:00:01Z "),
        _filler(20 * scale, 300),
        # A bare message after a separator, a JSON line holding one escaped, and a repr.
        f"2026-12-01 10:01:00 ERROR worker - failed; {MESSAGE.format(p='mlp.up')}\n",
        json.dumps({"level": "error", "msg": f"ValueError: {quoted}"}) + "\n",
        f"2026-12-01 10:01:02 ERROR errors=[ValueError({quoted!r})]\n",
        _filler(20 * scale, 400),
        _traceback("ZeroDivisionError", "division by zero"),
        _traceback("OSError", "[Errno 28] No space left on device"),
        "Traceback (most recent call last):\n"
        '  File "/srv/app/run.py", line 3, in <module>\n'
        "CannotInvert: matrix 7 is singular\n",
        _filler(30 * scale, 500),
        (EXAMPLES / "quanto-incompatible-scale.log").read_text(encoding="utf-8"),
        _filler(30 * scale, 600),
        (EXAMPLES / "comfy-int8-scale-shapes.log").read_text(encoding="utf-8"),
        _filler(10 * scale, 700),
    ]
    return "".join(parts)


def _counted_scans(monkeypatch: pytest.MonkeyPatch) -> list[recordscan.ScanCounts]:
    """Every ``record_scan``'s counts from now on, in order."""
    seen: list[recordscan.ScanCounts] = []
    real = recordscan.record_scan

    def counted(*args: Any, **kwargs: Any) -> recordscan.ScanCounts:
        counts = real(*args, **kwargs)
        seen.append(counts)
        return counts

    monkeypatch.setattr(recordscan, "record_scan", counted)
    return seen


def _both(
    kb: errkb.KnowledgeBase, data: str | bytes, thresholds: Thresholds | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report of ``data`` by the scan, and by the region parse (the test oracle)."""
    sizes = thresholds or kb.thresholds
    scanned = kb.explain(data, thresholds=sizes).to_dict()
    parsed = kb.explain(data, thresholds=regions_of(sizes)).to_dict()
    return scanned, parsed


def test_the_scan_gives_the_region_parse_s_report(small_kb: errkb.KnowledgeBase) -> None:
    data = _mixed_log().encode()
    scanned, parsed = _both(small_kb, data)
    assert scanned == parsed
    ids = {m["id"] for m in scanned["matches"] if m["confidence"] == "exact"}
    assert COMFY in ids and len(ids) >= 2
    assert {u["class"] for u in scanned["unmatched"]} >= {"KeyError", "ZeroDivisionError"}
    assert small_kb._engine._anchors is not None  # the scan ran, not the region parse


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_give_the_same_report(small_kb: errkb.KnowledgeBase, engine: str) -> None:
    if engine == "hyperscan":
        require_extra("hyperscan", "fast")
    data = _mixed_log().encode()
    small_kb.scan_engine = engine
    try:
        scanned = small_kb.explain(data).to_dict()
        assert small_kb._engine._anchors is not None and small_kb._engine._anchors.engine == engine
    finally:
        small_kb.scan_engine = None
    assert scanned == small_kb.explain(data).to_dict()


def test_a_str_input_reads_as_its_bytes(small_kb: errkb.KnowledgeBase) -> None:
    text = _mixed_log()
    assert small_kb.explain(text).to_dict() == small_kb.explain(text.encode()).to_dict()


def test_a_damaged_anchor_database_is_rebuilt(small_kb: errkb.KnowledgeBase) -> None:
    data = _mixed_log().encode()
    small_kb._engine._anchors = None  # built with the default engine and stored
    before = small_kb.explain(data).to_dict()
    path = record_anchordb_path(small_kb.path)
    assert path.is_file()
    image = path.read_bytes()
    path.write_bytes(image[: len(image) // 2])  # truncated
    small_kb.refresh()
    small_kb._engine._anchors = None  # a new process: reads the file
    assert small_kb.explain(data).to_dict() == before
    assert path.read_bytes() == image  # rebuilt and stored again


def test_the_scan_parses_only_windows_around_hit_lines(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _counted_scans(monkeypatch)
    data = _mixed_log(scale=20).encode()
    small_kb.explain(data)
    (counts,) = seen
    total = data.count(b"\n")
    # The filler (most of the log) is never parsed: the windows cover a small part of it.
    assert counts.window_lines < total // 5
    assert counts.shape_unmatched >= 2  # unknown tracebacks read straight from their lines


def test_anchors_and_their_escaped_forms() -> None:
    assert anchor_line("first line\n  the longest line here \nend") == "the longest line here"
    forms = escaped_forms('can\'t open "x" <file>')
    assert 'can\\\'t open "x" <file>' in forms  # a repr
    assert 'can\'t open \\"x\\" <file>' in forms  # a JSON string
    assert "can&#x27;t open &quot;x&quot; &lt;file&gt;" in forms  # HTML
    assert escaped_forms("plain words") == []
    # Not printable ASCII: JSON escapes a tab and (ensure_ascii) any non-ASCII letter.
    assert escaped_forms("tab\there") == ["tab\\there"]
    assert escaped_forms("café au lait") == ["caf\\u00e9 au lait"]


@pytest.mark.parametrize(
    ("line", "prefix", "expected"),
    [
        ("ValueError: bad value", None, ("ValueError", "bad value")),
        ("[pod/x] 10:00Z KeyError: 'k'", "[pod/x] 10:00Z ", ("KeyError", "'k'")),
        # The header's timestamp with other digits (GitHub Actions prints one per line).
        (
            "2024-07-08T16:59:07.1284290Z requests.exceptions.ReadTimeout: timed out",
            "2024-07-08T16:59:07.1266411Z ",
            ("requests.exceptions.ReadTimeout", "timed out"),
        ),
        ("2024-07-08T16:59:07 x ReadTimeout: timed out", "2024-07-08T16:59:07.1266411Z ", None),
        ("CannotInvert: singular", "", ("CannotInvert", "singular")),
        ("CannotInvert: singular", None, None),  # no error word, no traceback
        # Where the class begins is the prefix table's word, as the parser reads the line:
        ("2026-12-01 12:00:01 ERROR x - OSError: disk full", None, ("OSError", "disk full")),
        ("ERROR:root:ValueError: boom", None, ("ValueError", "boom")),
        ("[rank3]:ValueError: x", None, ("ValueError", "x")),
        # ... and a class after words no rule strips is no exception line (nor for the parser).
        ("2026-12-01 ERROR x - OSError: disk full", None, None),
        ("Error: plain words", None, None),
        ("just words here", None, None),
        ("just words here", "", None),
    ],
)
def test_exception_lines_outside_windows(
    line: str, prefix: str | None, expected: tuple[str, str] | None
) -> None:
    data = f"filler\n{line}\nmore\n".encode()
    assert exception_of(data, len("filler\n"), prefix) == expected


# --------------------------------------------------------------------------- bounded output
def _one_record_log(count: int) -> bytes:
    return "".join(
        _traceback("ValueError", MESSAGE.format(p=f"layer.{n}")) + FILLER.format(s=n % 60, n=n)
        for n in range(count)
    ).encode()


def test_distinct_captures_of_one_record_are_capped_with_exact_counts(
    small_kb: errkb.KnowledgeBase,
) -> None:
    data = _one_record_log(60)
    report = small_kb.explain(data, limits=Limits(matches_per_record=10, lines_per_entry=5))
    assert [m.id for m in report.exact] == [COMFY] * 10
    assert report.omitted is not None
    assert report.omitted.matches == 50 and report.omitted.match_occurrences == 50
    assert report.omitted.records == ((COMFY, 50),)
    out = report.to_dict()
    schema_validator("explanation.schema.json").validate(out)
    assert out["omitted"]["how"].startswith("counts are exact")
    everything = small_kb.explain(data, limits=None)
    assert len(everything.exact) == 60 and everything.omitted is None


def test_the_default_cuts_start_past_the_region_parse_s_gate(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scan reads from 256 KiB on, but a report of at most 1 MiB (every serving call's
    # text) was never cut and is not now: 300 distinct captures past the 200 a record keeps.
    data = _one_record_log(300)
    scans = _counted_scans(monkeypatch)
    # "from 256 KiB", a few KB here
    whole = small_kb.explain(data, thresholds=Thresholds(scan_from=4096, paste_upto=len(data)))
    assert len(scans) == 1 and len(whole.exact) == 300 and whole.omitted is None
    cut = small_kb.explain(data, thresholds=Thresholds(scan_from=4096, paste_upto=len(data) - 1))
    assert len(cut.exact) == 200 and cut.omitted is not None and cut.omitted.matches == 100


def test_distinct_unknown_exceptions_are_capped_with_exact_counts(
    small_kb: errkb.KnowledgeBase,
) -> None:
    data = "".join(
        _traceback("KeyError", f"'session_{n}'") + _traceback("KeyError", "'again'")
        for n in range(40)
    ).encode()
    report = small_kb.explain(data, limits=Limits(unmatched=8, lines_per_entry=5))
    assert len(report.unmatched) == 8
    again = next(u for u in report.unmatched if u.message == "'again'")
    assert again.occurrences == 40 and len(again.lines) == 5  # lines capped, count exact
    assert report.omitted is not None
    assert report.omitted.unmatched == 41 - 8
    assert report.omitted.lines == 35
    schema_validator("explanation.schema.json").validate(report.to_dict())


@pytest.mark.slow
def test_the_scan_matches_the_region_parse_above_the_real_gate(
    rs_kb: errkb.KnowledgeBase,
) -> None:
    data = _mixed_log(scale=400).encode()
    assert len(data) > DEFAULT_THRESHOLDS.paste_upto
    scanned, parsed = _both(rs_kb, data)
    assert scanned == parsed


def test_a_store_without_every_spec_row_keeps_the_region_parse(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "kb.sqlite3"
    data = _mixed_log().encode()
    with errkb.open(db, thresholds=SMALL) as kb:
        expected = kb.explain(data).to_dict()
    # A database written before migration 0006 (read-only, not reindexed) lacks spec rows:
    # the scan cannot know those records' anchors, so it must not run.
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM pattern_specs WHERE record_id = ?", (COMFY,))
    # The errkb that wrote such a database wrote no maps beside it (the file is keyed by the
    # state, which this edit behind errkb's back does not bump).
    recordanchors.maps_path(record_anchordb_path(db)).unlink()
    with errkb.open(db, thresholds=SMALL) as kb:
        report = kb.explain(data).to_dict()
        assert kb._engine._anchors is not None and not kb._engine._anchors.complete
    assert report == expected


@pytest.mark.slow
def test_the_cli_says_what_it_cut_and_all_lists_everything(tmp_path: Path) -> None:
    from tests.cli import run

    db = tmp_path / "kb.sqlite3"
    log = tmp_path / "big.log"
    data = _one_record_log(Limits().matches_per_record + 10)
    # Past a paste's size (``Thresholds.paste_upto``): the command line's report is cut.
    filler = _filler(1 + (DEFAULT_THRESHOLDS.paste_upto - len(data)) // 60).encode()
    log.write_bytes(data + filler)
    assert log.stat().st_size > DEFAULT_THRESHOLDS.paste_upto
    cut = run(db, "explain", "--format", "json", str(log))
    assert cut.exit_code == 0, cut.output
    out = json.loads(cut.stdout)
    assert len(out["matches"]) == Limits().matches_per_record
    assert out["omitted"]["matches"] == 10 and "--all" in out["omitted"]["how"]
    everything = json.loads(run(db, "explain", "--all", "--format", "json", str(log)).stdout)
    assert len(everything["matches"]) == Limits().matches_per_record + 10
    assert "omitted" not in everything


def test_every_backend_gives_each_live_record_s_anchor_row(db_target: str) -> None:
    with errkb.open(db_target) as kb, kb.store.snapshot() as view:
        rows = list(view.anchor_rows())
        stats = kb.stats()
    assert len(rows) == stats.records - stats.retired
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    by_id = {
        rid: (anchor, literals, regex, template) for rid, anchor, literals, regex, template in rows
    }
    anchor, literals, regex, template = by_id[COMFY]
    assert anchor is not None and anchor in template
    assert anchor in [lit.strip() for lit in literals]  # the longest literal, stripped
    assert regex.endswith("$") and template.startswith("Comfy INT8 layer")


def test_more_shape_lines_than_the_scan_holds_is_read_by_the_region_parse(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Millions of one-line tracebacks would cost the shape pass's per-line sets a gigabyte:
    # past its bound the region parse reads the input, and every occurrence is still counted.
    from errkb.match import recordscan

    data = b"ValueError: x\n" * 3000 + b"KeyError: 'last'\n"
    whole = small_kb.explain(data).to_dict()
    monkeypatch.setattr(recordscan, "_max_shape_lines", lambda read, size: 100)
    with pytest.raises(recordscan.TooManyShapes):
        recordscan.shape_lines(data, recordscan.line_index(data))
    bounded = small_kb.explain(data).to_dict()
    # Both cut the lines listed alike (the region parse's report is kept within the limits).
    assert "omitted" in whole and bounded["omitted"] == whole["omitted"]
    assert bounded["matches"] == whole["matches"] == []

    def counted(report: dict[str, Any]) -> list[tuple[str, int, list[int]]]:
        return [(u["class"], u["occurrences"], u["lines"][:1000]) for u in report["unmatched"]]

    assert counted(bounded) == counted(whole)
    assert counted(bounded)[0][:2] == ("ValueError", 3000)


def test_the_shape_pass_reads_in_chunks_and_finds_a_word_across_their_edge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from errkb.match import recordscan

    monkeypatch.setattr(recordscan, "_SHAPE_CHUNK", 64)
    data = b"x" * 60 + b"\nTraceback (most recent call last):\n" + b"y" * 100 + b"\nValueError: z\n"
    shapes = recordscan.shape_lines(data, recordscan.line_index(data))
    monkeypatch.setattr(recordscan, "_SHAPE_CHUNK", 1 << 20)
    assert shapes == recordscan.shape_lines(data, recordscan.line_index(data))
    assert list(shapes.headers) == [2] and 4 in shapes.exceptions


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_every_engine_finds_the_same_shapes(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    # Hyperscan reports where a literal ends, Aho-Corasick where it starts: the shape pass
    # gives the same lines either way, overlapping words and pytest's newline-led word too.
    from tests.test_shapes_corpus import SHAPES

    monkeypatch.setattr(recordscan, "_SHAPE_CHUNK", chunk)
    logs = [
        _mixed_log(scale=2).encode(),
        b"ValueError:Error:Exception:\nE   KeyError: 'k'\nE\n+-+---- 1 ----\nMESSAGE=x\n",
        "╭─ panel ╰─ end\nThe above exception was the direct cause of it\n".encode(),
        *((SHAPES / name).read_bytes() for name in _shapes_files()[::5]),
    ]
    engines = ["ahocorasick"]
    if importlib.util.find_spec("hyperscan") is not None:
        engines.append("hyperscan")
    for data in logs:
        found = [recordscan.shape_lines(data, recordscan.line_index(data), e) for e in engines]
        assert all(shapes == found[0] for shapes in found), data[:80]
    assert len(engines) == 2 or os.environ.get("ERRKB_REQUIRE_EXTRAS") != "1"


def test_an_unknown_exception_in_a_window_is_not_looked_up(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The unknown traceback printed right after a known one is in its window: no anchor hit
    # its line, so decide takes it as unmatched without a candidate look-up; the report is
    # still the region parse's.
    from errkb.match.matcher import IndexedMatcher

    data = (
        _filler(60)
        + _traceback("ValueError", MESSAGE.format(p="blocks.9"))
        + _traceback("KeyError", "'session_77'")
        + _filler(60, 100)
    ).encode()
    looked: list[str] = []
    real = IndexedMatcher.find

    def find(self: IndexedMatcher, text: str, among: Any = None) -> Any:
        looked.append(text)
        return real(self, text, among)

    monkeypatch.setattr(IndexedMatcher, "find", find)
    scanned = small_kb.explain(data).to_dict()
    assert looked and not any("session_77" in text for text in looked)
    scanned, parsed = _both(small_kb, data)
    assert scanned == parsed
    assert any("session_77" in text for text in looked)  # the region parse looks it up
    assert [u["class"] for u in scanned["unmatched"]] == ["KeyError"]
    assert [m["id"] for m in scanned["matches"] if m["confidence"] == "exact"] == [COMFY]


def test_a_stored_anchor_database_of_other_words_is_replaced(small_kb: errkb.KnowledgeBase) -> None:
    # Valid for this state, but not these rows' words (one missing, one duplicated in its
    # place: as many words): never scanned with, rebuilt from the rows and stored again.
    from errkb.match.anchordb import AnchorDB, read_anchor_db, write_anchor_db

    data = _mixed_log().encode()
    small_kb._engine._anchors = None
    before = small_kb.explain(data).to_dict()
    assert small_kb._engine._anchors is not None
    words = small_kb._engine._anchors.words
    path = record_anchordb_path(small_kb.path)
    with small_kb.store.snapshot() as view:
        state, version = anchors_key(view.meta_value)
    engine = small_kb._engine._anchors.engine
    write_anchor_db(path, AnchorDB((*words[:-1], words[0]), engine), state, version)
    small_kb._engine._anchors = None
    assert small_kb.explain(data).to_dict() == before
    assert read_anchor_db(path, state, version, engine).words == words


def test_a_window_beginning_inside_a_traceback_takes_in_all_of_it(
    small_kb: errkb.KnowledgeBase,
) -> None:
    # The known traceback's window opens one line before its header: on the exception line
    # of an unknown traceback printed right before it, whose class has no error word. Cut
    # there, the parser would see a bare "CannotInvert: ..." (no exception class on its own)
    # and the entry would be lost.
    data = (
        _filler(60)
        + _traceback("CannotInvert", "matrix 7 is singular")
        + _traceback("ValueError", MESSAGE.format(p="blocks.9"))
        + _filler(60, 100)
    ).encode()
    scanned, parsed = _both(small_kb, data)
    assert scanned == parsed
    assert [u["class"] for u in scanned["unmatched"]] == ["CannotInvert"]
    assert [m["id"] for m in scanned["matches"] if m["confidence"] == "exact"] == [COMFY]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"Traceback (most recent call last):", True),
        (b"    Traceback (most recent call last):\r", True),
        (b"[pod/x] Traceback (most recent call last):", False),  # a prefix may hold a message
        (b"Scheduler hit an exception: Traceback (most recent call last):", False),
        (b"  + Exception Group Traceback (most recent call last):", False),
    ],
)
def test_only_a_bare_traceback_header_opens_no_window(line: bytes, expected: bool) -> None:
    data = b"before\n" + line + b"\nafter\n"
    assert recordscan._bare_header(data, len(b"before\n")) is expected


def test_the_stored_maps_spare_reading_every_row_and_a_bad_file_is_rebuilt(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.store.sqlite import SqliteView

    data = _mixed_log().encode()
    small_kb._engine._anchors = None
    before = small_kb.explain(data).to_dict()
    path = recordanchors.maps_path(record_anchordb_path(small_kb.path))
    image = path.read_bytes()
    assert image.startswith(b"errkb-beside 2 " + recordanchors.MAPS_KIND.encode())
    read: list[int] = []
    real = SqliteView.anchor_rows

    def counted(self: SqliteView) -> Any:
        read.append(1)
        return real(self)

    monkeypatch.setattr(SqliteView, "anchor_rows", counted)
    small_kb._engine._anchors = None  # a new process: the maps are read, no row is
    assert small_kb.explain(data).to_dict() == before
    assert read == []
    with small_kb.store.snapshot() as view:
        state = anchors_key(view.meta_value)[0]
    damaged = {
        "truncated": image[: len(image) // 2],
        "altered": image[:-2] + bytes([image[-2] ^ 1]) + image[-1:],  # one literal byte
        "stale": image.replace(f" {state} ".encode(), b" 999999 ", 1),
        "not ours": b"garbage\n{}",
    }
    for name, bad in damaged.items():
        path.write_bytes(bad)
        small_kb._engine._anchors = None
        assert small_kb.explain(data).to_dict() == before, name
        assert path.read_bytes() == image, name  # derived from the rows again, and stored
    assert len(read) == len(damaged)


def test_a_batch_loads_its_candidates_specs_up_front_with_the_same_report(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.match import decide
    from errkb.match.matcher import IndexedMatcher
    from errkb.store.sqlite import SqliteView

    data = _mixed_log(scale=4).encode()
    queries: list[int] = []
    real = SqliteView.pattern_specs

    def counted(self: SqliteView, ids: Any) -> Any:
        queries.append(len(ids))
        return real(self, ids)

    monkeypatch.setattr(SqliteView, "pattern_specs", counted)
    # Decide's own batch prefetch: the scan's up-front load (tested below) left out.
    monkeypatch.setattr(IndexedMatcher, "load", lambda _self, _ids: False)
    reports = []
    for prefetch in (1 << 40, 1):  # never, then every batch
        monkeypatch.setattr(decide, "PREFETCH_EVENTS", prefetch)
        small_kb._engine._cache = None  # a new process: no spec loaded yet
        queries.clear()
        reports.append((small_kb.explain(data).to_dict(), len(queries)))
    (alone, each), (batched, once) = reports
    assert batched == alone
    assert 0 < once < each


def test_the_scan_reads_its_kept_lines_records_together_with_the_same_report(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Decide's batch prefetch off (small batches, as a dense log's windows come): without
    # the scan's up-front load each look-up reads its own one or two specs.
    from errkb.match import decide
    from errkb.match.matcher import IndexedMatcher
    from errkb.store.sqlite import SqliteView

    data = _mixed_log(scale=4).encode()
    queries: list[int] = []
    real = SqliteView.pattern_specs
    loads: list[int] = []
    real_load = IndexedMatcher.load

    def counted(self: SqliteView, ids: Any) -> Any:
        queries.append(len(ids))
        return real(self, ids)

    def load(self: IndexedMatcher, ids: Any) -> bool:
        loads.append(len(ids))
        return real_load(self, ids)

    monkeypatch.setattr(SqliteView, "pattern_specs", counted)
    monkeypatch.setattr(decide, "PREFETCH_EVENTS", 1 << 40)
    reports = []
    for loader in (lambda _self, _ids: False, load):
        monkeypatch.setattr(IndexedMatcher, "load", loader)
        small_kb._engine._cache = None  # a new process: no spec loaded yet
        queries.clear()
        reports.append((small_kb.explain(data).to_dict(), len(queries), sum(queries)))
    (alone, each, read_alone), (together, fewer, read_together) = reports
    assert together == alone
    assert sum(loads) > 0  # the kept lines named records
    assert 0 < fewer < each
    assert read_together >= read_alone - 1  # the same specs read, not fewer found


def test_a_load_larger_than_the_spec_cache_reads_nothing(rs_kb: errkb.KnowledgeBase) -> None:
    from errkb.match import matcher

    seen: list[int] = []
    with rs_kb.store.snapshot() as view:
        cache = matcher.SpecCache()
        indexed = matcher.IndexedMatcher(view, cache)
        real = view.pattern_specs

        def counted(ids: Any) -> Any:
            seen.append(len(ids))
            return real(ids)

        view.pattern_specs = counted  # type: ignore[method-assign]
        rid = COMFY
        assert not indexed.load([])
        assert not indexed.load([f"no-such-{n}" for n in range(matcher.SPEC_CACHE_MAX)])
        assert seen == []
        assert indexed.load([rid, rid]) and seen == [1] and cache.holds(rid)


def test_a_plain_hit_line_s_candidates_come_from_the_anchor_pass(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hit line the parser reads as it is: the records that passed its literal rejects are
    # its message's candidates (no index walk); one glued to a word before it ("xComfy")
    # matches the pattern mid-word, which the index does not list: the index is asked then,
    # and the report stays the region parse's.
    from errkb.match.matcher import IndexedMatcher

    plain = f"2026-12-01 10:01:00 ERROR worker - failed; {MESSAGE.format(p='mlp.up')}\n"
    glued = f"2026-12-01 10:01:01 ERROR worker - failed; x{MESSAGE.format(p='mlp.dn')}\n"
    data = (_filler(60) + plain + _filler(20, 100) + glued + _filler(60, 200)).encode()
    asked: list[str] = []
    real = IndexedMatcher.candidate_ids

    def candidate_ids(self: IndexedMatcher, text: str) -> list[str]:
        asked.append(text)
        return real(self, text)

    monkeypatch.setattr(IndexedMatcher, "candidate_ids", candidate_ids)
    scanned = small_kb.explain(data).to_dict()
    assert not any("mlp.up" in text for text in asked)
    assert any("mlp.dn" in text for text in asked)
    assert scanned == _both(small_kb, data)[1]
    exact = [m for m in scanned["matches"] if m["confidence"] == "exact"]
    # The glued one is no occurrence: the index, not the pattern, says so.
    assert [(m["id"], m["captures"]["prefix"], m["lines"]) for m in exact] == [
        (COMFY, "mlp.up", [61])
    ]


def _shapes_files() -> list[str]:
    from tests.test_shapes_corpus import EXPECTATIONS

    return sorted(EXPECTATIONS)


@pytest.mark.parametrize("name", _shapes_files())
def test_every_shapes_corpus_log_scans_as_the_region_parse_reads_it(
    rs_kb: errkb.KnowledgeBase, name: str
) -> None:
    # The gate so low that each file of the corpus (logs made by real renderers: rich panels,
    # exception groups, pytest blocks, containers, wrapped messages) is a "large" input: the
    # record scan's report is the region parse's, whole.
    from tests.test_shapes_corpus import SHAPES

    data = (SHAPES / name).read_bytes()
    scanned, parsed = _both(rs_kb, data, Thresholds(scan_from=257, paste_upto=256))
    assert scanned == parsed


#: Shapes-corpus logs whose pytest short-summary line (cut with "...") lies outside the scan's
#: windows: the region parse folds it into its traceback, the scan does not yet.
def test_the_region_parse_s_windows_are_found_from_a_quiet_line_on() -> None:
    # The windows around hard shapes are the region parse's own, worked out from the keyword
    # lines near them: for every keyword line of these logs, the same window as the region
    # parse's pass over the whole input gives.
    from tests.test_shapes_corpus import SHAPES

    logs = [_mixed_log(scale=3).encode(), _one_record_log(30)]
    logs += [(SHAPES / name).read_bytes() for name in _shapes_files()[::7]]
    for data in logs:
        whole = [
            [first, first + region.count(b"\n") - (0 if region.endswith(b"\n") else -1) - 1]
            for first, region in regions.error_regions(data)
        ]
        total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        shapes = recordscan.shape_lines(data, recordscan.line_index(data))
        tracebacks = recordscan._Tracebacks(data, shapes)
        spans = recordscan.hard_spans(data, shapes, tracebacks, shapes.keywords, total)
        merged: list[list[int]] = []
        for first, last in whole:
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        assert spans == merged


def test_a_hard_shape_s_window_is_read_whole_and_the_common_log_opens_none(
    rs_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rich panel (its message wrapped over the lines after the panel, no one line holding
    # the record's anchor with its literals) among the filler of a log above the real gate:
    # the panel's region is parsed and decided whole, as the region parse reads it; the same
    # log without it opens no such window.
    from tests.test_shapes_corpus import SHAPES

    seen = _counted_scans(monkeypatch)
    panel = (SHAPES / "rich_install_w80_comfy.log").read_text(encoding="utf-8")
    plain = _mixed_log()
    data = (_filler(50) + panel + plain).encode()
    scanned, parsed = _both(rs_kb, data, SMALL)
    assert scanned == parsed
    exact = [m for m in scanned["matches"] if m["confidence"] == "exact"]
    shift = 50
    assert any(m["id"] == COMFY and m["lines"] == [73 + shift] for m in exact)
    assert seen[0].hard_windows >= 1
    seen.clear()
    rs_kb.explain(plain.encode(), thresholds=SMALL)
    assert seen[0].hard_windows == 0 and seen[0].hard_lines == 0


def test_which_exception_lines_read_alone_only_the_parser_reads(
    small_kb: errkb.KnowledgeBase,
) -> None:
    small_kb.explain(_mixed_log().encode())  # the record anchors, built
    anchors = small_kb._engine._anchors
    assert anchors is not None
    comfy = MESSAGE.format(p="blocks.3")
    text = (
        f"ValueError: {comfy[:40]}\n{comfy[40:]}\n"  # 1: a known message wrapped mid-word
        "KeyError: 'k'\n2026-12-01 10:00:00 INFO the next record\n"  # 3: a record follows
        "    ValueError: indented\n\n"  # 5: the parser reads it by its block
        "TypeError: unknown\nsome more words here\n"  # 7: continues, but holds no anchor
        "ValueError: x\nValueError: y\n"  # 9: the next line is an event of its own
    )
    starts, at = {}, 0
    for number, line in enumerate(text.encode().splitlines(keepends=True), start=1):
        starts[number] = at
        at += len(line)
    lines = [(n, starts[n]) for n in (1, 3, 5, 7, 9, 10)]
    assert recordscan.wrapped_exceptions(text.encode(), lines, anchors) == [1, 5]


def test_prepare_loads_the_record_anchors_so_no_explain_does(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _mixed_log().encode()
    expected = small_kb.explain(data).to_dict()  # the files beside the knowledge base exist
    loads: list[int] = []
    real = recordanchors.RecordAnchors.__init__

    def counted(self: recordanchors.RecordAnchors, *args: Any, **kwargs: Any) -> None:
        loads.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(recordanchors.RecordAnchors, "__init__", counted)
    with errkb.open(small_kb.path, thresholds=SMALL) as kb:  # a serving process, at start
        kb.prepare()
        assert loads == [1]
        db = kb._engine._anchors.db if kb._engine._anchors is not None else None
        # The arrays the anchor pass derives from its words, derived now, not by a request.
        derived = (db._stop_at, db._lengths, db._short) if db is not None else ()
        assert derived and all(a is not None for a in derived)
        assert kb.explain(data).to_dict() == expected
        again = (db._stop_at, db._lengths, db._short)  # type: ignore[union-attr]
        assert all(now is then for now, then in zip(again, derived, strict=True))
        assert kb.prepare() is False  # the same state: nothing is loaded again
        assert loads == [1]


def test_the_cyclic_collector_rests_during_the_scan_and_resumes_after(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    seen: list[bool] = []
    real = recordscan.record_scan

    def watched(*args: Any, **kwargs: Any) -> recordscan.ScanCounts:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(recordscan, "record_scan", watched)
    assert gc.isenabled()
    report = small_kb.explain(_mixed_log().encode())
    assert report.exact and seen == [False]
    assert gc.isenabled()  # back on, as it was
    gc.disable()
    try:
        small_kb.explain(_mixed_log().encode())
        assert gc.isenabled() is False  # a caller's own choice is left as it was
    finally:
        gc.enable()


def test_a_log_with_a_few_shape_lines_a_kilobyte_stays_in_the_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dense bench log has about three shape lines a kilobyte; four copies of it (200 MB)
    # passed the old bound of one a kilobyte and went to the far slower region parse.
    monkeypatch.setattr(recordscan, "MIN_SHAPE_LINES", 100)
    line = b"2026-12-01 10:00:00 INFO step 1 loss=0.41 lr=2.0e-04 weight and scale loaded ok\n"
    dense = (line * 3 + b"ValueError: boom\n") * 150  # 150 shape lines in 40 KB
    assert len(dense) // 1000 < 150 <= len(dense) // recordscan.SHAPE_LINE_BYTES
    shapes = recordscan.shape_lines(dense, recordscan.line_index(dense))
    assert len(shapes.exceptions) == 150
    hostile = b"ValueError: x\n" * 2000  # a shape line every 14 bytes
    with pytest.raises(recordscan.TooManyShapes):
        recordscan.shape_lines(hostile, recordscan.line_index(hostile))


def test_a_flood_of_distinct_tracebacks_stays_in_the_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 21's bounded cases: tracebacks of distinct unknown exceptions, two shape lines
    # each, one per ~53 bytes (the denser of the two). Past the bound they went to the region
    # parse, which holds every distinct event at once (3.8 GB for 150,000 of them).
    monkeypatch.setattr(recordscan, "MIN_SHAPE_LINES", 100)
    flood = "".join(
        "Traceback (most recent call last):\n"
        f'  File "/srv/app/load.py", line {40 + n % 7}, in load\n'
        f"KeyError: 'session_{n}'\n"
        for n in range(399_000, 400_000)
    ).encode()
    assert len(flood) // 2_000 < 54  # as dense as the bench's 400,000 (42.3 MB, 800,000 lines)
    shapes = recordscan.shape_lines(flood, recordscan.line_index(flood))
    assert len(shapes.headers) == len(shapes.exceptions) == 1_000


def test_a_log_denser_at_its_start_keeps_the_allowance_of_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The per-48-bytes rule is judged on what has been read; a log whose first chunk is all
    # exception lines and whose rest is quiet keeps one line per 256 bytes of its whole size.
    monkeypatch.setattr(recordscan, "MIN_SHAPE_LINES", 100)
    monkeypatch.setattr(recordscan, "_SHAPE_CHUNK", 4096)
    dense = b"".join(b"KeyError: 'k%d'\n" % n for n in range(300))  # ~5 KB, 300 lines
    quiet = b"2026-12-01 10:00:00 INFO step ok, nothing to see here at all\n" * 2_000
    data = dense + quiet  # ~125 KB: 488 lines allowed by its size, 300 named
    assert len(dense) // recordscan.SHAPE_LINE_BYTES < 300 <= len(data) // 256
    shapes = recordscan.shape_lines(data, recordscan.line_index(data))
    assert len(shapes.exceptions) == 300
    with pytest.raises(recordscan.TooManyShapes):  # the same start, no quiet rest
        recordscan.shape_lines(dense * 8, recordscan.line_index(dense * 8))


def test_a_large_input_the_scan_hands_back_is_reported_within_the_limits(
    rs_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The region parse reads what the scan gives up (more shape lines than it holds); its
    # report is cut as the scan's is, every occurrence still counted.
    import functools

    body = "".join(
        f"2026-12-01 10:00:{n % 60:02d} ERROR worker - {MESSAGE.format(p=f'blocks.{n}.attn')}\n"
        + f"{'x' * 60} filler line {n}\n" * 40
        for n in range(400)
    )
    data = body.encode()
    assert len(data) > (1 << 20)  # past the region parse's gate: the default limits apply
    whole = rs_kb.explain(data, limits=None)
    assert len(whole.exact) == 400
    monkeypatch.setattr(recordscan, "_max_shape_lines", lambda _r, _s: 10)  # the scan gives up
    monkeypatch.setattr(recordscan, "Limits", functools.partial(recordscan.Limits, matches=7))
    cut = rs_kb.explain(data)
    assert len(cut.exact) == 7 and cut.omitted is not None
    assert cut.omitted.matches == 393
    assert sum(m.occurrences for m in cut.exact) + cut.omitted.match_occurrences == 400
    assert [m.id for m in cut.exact] == [COMFY] * 7
    # Within the limits it is the region parse's report as it was, entry for entry.
    roomy = recordscan.Limits(matches=1_000, matches_per_record=1_000)
    assert rs_kb.explain(data, limits=roomy).to_dict() == rs_kb.explain(data, limits=None).to_dict()


def test_an_exception_behind_a_timestamp_per_line_is_read_as_the_parse_reads_it(
    small_kb: errkb.KnowledgeBase,
) -> None:
    # GitHub Actions' timestamps: no line repeats the header's prefix, and the middle class of
    # this chain ends in no error word, so only the walk from its header finds its exception
    # line (a real CI log of 395 KB, shared/reallogs/drci's error_log1.txt, lost it once the
    # scan read it).
    from tests.test_regions import _timestamped_traceback

    filler = [f"2024-07-08T16:58:{n % 60:02d}.{n:07d}Z step {n} ok" for n in range(300)]
    chain = [
        *_timestamped_traceback("TimeoutError", "The read operation timed out", 1000000),
        "2024-07-08T16:59:07.1100000Z ",
        "2024-07-08T16:59:07.1100001Z During handling of the above exception, another "
        "exception occurred:",
        "2024-07-08T16:59:07.1100002Z ",
        *_timestamped_traceback("requests.exceptions.ReadTimeout", "Read timed out.", 2000000),
        "2024-07-08T16:59:07.1200000Z ",
        "2024-07-08T16:59:07.1200001Z The above exception was the direct cause of the "
        "following exception:",
        "2024-07-08T16:59:07.1200002Z ",
        *_timestamped_traceback("OSError", "We couldn't connect to the hub.", 3000000),
    ]
    data = ("\n".join(filler[:100] + chain + filler[100:]) + "\n").encode()
    scanned, parsed = _both(small_kb, data)
    assert scanned == parsed
    assert [(u["class"], u["line"]) for u in scanned["unmatched"]] == [
        ("TimeoutError", 118),
        ("requests.exceptions.ReadTimeout", 139),
        ("OSError", 160),
    ]


def test_an_input_large_enough_for_the_anchor_table_is_scanned_as_the_whole_parse_reads_it(
    rs_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From 256 KiB (``scan_from``) the scan reads it, not only past a paste's 1 MiB.
    scan_from = DEFAULT_THRESHOLDS.scan_from
    data = _mixed_log(scale=40).encode()
    assert scan_from <= len(data) <= DEFAULT_THRESHOLDS.paste_upto
    scans = _counted_scans(monkeypatch)
    scanned, parsed = _both(rs_kb, data)
    assert len(scans) == 1 and scans[0].anchor_lines > 0
    assert scanned == parsed
    small = data[: scan_from - 1]
    small = small[: small.rindex(b"\n") + 1]
    rs_kb.explain(small)
    assert len(scans) == 1  # a smaller input is parsed whole


def test_a_large_scan_gives_the_heap_back_once_and_a_small_input_never(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.match import anchordb

    calls: list[int] = []
    data = (_filler(200) + _traceback("ValueError", MESSAGE.format(p="blocks.2"))).encode()
    small_kb.explain(data)  # the anchors built (their compile gives the heap back too)
    monkeypatch.setattr(anchordb, "release_heap", lambda: calls.append(1))
    sizes = dataclasses.replace(SMALL, release_from=len(data))
    scanned = small_kb.explain(data, thresholds=sizes)
    assert calls == [1]
    small_kb.explain(data[:-1], thresholds=sizes)  # a byte smaller: nothing given back
    assert calls == [1]
    assert [m.id for m in scanned.exact] == [COMFY]


def _one_record_kb(tmp_path: Path, template: str, n: int) -> tuple[Path, dict[str, Any]]:
    """A knowledge base holding one generated record whose message template is ``template``."""
    from published import make_record

    from errkb.records import upstream

    repo = f"org/one-{n}"
    record = make_record(n, repo)
    record["errorMessage"] = template
    record["messagePattern"] = upstream.message_pattern(template)
    record["id"] = upstream.record_id(repo, None, template, record["filePath"])
    record["slug"] = upstream.slug(None, template)
    source = tmp_path / "record.jsonl"
    source.write_text(json.dumps(record) + "\n", encoding="utf-8")
    path = tmp_path / "kb.sqlite3"
    with errkb.open(path, bundled=False) as kb:
        assert not kb.ingest([source]).problems
    return path, record


def test_a_literal_after_a_line_break_opens_a_window_only_where_it_begins_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A record printed over two lines whose second begins with ``graph: ``; sglang's decode
    # lines say ``cuda graph: True`` in mid-line, here next to error words on every other
    # line. Only a line that begins with it is kept (the message's own second line): the
    # same report as the region parse, and the decode lines open no window.
    path, _record = _one_record_kb(tmp_path, "{usage}\ngraph: %s", 5)
    decode = "[2026-08-28 05:00:{s:02d} TP0] Decode batch. #running-req: 3, cuda graph: True\n"
    noisy = "".join(
        decode.format(s=n % 60) + f"2026-08-28 05:00:{n % 60:02d} WARNING retry {n} failed\n"
        for n in range(400)
    )
    message = "Traceback (most recent call last):\n" + '  File "/srv/run.py", line 3, in main\n'
    message += "SystemExit: usage: run.py [-h]\ngraph: fp8\n"
    data = (noisy + message + noisy).encode()
    with errkb.open(path, bundled=False, thresholds=SMALL) as kb:
        seen = _counted_scans(monkeypatch)
        scanned, parsed = _both(kb, data)
    assert scanned == parsed
    assert [u["message"] for u in scanned["unmatched"]] == ["usage: run.py [-h]"]
    assert seen[0].anchor_lines == 1  # the message's second line, of 801 holding the anchor
    assert seen[0].window_lines <= 10  # its traceback, not the decode lines around it


def test_an_exception_line_no_record_can_match_alone_opens_no_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``Error: %r`` holds its one literal on every ``SomethingError: ...`` line; the unknown
    # tracebacks whose message is no repr are read from their exception line, as any unknown
    # one outside the windows, and the report is the region parse's. A repr after ``Error: ``,
    # a quote on the line (its message may end before it) and a message the next line
    # continues still reach the parser.
    path, record = _one_record_kb(tmp_path, "Error: %r", 6)
    unknown = "".join(
        _filler(3, 10 * n) + _traceback("TimeoutError", f"Timed out waiting for batch {n}")
        for n in range(60)
    )
    known = _traceback("ValueError", "Error: 'shard_7'")
    quoted = _traceback("RuntimeError", "Worker failed: ValueError(\"Error: 'x'\")")
    wrapped = _traceback("TimeoutError", "Timed out waiting for batch 99 on Error:")
    wrapped += "    'shard_9'\n"
    quiet = _filler(60)  # a region of the parse ends in a quiet stretch
    data = (unknown + quiet + known + quiet + quoted + quiet + wrapped + quiet).encode()
    with errkb.open(path, bundled=False, thresholds=SMALL) as kb:
        seen = _counted_scans(monkeypatch)
        scanned = kb.explain(data, limits=None).to_dict()
        parsed = kb.explain(data, limits=None, thresholds=regions_of(SMALL)).to_dict()
    assert scanned == parsed
    # ``Error: %r`` is generic: its matches are possible ones (no frame in its file), found
    # and captured the same on both routes.
    found = [m for m in scanned["matches"] if m["confidence"] != "similar"]
    assert {m["id"] for m in found} == {record["id"]}
    assert {m["confidence"] for m in found} == {"possible"}
    assert sorted(m["captures"]["arg1"] for m in found) == ["shard_7", "shard_9", "x"]
    counts = seen[0]
    assert counts.shape_unmatched >= 60  # the unknown tracebacks, read from their lines
    assert counts.window_lines < 40  # the known, quoted and wrapped ones' tracebacks alone


def _match(rid: str, confidence: str, line: int) -> Any:
    from errkb.report import Confidence, ExceptionInfo, Match

    return Match(
        id=rid,
        slug=rid,
        confidence=Confidence(confidence),
        score=0.9 if confidence == "exact" else 0.6,
        captures=(("x", str(line)),) if confidence == "possible" else (),
        occurrences=1,
        lines=(line,),
        exception=ExceptionInfo("ValueError", "m"),
        record={},
    )


def test_folded_possible_matches_never_take_an_answers_place() -> None:
    folded = recordscan.Folded(Limits(matches=2))
    folded.add_matches([_match(f"{n:016x}", "possible", n) for n in range(1, 5)])
    folded.add_matches([_match("a" * 16, "exact", 9), _match("b" * 16, "exact", 10)])
    matches, _unmatched, omitted = folded.result()
    assert [m.confidence.value for m in matches] == ["exact", "exact", "possible", "possible"]
    assert omitted is not None and omitted.matches == 2  # the two possible ones past the limit


def test_folded_an_exact_occurrence_makes_a_possible_match_exact() -> None:
    from dataclasses import replace

    folded = recordscan.Folded(Limits())
    first = _match("c" * 16, "possible", 3)
    folded.add_matches([first])
    folded.add_matches([replace(first, confidence=first.confidence.EXACT, lines=(7,))])
    (m,), _u, _o = folded.result()
    assert m.confidence.value == "exact" and m.lines == (3, 7) and m.occurrences == 2


def test_folded_a_cut_summary_line_is_one_more_occurrence_of_what_it_repeats() -> None:
    folded = recordscan.Folded(Limits())
    long = "Comfy INT8 layer 'blk.0' has incompatible weight/scale shapes"
    folded.add_unmatched([recordscan.Unmatched("ValueError", long, 5, lines=(5,))])
    assert folded.add_copy("ValueError", long[:40], 9)  # pytest cut it at its width
    assert not folded.add_copy("KeyError", long[:40], 10)  # another class: its own exception
    assert not folded.add_copy("ValueError", long[:10], 11)  # too short to tell
    _m, (entry,), _o = folded.result()
    assert (entry.lines, entry.occurrences) == ((5, 9), 2)


def test_folded_counts_the_distinct_entries_it_cuts_in_8_bytes_each() -> None:
    # Issue 50, row 14: a set of every cut entry's hash held ~60 bytes an entry; the hashes
    # are an array made distinct as it grows, and the count stays exact.
    from errkb.report import Unmatched

    folded = recordscan.Folded(Limits(unmatched=10))
    distinct = 70_000
    batch: list[Unmatched] = []
    for k in range(200_000):
        batch.append(Unmatched("ValueError", f"m{k % distinct}", k + 1, lines=(k + 1,)))
        if len(batch) == 5000:
            folded.add_unmatched(batch)
            batch = []
    folded.add_unmatched(batch)
    _, unmatched, truncation = folded.result()
    assert len(unmatched) == 10 and truncation is not None
    assert truncation.unmatched == distinct - 10
    assert truncation.unmatched_occurrences == 200_000 - sum(u.occurrences for u in unmatched)
    assert len(folded._cut_unmatched._held) < 2 * distinct  # not one hash per cut line (190k)


def test_distinct_hashes_past_what_it_holds_are_counted_exactly_from_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 50, row 14: a gigabyte of distinct cut lines would hold 8 bytes each; past
    # ``HELD`` the hashes go out to files by part, and the count stays exact.
    import random

    pytest.importorskip("numpy")
    monkeypatch.setattr(recordscan.DistinctHashes, "HELD", 5000)
    counter = recordscan.DistinctHashes()
    rng = random.Random(7)
    values = [rng.getrandbits(64) - (1 << 63) for _ in range(200_000)]
    most, added = 0, set()
    for k in range(300_000):
        value = values[k % len(values)] if k % 3 else values[(k * 7) % 1000]
        counter.add(value)
        added.add(value)
        most = max(most, len(counter._held))
    assert counter._spilled is not None and most < 150_000  # never all of them at once
    folder = counter._spilled.name
    assert counter.count() == len(added) > 150_000 and counter.added == 300_000
    assert not os.path.exists(folder)  # the files are gone once counted
    assert counter.count() == len(added)
    # With no temporary folder to write to, the hashes stay in memory and the count is exact.
    import tempfile

    monkeypatch.setattr(tempfile, "TemporaryDirectory", _refused)
    unwritable = recordscan.DistinctHashes()
    for value in values:
        unwritable.add(value)
    assert unwritable._spilled is None and unwritable.count() == len(set(values))


def _refused(*args: object, **kwargs: object) -> None:
    raise PermissionError("read-only temporary folder")


def test_folded_suggests_only_for_exceptions_some_plain_occurrence_left_unmatched() -> None:
    # ``decide``'s rule on every route: an exception only possible matches explain is listed
    # with them and gets no suggestions; the scan folds batches, so the flag travels.
    from errkb.report import Unmatched

    folded = recordscan.Folded(Limits())
    folded.add_unmatched(
        [
            Unmatched("RuntimeError", "wrapped: inner", 3, lines=(3,), possible=True),
            Unmatched("KeyError", "'k'", 5, lines=(5,)),
            Unmatched("OSError", "disk", 7, lines=(7,), possible=True),
        ]
    )
    folded.add_unmatched([Unmatched("OSError", "disk", 9, lines=(9,))])  # a plain one, later
    asked = [(e.exc_class, e.message, e.lines) for e in folded.unmatched_events(10)]
    assert asked == [("KeyError", "'k'", (5,)), ("OSError", "disk", (7,))]
    _, unmatched, _ = folded.result()
    assert [u.message for u in unmatched] == ["wrapped: inner", "'k'", "disk"]  # all listed


# ---------------------------------------------------------------------------- segments
def _row14_lines(count: int, start: int = 0) -> str:
    """Distinct exception-like lines (issue 50, row 14's shape: every line a shape line)."""
    classes = ("ValueError", "RuntimeError", "KeyError", "OSError")
    return "".join(
        f"{classes[k % 4]}: worker {k} failed while loading shard {k * 7 % 1000}\n"
        for k in range(start, start + count)
    )


def _segmented_log() -> bytes:
    """Every shape of ``_mixed_log`` several times over, and runs with no quiet line in them."""
    parts = [_mixed_log(), _row14_lines(300), _mixed_log(2), _row14_lines(200, 300)]
    # A header every few lines and error words on the rest: no clean or calm cut anywhere.
    busy = "".join(
        f"ERROR step {n} failed\n" if n % 4 else f"[w{n}] Traceback (most recent call last):\n"
        for n in range(400)
    )
    return "".join([*parts, busy, _mixed_log()]).encode()


@pytest.mark.parametrize("segment", [4096, 5000, 11000])
def test_a_segmented_scan_reports_what_the_whole_scan_does(
    small_kb: errkb.KnowledgeBase, segment: int
) -> None:
    # Issue 50, row 14: a large input is scanned a segment at a time so the per-line arrays
    # are a segment's; its report is the whole scan's, line numbers and cuts included.
    data = _segmented_log()
    whole = small_kb.explain(data, thresholds=dataclasses.replace(SMALL, segment=0))
    cut = dataclasses.replace(SMALL, segment=segment)
    assert len(data) > 10 * segment
    assert small_kb.explain(data, thresholds=cut).to_dict() == whole.to_dict()
    unlimited = small_kb.explain(data, thresholds=cut, limits=None)
    assert unlimited.to_dict() == small_kb.explain(data, thresholds=SMALL, limits=None).to_dict()
    assert {m.id for m in whole.exact} >= {COMFY} and len(whole.unmatched) > 500


def test_every_shapes_corpus_log_scans_in_segments_as_it_does_whole(
    rs_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The corpus's plain-text files one after another (a traceback every few lines), cut
    # every 64 KiB: each cut lands at a quiet line within its search, so the report is the
    # whole scan's. (Cut every 16 KiB, a search of 8 KiB finds none in some places.)
    from errkb.explain.routes import Route, choose_route
    from tests.test_shapes_corpus import SHAPES

    sizes = Thresholds(scan_from=257, paste_upto=256, segment=0)
    files = [(SHAPES / name).read_bytes() for name in _shapes_files()]
    data = b"\n".join(f for f in files if choose_route(f, sizes)[0] is Route.SCAN)
    assert choose_route(data, sizes)[0] is Route.SCAN and len(data) > 5 * 65536
    whole = rs_kb.explain(data, thresholds=sizes).to_dict()
    passes = _counted_passes(monkeypatch)
    cut = dataclasses.replace(sizes, segment=65536)
    assert rs_kb.explain(data, thresholds=cut).to_dict() == whole
    assert len(passes) > 5


def _counted_passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(bytes, exception lines) of every segment's passes from now on."""
    passes: list[tuple[int, int]] = []
    real = recordscan._passes

    def counted(piece: bytes, anchors: recordanchors.RecordAnchors) -> Any:
        scan = real(piece, anchors)
        passes.append((len(piece), len(scan.shapes.exceptions)))
        return scan

    monkeypatch.setattr(recordscan, "_passes", counted)
    return passes


def test_a_segment_s_arrays_are_its_own_not_the_input_s(
    small_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a segment's passes hold is counted: each reads at most a segment (and a line), the
    # shape lines of none is more than its share, and every line is read once.
    data = _row14_lines(6000).encode()  # ~380 KB, every line a shape line
    passes = _counted_passes(monkeypatch)
    segment = 16384
    report = small_kb.explain(data, thresholds=dataclasses.replace(SMALL, segment=segment))
    assert len(passes) >= len(data) // segment
    assert max(size for size, _ in passes) <= segment + 100
    assert sum(lines for _, lines in passes) == 6000
    assert report.omitted is not None and report.omitted.unmatched == 6000 - len(report.unmatched)
    assert [u.line for u in report.unmatched] == list(range(1, len(report.unmatched) + 1))


def _anchors_of(kb: errkb.KnowledgeBase) -> recordanchors.RecordAnchors:
    kb.explain(_mixed_log(), thresholds=SMALL)  # the scan builds them
    anchors = kb._engine._anchors
    assert anchors is not None
    return anchors


def test_a_cut_falls_at_a_quiet_line_not_inside_a_traceback(small_kb: errkb.KnowledgeBase) -> None:
    anchors = _anchors_of(small_kb)
    before = _filler(200).encode()
    long_traceback = _traceback("ValueError", MESSAGE.format(p="x")).encode()
    data = before + long_traceback * 3 + _filler(200, 300).encode()
    size = len(before) + len(long_traceback)  # the nominal end inside the tracebacks
    segments = recordscan.cuts(data, size, anchors)
    assert [s[0] for s in segments[1:]] == [s[1] for s in segments[:-1]]
    assert segments[0][0] == 0 and segments[-1][1] == len(data)
    stop = segments[0][1]
    assert data[stop - 1 : stop] == b"\n" and stop < len(before)  # before the first header
    quiet = data[:stop].splitlines()[-recordscan.QUIET_LINES :]
    assert all(b"Error" not in line and b"Traceback" not in line for line in quiet)


def test_a_cut_through_exception_lines_is_calm_and_else_farthest_from_any_shape(
    small_kb: errkb.KnowledgeBase,
) -> None:
    anchors = _anchors_of(small_kb)
    dense = _row14_lines(400).encode()  # no quiet line, no traceback: calm at the nominal end
    nominal = len(dense) // 2
    stop = recordscan.cuts(dense, nominal, anchors)[0][1]
    assert stop == dense.index(b"\n", nominal - 1) + 1
    headers = b"".join(
        b"ERROR %d failed\n" % n if n % 12 else b"Traceback (most recent call last):\n"
        for n in range(2000)
    )
    nominal = len(headers) // 2
    stop = recordscan.cuts(headers, nominal, anchors)[0][1]
    assert stop == headers.index(b"\n", nominal - 1) + 1  # neither clean nor calm: forced
    # A few plain lines, too few for a clean cut: the cut falls in their middle.
    plain = b"".join(b"INFO step %d\n" % n for n in range(5))
    gap = headers.index(b"ERROR 908 failed\n")  # past the reach of the traceback at 900
    mixed = headers[:gap] + plain + headers[gap:]
    stop = recordscan.cuts(mixed, nominal, anchors)[0][1]
    assert mixed[stop:].startswith((b"INFO step 2\n", b"INFO step 3\n"))
    segments = recordscan.cuts(headers, 1000, anchors)
    assert [s[0] for s in segments[1:]] == [s[1] for s in segments[:-1]]
    assert segments[0][0] == 0 and segments[-1][1] == len(headers)


@pytest.mark.slow
def test_memory_past_the_input_does_not_grow_with_it_in_segments(tmp_path: Path) -> None:
    # Issue 50, row 14: exception-like lines held about 72 bytes a line past the input (2.1 GB
    # for 1,000 MiB). In segments, what an explain adds to the input it holds is the same for
    # 6 and 24 MiB, but for the cut entries' hashes (8 bytes a distinct line).
    import subprocess
    import sys

    script = f"""
import json, resource, sys
import errkb
from errkb.explain import Thresholds
kb = errkb.open({str(tmp_path / "kb.sqlite3")!r}, thresholds=Thresholds(segment=int(sys.argv[2])))
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = kb.explain(data)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"cut": report.omitted.unmatched, "extra_kib": after - before}}))
"""
    with errkb.open(tmp_path / "kb.sqlite3"):
        pass  # made here: its first sync is no part of either peak
    extra = {}
    for mib in (6, 24):
        log = tmp_path / f"{mib}.log"
        log.write_text(_row14_lines((mib << 20) // 64), encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-c", script, str(log), str(2 << 20)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(proc.stdout)
        assert result["cut"] == (mib << 20) // 64 - 2000  # every distinct line counted
        extra[mib] = result["extra_kib"]
    lines = ((24 - 6) << 20) // 64
    assert extra[24] - extra[6] < lines * 24 // 1024, extra  # KiB, not 72 bytes a line


def test_the_message_first_pass_reads_every_segment_s_uncovered_lines(
    small_kb: errkb.KnowledgeBase,
) -> None:
    # Nothing exact in any window: the message-first pass runs once, at the end, over the hit
    # lines no event covered in every segment, numbered as the whole input.
    lines = [_filler(300), f"[worker 3] {MESSAGE.format(p='a.b')}\n", _filler(300, 300)]
    lines += [f"[worker 5] {MESSAGE.format(p='c.d')}\n", _filler(300, 600)]
    data = "".join(lines).encode()
    whole = small_kb.explain(data, thresholds=dataclasses.replace(SMALL, segment=0))
    found = [(m.captures, m.lines) for m in whole.matches if m.id == COMFY]
    assert [lines for _c, lines in found] == [(301,), (602,)]
    for segment in (8192, 20000):
        cut = small_kb.explain(data, thresholds=dataclasses.replace(SMALL, segment=segment))
        assert cut.to_dict() == whole.to_dict()
