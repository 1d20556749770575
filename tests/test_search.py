"""errkb search: the full-text index kept in every write's transaction, ranking, safety on any
text, the CLI; on both backends (SQLite FTS5, PostgreSQL tsvector + GIN) through ``db_target``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.cli import cli
from errkb.match.feed import FEED
from errkb.records import schema_validator
from errkb.store import VersionKind
from errkb.store.sqlite import SqliteStore
from tests.conftest import (
    COMFY_ID,
    DATASET,
    EXAMPLES,
    LINEAR_ID,
    QUANTO_ID,
    ROOT,
    is_pg,
    make_record,
)
from tests.conftest import (
    query as sql_rows,
)
from tests.tiers import examples

MIGRATION = ROOT / "migrations" / "versions" / "0004_search.py"


@pytest.fixture
def kb(db_target: str) -> Iterator[errkb.KnowledgeBase]:
    """The bundled knowledge base on each backend."""
    with errkb.open(db_target) as opened:
        yield opened


def write_sql(
    kb: errkb.KnowledgeBase, sqlite_sql: str, pg_sql: str, params: tuple[Any, ...]
) -> None:
    """Run one statement in the store's own write transaction, in the backend's spelling."""
    with kb.store.write() as tx:
        sql = pg_sql if is_pg(kb.store.describe()) else sqlite_sql
        tx.sql.conn.execute(sql, params)  # type: ignore[attr-defined]


def ids(report: Any) -> list[str]:
    return [r.id for r in report.results]


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"record": r, "datasetVersion": "2026-12-01T00:00:00.000Z"}) + "\n"
            for r in records
        )
    )
    return path


def fts_integrity(kb: errkb.KnowledgeBase) -> None:
    """The index holds exactly what indexing the records afresh gives.

    On PostgreSQL: every record's ``search_tsv`` equals what the trigger computes afresh (all
    records rewritten in a transaction that is rolled back).

    FTS5's own integrity-check cannot see a contentless table's bad 'delete' (it has no text to
    compare with), so the triggers' bookkeeping is checked against a rebuild, term by term.
    """
    import importlib.util

    if is_pg(kb.store.describe()):
        pg_integrity(kb)
        return
    spec = importlib.util.spec_from_file_location("m0004", MIGRATION)
    assert spec and spec.loader
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    conn = sqlite3.connect(kb.path)
    try:
        conn.execute(f"CREATE VIRTUAL TABLE temp.fresh USING fts5({migration.COLUMNS}, content='')")
        conn.execute(
            f"INSERT INTO temp.fresh (rowid, {migration.COLUMNS}) SELECT d.key, "
            f"{migration._values('r')} FROM records r JOIN search_docs d ON d.record_id = r.id"
        )
        conn.execute(
            "CREATE VIRTUAL TABLE temp.fresh_vocab USING fts5vocab(temp, fresh, 'instance')"
        )
        conn.execute(
            "CREATE VIRTUAL TABLE temp.live_vocab USING fts5vocab(main, search_fts, 'instance')"
        )
        query = "SELECT term, doc, col, offset FROM temp.{} ORDER BY 1, 2, 3, 4"
        fresh = conn.execute(query.format("fresh_vocab")).fetchall()
        live = conn.execute(query.format("live_vocab")).fetchall()
        assert fresh and live == fresh
    finally:
        conn.close()


def pg_integrity(kb: errkb.KnowledgeBase) -> None:
    from errkb.store.postgres import PostgresStore

    store = kb.store
    assert isinstance(store, PostgresStore)
    with store.pool().connection() as conn:
        try:
            conn.execute("CREATE TEMP TABLE kept AS SELECT id, search_tsv FROM records")
            conn.execute("UPDATE records SET raw_json = raw_json")
            row = conn.execute(
                "SELECT count(*), "
                "count(*) FILTER (WHERE r.search_tsv IS DISTINCT FROM k.search_tsv), "
                "count(*) FILTER (WHERE r.search_tsv IS NULL OR length(r.search_tsv) = 0) "
                "FROM records r JOIN kept k USING (id)"
            ).fetchone()
        finally:
            conn.rollback()
    assert row is not None and row[0] > 0 and row[1:] == (0, 0)


def test_words_find_records_and_results_are_typed_and_frozen(kb: errkb.KnowledgeBase) -> None:
    report = kb.search("quanto incompatible scale")
    assert ids(report)[0] == QUANTO_ID
    first = report.results[0]
    assert (first.repo, first.error_class, first.severity) == (
        "sgl-project/sglang",
        "ValueError",
        "error",
    )
    assert 0 < first.score < 1  # only the matcher's verdict scores 1.0
    with pytest.raises(AttributeError):
        first.score = 1.0  # type: ignore[misc]
    assert report.dataset_version == "2026-08-28T06:17:29.519Z"


def test_prose_words_find_a_record(kb: errkb.KnowledgeBase, seed_records: dict[str, Any]) -> None:
    # A word only in a solution, not in the template, still finds the record.
    assert "out_features" in seed_records[QUANTO_ID]["solutions"][0]
    assert QUANTO_ID in ids(kb.search("reshape out_features"))
    # A tag, and a slug.
    assert ids(kb.search("shape-validation"))[0] == QUANTO_ID
    assert ids(kb.search("fused-in-checkpoint"))[0] == LINEAR_ID


def test_a_near_exact_message_ranks_first(kb: errkb.KnowledgeBase) -> None:
    # Values filled in, class left out: the matcher explains it, so score 1.0.
    report = kb.search(
        "Comfy INT8 layer 'blk.0' has incompatible weight/scale shapes: (8, 4) and (1, 8)"
    )
    assert ids(report)[0] == COMFY_ID and report.results[0].score == 1.0
    # A message that no pattern matches (a word changed) still ranks its record first by text.
    near = kb.search("Comfy INT8 layer 'blk.0' has an incompatible weight/scale: (8, 4) and (1, 8)")
    assert ids(near)[0] == COMFY_ID and near.results[0].score < 1.0
    assert near.results[0].score > near.results[1].score


class _Watched:
    """A store that records every call made on it (a read transaction is one ``snapshot``).

    Its views call ``hook`` once, at the first record the matcher reads: in the middle of an
    answer, after the matcher has begun and before the full-text step.
    """

    def __init__(self, store: Any, hook: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.calls: list[str] = []
        self.hook = hook

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.store, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return value(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Any]:
        self.calls.append("snapshot")
        with self.store.snapshot() as view:
            yield _HookedView(view, self)


class _HookedView:
    def __init__(self, view: Any, watched: _Watched) -> None:
        self.view = view
        self.watched = watched

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)

    def _run_hook(self) -> None:
        hook, self.watched.hook = self.watched.hook, lambda: None
        hook()

    def raw_record(self, record_id: str) -> Any:
        self._run_hook()
        return self.view.raw_record(record_id)

    def raw_records(self, record_ids: Any) -> Any:
        # A report's matches read their records together (decide's prefetch).
        self._run_hook()
        return self.view.raw_records(record_ids)


#: Exact for the matcher (score 1.0) and found by the full-text index: both steps read.
COMFY_MESSAGE = "Comfy INT8 layer 'blk.0' has incompatible weight/scale shapes: (8, 4) and (1, 8)"


@pytest.mark.parametrize(
    "query",
    [COMFY_MESSAGE, (EXAMPLES / "quanto-incompatible-scale.log").read_text(), "quanto scale"],
    ids=["message", "traceback", "words"],
)
def test_an_answer_is_read_in_one_read_transaction(kb: errkb.KnowledgeBase, query: str) -> None:
    watched = _Watched(kb.store)
    report = errkb.KnowledgeBase(watched).search(query)  # type: ignore[arg-type]
    assert report.results and report == kb.search(query)
    # Nothing read outside it either: every query went through the one view.
    assert watched.calls == ["snapshot"]


def test_a_sync_committed_during_an_answer_is_not_in_it(
    kb: errkb.KnowledgeBase, db_target: str, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    before = kb.search(COMFY_MESSAGE)
    assert ids(before)[0] == COMFY_ID and before.results[0].score == 1.0
    # A newer full snapshot without the record: it retires it, and names another version.
    newer = write_records(
        tmp_path / "newer.jsonl", [r for rid, r in seed_records.items() if rid != COMFY_ID]
    )

    def sync_elsewhere() -> None:
        # Another process's sync, in effect: its own connections, committed before we go on.
        with errkb.open(db_target) as other:
            other.sync(newer, full=True)

    watched = _Watched(kb.store, sync_elsewhere)
    during = errkb.KnowledgeBase(watched).search(COMFY_MESSAGE)  # type: ignore[arg-type]
    assert watched.hook is not sync_elsewhere, "the hook never ran"
    # The answer is the state it began with, throughout: the matcher's hit, the full-text
    # candidates and the dataset version alike.
    assert during == before
    with errkb.open(db_target) as after:  # and the sync did commit
        found = after.search(COMFY_MESSAGE)
    assert found.dataset_version == "2026-12-01T00:00:00.000Z"
    assert COMFY_ID not in ids(found)


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("comfy-int8-scale-shapes.log", COMFY_ID),
        ("quanto-incompatible-scale.log", QUANTO_ID),
        ("merged-column-scalar-scale.log", LINEAR_ID),
    ],
)
def test_a_whole_traceback_finds_its_record_first(
    kb: errkb.KnowledgeBase, log: str, expected: str
) -> None:
    text = (EXAMPLES / log).read_text()
    assert text.count("\n") > 5
    report = kb.search(text)
    assert ids(report)[0] == expected and report.results[0].score == 1.0


def test_filters_and_limit(kb: errkb.KnowledgeBase) -> None:
    assert ids(kb.search("scale", tag="quanto")) == [QUANTO_ID]
    assert ids(kb.search("scale", repo="nobody/nothing")) == []
    assert ids(kb.search("scale", error_class="KeyError")) == []
    assert ids(kb.search("scale", severity="warning")) == []
    assert len(kb.search("scale", severity="error").results) == 3
    assert len(kb.search("scale", limit=1).results) == 1
    # Filters apply to the matcher's exact hits too.
    message = (
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
        "got shape (2,)"
    )
    assert ids(kb.search(message))[0] == LINEAR_ID
    assert LINEAR_ID not in ids(kb.search(message, tag="quanto"))
    with pytest.raises(errkb.UsageError, match="limit"):
        kb.search("scale", limit=0)


def test_nothing_found(kb: errkb.KnowledgeBase) -> None:
    assert kb.search("zzzqqq xyzzy").results == ()
    assert kb.search("").results == ()
    assert kb.search("   \n  ").results == ()


def test_the_index_follows_every_write_in_its_transaction(
    kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    added = make_record(seed_records[QUANTO_ID], "Flibbertigibbet tensor {name!r} is lopsided")
    kb.ingest([write_records(tmp_path / "a.jsonl", [added])])
    assert ids(kb.search("flibbertigibbet")) == [added["id"]]

    changed = dict(added, documentation="Now about a wobbly gyroscope.")
    kb.ingest([write_records(tmp_path / "b.jsonl", [changed])])
    assert ids(kb.search("gyroscope")) == [added["id"]]
    assert ids(kb.search("flibbertigibbet")) == [added["id"]]  # still its message

    changed2 = dict(added, documentation="Now about a teapot.", tags=["porcelain"])
    report = kb.ingest([write_records(tmp_path / "c.jsonl", [changed2])])
    assert report.counts.updated == 1
    assert ids(kb.search("gyroscope")) == []  # the old words left the index
    assert ids(kb.search("teapot")) == ids(kb.search("porcelain")) == [added["id"]]
    assert ids(kb.search("teapot", tag="porcelain")) == [added["id"]]
    fts_integrity(kb)

    # A failed unit of work leaves the index as it was.
    store = kb.store
    with pytest.raises(RuntimeError), store.write() as tx:
        # The engine's SQL: "?" placeholders on every backend.
        sql = "UPDATE records SET documentation = 'quixotic' WHERE id = ?"
        tx.sql.execute(sql, (QUANTO_ID,))  # type: ignore[attr-defined]
        raise RuntimeError("boom")
    assert ids(kb.search("quixotic")) == []


def test_a_record_whose_json_sqlite_refuses_is_still_indexed(
    kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    added = make_record(seed_records[QUANTO_ID], "Gallimaufry tensor {name!r} is odd")
    added["futureField"] = float("nan")  # kept verbatim: NaN, which SQLite's JSON refuses
    path = tmp_path / "nan.jsonl"
    path.write_text(json.dumps({"record": added, "datasetVersion": "2026-12-01T00:00:00.000Z"}))
    report = kb.ingest([path])
    assert report.counts.added == 1
    assert ids(kb.search("gallimaufry")) == [added["id"]]
    fts_integrity(kb)


def test_retired_records_are_not_found(kb: errkb.KnowledgeBase) -> None:
    write_sql(
        kb,
        "UPDATE records SET retired = 1 WHERE id = ?",
        "UPDATE records SET retired = true WHERE id = %s",
        (QUANTO_ID,),
    )
    assert QUANTO_ID not in ids(kb.search("quanto incompatible scale"))
    assert QUANTO_ID not in ids(kb.search((EXAMPLES / "quanto-incompatible-scale.log").read_text()))


@pytest.mark.parametrize("start", ["0003", "0004"])
def test_migrating_an_existing_database_fills_the_index(db_target: str, start: str) -> None:
    from alembic import command
    from alembic.config import Config

    from errkb._resources import bundle_path
    from errkb.store import Store
    from errkb.store.postgres import PostgresStore

    # A database as an errkb before search left it (0003), or before PostgreSQL's index (0004,
    # SQLite's FTS5 only), records in it.
    store: Store = PostgresStore(db_target) if is_pg(db_target) else SqliteStore(Path(db_target))
    cfg = Config()
    cfg.set_main_option("script_location", str(bundle_path("migrations")))
    # Records written at head, then the schema taken back to ``start`` (this errkb writes only
    # its own schema).
    store.ensure_schema()
    with store.write() as tx:
        tx.apply(
            _incoming(), kind=VersionKind.INGEST, source="seeds", dataset_version=None, feed=FEED
        )
    with store.engine().begin() as conn:  # type: ignore[attr-defined]
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, start)
    assert sql_rows(store, "SELECT version_num FROM alembic_version") == [(start,)]
    store.close()
    with errkb.open(db_target, bundled=False) as kb:
        assert ids(kb.search("quanto incompatible scale"))[0] == QUANTO_ID
        assert {r.id for r in kb.search("scale").results} == {QUANTO_ID, COMFY_ID, LINEAR_ID}
        fts_integrity(kb)


def _incoming() -> list[Any]:
    from errkb.store import Incoming

    return [
        Incoming(json.loads(p.read_text())["record"], None) for p in sorted(DATASET.glob("*.txt"))
    ]


NASTY = [
    '"',
    '"""',
    "'",
    "(",
    ")",
    "((",
    "))",
    "AND",
    "OR",
    "NOT",
    "NEAR(",
    "NEAR(a b, 2)",
    "*",
    "a*",
    "^",
    "^start",
    "col:word",
    "message:scale",
    "-",
    "+",
    "{",
    "}",
    "[",
    "]",
    ":",
    "\x00",
    "scale\x00quanto",
    "\ud800",
    "\udcff",
    "AND OR NOT",
    '"unbalanced',
    "a AND",
    "NEAR",
    "\\",
]


