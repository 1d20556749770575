"""The sync's feed: ``errkb.match.feed.FEED`` that can also rank a few records by stored counts.

``rank_counted`` ranks the records whose rows can change by the store's word counts
(``store.CountedRank``), giving the rows a whole ranking (``index.rank_words``) would write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from errkb.match.feed import IndexFeed
from errkb.match.index import rank_record


class CountingFeed(IndexFeed):
    """``FEED`` with ``rank_counted`` (``errkb.store.CountedRank``); otherwise the same."""

    def rank_counted(
        self, words: Iterable[tuple[str, Sequence[str]]], count: Mapping[str, int]
    ) -> Iterator[tuple[str, str, int]]:
        """(token, record id, rank) rows of each record given, rarity read from ``count``."""
        for rid, record_words in words:
            yield from rank_record(rid, record_words, count)


#: The feed a sync writes with.
COUNTING_FEED = CountingFeed()
