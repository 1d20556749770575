"""Incremental record anchors (``errkb.match.anchordelta``, issue 48).

A write compiles only the records it added or changed; the first explain after any write
compiles nothing, and its report equals that of a knowledge base built from scratch with the
same records, over random sequences of syncs, documentation changes, compactions and
rollbacks.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.errors import SyncInterruptedError
from errkb.explain import Thresholds
from errkb.match import anchordb, anchordelta, recordanchors
from errkb.match.anchordelta import BuildKind, Compaction, hashes_path
from errkb.match.recordanchors import maps_path, record_anchordb_path
from errkb.store import anchors_key
from tests.conftest import load_seed_envelopes, make_record, query
from tests.test_recordanchors import _row
from tests.tiers import examples

SMALL = Thresholds(scan_from=4097, paste_upto=4096)
#: A small knowledge base's writes change more than 10% of it: compacted past 90% here.
LOOSE = Compaction(share=0.9, images=6)

#: Messages of the pool's records: placeholders, fixed messages, an anchor two records
#: share, a quote (escaped forms), a literal that must begin its line.
MESSAGES = (
    "Cannot load shard {name} of the checkpoint",
    "Cannot find tokenizer config for {model}",
    "Cannot find tokenizer config in {path}",
    "Worker lease expired for the scheduler pool",
    "Bad value 'auto' for option {key}",
    "Quantized layer {layer} has no scale tensor",
    "Process group was destroyed before the barrier",
    "Expected {n} experts per token, got {m}",
    "Cannot allocate the paged attention cache",
    "Unknown sampling mode {mode}\n  hint: one of greedy or beam",
)
VALUES = {
    "{name}": "layers.3",
    "{model}": "llama-7b",
    "{path}": "/srv/models/x",
    "{key}": "dtype",
    "{layer}": "mlp.up",
    "{mode}": "nucleus",
    "{n}": "2",
    "{m}": "3",
}


def _pool() -> list[dict[str, Any]]:
    base = load_seed_envelopes()[0]["record"]
    return [make_record(base, message) for message in MESSAGES]


POOL = _pool()


def _filled(message: str) -> str:
    for slot, value in VALUES.items():
        message = message.replace(slot, value)
    return message


def _log() -> bytes:
    """Every pool message printed, as a traceback, a JSON line and a repr, between fillers."""
    parts: list[str] = []
    for n, message in enumerate(MESSAGES):
        text = _filled(message)
        parts.append("".join(f"2026-12-01 10:00:{s:02d} INFO step {s} ok\n" for s in range(12)))
        parts.append(
            "Traceback (most recent call last):\n"
            f'  File "/srv/app/run.py", line {n + 3}, in main\n'
            f"ValueError: {text}\n"
        )
        parts.append(json.dumps({"level": "error", "msg": f"ValueError: {text}"}) + "\n")
        parts.append(f"2026-12-01 10:01:00 ERROR errors=[ValueError({text!r})]\n")
    return "".join(parts).encode()


LOG = _log()


@contextlib.contextmanager
def _delta_kb(target: str | Path, **options: Any) -> Iterator[errkb.KnowledgeBase]:
    """The knowledge base at ``target`` with Hyperscan anchors, compacted only past ``LOOSE``."""
    with errkb.open(target, **options) as kb:
        kb.scan_engine = "hyperscan"
        kb.compaction = LOOSE
        yield kb


def _write(path: Path, records: list[dict[str, Any]], version: str) -> Path:
    path.write_text(
        "".join(json.dumps({"record": r, "datasetVersion": version}) + "\n" for r in records)
    )
    return path


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many anchor compiles (Hyperscan parts) and maps derivations run from now on."""
    pytest.importorskip("hyperscan")
    seen = {"compiles": 0, "maps": 0, "words": 0}
    real_compile, real_maps = anchordb.compile_images, recordanchors.record_maps

    def compile_images(encoded: list[bytes], ends: bytes, first: int = 0) -> Any:
        seen["compiles"] += 1
        seen["words"] += len(encoded)
        return real_compile(encoded, ends, first)

    def record_maps(rows: Any) -> Any:
        seen["maps"] += 1
        return real_maps(rows)

    monkeypatch.setattr(anchordb, "compile_images", compile_images)
    monkeypatch.setattr(recordanchors, "record_maps", record_maps)
    monkeypatch.setattr(anchordelta, "record_maps", record_maps)
    yield seen


