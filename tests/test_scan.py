"""The anchor table (errkb.match.scan): the match index held in memory, stored beside the DB."""

from __future__ import annotations

import json
import random
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb
from bench import corpus as bc
from errkb.explain import DEFAULT_THRESHOLDS
from errkb.maint.extract import extract
from errkb.match import scan
from errkb.match.anchordb import ENGINES
from errkb.match.index import candidate_ids, message_tokens
from errkb.records.template import parse_template
from errkb.store import anchors_key
from errkb.store.interface import RELATED_COMMON
from tests.conftest import DATASET, require_extra

EXAMPLES = Path(__file__).resolve().parent.parent / "data" / "examples"


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    """Real records of a few stdlib packages plus variants that share most of their words."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    real: list[dict[str, Any]] = []
    for pkg in ("json", "email", "http"):
        real += extract([stdlib / pkg], repo="python/cpython", root=stdlib, sha="1" * 40)
    return real + list(bc.make_variants(real, 400, seed=5))


@pytest.fixture
def big_kb(tmp_path: Path, records: list[dict[str, Any]]) -> Iterator[errkb.KnowledgeBase]:
    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with errkb.open(tmp_path / "kb.sqlite3", bundled=False) as kb:
        report = kb.ingest([source])
        assert not report.problems, report.problems[:3]
        yield kb


def _body(kb: errkb.KnowledgeBase) -> str:
    """The anchor table's body as a sync stores it, from ``kb``'s match index."""
    with kb.store.snapshot() as view:
        return scan.build_body(view.token_rows())


def _stored_table(path: Path, state: str, version: str | None) -> scan.AnchorTable | None:
    """The table stored at ``path`` if it belongs to this state and is intact; else None."""
    body = scan._read_body(path, state, version)
    return None if body is None else scan.AnchorTable(body)


def _messages(records: list[dict[str, Any]]) -> list[str]:
    rng = random.Random(7)
    out: list[str] = []
    for r in records:
        template = parse_template(r["errorMessage"])
        values = {name: rng.choice(["x", "'a b'", "42", "(2, 3)"]) for name in template.names}
        rendered = template.render(values)
        words = rendered.split()
        out.append(rendered)
        out.append(" ".join(words[: max(1, len(words) // 2)]))  # some words missing
        out.append(rendered.replace(" ", "_", 1))  # two words glued into one
        out.append("wrapped: " + rendered + " | and " + rng.choice(out))
    return out


def test_table_candidates_are_the_index_candidates(
    big_kb: errkb.KnowledgeBase, records: list[dict[str, Any]]
) -> None:
    messages = _messages(records)
    nonempty = 0
    with big_kb.store.snapshot() as view:
        table = scan.AnchorTable(scan.build_body(view.token_rows()))
        assert len(table) > 100
        for message in messages:
            want = sorted(candidate_ids(view, message))
            assert sorted(table.candidates(message)) == want, message
            nonempty += bool(want)
    assert nonempty > len(records)  # the check is not vacuous


def test_related_from_the_table_is_the_index_s_related(
    big_kb: errkb.KnowledgeBase, records: list[dict[str, Any]]
) -> None:
    from errkb.match.index import related_ids

    messages = _messages(records)
    with big_kb.store.snapshot() as view:
        table = scan.AnchorTable(scan.build_body(view.token_rows()))
        assert table.related(["json"], 3) is None  # not built: the caller asks the store
        assert table.build_related()
        # One knowledge base for every case: each limit with the default cap, and a cap of 3.
        for limit, common in (
            (1, RELATED_COMMON),
            (3, RELATED_COMMON),
            (300, RELATED_COMMON),
            (300, 3),
        ):
            longer = cut = 0
            for message in messages:
                want = related_ids(view, message, limit, common=common)
                # The same ids in the same order: shared words, most first, ties by id.
                got = table.related(message_tokens(message), limit, common=common)
                assert got == want, (message, limit, common)
                longer += len(want) > 1
                if common == 3:
                    cut += want != related_ids(view, message, limit, common=len(records))
            assert longer > len(records) // 2 or limit == 1  # ties and order are exercised
            # A word in more than ``common`` records' rows is left out: with 3, results change.
            assert cut > 0 or common != 3


def test_a_long_running_process_suggests_from_memory(
    kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.store.sqlite import SqliteView

    text = "ValueError: Quanto layer 'q' has an incompatible bias F32 (4096,)\n"
    first = kb.explain(text).to_dict()  # a one-shot run: the store answers
    asked: list[int] = []
    real = SqliteView.related_ids

    def counted(self: SqliteView, tokens: Any, limit: int) -> list[str]:
        asked.append(limit)
        return real(self, tokens, limit)

    monkeypatch.setattr(SqliteView, "related_ids", counted)
    assert kb.explain(text).to_dict() == first  # the second report loads the table
    assert asked == []
    assert any(m["confidence"] == "similar" for m in first["matches"])


def _big_input() -> bytes:
    example = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes()
    filler = b"".join(b"[2026-08-28 05:10:05] INFO step %d ok\n" % i for i in range(12_000))
    return filler + example + filler


def test_a_large_input_stores_the_table_beside_the_database(
    kb: errkb.KnowledgeBase, tmp_path: Path
) -> None:
    path = scan.anchor_path(kb.path)
    small = kb.explain((EXAMPLES / "quanto-incompatible-scale.log").read_text())
    assert not path.exists()  # a one-shot small explain never builds or reads it
    data = _big_input()
    assert len(data) >= DEFAULT_THRESHOLDS.scan_from
    fresh = errkb.open(kb.path)
    report = fresh.explain(data)
    assert path.exists()
    header = path.read_text(encoding="utf-8").splitlines()[0].split()
    state = kb.store.meta_value("state")
    key = anchors_key(kb.store.meta_value)[0]
    assert header[:4] == ["errkb-beside", "2", scan.KIND, key]
    assert [m.id for m in report.exact] == [m.id for m in small.exact]
    # A write that leaves what the table is built from as it was (the same dataset again) is
    # a new state but the same anchor key (``store.anchors_key``): the stored table stays
    # current, neither rebuilt nor rewritten, and explains as before.
    written = path.stat().st_mtime_ns, path.stat().st_ino
    kb.ingest([DATASET])
    assert kb.store.meta_value("state") != state
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == written
    again = errkb.open(kb.path).explain(data).to_dict()
    assert again["matches"] == report.to_dict()["matches"]
    # A write that adds a record makes it stale: the write builds the new state's after its
    # commit (``build_anchor_files``), and the old one is never used.
    from published import make_record

    added = tmp_path / "added.jsonl"
    added.write_text(json.dumps(make_record(7, "org/added")) + "\n", encoding="utf-8")
    kb.ingest([added])
    new_key = anchors_key(kb.store.meta_value)[0]
    assert new_key != key
    assert path.read_text(encoding="utf-8").split()[3] == new_key
    assert _stored_table(path, key, kb.store.meta_value("dataset_version")) is None
    path.unlink()  # a write by an older errkb, or a file lost: the next large input builds it
    errkb.open(kb.path).explain(data)
    assert path.read_text(encoding="utf-8").split()[3] == new_key


def test_a_damaged_or_unwritable_table_is_rebuilt_in_memory(kb: errkb.KnowledgeBase) -> None:
    data = _big_input()
    want = errkb.open(kb.path).explain(data).to_dict()
    path = scan.anchor_path(kb.path)
    text = path.read_text(encoding="utf-8")
    # Same header, body changed: the CRC no longer agrees, so the file is not trusted.
    path.write_text(text.replace("Quanto", "Qu4nto"), encoding="utf-8")
    key, version = anchors_key(kb.store.meta_value)
    assert _stored_table(path, key, version) is None
    assert errkb.open(kb.path).explain(data).to_dict() == want
    path.unlink()
    path.mkdir()  # nothing can be written there
    assert errkb.open(kb.path).explain(data).to_dict() == want


def test_reports_are_the_same_with_and_without_the_table(
    big_kb: errkb.KnowledgeBase, records: list[dict[str, Any]]
) -> None:
    rng = random.Random(3)
    lines = []
    for r in rng.sample(records, 200):
        template = parse_template(r["errorMessage"])
        message = template.render(dict.fromkeys(template.names, "v1"))
        lines += ["Traceback (most recent call last):", '  File "a.py", line 1, in f',
                  f"{r['errorClass'] or 'ValueError'}: {message}", "INFO ok"]  # fmt: skip
    text = "\n".join(lines) + "\n"
    without = errkb.open(big_kb.path).explain(text)  # first, small: SQL candidates
    kb = errkb.open(big_kb.path)
    kb.explain("warm-up")
    with_table = kb.explain(text)  # second report: the anchor table
    assert kb._engine._table is not None
    assert with_table.to_dict() == without.to_dict()
    assert len(with_table.exact) > 50


def test_a_bounded_table_gives_the_same_candidates(
    big_kb: errkb.KnowledgeBase, records: list[dict[str, Any]]
) -> None:
    # A table that may keep only a few parsed entries drops and re-parses words as it goes; the
    # candidates (and the public entries) must be exactly those of a table that keeps them all.
    messages = _messages(records)
    body = _body(big_kb)
    whole = scan.AnchorTable(body)
    bounded = scan.AnchorTable(body, parsed_max=64)
    most, words = 0, set(whole.words())
    for message in messages:
        # The walk of every entry in table order: the rule as first written, order included.
        tokens = message_tokens(message)
        walk = [
            rid
            for word in tokens
            if word in words
            for rid, others in whole.entries(word)
            if others <= set(tokens)
        ]
        assert whole.candidates(message) == walk, message
        assert bounded.candidates(message) == walk, message
        most = max(most, bounded.parsed_entries)
    assert whole.parsed_entries > 64  # the bound was reached, so words were dropped
    biggest = max(len(whole.entries(w)) for w in whole.words())
    assert most <= max(64, biggest)  # a single word larger than the bound is still served
    for word in whole.words():
        assert bounded.entries(word) == whole.entries(word)
        assert all(isinstance(others, frozenset) for _rid, others in whole.entries(word))


def test_entries_hold_one_string_per_word() -> None:
    body = "alpha\taaaaaaaaaaaaaaaa:gamma,delta bbbbbbbbbbbbbbbb:zeta,delta cccccccccccccccc\n"
    table = scan.AnchorTable(body)
    _bare, keyed = table._selects("alpha")
    [(_p1, _a, first)], [(_p2, _b, second)] = keyed["gamma"], keyed["zeta"]
    assert first[0] is second[0]  # "delta" is held once however many entries name it
    assert table.candidates("alpha gamma") == ["cccccccccccccccc"]
    assert table.candidates("alpha zeta delta gamma") == [
        "aaaaaaaaaaaaaaaa",
        "bbbbbbbbbbbbbbbb",
        "cccccccccccccccc",
    ]
    assert table.entries("alpha") == (
        ("aaaaaaaaaaaaaaaa", frozenset({"gamma", "delta"})),
        ("bbbbbbbbbbbbbbbb", frozenset({"zeta", "delta"})),
        ("cccccccccccccccc", frozenset()),
    )


def test_a_word_in_use_stays_parsed() -> None:
    # Least recently used out: a word looked up between others survives the bound.
    rows = "".join(f"w{i:03d}\t{i:016x} {i + 1000:016x}\n" for i in range(40))
    table = scan.AnchorTable(rows, parsed_max=8)
    for i in range(1, 40):
        table.candidates("w000")
        table.candidates(f"w{i:03d}")
        assert table.parsed_entries <= 8
    assert "w000" in table._parsed
    assert table.candidates("w000") == [f"{0:016x}", f"{1000:016x}"]


def test_a_write_builds_the_files_without_the_scan_s_structures(
    big_kb: errkb.KnowledgeBase,
) -> None:
    # The ingest's ``build_anchor_files`` stored the table and the record anchors and kept
    # none of what a scan holds; no buffer-pass file (``<db>.anchordb``) is written any more.
    assert big_kb._engine._anchors is None and big_kb._engine._table is None
    state, version = anchors_key(big_kb.store.meta_value)
    table = _stored_table(scan.anchor_path(big_kb.path), state, version)
    assert table is not None and len(table) > 100
    assert not big_kb.path.with_name(big_kb.path.name + ".anchordb").exists()


def test_a_write_removes_the_buffer_pass_s_old_file(big_kb: errkb.KnowledgeBase) -> None:
    old = big_kb.path.with_name(big_kb.path.name + ".anchordb")
    old.write_bytes(b"errkb-anchordb 5 ...")
    big_kb.build_anchor_files()
    assert not old.exists()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("damage", [None, "record words", "maps", "record images"])
def test_a_write_that_finds_the_files_current_derives_nothing(
    big_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch, damage: str | None, engine: str
) -> None:
    # Current and intact: the record maps are not derived again, and no Hyperscan image is
    # loaded. A damaged one of them is built again, alone.
    from errkb.match import anchordb, recordanchors

    if engine == "hyperscan":
        require_extra("hyperscan", "fast")
    big_kb.scan_engine = engine
    big_kb.build_anchor_files()  # current for this engine
    record_db = recordanchors.record_anchordb_path(big_kb.path)
    files = {
        "record": record_db,
        "maps": recordanchors.maps_path(record_db),
    }
    good = {name: path.read_bytes() for name, path in files.items()}
    if damage is not None:
        name = damage.split()[0]
        image = bytearray(good[name])
        if damage == "record words":  # a byte of its word list (after two header lines)
            at = image.index(b"\n", image.index(b"\n") + 1) + 2
        else:  # one of the last bytes (in the record anchors: Hyperscan's images)
            at = len(image) - 3
        image[at] ^= 0x01
        files[name].write_bytes(bytes(image))
    derived: list[str] = []
    real_maps = recordanchors.record_maps
    monkeypatch.setattr(
        recordanchors, "record_maps", lambda *a: derived.append("maps") or real_maps(*a)
    )
    if damage is None:
        monkeypatch.setattr(
            anchordb.AnchorDB, "_hyperscan", lambda *a: pytest.fail("a Hyperscan image was loaded")
        )
    big_kb.build_anchor_files()
    after = {name: path.read_bytes() for name, path in files.items()}
    # A write checks a file's whole body (its sha256) before it keeps it: damage in the
    # images it never loads is found here too, and the files are built again.
    expected = {None: [], "maps": ["maps"]}.get(damage, ["maps"])
    assert derived == expected
    assert after == good  # built again where damaged: the same bytes


@pytest.mark.parametrize("width", ["uniform", "mixed"])
def test_related_counts_shared_words_for_ids_of_one_width_or_many(width: str) -> None:
    # The table's entries as stored (a rank-0 word, then each record with its other words);
    # ids of one width live in a byte array, others as strings: the same answer, which is a
    # count of the tokens each record is indexed by, most first, ties by id.
    from errkb.match.scan import _Related

    ids = ["a" * 16, "b" * 16, "c" * 16, "d" * 16]
    if width == "mixed":
        ids = ["a" * 16, "bb", "c" * 20, "d"]
    a, b, c, d = ids
    raw = {"shape": f"{a}:weight,scale {b}:scale {c}", "weight": f"{d}:zebra", "zebra": f"{c}"}
    words = {a: {"shape", "weight", "scale"}, b: {"shape", "scale"}, c: {"shape", "zebra"}}
    words[d] = {"weight", "zebra"}
    related = _Related(raw)
    assert isinstance(related._ids, list) == (width == "mixed")
    for tokens in (["shape"], ["scale", "weight"], ["zebra", "shape", "nothing"], ["nothing"]):
        counts = {rid: len(words[rid] & set(tokens)) for rid in ids}
        want = sorted((rid for rid in ids if counts[rid]), key=lambda r: (-counts[r], r))
        assert related.top(tokens, 10) == want, tokens
        assert related.top(tokens, 1) == want[:1]
    assert related.top(["x" * 300], 5) == []  # longer than any word: never found


def test_a_warmed_table_holds_its_largest_words_and_gives_the_same_candidates(
    big_kb: errkb.KnowledgeBase, records: list[dict[str, Any]]
) -> None:
    messages = _messages(records)
    body = _body(big_kb)
    cold, warmed = scan.AnchorTable(body), scan.AnchorTable(body, parsed_max=200)
    held = warmed.warm()
    sizes = {w: len(cold.entries(w)) for w in cold.words()}
    biggest = max(sizes.values())
    assert 100 <= held <= 100 + biggest  # half the bound, give or take the last word parsed
    parsed = set(warmed._parsed)
    # The largest lists first: none left out is larger than the smallest one parsed.
    assert max(sizes[w] for w in sizes if w not in parsed) <= min(sizes[w] for w in parsed)
    for message in messages:
        assert warmed.candidates(message) == cold.candidates(message), message
