"""``errkb.sync.ranking``: ranking by stored counts gives the rows ranking every record gives."""

from __future__ import annotations

import random
from collections import Counter

from errkb.match.feed import FEED
from errkb.store import CountedRank
from errkb.sync.ranking import COUNTING_FEED


def test_ranking_by_counts_is_ranking_by_the_records_themselves() -> None:
    rng = random.Random(7)
    vocabulary = [f"{'w' * (k % 4 + 1)}{k}" for k in range(30)]
    for _round in range(20):
        records = [
            (f"{n:04x}", tuple(rng.sample(vocabulary, rng.randint(0, 9)))) for n in range(80)
        ]
        count = Counter(w for _rid, words in records for w in words)
        some = sorted(rng.sample(records, 25))
        expected = [row for row in FEED.rank(records) if row[1] in dict(some)]
        assert list(COUNTING_FEED.rank_counted(some, count)) == expected


def test_the_sync_feed_is_the_matching_feed_with_counted_ranks() -> None:
    assert isinstance(COUNTING_FEED, CountedRank)
    assert not isinstance(FEED, CountedRank)
    assert COUNTING_FEED.compiler == FEED.compiler
