"""The store's one write engine (``errkb.store.engine``) and what it is fed (issue 20).

The unit of work runs on both backends from one body; the store computes nothing about
matching: each record's compiled matcher and index words come with it (``Derived``) or from the
caller's ``Feed``, and explain reads the stored specs instead of compiling records.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.match.feed import FEED, derive
from errkb.match.matcher import load_specs
from errkb.records.patterns import compile_record
from errkb.store import Incoming, RecordJSON, VersionKind, anchors_key, open_store
from errkb.store.engine import spec_columns, spec_from
from errkb.store.values import Derived
from tests.conftest import DATASET, QUANTO_ID, ROOT, index_rows, is_pg, make_record, query

STORE = ROOT / "errkb" / "store"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at top level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_store_imports_no_matching_code() -> None:
    for path in sorted(STORE.glob("*.py")):
        bad = {m for m in _imports(path) if m == "errkb.match" or m.startswith("errkb.match.")}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_postgres_imports_no_private_name_of_sqlite() -> None:
    tree = ast.parse((STORE / "postgres.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "errkb.store.sqlite":
            assert all(not a.name.startswith("_") for a in node.names), ast.dump(node)


def _seeds() -> list[RecordJSON]:
    return [json.loads(p.read_text())["record"] for p in sorted(DATASET.glob("*.txt"))]


def _ingest(store: Any, incoming: list[Incoming], feed: Any = FEED, *, full: bool = False) -> None:
    """One ingest of ``incoming`` in a write transaction of its own."""
    with store.write() as tx:
        tx.apply(
            incoming,
            kind=VersionKind.INGEST,
            source="t",
            dataset_version=None,
            feed=feed,
            full=full,
        )


class CountingFeed:
    """``FEED``, counting the records it is asked to derive."""

    compiler = FEED.compiler

    def __init__(self) -> None:
        self.derived: list[str] = []

    def derive(self, record: RecordJSON) -> Derived:
        self.derived.append(str(record["id"]))
        return derive(record)

    def rank(self, words: Iterable[tuple[str, Sequence[str]]]) -> Iterator[tuple[str, str, int]]:
        return FEED.rank(words)

    def rerank(
        self,
        words: Iterable[tuple[str, Sequence[str]]],
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
        return FEED.rerank(words, previous, after)


@pytest.fixture
def store(db_target: str) -> Iterator[Any]:
    st = open_store(db_target)
    st.ensure_schema()
    yield st
    st.close()


def test_apply_writes_what_it_is_fed_and_derives_only_the_rest(store: Any) -> None:
    seeds = _seeds()
    fed = [Incoming(r, None, derived=derive(r)) for r in seeds[1:]]
    feed = CountingFeed()
    _ingest(store, [Incoming(seeds[0], None), *fed], feed)
    assert feed.derived == [seeds[0]["id"]]  # the one that came without
    with store.snapshot() as view:
        got = {s.record_id: s for s in view.pattern_specs([r["id"] for r in seeds])}
        tokens = sorted(view.token_rows())
    for r in seeds:
        assert got[r["id"]] == compile_record(
            r["id"],
            r["errorMessage"],
            r.get("messagePattern") or "",
            error_class=r.get("errorClass"),
            file_path=r.get("filePath") or "",
            line_number=r.get("lineNumber"),
            source_code=r.get("sourceCode"),
        )
    expected = list(index_rows((r["id"], r["errorMessage"]) for r in seeds))
    assert tokens == sorted((rid, tok, rank) for tok, rid, rank in expected)


def test_an_update_replaces_the_spec_and_retired_records_have_none_read(store: Any) -> None:
    seeds = _seeds()
    _ingest(store, [Incoming(r, None) for r in seeds])
    changed = dict(seeds[0], errorMessage="Brand new message about {thing} here")
    _ingest(store, [Incoming(changed, None), *(Incoming(r, None) for r in seeds[2:])], full=True)
    with store.snapshot() as view:
        specs = {s.record_id: s for s in view.pattern_specs([r["id"] for r in seeds])}
    assert specs[seeds[0]["id"]].template == changed["errorMessage"]
    assert seeds[1]["id"] not in specs  # retired by the full apply
    assert query(store, "SELECT count(*) FROM pattern_specs")[0][0] == len(seeds)


def test_the_anchor_rows_of_some_ids_and_the_live_hashes_are_the_live_records_only(
    store: Any,
) -> None:
    seeds = _seeds()
    _ingest(store, [Incoming(r, None) for r in seeds])
    _ingest(store, [Incoming(r, None) for r in seeds[1:]], full=True)  # seeds[0] retired
    ids = [r["id"] for r in seeds]
    with store.snapshot() as view:
        whole = {row[0]: row for row in view.anchor_rows()}
        some = view.anchor_rows_of([*reversed(ids), "no-such-id"])
        hashes = dict(view.live_hashes())
    assert [row[0] for row in some] == sorted(ids[1:], key=str.encode)
    assert all(whole[row[0]] == row for row in some)
    assert set(hashes) == set(ids[1:])
    stored = query(store, "SELECT id, content_hash FROM records WHERE retired = 0")
    assert hashes == dict(stored)


def test_specs_of_another_compiler_are_compiled_again_by_the_next_write(store: Any) -> None:
    seeds = _seeds()
    _ingest(store, [Incoming(r, None) for r in seeds])
    assert store.meta_value("compiler") == FEED.compiler
    with store.snapshot() as view:
        current = {s.record_id: s for s in view.pattern_specs([r["id"] for r in seeds])}
    # What an older errkb left: its compiler noted, a spec it compiled otherwise, words of it.
    kept = seeds[1]["id"]
    with store.write() as tx:
        tx.set_meta("compiler", "0")
        tx.sql.execute(
            "UPDATE pattern_specs SET kinds = '[]', words = '[\"zzold\"]' WHERE record_id = ?",
            (kept,),
        )
    with store.snapshot() as view:
        assert view.pattern_specs([kept])[0] != current[kept]
    changed = dict(seeds[0], errorMessage="Brand new message about {thing} here")
    feed = CountingFeed()
    _ingest(
        store,
        [
            Incoming(changed, None, derived=derive(changed)),
            *(Incoming(r, None) for r in seeds[1:]),
        ],
        feed,
    )
    # Every record it kept compiled again, the one it wrote not twice; the index re-ranked.
    assert sorted(feed.derived) == sorted(r["id"] for r in seeds[1:])
    assert store.meta_value("compiler") == FEED.compiler
    with store.snapshot() as view:
        assert view.pattern_specs([kept])[0] == current[kept]
        assert "zzold" not in {token for _rid, token, _rank in view.token_rows()}
    _index_is_whole(store)  # ranked from every live record's new words
    feed = CountingFeed()
    # This compiler's specs: nothing compiled again.
    _ingest(store, [Incoming(r, None) for r in seeds[1:]], feed)
    assert feed.derived == []


def test_a_spec_survives_its_columns() -> None:
    r = _seeds()[0]
    spec = compile_record(r["id"], r["errorMessage"], r.get("messagePattern") or "")
    assert spec_from((spec.record_id, *spec_columns(spec))) == spec


def test_explain_reads_stored_specs_and_compiles_none(
    kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errkb.match.matcher as matcher

    calls: list[str] = []
    real = matcher.compile_record

    def counting(rid: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(rid)
        return real(rid, *args, **kwargs)

    monkeypatch.setattr(matcher, "compile_record", counting)
    with kb.store.snapshot() as view:
        specs = load_specs(view, [QUANTO_ID])
    assert [s.record_id for s in specs] == [QUANTO_ID]
    assert calls == []
    # A database written before migration 0006 (no rows yet): compiled from the record.
    store = kb.store
    with store.write() as tx:
        tx.sql.execute("DELETE FROM pattern_specs")  # type: ignore[attr-defined]
    with kb.store.snapshot() as view:
        again = load_specs(view, [QUANTO_ID])
    assert again == specs
    assert calls == [QUANTO_ID]


def test_opening_a_database_without_specs_fills_them(db_target: str) -> None:
    with errkb.open(db_target) as kb:
        live = query(kb.store, "SELECT count(*) FROM records WHERE retired = 0")[0][0]
        tokens = query(kb.store, "SELECT token, record_id, rank FROM match_tokens")
        with kb.store.write() as tx:
            tx.sql.execute("DELETE FROM pattern_specs")  # type: ignore[attr-defined]
            tx.set_meta("match_index", "stale")  # what migration 0006 leaves
    with errkb.open(db_target) as kb:
        assert query(kb.store, "SELECT count(*) FROM pattern_specs")[0][0] == live
        assert sorted(query(kb.store, "SELECT token, record_id, rank FROM match_tokens")) == sorted(
            tokens
        )
        assert kb.store.meta_value("match_index") is None
    assert is_pg(db_target) or Path(db_target).exists()


class RerankCounting(CountingFeed):
    """``FEED``, noting how many records each ``rerank`` hands back rows for (None: all)."""

    def __init__(self) -> None:
        super().__init__()
        self.redone: list[int | None] = []

    def rerank(
        self,
        words: Iterable[tuple[str, Sequence[str]]],
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
        redo, rows = FEED.rerank(words, previous, after)
        self.redone.append(None if redo is None else len(redo))
        return redo, rows


def _index_is_whole(store: Any) -> None:
    """The match index holds exactly what ranking every live record's words gives."""
    live = query(
        store,
        "SELECT s.record_id, s.words FROM pattern_specs s JOIN records r ON r.id = s.record_id "
        "WHERE r.retired = FALSE",
    )
    expected = sorted(
        (rid, tok, rank) for tok, rid, rank in FEED.rank((r, json.loads(w)) for r, w in live)
    )
    with store.snapshot() as view:
        assert sorted(view.token_rows()) == expected


