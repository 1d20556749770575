"""Tests for errkb.match.feed: what the store is fed, and the match index rows that change.

``rerank`` must give exactly ``rank_words``'s rows for every record whose rows can change,
and leave out only records whose rows are the same before and after.
"""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

import errkb.match.feed as feed
from errkb.match.feed import rerank
from errkb.match.index import rank_words
from tests.tiers import examples

WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "de", "epsilon", "z"]), unique=True)
STATES = st.dictionaries(st.sampled_from([f"{n:02x}" for n in range(12)]), WORDS, max_size=12)


def _rows(live: dict[str, list[str]]) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for token, rid, rank in rank_words(sorted(live.items())):
        out.setdefault(rid, []).append((token, rank))
    return out


@settings(max_examples=examples(400), deadline=None)
@given(
    before=STATES,
    after=STATES,
    most=st.sampled_from([feed.RERANK_MOST, 1.0]),
    touched=st.sets(st.sampled_from([f"{n:02x}" for n in range(12)])),
)
def test_rerank_gives_every_row_that_changes(
    before: dict[str, list[str]], after: dict[str, list[str]], most: float, touched: set[str]
) -> None:
    changed = {rid for rid in {*before, *after} if before.get(rid) != after.get(rid)}
    # A unit of work also notes records it rewrote with the words they had (new
    # documentation): ``previous`` holds those too.
    previous = {rid: before.get(rid) for rid in changed | touched}
    default, feed.RERANK_MOST = feed.RERANK_MOST, most  # 1.0: never every row
    try:
        now = {rid: after[rid] for rid in previous if rid in after}
        redo, rows = rerank(sorted(after.items()), previous, now)
    finally:
        feed.RERANK_MOST = default
    old, new = _rows(before), _rows(after)
    if redo is None:  # the caller ranks every record instead
        assert list(rows) == []
        return
    assert changed <= redo
    got: dict[str, list[tuple[str, int]]] = {}
    for token, rid, rank in rows:
        got.setdefault(rid, []).append((token, rank))
    assert got == {rid: new[rid] for rid in redo if rid in new}
    for rid in set(after) - redo:  # left out: its rows are the ones it had
        assert old.get(rid) == new.get(rid)


def test_rerank_reads_nothing_when_no_record_s_words_changed() -> None:
    # Records rewritten with the words they had (a re-analysis changing documentation), one
    # that was not live and is not now: no row can change, and the live words (every
    # record's, read from the database) are not read.
    def words() -> Iterator[tuple[str, list[str]]]:
        raise AssertionError("read every live record's words")
        yield  # a generator

    previous = {"01": ["alpha", "beta"], "02": None}
    redo, rows = rerank(words(), previous, {"01": ["alpha", "beta"]})
    assert (redo, list(rows)) == (frozenset(), [])
    # One word more for "01": its count moved, so the words are read.
    read: list[str] = []

    def counted() -> Iterator[tuple[str, list[str]]]:
        for rid, w in (("01", ["alpha", "beta", "z"]), ("03", ["z"])):
            read.append(rid)
            yield rid, w

    redo, _rows = rerank(counted(), previous, {"01": ["alpha", "beta", "z"]})
    assert read == ["01", "03"]
    assert redo is None or "01" in redo  # None: so many that the caller ranks them all
