"""The record anchors (errkb.match.recordanchors): their flat maps, end conditions and rejects."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from errkb.match import anchordb, recordanchors
from errkb.match.recordanchors import RecordAnchors, maps_path, read_maps, record_maps
from errkb.records.patterns import re2_escape
from errkb.store.interface import AnchorRow
from tests.conftest import require_extra


def _row(rid: str, template: str, literals: tuple[str, ...], fixed: bool) -> AnchorRow:
    anchor = max(literals, key=len)
    regex = f"(?s)^(?:{re2_escape(template)})$" if fixed else f"(?s)^(?:{template}(?P<x>.+))$"
    return (rid, anchor, literals, regex, template)


#: A fixed message (its anchor the whole message), a record whose one literal is its anchor
#: (every hit keeps its line), one that needs a second literal, and a quoted anchor whose
#: escaped forms are words too.
ROWS = [
    _row("a" * 16, "fill", ("fill",), fixed=True),
    _row("b" * 16, "cannot open shard ", ("cannot open shard ",), fixed=False),
    _row("c" * 16, "bad dtype for ", ("bad dtype for ", " in layer"), fixed=False),
    _row("d" * 16, "can't load 'x'", ("can't load 'x'",), fixed=True),
]


def test_the_maps_say_what_each_word_needs() -> None:
    maps, words = record_maps(ROWS)
    assert maps.complete and len(maps) == len(words)
    by_word = dict(zip(words, range(len(words)), strict=True))
    fill, shard, dtype = by_word["fill"], by_word["cannot open shard"], by_word["bad dtype for"]
    assert maps.ends[fill] == 1 and maps.sure[fill] == 0 and maps.fixed[0] == 1
    # "cannot open shard " keeps its space before the placeholder: a hit on the word does
    # not say the space is there, so the line is tested.
    assert maps.sure[shard] == 0 and maps.ends[shard] == 0
    assert maps.sure[dtype] == 0  # " in layer" must be on the line too
    assert maps.record_literals(1) == ("cannot open shard ",)
    assert maps.record_literals(2) == ("bad dtype for ", " in layer")
    escaped = by_word["can\\'t load \\'x\\'"]
    assert maps.plain[escaped] == 0 and maps.ends[escaped] == 0


def _log(seed: int) -> bytes:
    rng = random.Random(seed)
    pieces = [
        "fill",
        "cannot open shard",
        "bad dtype for",
        " in layer",
        "can't load 'x'",
        "can\\'t load \\'x\\'",
        "'",
        " ",
        "x",
        "\n",
        "\r\n",
        "é",
    ]
    return "".join(rng.choice(pieces) for _ in range(3000)).encode()


def _engines() -> list[str]:
    try:
        import hyperscan  # noqa: F401
    except ImportError:  # pragma: no cover - CI installs errkb[fast]
        return ["ahocorasick"]
    return ["hyperscan", "ahocorasick"]


def _naive(data: bytes) -> list[tuple[int, int]]:
    """The lines the rejects keep, one line at a time from the decoded text."""
    out = []
    start = 0
    for number, line in enumerate(data.split(b"\n"), 1):
        text = line.decode("utf-8", "replace")
        rest_after = [text[at + 4 :].rstrip() for at in _finds(text, "fill")]
        keep = (
            any(not rest or rest[0] in "'\"\\)]}<&" for rest in rest_after)
            # A literal's one edge space is kept (``one_line_literal``): there, or the line's
            # text wrapped at it.
            or "cannot open shard " in text
            or text.strip().endswith("cannot open shard")
            or (
                ("bad dtype for " in text or text.strip().endswith("bad dtype for"))
                and (" in layer" in text or text.strip().startswith("in layer"))
            )
            or "can\\'t load \\'x\\'" in text  # an escaped form: kept as is
            or any(
                not rest or rest[0] in "'\"\\)]}<&"
                for rest in (text[at + 14 :].rstrip() for at in _finds(text, "can't load 'x'"))
            )
        )
        if keep:
            out.append((number, start))
        start += len(line) + 1
    return out


def _finds(text: str, word: str) -> list[int]:
    found = []
    at = text.find(word)
    while at >= 0:
        found.append(at)
        at = text.find(word, at + 1)
    return found


@pytest.mark.parametrize("engine", _engines())
def test_the_kept_lines_are_the_rejects_one_line_at_a_time(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    anchors = RecordAnchors(ROWS, engine)
    for seed in range(6):
        data = _log(seed)
        want = _naive(data)
        assert anchors.hit_lines(data) == want, seed

    # Without numpy (a process capped below what its import maps) the same lines.
    def no_numpy() -> None:
        raise ImportError("capped")

    monkeypatch.setattr(anchordb, "_numpy", no_numpy)
    fresh = RecordAnchors(ROWS, engine)
    for seed in range(6, 9):
        data = _log(seed)
        assert fresh.hit_lines(data) == _naive(data), seed


def test_both_engines_keep_the_same_lines() -> None:
    engines = _engines()
    if len(engines) < 2:  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")
    hs, ac = (RecordAnchors(ROWS, engine) for engine in engines)
    for seed in range(10, 14):
        data = _log(seed)
        assert hs.hit_lines(data) == ac.hit_lines(data)


def _stored(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "kb.sqlite3.recordanchors"
    (tmp_path / "kb.sqlite3").write_bytes(b"")
    anchors = RecordAnchors(lambda: ROWS, "ahocorasick", store_at=path, state="7")
    return maps_path(path), anchors.db.digest


def test_stored_maps_load_as_written(tmp_path: Path) -> None:
    path, digest = _stored(tmp_path)
    assert path.read_bytes().startswith(
        b"errkb-beside 2 " + recordanchors.MAPS_KIND.encode() + b" 7 - "
    )
    maps = read_maps(path, "7", None, digest)
    want, _words = record_maps(ROWS)
    assert maps == want
    assert read_maps(path, "8", None, digest) is None  # another state
    assert read_maps(path, "7", None, "0" * 64) is None  # other words


def test_stored_maps_whose_offsets_leave_their_arrays_are_refused(tmp_path: Path) -> None:
    # A body whose header is right (written by the one writer) but indexes outside itself.
    from errkb.match import beside

    path, digest = _stored(tmp_path)
    image = path.read_bytes()
    header, _, body = image.partition(b"\n")
    table, _, rest = body.partition(b"\n")
    words, records = (int(f) for f in table.split(b" ")[:2])
    at = 3 * words + records + 4 * (words + 1)  # the word records: one out of range
    bad = rest[:at] + (records + 5).to_bytes(4, "little") + rest[at + 4 :]
    forged = table + b"\n" + bad
    stamp = beside.Stamp(recordanchors.MAPS_KIND, "7", None)
    assert beside.write(path, stamp, forged, tmp_path / "kb.sqlite3")
    assert read_maps(path, "7", None, digest) is None
    assert header.startswith(b"errkb-beside 2 " + recordanchors.MAPS_KIND.encode())


def test_a_stored_anchor_database_with_other_end_flags_is_replaced(tmp_path: Path) -> None:
    # The same words, stored without their end conditions (another build's): never scanned
    # with, compiled again from the rows and stored.
    path = tmp_path / "kb.sqlite3.recordanchors"
    (tmp_path / "kb.sqlite3").write_bytes(b"")
    first = RecordAnchors(lambda: ROWS, "ahocorasick", store_at=path, state="7")
    plain = anchordb.AnchorDB(first.words, "ahocorasick")
    assert anchordb.write_anchor_db(path, plain, "7", None)
    again = RecordAnchors(lambda: ROWS, "ahocorasick", store_at=path, state="7")
    assert again.db.ends == first.db.ends != plain.ends
    assert anchordb.read_anchor_db(path, "7", None, "ahocorasick").ends == first.db.ends


def _hyperscan_only() -> None:
    if "hyperscan" not in _engines():  # pragma: no cover - CI installs errkb[fast]
        require_extra("hyperscan", "fast")


def test_a_build_for_storage_writes_what_a_scan_builds_and_loads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The files a sync stores (never loaded to scan with) are byte for byte those a scan
    # that compiled them itself stores, and a scan then loads them without compiling.
    _hyperscan_only()
    import hyperscan

    (tmp_path / "kb.sqlite3").write_bytes(b"")
    built = tmp_path / "kb.sqlite3.recordanchors"
    with monkeypatch.context() as patched:

        def no_load(*_args: object) -> None:
            raise AssertionError("the build loaded a database to scan with")

        patched.setattr(hyperscan, "loadb", no_load)
        recordanchors.store_record_anchors(
            lambda: ROWS, "hyperscan", store_at=built, state="7", dataset_version="v1"
        )
    other = tmp_path / "other"
    other.mkdir()
    (other / "kb.sqlite3").write_bytes(b"")
    scanned = other / "kb.sqlite3.recordanchors"
    fresh = RecordAnchors(
        lambda: ROWS, "hyperscan", store_at=scanned, state="7", dataset_version="v1"
    )
    assert fresh.db.compiled
    assert built.read_bytes() == scanned.read_bytes()
    assert maps_path(built).read_bytes() == maps_path(scanned).read_bytes()

    def no_rows() -> list[AnchorRow]:
        raise AssertionError("the stored files were not used")

    loaded = RecordAnchors(no_rows, "hyperscan", store_at=built, state="7", dataset_version="v1")
    assert not loaded.db.compiled
    for seed in range(20, 23):
        assert loaded.hit_lines(_log(seed)) == fresh.hit_lines(_log(seed))


def test_a_build_for_storage_keeps_current_files_and_replaces_stale_ones(tmp_path: Path) -> None:
    _hyperscan_only()
    (tmp_path / "kb.sqlite3").write_bytes(b"")
    path = tmp_path / "kb.sqlite3.recordanchors"
    calls: list[int] = []

    def rows() -> list[AnchorRow]:
        calls.append(1)
        return ROWS

    def build(state: str) -> None:
        recordanchors.store_record_anchors(
            rows, "hyperscan", store_at=path, state=state, dataset_version=None
        )

    build("7")
    first = path.read_bytes()
    build("7")
    assert calls == [1]  # current: the rows are not read again
    maps_path(path).unlink()
    build("7")  # the maps alone are missing: derived again, the database kept as it is
    assert calls == [1, 1] and path.read_bytes() == first
    assert read_maps(
        maps_path(path), "7", None, anchordb.read_anchor_db(path, "7", None, "hyperscan").digest
    )
    path.write_bytes(first[: len(first) // 2])  # truncated: built again
    build("7")
    assert calls == [1, 1, 1] and path.read_bytes() == first
    build("8")  # another state: built again for it
    assert anchordb.read_anchor_db(path, "8", None, "hyperscan").ends == record_maps(ROWS)[0].ends


def test_a_record_is_found_by_its_id_and_a_text_lacking_its_literals_cannot_match() -> None:
    anchors = RecordAnchors(ROWS, "ahocorasick")
    maps = anchors.maps
    for number, row in enumerate(ROWS):
        assert maps.position(row[0]) == number
    assert maps.position("0" * 16) is None and maps.position("z" * 17) is None
    dtype = "c" * 16
    assert anchors.may_match(dtype, "bad dtype for w in layer 3")
    assert anchors.matchable(["e" * 16, dtype, "a" * 16], "bad dtype for w in layer 3") == [
        "e" * 16,
        dtype,
    ]
    assert not anchors.may_match(dtype, "bad dtype for w at step 3")  # " in layer" missing
    assert not anchors.may_match("a" * 16, "nothing to do here")
    # A record the maps do not hold (no anchor, no stored spec) may match anything.
    assert anchors.may_match("e" * 16, "anything")


def test_ids_out_of_order_are_not_found_rather_than_found_wrong() -> None:
    # Rows in another order than the ids' own (a collation that sorts otherwise): a lookup
    # may miss, and then says "may match"; it never names another record.
    shuffled = [ROWS[2], ROWS[0], ROWS[3], ROWS[1]]
    anchors = RecordAnchors(shuffled, "ahocorasick")
    for row in shuffled:
        found = anchors.maps.position(row[0])
        assert found is None or anchors.maps.record_id(found) == row[0]
        assert anchors.may_match(row[0], row[2][0] + " in layer")
    assert anchors.id_table() is None  # not in byte order: each id is bisected


def test_one_search_over_the_id_table_finds_what_the_bisection_finds() -> None:
    asked = [r[0] for r in ROWS] + ["0" * 16, "c" * 15, "c" * 17, "", "cccccccccccccccd", "é" * 8]
    uniform = RecordAnchors(ROWS, "ahocorasick")
    assert uniform.id_table() is not None
    assert uniform._positions(asked) == [uniform.maps.position(rid) for rid in asked]
    assert uniform._positions(asked)[:4] == [0, 1, 2, 3]
    # Ids of other lengths: no fixed-width table, the same answers by bisection.
    mixed = RecordAnchors(
        [*ROWS, _row("f" * 20, "tail {x}", ("tail ",), fixed=False)], "ahocorasick"
    )
    assert mixed.id_table() is None
    assert mixed._positions([*asked, "f" * 20]) == [*uniform._positions(asked), 4]


def test_deferred_rejects_keep_the_lines_hit_lines_keeps_each_rejected_once() -> None:
    import numpy as np

    anchors = RecordAnchors(ROWS, "ahocorasick")
    for seed in range(30, 34):
        data = _log(seed)
        whole = anchors.hit_lines(data)
        calls: list[int] = []

        def even(lines: np.ndarray, calls: list[int] = calls) -> np.ndarray:
            calls.append(len(lines))
            return np.asarray(lines % 2 == 0)

        now, later = anchors.split_hit_lines(data, wanted=even)
        waiting = len(later)
        assert set(now) <= set(whole)
        odd = later.take(lambda lines: np.asarray(lines % 2 == 1))
        assert all(n % 2 == 0 for n, _o in odd)
        rest = later.take()
        assert len(later) == 0 and later.take() == []
        assert sorted([*now, *odd, *rest]) == whole
        assert waiting > 0 and calls == [calls[0]]  # some lines waited; the predicate ran once


@pytest.mark.parametrize(
    ("literal", "tested"),
    [
        (" side", " side"),
        ("side ", "side "),
        (" side ", " side "),
        ("  side", "side"),  # two spaces: a renderer may change them
        ("\tside", "side"),
        (" ", ""),
        ("a\nb", ""),
    ],
)
def test_a_literal_keeps_one_edge_space(literal: str, tested: str) -> None:
    assert recordanchors.one_line_literal(literal) == tested


@pytest.mark.parametrize(
    ("text", "literal", "held"),
    [
        ("the left side of it", " side", True),
        ("Consider using a fast tokenizer", " side", False),
        ("side effects were", " side", True),  # wrapped at the space
        ("it is on this side", "side ", True),  # wrapped at the space
        ("insider", "side ", False),
        ("a side b", " side ", True),
        ("sidewalk", " side ", False),
        ("side", " side ", True),
    ],
)
def test_a_kept_edge_space_is_held_on_the_line_or_where_it_wrapped(
    text: str, literal: str, held: bool
) -> None:
    assert recordanchors.holds(text, literal) is held


@pytest.mark.parametrize(
    ("line", "kept", "bits"),
    [
        ("side", [" side"], anchordb.EDGE_BEFORE),
        ("Pending:", ["Pending: "], anchordb.EDGE_AFTER),
        ("usage", [" usage "], anchordb.EDGE_BEFORE | anchordb.EDGE_AFTER),
        ("usage", ["usage", " usage "], 0),  # the first literal whose core is the line
        ("usage", ["token ", " usage "], anchordb.EDGE_BEFORE | anchordb.EDGE_AFTER),
        ("usage", [" usages"], 0),  # another core: the hit says nothing of its sides
        ("x", [], 0),
    ],
)
def test_an_anchor_lines_edges_are_its_literals_kept_spaces(
    line: str, kept: list[str], bits: int
) -> None:
    assert recordanchors.record_edges(line, kept) == bits


#: Records whose anchor is a literal with a kept edge space: before (" side"), after
#: ("Pending: "), both (" usage "); two records of one word, one needing no side ("back");
#: a quoted one, whose escaped form must get no side; a fixed message with a space.
EDGE_ROWS = [
    _row("e" * 16, " side", (" side",), fixed=False),
    _row("f" * 16, "Pending: ", ("Pending: ",), fixed=False),
    _row("g" * 16, " usage ", (" usage ",), fixed=False),
    _row("h" * 16, " back", (" back",), fixed=False),
    _row("i" * 16, "back", ("back",), fixed=False),
    _row("j" * 16, " can't go", (" can't go",), fixed=False),
    _row("k" * 16, " fill", (" fill",), fixed=True),
]


def test_the_maps_keep_the_sides_every_record_of_a_word_needs() -> None:
    maps, words = record_maps(EDGE_ROWS)
    edges = dict(zip(words, maps.edges, strict=True))
    assert edges["side"] == anchordb.EDGE_BEFORE
    assert edges["Pending:"] == anchordb.EDGE_AFTER
    assert edges["usage"] == anchordb.EDGE_BEFORE | anchordb.EDGE_AFTER
    assert edges["back"] == 0  # "back" alone needs no space beside it
    assert edges["can't go"] == anchordb.EDGE_BEFORE
    assert edges["can\\'t go"] == 0  # an escaped form: its line is decoded later
    assert edges["fill"] == 0  # a fixed message: its end condition decides


def _edge_log(seed: int) -> bytes:
    rng = random.Random(seed)
    pieces = [
        *("side", "Pending:", "usage", "back", "can't go", "can\\'t go", "fill"),
        *(" ", " ", "x", ":", "\t", "\n", "\r\n", "é", "\u00a0", "'"),
    ]
    return "".join(rng.choice(pieces) for _ in range(3000)).encode()


@pytest.mark.parametrize("engine", _engines())
def test_the_edges_drop_only_hits_the_rejects_would_drop(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    anchors = RecordAnchors(EDGE_ROWS, engine)
    unedged = RecordAnchors(EDGE_ROWS, engine)
    unedged.maps = dataclasses.replace(unedged.maps, edges=bytes(len(unedged.maps)))
    for seed in range(40, 46):
        data = _edge_log(seed)
        raw: list[anchordb.Hits] = []
        every: list[anchordb.Hits] = []
        assert anchors.hit_lines(data, raw=raw) == unedged.hit_lines(data, raw=every), seed
        # The work the edges save: hits that never reach the rejects in Python.
        assert len(raw[0].words) < len(every[0].words), seed

    def no_numpy() -> None:
        raise ImportError("capped")

    monkeypatch.setattr(anchordb, "_numpy", no_numpy)
    for seed in range(46, 49):
        data = _edge_log(seed)
        assert anchors.hit_lines(data) == unedged.hit_lines(data), seed


def test_stored_maps_keep_their_edges_and_bad_edges_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite3.recordanchors"
    (tmp_path / "kb.sqlite3").write_bytes(b"")
    anchors = RecordAnchors(lambda: EDGE_ROWS, "ahocorasick", store_at=path, state="7")
    stored = maps_path(path)
    maps = read_maps(stored, "7", None, anchors.db.digest)
    assert maps is not None and maps.edges == record_maps(EDGE_ROWS)[0].edges
    assert set(maps.edges) == {0, 1, 2, 3}
    recordanchors.write_maps(stored, maps, "7", None, anchors.db.digest)
    assert read_maps(stored, "7", None, anchors.db.digest) == maps  # written again: the same
    # An edge byte of 4 (no such bit) in a file whose digest is redone: refused, not used.
    bad = dataclasses.replace(maps, edges=b"\x04" + maps.edges[1:])
    recordanchors.write_maps(stored, bad, "7", None, anchors.db.digest)
    assert read_maps(stored, "7", None, anchors.db.digest) is None


def test_every_escaped_form_holds_an_escape_byte() -> None:
    # The edge bits (``record_maps``) and the anchor pass's "e" gate both rest on this.
    rng = random.Random(3)
    alphabet = "ab '\"&<>\\é\t\u2028\u00a0\x85\u3000()"
    chars = anchordb.ESCAPE_BYTES.decode()
    for _ in range(20_000):
        anchor = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 8)))
        for form in recordanchors.escaped_forms(anchor):
            assert any(char in form for char in chars), (anchor, form)


#: A template over two lines whose second begins with ``graph: `` (sglang's decode lines say
#: ``cuda graph: True`` in mid-line, on every line), and one record of one line with the same
#: anchor, which may be printed anywhere.
GRAPH = "{usage}\ngraph: %s"
GRAPH_ROWS = [
    ("e" * 16, "graph:", ("\ngraph: ",), "(?s)^(?:(?P<c0>.+?)\ngraph: (?P<c1>.+?))$", GRAPH),
]
GRAPH_LINES = [
    ("[2026-08-28 05:00:30 TP1] Decode batch. token usage: 0.92, cuda graph: True", False),
    ("graph: 3", True),
    ("[pod/enc-0-0/server] 2026-08-28T05:22:24.123000565Z graph: 12", True),  # a prefix
    ("    graph: 3", True),  # indented
    ("> graph: 3", True),  # a quoted mail
    ("cuda graph: True", False),
    ("ValueError('usage\\ngraph: 3')", True),  # inside a repr: its break is escaped
    ("\x1b[31mgraph: 3\x1b[0m", True),  # in colours: cleaned before it is read
    ("[31mgraph: 3", True),  # a colour's remnant
    ("cuda graph: True\r", False),  # a CRLF line: its \r is not its text
    ("graph: 3\r", True),
]


def test_a_literal_after_a_line_break_keeps_a_line_only_where_it_begins_it() -> None:
    maps, words = record_maps(GRAPH_ROWS)
    graph = words.index("graph:")
    assert maps.record_literals(0) == ("graph: ",)
    assert maps.record_line_starts(0) == ("graph:",)
    assert maps.sure[graph] == 0  # where the line's text begins is tested in the rejects
    data = "".join(line + "\n" for line, _ in GRAPH_LINES).encode()
    want = [n for n, (_, kept) in enumerate(GRAPH_LINES, 1) if kept]
    for engine in _engines():
        anchors = RecordAnchors(GRAPH_ROWS, engine)
        assert [n for n, _ in anchors.hit_lines(data)] == want, engine
        # A message's own text (the single-traceback path's literal test) holds it anywhere.
        assert anchors.matchable(["e" * 16], "usage: x graph: 3") == ["e" * 16]
    # The same anchor for a record of one line: that record may print it anywhere.
    anywhere = [*GRAPH_ROWS, _row("f" * 16, "graph: ", ("graph: ",), fixed=False)]
    for engine in _engines():
        lines = RecordAnchors(anywhere, engine).hit_lines(data)
        assert [n for n, _ in lines] == list(range(1, len(GRAPH_LINES) + 1)), engine


def test_stored_maps_keep_which_literals_begin_a_line(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite3.recordanchors"
    built = RecordAnchors(lambda: GRAPH_ROWS, "ahocorasick", store_at=path, state="3")
    loaded = read_maps(maps_path(path), "3", None, built.db.digest)
    assert loaded is not None
    assert loaded.record_line_starts(0) == ("graph:",)
    assert loaded.record_literals(0) == ("graph: ",)


def test_a_literal_s_own_marker_character_is_not_taken_for_a_line_start() -> None:
    # Dataset content is untrusted: a literal that begins with the marker's character is
    # tested without it (more lines kept, never fewer), and says nothing of a line's start.
    row = _row("a" * 16, "\x01only here ", ("\x01only here ",), fixed=False)
    maps, _words = record_maps([row])
    assert maps.record_literals(0) == ("only here ",)
    assert maps.record_line_starts(0) == ()


PHRASE = "failed to initialize the process group for rank"


def _crowd(count: int, always: bool = True) -> list[AnchorRow]:
    """``count`` records sharing ``PHRASE`` (some with equal literal sets), and a fixed one."""
    rows = []
    for k in range(count):
        second = f" in variant{k % (count - 3)} stage"  # the last three repeat earlier sets
        rows.append(_row(f"{k:016x}", PHRASE, (PHRASE + " ", second), fixed=False))
    rows.append(_row("f" * 16, PHRASE, (PHRASE,), fixed=True))
    if always:
        # Every literal inside the word (but for its edge space): checked on every line.
        rows.append(_row("e" * 16, PHRASE + " ", (PHRASE + " ",), fixed=False))
    return rows


def _crowd_log(seed: int, count: int) -> bytes:
    rng = random.Random(seed)
    lines = []
    for _ in range(300):
        tail = rng.choice(
            [
                f" {rng.randrange(9)} in variant{rng.randrange(count + 5)} stage",
                f" {rng.randrange(9)} in warmup",
                "",
                f" in variant{rng.randrange(count)} stage'",
            ]
        )
        head = rng.choice(["", "INFO ", "ValueError: "])
        lines.append(head + rng.choice([PHRASE, "the process group for rank"]) + tail)
    return "\n".join(lines).encode()


def _records_holding(rows: list[AnchorRow], text: str) -> list[int]:
    """The records (by row) one line may print: the rejects one record at a time."""
    found = []
    for number, (_, anchor, literals, _, template) in enumerate(rows):
        if anchor is None or anchor.strip() not in text:
            continue
        if template == PHRASE and len(literals) == 1:  # the fixed record: where it ends
            rest = text[text.find(PHRASE) + len(PHRASE) :].rstrip()
            if not rest or rest[0] in "'\"\\)]}<&":
                found.append(number)
            continue
        parts = [recordanchors.one_line_literal(lit) for lit in literals]
        if all(recordanchors.holds(text, part) for part in parts):
            found.append(number)
    return found


@pytest.mark.parametrize("engine", _engines())
def test_a_crowded_word_keeps_the_lines_its_records_keep_one_by_one(engine: str) -> None:
    count = 4 * recordanchors.CROWD
    rows = _crowd(count)
    anchors = RecordAnchors(rows, engine)
    word = anchors.words.index(PHRASE)
    check = anchors.records_of(word)
    assert len(check.groups) == count - 3 + 1 and check.fixed  # equal sets checked once
    assert check._finder is not None  # past CROWD: reached through the keys
    for seed in range(3):
        data = _crowd_log(seed, count)
        want = []
        start = 0
        for number, line in enumerate(data.split(b"\n"), 1):
            text = line.decode()
            if _records_holding(rows, text):
                want.append((number, start))
            start += len(line) + 1
            # The candidates a kept line names: those whose literals it holds, fixed ones too.
            fixed = [n for n, row in enumerate(rows) if row[4] == PHRASE and len(row[2]) == 1]
            named = [n for n in _records_holding(rows, text) if n not in fixed]
            if PHRASE in text:
                assert anchors.passing(word, text) == sorted(named + fixed), text
        assert anchors.hit_lines(data) == want, seed
        assert any(want) and len(want) < data.count(b"\n")  # both kinds of line are there


def test_a_line_costs_its_keys_not_the_records_sharing_its_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 50, row 13: lines holding a phrase thousands of records share, and none of their
    # other literals, cost each record a check: the work grew with the records, not the input.
    calls = {"n": 0}
    real = recordanchors.holds

    def counted(text: str, literal: str) -> bool:
        calls["n"] += 1
        return real(text, literal)

    monkeypatch.setattr(recordanchors, "holds", counted)
    lines = [f"2026-01-01 INFO {PHRASE} {k} in warmup" for k in range(400)]
    data = "\n".join(lines).encode()
    work = {}
    for count in (50, 2000):
        anchors = RecordAnchors(_crowd(count, always=False))
        calls["n"] = 0
        assert anchors.hit_lines(data) == []  # the fixed record does not end these lines
        work[count] = calls["n"]
    # No record's key is on these lines: none is checked, however many share the phrase.
    assert work[2000] == work[50] <= len(lines)