def test_an_apply_rewrites_only_the_match_index_rows_that_change(store: Any) -> None:
    from published import make_record

    def apply(records: Sequence[RecordJSON], feed: Any, *, full: bool = False) -> None:
        _ingest(store, [Incoming(r, None, derived=derive(r)) for r in records], feed, full=full)

    first = [make_record(n, f"org/repo-{n % 4}") for n in range(40)]
    apply(first, FEED)
    _index_is_whole(store)
    # Two records with new content but their messages (their words) as they were: no row
    # changes, none is rewritten (and no other record's words are read: ``test_feed``).
    feed = RerankCounting()
    apply([make_record(n, f"org/repo-{n % 4}", marker="v2") for n in (3, 7)], feed)
    assert feed.redone == [0]
    _index_is_whole(store)
    # A new message with a word of its own and words every record holds: the common words'
    # counts moved, so every record's ranks may: all rows, in bulk.
    feed = RerankCounting()
    extra = {**first[0], "errorMessage": "Generated failure number 999 in layer {name!r} zebra"}
    extra["id"] = "f" * 16
    apply([extra], feed)
    assert feed.redone == [None]
    _index_is_whole(store)
    # A message that gains "zebra": its count moved, so the other record holding it is
    # ranked again too, and no one else.
    feed = RerankCounting()
    gains = {**first[5], "errorMessage": str(first[5]["errorMessage"]) + " zebra"}
    apply([gains], feed)
    assert feed.redone == [2]
    _index_is_whole(store)
    # A full apply retiring most records, then one bringing two of them back.
    feed = RerankCounting()
    apply(first[:5], feed, full=True)
    apply(first[:7], feed, full=True)
    _index_is_whole(store)


