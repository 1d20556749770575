"""The sync's feed: ``errkb.match.feed.FEED`` that can also rank a few records by stored counts.

``rank_counted`` ranks the records whose rows can change by the store's word counts
(``store.CountedRank``), giving the rows a whole ranking (``index.rank_words``) would write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from errkb.match.feed import FEED
from errkb.match.index import rank_record
from errkb.store import Derived, RecordJSON


class CountingFeed:
    """``FEED`` with ``rank_counted`` (``errkb.store.CountedRank``); otherwise the same."""

    compiler = FEED.compiler

    def derive(self, record: RecordJSON) -> Derived:
        return FEED.derive(record)

    def rank(self, words: Iterable[tuple[str, Sequence[str]]]) -> Iterator[tuple[str, str, int]]:
        return FEED.rank(words)

    def rerank(
        self,
        words: Iterable[tuple[str, Sequence[str]]],
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
        return FEED.rerank(words, previous, after)

    def rank_counted(
        self, words: Iterable[tuple[str, Sequence[str]]], count: Mapping[str, int]
    ) -> Iterator[tuple[str, str, int]]:
        """(token, record id, rank) rows of each record given, rarity read from ``count``."""
        for rid, record_words in words:
            yield from rank_record(rid, record_words, count)


#: The feed a sync writes with.
COUNTING_FEED = CountingFeed()