@pytest.mark.parametrize("query", NASTY)
def test_fts_syntax_is_never_interpreted(kb: errkb.KnowledgeBase, query: str) -> None:
    report = kb.search(query)
    json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")  # printable as UTF-8


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.one_of(
        st.text(),
        st.binary(),
        st.lists(st.sampled_from([*NASTY, "scale", "quanto", " ", "\n", "ValueError: "])).map(
            "".join
        ),
    )
)
def test_any_text_is_safe(kb: errkb.KnowledgeBase, query: str | bytes) -> None:
    report = kb.search(query)
    assert all(0 <= r.score <= 1 for r in report.results)
    assert "\x00" not in report.query
    report.query.encode("utf-8")


def test_search_json_matches_its_schema(kb: errkb.KnowledgeBase) -> None:
    validator = schema_validator("search.schema.json")
    for query in ("quanto scale", (EXAMPLES / "comfy-int8-scale-shapes.log").read_text(), "zzz"):
        data = kb.search(query).to_dict()
        validator.validate(data)
        assert list(data) == ["query", "datasetVersion", "results"]
    bad = kb.search("quanto").to_dict()
    bad["results"][0]["score"] = 2
    with pytest.raises(Exception, match="2"):
        validator.validate(bad)


@pytest.fixture
def db(db_target: str) -> str:
    errkb.open(db_target).close()
    return db_target