def _report(kb: errkb.KnowledgeBase) -> dict[str, Any]:
    kb.scan_engine = "hyperscan"
    got = kb.explain(LOG, thresholds=SMALL).to_dict()
    assert kb._engine._anchors is not None  # the record-driven scan ran
    got.pop("datasetVersion", None)  # the fresh knowledge base's is its own
    return got


def _live(kb: errkb.KnowledgeBase) -> list[dict[str, Any]]:
    rows = query(kb.store, "SELECT raw_json FROM records WHERE retired = 0 ORDER BY id")
    return [json.loads(raw) for (raw,) in rows]


def _fresh_report(records: list[dict[str, Any]], where: Path) -> dict[str, Any]:
    where.mkdir()
    with errkb.open(where / "kb.sqlite3", bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        if records:
            kb.sync(_write(where / "records.jsonl", records, "2026-12-01T00:00:00.000Z"))
        return _report(kb)


def _documented(record: dict[str, Any], n: int) -> dict[str, Any]:
    return dict(record, documentation=f"{record.get('documentation') or ''} (revised {n})")


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("sync"), st.frozensets(st.integers(0, len(POOL) - 1), min_size=1)),
        st.tuples(st.just("docs"), st.integers(0, len(POOL) - 1)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("rollback"), st.integers(0, 3)),
    ),
    min_size=1,
    max_size=4,
)


def _apply(kb: errkb.KnowledgeBase, step: tuple[str, Any], n: int, tmp: Path) -> None:
    kind, arg = step
    version = f"2026-12-{n + 2:02d}T00:00:00.000Z"
    if kind == "sync":
        chosen = [POOL[k] for k in sorted(arg)]
        kb.sync(_write(tmp / f"v{n}.jsonl", chosen, version), full=True)
    elif kind == "docs":
        live = {r["id"]: r for r in _live(kb)}
        record = live.get(POOL[arg]["id"])
        if record is not None:
            kb.sync(_write(tmp / f"v{n}.jsonl", [_documented(record, n)], version), full=False)
    elif kind == "compact":
        kb.compact_anchor_files()
    else:
        versions = kb.versions().versions
        if versions:
            kb.rollback(versions[min(arg, len(versions) - 1)].id)