class CountedNoting:
    """The sync's feed (``rank_counted``), noting how many records each counted rank got."""

    def __init__(self) -> None:
        from errkb.sync.ranking import COUNTING_FEED

        self.feed = COUNTING_FEED
        self.compiler = COUNTING_FEED.compiler
        self.ranked: list[int] = []
        self.reranked = 0  #: ``rerank`` calls: every live record's words read

    def derive(self, record: RecordJSON) -> Derived:
        return self.feed.derive(record)

    def rank(self, words: Iterable[tuple[str, Sequence[str]]]) -> Iterator[tuple[str, str, int]]:
        return self.feed.rank(words)

    def rerank(
        self,
        words: Iterable[tuple[str, Sequence[str]]],
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
        self.reranked += 1
        return self.feed.rerank(words, previous, after)

    def rank_counted(
        self, words: Iterable[tuple[str, Sequence[str]]], count: Mapping[str, int]
    ) -> Iterator[tuple[str, str, int]]:
        given = list(words)
        self.ranked.append(len(given))
        return self.feed.rank_counted(given, count)


def _words_are_counted(store: Any) -> None:
    """``match_words`` and ``match_word_counts`` hold every live record's words, counted."""
    live = query(
        store,
        "SELECT s.record_id, s.words FROM pattern_specs s JOIN records r ON r.id = s.record_id "
        "WHERE NOT r.retired",
    )
    pairs = sorted((w, str(rid)) for rid, words in live for w in json.loads(words))
    assert sorted((str(w), str(r)) for w, r in query(store, "SELECT * FROM match_words")) == pairs
    counts: dict[str, int] = {}
    for w, _rid in pairs:
        counts[w] = counts.get(w, 0) + 1
    stored = query(store, "SELECT word, n FROM match_word_counts")
    assert {str(w): int(n) for w, n in stored} == counts


def test_a_counted_rank_leaves_the_index_a_whole_ranking_would(store: Any) -> None:
    # Random messages over a few words (many equal counts, words crossing each other's
    # counts) through random applies: records changed, added, retired and brought back.
    # After each, the index is what ranking every live record gives, and only the records
    # whose rows can change were ranked (never every live record's words read).
    import random

    from published import make_record

    rng = random.Random(48)
    vocabulary = [f"w{k}{'x' * (k % 3)}" for k in range(14)]

    def record(n: int, version: int) -> RecordJSON:
        obj = make_record(n, f"org/repo-{n % 3}")
        words = rng.sample(vocabulary, rng.randint(1, 8))
        obj["errorMessage"] = " ".join(words) + f" v{version} {{name}}"
        obj["messagePattern"] = obj["errorMessage"].replace("{name}", "(.+?)")
        return obj

    current = {n: record(n, 0) for n in range(50)}

    def apply(records: Sequence[RecordJSON], feed: Any, *, full: bool = False) -> None:
        _ingest(store, [Incoming(r, None, derived=derive(r)) for r in records], feed, full=full)

    apply(list(current.values()), FEED)
    for step in range(1, 16):
        feed = CountedNoting()
        live = sorted(current)
        for n in rng.sample(live, rng.randint(1, 4)):
            current[n] = record(n, step)
        for n in rng.sample(live, rng.randint(0, 3)):
            del current[n]  # retired by the full apply
        for n in rng.sample(range(50, 60), rng.randint(0, 2)):
            current[n] = record(n, step)  # new, or back
        apply(list(current.values()), feed, full=True)
        _index_is_whole(store)
        _words_are_counted(store)
        assert feed.reranked == 0
        assert feed.ranked and all(n < len(current) for n in feed.ranked), feed.ranked


def test_a_counted_rank_reads_no_record_whose_order_cannot_move(store: Any) -> None:
    # 200 records share "common"; one retired moves its count by one, which no other word's
    # count is near: only the records holding both "common" and a word counted 199 or 200
    # (none) could move, so nothing but the changed record is ranked.
    from published import make_record

    def record(n: int) -> RecordJSON:
        obj = make_record(n, "org/repo")
        obj["errorMessage"] = f"common unique{n} {{name}}"
        obj["messagePattern"] = f"common unique{n} (.+?)"
        return obj

    records = [record(n) for n in range(200)]
    incoming = [Incoming(r, None, derived=derive(r)) for r in records]
    _ingest(store, incoming, FEED)
    feed = CountedNoting()
    _ingest(store, incoming[1:], feed, full=True)
    assert feed.ranked == [0]
    _index_is_whole(store)
    _words_are_counted(store)
    # A new record holding "common" and a word held by 199: both counts cross, and every
    # holder of the other word may move: ranked.
    other = make_record(500, "org/repo")
    other["errorMessage"] = "common unique7 {name}"
    other["messagePattern"] = "common unique7 (.+?)"
    feed = CountedNoting()
    _ingest(store, [Incoming(other, None, derived=derive(other))], feed)
    assert feed.ranked == [2]  # the new record, and unique7's other holder
    _index_is_whole(store)
    _words_are_counted(store)


def test_the_anchor_key_moves_only_with_what_the_anchor_files_are_built_from(
    store: Any,
) -> None:
    # The anchor files beside the knowledge base are keyed by ``anchors_key``: the state of
    # the last write that changed a live record's anchor, literals, regex, template or index
    # words, or which records are live. Any other write leaves them current.
    from published import make_record

    def apply(records: Sequence[RecordJSON], *, full: bool = False) -> tuple[str, str]:
        _ingest(store, [Incoming(r, None, derived=derive(r)) for r in records], full=full)
        with store.snapshot() as view:
            state = str(view.meta_value("state"))
            # The key is the state of that write and the nonce it drew (``anchors_key``).
            return state, anchors_key(view.meta_value)[0].partition(".")[0]

    first = [make_record(n, f"org/repo-{n % 4}") for n in range(12)]
    state, key = apply(first)
    assert key == state  # the first write: every input is new
    # New documentation for two records (a re-analysis upstream): the key stays.
    state2, key2 = apply([make_record(n, f"org/repo-{n % 4}", marker="v2") for n in (3, 7)])
    assert (state2 != state, key2) == (True, key)
    # The same records again: nothing changed at all.
    assert apply(first[:2])[1] == key
    # A record whose message changes: its template, literals and words do.
    gains = {**first[5], "errorMessage": str(first[5]["errorMessage"]) + " zebra"}
    state3, key3 = apply([gains])
    assert key3 == state3 != key
    # A record retired, then brought back, then a new one: the live set changes each time.
    now = [*first[:5], gains, *first[6:]]
    for records, full in ((now[:11], True), (now, True), ([make_record(99, "org/new")], False)):
        before = key3
        state3, key3 = apply(records, full=full)
        assert key3 == state3 != before


def test_a_rewrite_that_came_without_its_matcher_is_derived_once(store: Any) -> None:
    # Telling whether a rewrite changes the anchor files' inputs needs its new spec: derived
    # once, and the row is written from that same value. A rewrite leaving the matcher's
    # inputs as stored (documentation alone) is not derived at all: its spec row stays.
    seeds = _seeds()
    _ingest(store, [Incoming(r, None) for r in seeds])
    with store.snapshot() as view:
        specs = load_specs(view, [str(r["id"]) for r in seeds])
    feed = CountingFeed()
    again = [dict(r, documentation=f"{r['documentation']} (again)") for r in seeds]
    _ingest(store, [Incoming(r, None) for r in again], feed)
    assert feed.derived == []
    with store.snapshot() as view:
        assert load_specs(view, [str(r["id"]) for r in seeds]) == specs
    moved = [dict(r, lineNumber=int(r.get("lineNumber") or 0) + 3) for r in again]
    _ingest(store, [Incoming(r, None) for r in moved], feed)
    assert sorted(feed.derived) == sorted(str(r["id"]) for r in seeds)
    with store.snapshot() as view:
        lines = {s.record_id: s.line_number for s in load_specs(view, [r["id"] for r in seeds])}
    assert lines == {r["id"]: r["lineNumber"] for r in moved}


def test_records_read_together_are_each_record_as_read_alone(store: Any) -> None:
    seeds = _seeds()
    _ingest(store, [Incoming(r, None) for r in seeds])
    ids = [r["id"] for r in seeds]
    with store.snapshot() as view:
        alone = {rid: view.raw_record(rid) for rid in ids}
        together = view.raw_records([*reversed(ids), "0" * 16, ids[0]])
        again = view.raw_records(ids)  # PostgreSQL: from the state's record cache this time
    assert together == alone == again
    assert "0" * 16 not in together and len(together) == len(seeds) > 1


def test_kept_and_retired_are_what_reading_every_kept_id_gives(store: Any) -> None:
    # ``apply`` counts the kept records and lists those a full apply retires without reading
    # the kept repositories' ids; ``classify`` still reads them (``_kept_ids``,
    # ``_to_retire``). Both, over repositories kept or not, rejects inside and outside them,
    # this apply's own ids among them, and retired records.
    import random

    from errkb.store import Keep
    from errkb.store.engine import _kept_and_retired, _kept_ids, _to_retire

    base = _seeds()[0]
    records = []
    for n in range(60):
        rec = make_record(base, f"Keepword{n} tensor {{name!r}} is odd{n}")
        rec["repo"] = f"org/r{n % 6}"
        rec["id"] = f"{n:016x}"
        records.append(rec)
    _ingest(store, [Incoming(r, None) for r in records])
    retired = [r for n, r in enumerate(records) if n % 11 == 3]
    with store.write() as tx:  # some records retired: never kept, never retired again
        tx.apply(
            [Incoming(r, None) for r in records if r not in retired],
            kind=VersionKind.INGEST,
            source="t",
            dataset_version=None,
            feed=FEED,
            full=True,
        )
    ids = [str(r["id"]) for r in records]
    rng = random.Random(7)
    with store.snapshot() as view:
        for _round in range(40):
            keep = Keep(
                frozenset(rng.sample([f"org/r{n}" for n in range(8)], rng.randint(0, 6))),
                frozenset(rng.sample(ids, rng.randint(0, 6))),
            )
            seen = set(rng.sample(ids, rng.randint(0, 30)))
            kept = _kept_ids(view, keep, seen)
            for full in (False, True):
                count, retire = _kept_and_retired(view, keep, seen, full=full)
                assert count == len(kept), (keep, seen)
                assert retire == (_to_retire(view, seen.union(kept)) if full else [])


def test_an_update_rewrites_only_the_child_and_spec_rows_that_change(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Documentation alone (a re-analysis upstream): no child or spec row is touched; new tags:
    # that table alone; another line number: the spec row alone. What is stored afterwards is
    # the new content either way.
    from errkb.store.engine import UnitOfWork

    base = _seeds()[0]
    records = [make_record(base, f"Rowword{n} tensor {{name!r}} is odd{n}") for n in range(4)]
    _ingest(store, [Incoming(r, None) for r in records])
    docs, tags, line, same = (dict(r) for r in records)
    docs["documentation"] = "Rewritten by a re-analysis."
    tags["tags"] = [*tags["tags"], "backfilled"]
    line["lineNumber"] = int(line["lineNumber"] or 0) + 7
    deleted: dict[str, list[str]] = {}
    real = UnitOfWork._each_in

    def noted(self: UnitOfWork, statement: str, ids: Sequence[str], params: Any = ()) -> None:
        if statement.startswith("DELETE FROM"):
            deleted.setdefault(statement.split()[2], []).extend(ids)
        real(self, statement, ids, params)

    monkeypatch.setattr(UnitOfWork, "_each_in", noted)
    _ingest(store, [Incoming(r, None) for r in (docs, tags, line, same)])
    assert {table: ids for table, ids in deleted.items() if ids} == {
        "record_tags": [tags["id"]],
        "pattern_specs": [line["id"]],
    }
    for want in (docs, tags, line, same):
        assert store.raw_record(want["id"]) == want
    with store.snapshot() as view:
        specs = {s.record_id: s for s in load_specs(view, [r["id"] for r in records])}
    assert specs[line["id"]].line_number == line["lineNumber"]


def test_ids_asked_once_per_file_take_few_statement_texts() -> None:
    # Each distinct IN list is a prepared statement the driver caches: padded, the last
    # chunk of any count is one of ten sizes; the ids asked are the same set, in order.
    from errkb.store.sqlite import _CHUNK as _IN_CHUNK
    from errkb.store.sqlite import _padded

    sizes = set()
    for n in range(1, 3 * _IN_CHUNK + 7):
        ids = [f"{i:016x}" for i in range(n)]
        padded = _padded(ids)
        assert padded[:n] == ids and set(padded) == set(ids)
        sizes.add(len(padded) % _IN_CHUNK or _IN_CHUNK)
    assert len(sizes) <= 10
