"""Incremental record anchors (``errkb.match.anchordelta``, issue 48).

A write compiles only the records it added or changed; the first explain after any write
compiles nothing, and its report equals that of a knowledge base built from scratch with the
same records, over random sequences of syncs, documentation changes, compactions and
rollbacks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.explain import Thresholds
from errkb.match import anchordb, anchordelta, recordanchors
from errkb.match.anchordelta import BuildKind, Compaction, hashes_path
from errkb.match.recordanchors import maps_path, record_anchordb_path
from errkb.store import anchors_key
from tests.conftest import load_seed_envelopes, make_record, query
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
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_the_first_explain_after_any_write_compiles_nothing_and_equals_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory, counted: dict[str, int], steps: list[Any]
) -> None:
    tmp = tmp_path_factory.mktemp("delta")
    db = tmp / "kb.sqlite3"
    with errkb.open(db, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        kb.compaction = LOOSE
        kb.sync(_write(tmp / "v0.jsonl", POOL[:6], "2026-12-01T12:00:00.000Z"), full=True)
    for n, step in enumerate(steps):
        with errkb.open(db) as kb:
            kb.scan_engine = "hyperscan"
            kb.compaction = LOOSE
            _apply(kb, step, n, tmp)
            records = _live(kb)
        counted.update(compiles=0, maps=0)
        with errkb.open(db) as kb:  # another process: it loads the files
            got = _report(kb)
        assert counted["compiles"] == 0 and counted["maps"] == 0, step
        assert got == _fresh_report(records, tmp / f"fresh{n}"), step


def test_a_write_compiles_only_the_records_it_changed(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    db = tmp_path / "kb.sqlite3"
    with errkb.open(db, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        kb.compaction = LOOSE
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
    with errkb.open(db, bundled=False) as kb:
        kb.scan_engine = "hyperscan"
        kb.compaction = LOOSE
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