@settings(
    # Each example is several syncs and a rebuild from scratch (~0.8 s): four in the default
    # tier, sixty in the full one.
    max_examples=examples(60, default=4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_the_first_explain_after_any_write_compiles_nothing_and_equals_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory, counted: dict[str, int], steps: list[Any]
) -> None:
    tmp = tmp_path_factory.mktemp("delta")
    db = tmp / "kb.sqlite3"
    with _delta_kb(db, bundled=False) as kb:
        kb.sync(_write(tmp / "v0.jsonl", POOL[:6], "2026-12-01T12:00:00.000Z"), full=True)
    for n, step in enumerate(steps):
        with _delta_kb(db) as kb:
            _apply(kb, step, n, tmp)
            records = _live(kb)
        counted.update(compiles=0, maps=0)
        with errkb.open(db) as kb:  # another process: it loads the files
            got = _report(kb)
        assert counted["compiles"] == 0 and counted["maps"] == 0, step
        assert got == _fresh_report(records, tmp / f"fresh{n}"), step
        assert check_anchor_files(db), step


def test_a_write_compiles_only_the_records_it_changed(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    db = tmp_path / "kb.sqlite3"
    with _delta_kb(db, bundled=False) as kb:
        kb.sync(_write(tmp_path / "v1.jsonl", POOL[:8], "2026-12-01T00:00:00.000Z"), full=True)
        whole = counted["words"]
        counted.update(words=0)
        # One record retired, one added: the delta holds the added record's words alone.
        chosen = [*POOL[1:8], POOL[8]]
        kb.sync(_write(tmp_path / "v2.jsonl", chosen, "2026-12-02T00:00:00.000Z"), full=True)
        assert 0 < counted["words"] < whole
        state, version = anchors_key(kb.store.meta_value)
    path = record_anchordb_path(db)
    stored = anchordb.read_anchor_db(path, state, version, "hyperscan")
    assert stored.delta[0] == counted["words"] and stored.delta[1] >= 1
    assert hashes_path(path).is_file() and maps_path(path).is_file()
    with errkb.open(db) as kb:
        built = kb.compact_anchor_files()
        assert built is not None and built.kind is BuildKind.WHOLE
        assert kb.compact_anchor_files().kind is BuildKind.CURRENT  # type: ignore[union-attr]
    assert anchordb.read_anchor_db(path, state, version, "hyperscan").delta == (0, 0)


def test_a_delta_past_the_share_compacts(tmp_path: Path, counted: dict[str, int]) -> None:
    db = tmp_path / "kb.sqlite3"
    with _delta_kb(db, bundled=False) as kb:
        kb.sync(_write(tmp_path / "v1.jsonl", POOL[:3], "2026-12-01T00:00:00.000Z"), full=True)
        kb.sync(_write(tmp_path / "v2.jsonl", POOL[3:], "2026-12-02T00:00:00.000Z"), full=True)
        state, version = anchors_key(kb.store.meta_value)
    stored = anchordb.read_anchor_db(record_anchordb_path(db), state, version, "hyperscan")
    assert stored.delta == (0, 0)  # every record changed: compiled whole


def test_files_of_another_key_are_not_extended(tmp_path: Path, counted: dict[str, int]) -> None:
    # The maps of the previous key gone (a build killed between its files): compiled whole.
    db = tmp_path / "kb.sqlite3"
    with errkb.open(db, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        kb.sync(_write(tmp_path / "v1.jsonl", POOL[:8], "2026-12-01T00:00:00.000Z"), full=True)
        maps_path(record_anchordb_path(db)).unlink()
        kb.sync(_write(tmp_path / "v2.jsonl", POOL[1:9], "2026-12-02T00:00:00.000Z"), full=True)
        state, version = anchors_key(kb.store.meta_value)
        first = _report(kb)
    stored = anchordb.read_anchor_db(record_anchordb_path(db), state, version, "hyperscan")
    assert stored.delta == (0, 0)
    assert first == _fresh_report(POOL[1:9], tmp_path / "fresh")


#: Rows of a pool (``test_recordanchors._row``): shared anchors, fixed messages, quotes.
ROW_POOL = [
    _row(f"{n:016x}", template, literals, fixed)
    for n, (template, literals, fixed) in enumerate(
        [
            ("fill", ("fill",), True),
            ("cannot open shard ", ("cannot open shard ",), False),
            ("bad dtype for ", ("bad dtype for ", " in layer"), False),
            ("can't load 'x'", ("can't load 'x'",), True),
            ("cannot open shard ", ("cannot open shard ", " now"), False),
            ("fill", ("fill",), True),
            ("bad dtype for ", ("bad dtype for ",), False),
            ("a & b failed", ("a & b failed",), True),
        ]
    )
]


@given(
    before=st.frozensets(st.integers(0, len(ROW_POOL) - 1)),
    after=st.frozensets(st.integers(0, len(ROW_POOL) - 1)),
    changed=st.frozensets(st.integers(0, len(ROW_POOL) - 1)),
)
def test_merged_maps_say_what_maps_of_the_rows_say(
    before: frozenset[int], after: frozenset[int], changed: frozenset[int]
) -> None:
    # ``changed``: records of both whose rows are compiled again anyway (a new hash).
    old, old_words = recordanchors.record_maps([ROW_POOL[k] for k in sorted(before)])
    fresh = sorted((after - before) | (after & changed))
    gone = [ROW_POOL[k][0] for k in sorted((before - after) | (before & after & changed))]
    delta, delta_words = recordanchors.record_maps([ROW_POOL[k] for k in fresh])
    merged = anchordelta.merged_maps(old, gone, delta)
    whole, whole_words = recordanchors.record_maps([ROW_POOL[k] for k in sorted(after)])
    got = words_to_records((*old_words, *delta_words), merged)
    assert got == words_to_records(whole_words, whole)
    assert [merged.record_id(r) for r in range(len(merged.fixed))] == [
        whole.record_id(r) for r in range(len(whole.fixed))
    ]
    assert merged.ends == old.ends + delta.ends and len(merged) == len(old) + len(delta)


def words_to_records(words: tuple[str, ...], maps: recordanchors.RecordMaps) -> dict[str, Any]:
    """Each word's records (by id: fixed flag and literals), words standing for none left out."""
    out: dict[str, set[tuple[str, bool, tuple[str, ...]]]] = {}
    for w, word in enumerate(words):
        records = maps.word_records[maps.word_offsets[w] : maps.word_offsets[w + 1]]
        for r in records:
            entry = (maps.record_id(r), maps.fixed[r] == 1, maps.record_literals(r))
            out.setdefault(word, set()).add(entry)
    return out


def check_anchor_files(db: str | Path) -> bool:
    """The record anchors' files of ``db``'s current key say what its live rows say.

    False when they are not there for the current key (a reader reads the rows then); an
    AssertionError when they are and disagree with the rows.
    """
    from errkb.store import open_store

    store = open_store(db)
    try:
        with store.snapshot() as view:
            key, version = anchors_key(view.meta_value)
            rows_maps, rows_words = recordanchors.record_maps(view.anchor_rows())
    finally:
        store.close()
    path = record_anchordb_path(Path(db))
    try:
        stored = anchordb.read_anchor_db(path, key, version, anchordb.default_engine())
    except anchordb.AnchorDatabaseError:
        return False
    maps = recordanchors.read_maps(maps_path(path), key, version, stored.digest, verify=True)
    if maps is None:
        return False
    assert words_to_records(stored.words, maps) == words_to_records(rows_words, rows_maps)
    ids = [maps.record_id(r) for r in range(len(maps.fixed))]
    assert ids == sorted(rows_maps.record_id(r) for r in range(len(rows_maps.fixed)))
    assert all(maps.position(rid) == r for r, rid in enumerate(ids))
    return True


@pytest.mark.parametrize("dies", ["maps", "anchors", "hashes"])
def test_a_build_that_dies_between_its_files_leaves_old_or_new(
    tmp_path: Path, counted: dict[str, int], monkeypatch: pytest.MonkeyPatch, dies: str
) -> None:
    db = tmp_path / "kb.sqlite3"
    with _delta_kb(db, bundled=False) as kb:
        kb.sync(_write(tmp_path / "v1.jsonl", POOL[:7], "2026-12-01T00:00:00.000Z"), full=True)
    assert check_anchor_files(db)
    name = {"maps": "write_maps", "anchors": "store_extended", "hashes": "write_hashes"}[dies]
    real = getattr(anchordelta, name)

    def killed(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)  # the file is written, then the process dies
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(anchordelta, name, killed)
        with _delta_kb(db) as kb, pytest.raises(SyncInterruptedError):
            kb.sync(_write(tmp_path / "v2.jsonl", POOL[1:8], "2026-12-02T00:00:00.000Z"), full=True)
    check_anchor_files(db)  # the current key's files, where they are there, agree with the rows
    with errkb.open(db) as kb:
        assert _report(kb) == _fresh_report(POOL[1:8], tmp_path / "fresh1")
        kb.compaction = LOOSE
        kb.sync(_write(tmp_path / "v3.jsonl", POOL[2:9], "2026-12-03T00:00:00.000Z"), full=True)
    assert check_anchor_files(db)
    counted.update(compiles=0, maps=0)
    with errkb.open(db) as kb:
        got = _report(kb)
    assert counted["compiles"] == 0 and counted["maps"] == 0
    assert got == _fresh_report(POOL[2:9], tmp_path / "fresh2")


def test_both_backends_extend_the_files_and_explain_as_a_rebuild(
    db_target: str, tmp_path: Path, counted: dict[str, int]
) -> None:
    with _delta_kb(db_target, bundled=False) as kb:
        kb.sync(_write(tmp_path / "v1.jsonl", POOL[:8], "2026-12-01T00:00:00.000Z"), full=True)
        kb.sync(_write(tmp_path / "v2.jsonl", POOL[1:9], "2026-12-02T00:00:00.000Z"), full=True)
        state, version = anchors_key(kb.store.meta_value)
        path = record_anchordb_path(kb.path)
    assert anchordb.read_anchor_db(path, state, version, "hyperscan").delta[0] > 0
    counted.update(compiles=0, maps=0)
    with errkb.open(db_target) as kb:
        got = _report(kb)
    assert counted["compiles"] == 0 and counted["maps"] == 0
    assert got == _fresh_report(POOL[1:9], tmp_path / "fresh")