def invoke(args: list[str], input: bytes | None = None) -> Any:
    result = CliRunner().invoke(cli, args, input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_cli_text_json_and_exit_codes(db: str) -> None:
    found = invoke(["--db", db, "search", "quanto incompatible scale"])
    assert found.exit_code == 0
    assert found.stdout.splitlines()[0].split()[1] == QUANTO_ID
    as_json = invoke(["--db", db, "search", "--format", "json", "--tag", "quanto", "scale"])
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    schema_validator("search.schema.json").validate(data)
    assert [r["id"] for r in data["results"]] == [QUANTO_ID]
    none = invoke(["--db", db, "search", "--format", "json", "zzzqqq"])
    assert none.exit_code == 1 and json.loads(none.stdout)["results"] == []
    assert invoke(["--db", db, "search", "zzzqqq"]).stdout == "no records found\n"
    assert invoke(["--db", db, "search", "--limit", "0", "x"]).exit_code == 2
    assert invoke(["--db", db, "search", 'NEAR( "AND * ^ ))']).exit_code in (0, 1)


def test_cli_reads_a_traceback_from_stdin(db: str) -> None:
    log = (EXAMPLES / "merged-column-scalar-scale.log").read_bytes()
    result = invoke(["--db", db, "search", "--format", "json", "-"], input=log + b"\xff\xfe\x00")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["results"][0]["id"] == LINEAR_ID


def test_cli_broken_database_is_exit_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not sqlite" * 100)
    result = invoke(["--db", str(junk), "search", "scale"])
    assert result.exit_code == 2 and "error" in result.stderr


def test_common_words_are_and_ed_rare_ones_or_ed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.store import search as sql

    kb = errkb.open(tmp_path / "kb.sqlite3")
    conn = kb.store.reader()  # type: ignore[attr-defined]  # the SQLite backend's connection
    # With the bar at one record, "scale" (in all three) and "incompatible" (in two) are common.
    monkeypatch.setattr(sql, "RARE", 1)
    assert sql.document_frequencies(conn, ["scale", "quanto", "zzz"]) == {
        "scale": 2, "quanto": 1, "zzz": 0,  # counted up to RARE + 1, no further
    }  # fmt: skip
    common = sql.Plan('"scale" AND "incompatible"', ("scale", "incompatible"), common=True)
    assert sql.plan(conn, ["scale", "incompatible"], 6) == common
    assert sql.plan(conn, ["scale", "quanto", "zzz"], 6) == sql.Plan('"quanto"', ("quanto",), False)
    assert sql.plan(conn, ["zzz"], 6) is None
    # Common words only: the records returned are exactly those holding them all.
    holding = {
        rid
        for rid, raw in conn.execute("SELECT id, raw_json FROM records")
        if "quantization" in raw.lower() and "int8" in raw.lower()
    }
    assert holding and len(holding) < 3
    assert set(ids(kb.search("quantization int8"))) == holding
    # Ranked without FTS5's bm25: a word in the message template outranks one in the prose only.
    ranked = sql.candidates(conn, sql.plan(conn, ["scale"], 6), sql.Filters(), 10)
    assert len(ranked) == 3 and ranked == sorted(ranked, key=lambda c: (c.bm25, c.id))
    assert all("scale" in c.error_message.lower() for c in ranked if c.bm25 < 0)
    assert ranked[0].bm25 < 0
    assert [
        c.id
        for c in sql.candidates(conn, sql.plan(conn, ["scale"], 6), sql.Filters(tag="quanto"), 10)
    ] == [QUANTO_ID]
    kb.close()


def test_common_words_are_and_ed_rare_ones_or_ed_on_postgresql(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.store import pgsearch

    with errkb.open(pg_url) as kb, kb.store.snapshot() as view:
        conn = view.conn  # type: ignore[attr-defined]
        monkeypatch.setattr(pgsearch, "RARE", 1)
        assert pgsearch.document_frequencies(conn, ["scale", "quanto", "zzz"]) == {
            "scale": 2, "quanto": 1, "zzz": 0,  # counted up to RARE + 1, no further
        }  # fmt: skip
        common = pgsearch.plan(conn, ["scale", "incompatible"], 6)
        assert common is not None and common[0] == "&&"
        assert [t for t, _w in common[1]] == ["scale", "incompatible"]
        rare = pgsearch.plan(conn, ["scale", "quanto", "zzz"], 6)
        assert rare is not None and rare[0] == "||" and [t for t, _w in rare[1]] == ["quanto"]
        # A rarer word weighs more (bm25's idf, which ts_rank lacks).
        assert pgsearch.idf(1000, 1) > pgsearch.idf(1000, 500) > 0
        assert pgsearch.plan(conn, ["zzz"], 6) is None
        holding = {
            rid
            for rid, raw in view.rows("SELECT id, raw_json FROM records")  # type: ignore[attr-defined]
            if "quantization" in raw.lower() and "int8" in raw.lower()
        }
    assert holding and len(holding) < 3
    with errkb.open(pg_url) as kb:
        assert set(ids(kb.search("quantization int8"))) == holding


@pytest.mark.parametrize(
    "term", ["a:b", "x & y", "!", "<->", "'", "\\", "\x00", "\ud800", "scale | quanto", "(", "*:"]
)
def test_postgresql_terms_are_never_tsquery_syntax(pg_url: str, term: str) -> None:
    from errkb.store.search import Filters

    with errkb.open(pg_url) as kb, kb.store.snapshot() as view:
        # Straight to the backend, past errkb.search's word splitting: any text is safe here too.
        view.search([term, "scale"], Filters(repo=term, tag=term), 10, 6)
        assert {c.id for c in view.search([term, "scale"], Filters(), 10, 6)} == {
            QUANTO_ID, COMFY_ID, LINEAR_ID
        }  # fmt: skip


def test_scores_tell_stop_words_from_an_on_topic_query(kb: errkb.KnowledgeBase) -> None:
    stop = kb.search("the of and is")
    topic = kb.search("incompatible scale")
    assert topic.results[0].id == QUANTO_ID and topic.results[0].score >= 0.75
    assert max(r.score for r in stop.results) <= 0.2  # was 0.52: flat beside 0.58
    assert topic.results[0].score - max(r.score for r in stop.results) >= 0.5


def test_unquoted_words_are_one_query_and_a_bad_severity_is_a_usage_error(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "kb.sqlite3")
    runner = CliRunner()
    words = runner.invoke(cli, ["--db", db, "search", "incompatible", "scale", "--format", "json"])
    quoted = runner.invoke(cli, ["--db", db, "search", "incompatible scale", "--format", "json"])
    assert words.exit_code == 0 and words.stdout == quoted.stdout
    assert json.loads(words.stdout)["results"][0]["id"] == QUANTO_ID
    bogus = runner.invoke(cli, ["--db", db, "search", "--severity", "bogus", "x"])
    assert bogus.exit_code == 2 and "'bogus' is not one of" in bogus.stderr
    with errkb.open(db) as kb, pytest.raises(errkb.UsageError, match="unknown severity 'bogus'"):
        kb.search("x", severity="bogus")


def test_the_severities_are_the_record_schemas() -> None:
    from errkb.search import SEVERITIES

    schema = json.loads((ROOT / "schemas" / "record.v2.schema.json").read_text())
    assert list(SEVERITIES) == schema["properties"]["severity"]["enum"]
