"""The match index: its words, its candidates, and its rows in the store."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest

import errkb
from errkb.match.index import (
    candidate_ids,
    message_tokens,
    rank_words,
    related_ids,
    template_tokens,
)
from errkb.records.template import parse_template
from tests.conftest import COMFY_ID, LINEAR_ID, QUANTO_ID, index_rows


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        (
            "Quanto layer {prefix!r} has incompatible scale {a} {b}",
            ["Quanto", "layer", "has", "incompatible", "scale"],
        ),
        ("layer{n} failed", ["failed"]),  # "layer" touches the placeholder: not a whole word
        ("{x}abc def{y}", []),
        ("no placeholders at all", ["placeholders", "all"]),
        ("ünïcode wörds {v}", ["ünïcode", "wörds"]),
    ],
)
def test_template_tokens_are_whole_words_only(message: str, tokens: list[str]) -> None:
    assert template_tokens(parse_template(message)) == tokens


def test_rarest_words_rank_first() -> None:
    rows = _rows(
        [
            ("a" * 16, "shared words here {x} alpha"),
            ("b" * 16, "shared words here {x} beta"),
            ("c" * 16, "shared words here {x} gamma"),
        ]
    )
    rank0 = {rid: tok for tok, rid, rank in rows if rank == 0}
    assert rank0 == {"a" * 16: "alpha", "b" * 16: "beta", "c" * 16: "gamma"}
    assert max(rank for _t, _r, rank in rows) == 3


def test_candidates_come_from_the_database(kb: errkb.KnowledgeBase) -> None:
    with kb.store.snapshot() as conn:
        _check_candidates(conn)


def _check_candidates(conn: object) -> None:
    msg = "Comfy INT8 layer 'x' has incompatible weight/scale shapes: (1, 2) and (3,)"
    assert candidate_ids(conn, msg) == [COMFY_ID]
    assert candidate_ids(conn, "nothing in common") == []
    wide = related_ids(conn, "incompatible scale shape", 10)
    assert set(wide) <= {QUANTO_ID, COMFY_ID, LINEAR_ID} and wide
    # every indexed word of a record must be present, not only its rarest
    assert candidate_ids(conn, "Comfy INT8 weight/scale") == []
    assert len(message_tokens("w " * 10_000 + " ".join(f"t{i:05d}" for i in range(2000)))) == 500


def test_index_follows_every_write(empty_kb: errkb.KnowledgeBase) -> None:
    conn = empty_kb.store.reader()
    assert conn.execute("SELECT count(*) FROM match_tokens").fetchone()[0] == 0
    from tests.conftest import DATASET

    empty_kb.ingest([DATASET])
    assert conn.execute("SELECT count(DISTINCT record_id) FROM match_tokens").fetchone()[0] == 3


def test_a_stale_index_is_rebuilt_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    errkb.open(path).close()
    with sqlite3.connect(path) as conn:  # what a database migrated from revision 0001 looks like
        conn.execute("DELETE FROM match_tokens")
        conn.execute("INSERT INTO meta (key, value) VALUES ('match_index', 'stale')")
    with errkb.open(path) as kb:
        report = kb.match_message(
            "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
            "got shape (2,)"
        )
        assert [m.id for m in report.exact] == [LINEAR_ID]
        assert kb.store.meta_value("match_index") is None


class _CountingView:
    """A read view that counts the messages it is asked for (everything else passes through)."""

    def __init__(self, view: object) -> None:
        self._view = view
        self.asked: list[str] = []

    def messages(self, ids: list[str]) -> list[tuple[str, str]]:
        self.asked += ids
        return self._view.messages(ids)  # type: ignore[attr-defined, no-any-return]


def test_masked_templates_are_cached_per_state(kb: errkb.KnowledgeBase) -> None:
    from errkb.match.matcher import SpecCache

    cache = SpecCache()
    ids = [QUANTO_ID, "f" * 16, COMFY_ID]  # one id no record has
    with kb.store.snapshot() as view:
        want = sorted((rid, parse_template(msg).masked(" ")) for rid, msg in view.messages(ids))
        counting = _CountingView(view)
        first = cache.masked(counting, ids)  # type: ignore[arg-type]
        again = cache.masked(counting, [COMFY_ID, "f" * 16, QUANTO_ID, LINEAR_ID])  # type: ignore[arg-type]
    assert first == want and len(want) == 2
    assert again == sorted([*want, *cache.masked(view, [LINEAR_ID])])
    # Each id is asked for once, the missing one included: the second call asked only LINEAR_ID.
    assert counting.asked == [*ids, LINEAR_ID]


def test_ranked_rows_are_the_rarest_words_per_record_by_id_in_any_input_order() -> None:
    # The definition, written out plainly: every record's words by (how many records hold
    # them, longer first, then the word), the first four, records by id.
    rng = random.Random(4)
    vocabulary = [f"w{n}" * rng.randint(1, 3) for n in range(40)]
    records = [(f"{n:016x}", rng.sample(vocabulary, rng.randint(0, 7))) for n in range(300)]
    holders = Counter(w for _rid, words in records for w in words)
    want = [
        (w, rid, rank)
        for rid, words in sorted(records)
        for rank, w in enumerate(sorted(words, key=lambda w: (holders[w], -len(w), w))[:4])
    ]
    assert list(rank_words(records)) == want  # by id already
    shuffled = records[:]
    rng.shuffle(shuffled)
    assert list(rank_words(shuffled)) == want
    assert list(rank_words([])) == []


def _rows(records: Iterable[tuple[str, str]]) -> list[tuple[str, str, int]]:
    return list(index_rows(records))
