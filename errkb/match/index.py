r"""The match index: which records can possibly match a message, found in the database.

A message matches a record only if it holds every literal word of its template, so each live
record is indexed under its rarest words (``match_tokens``, rank 0 rarest), and a message's
candidates are the records whose rank-0 word it holds: one indexed query. The index costs
nothing at start-up and is rebuilt in the transaction of every change (the in-memory
``errkb.match.matcher.Matcher`` is for whole-dataset work). A word is a run of ``\\w`` of at
least ``MIN_TOKEN`` characters shown whole (not touching a placeholder).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from errkb.store.interface import RELATED_COMMON

if TYPE_CHECKING:
    from errkb.records.template import Template

MIN_TOKEN = 3
#: How many of a record's rarest words are stored (rank 0 selects, the rest must be there).
TOKENS_PER_RECORD = 4
#: SQLite binds at most this many parameters in one statement here; messages are cut to it.
MAX_QUERY_TOKENS = 500
WORD = _WORD = re.compile(r"\w+")
#: MODIFIER LETTER SMALL H: a word character error messages do not contain.
MARK = _MARK = "\u02b0"


def template_tokens(template: Template) -> list[str]:
    """The words a message rendered from ``template`` is sure to contain, in template order."""
    from errkb.records.template import Literal  # a write indexes; explain reads the index

    # Placeholders become the marker, so a word touching one is dropped: one regex pass.
    text = "".join(s.text if isinstance(s, Literal) else _MARK for s in template.segments)
    return [w for w in _WORD.findall(text) if len(w) >= MIN_TOKEN and _MARK not in w]


def message_tokens(text: str) -> list[str]:
    """The distinct words of a message (bounded, for one query)."""
    seen = dict.fromkeys(w for w in _WORD.findall(text) if len(w) >= MIN_TOKEN)
    return list(seen)[:MAX_QUERY_TOKENS]


def rank_words(records: Iterable[tuple[str, Iterable[str]]]) -> Iterator[tuple[str, str, int]]:
    """(token, record id, rank) rows from every record's (id, distinct index words), streamed."""
    number: dict[str, int] = {}
    vocabulary: list[str] = []
    frequency = array("L")  # per word number: how many records hold it
    flat = array("L")  # every record's word numbers, one after the other
    offsets = array("Q", [0])
    rids: list[str] = []
    ordered = True  # the store's rows come by id: no sort then
    for rid, record_words in records:
        if rids and rid < rids[-1]:
            ordered = False
        rids.append(rid)
        for word in record_words:
            k = number.get(word)
            if k is None:
                k = number[word] = len(vocabulary)
                vocabulary.append(word)
                frequency.append(0)
            frequency[k] += 1
            flat.append(k)
        offsets.append(len(flat))
    del number

    # Each word's rarity once (``rarity``), looked up by number while sorting.
    rarity_of = [rarity(frequency[k], word) for k, word in enumerate(vocabulary)].__getitem__

    order: Iterable[int] = (
        range(len(rids)) if ordered else sorted(range(len(rids)), key=rids.__getitem__)
    )
    for r in order:
        rid = rids[r]
        ranked = sorted(flat[offsets[r] : offsets[r + 1]], key=rarity_of)
        for rank, k in enumerate(ranked[:TOKENS_PER_RECORD]):
            yield vocabulary[k], rid, rank


def rarity(count: int, word: str) -> tuple[int, int, str]:
    """The index's rarity order: fewer records first, then the longer word, then the word."""
    return count, -len(word), word


def rank_record(
    rid: str, words: Iterable[str], count: Mapping[str, int]
) -> Iterator[tuple[str, str, int]]:
    """One record's (token, record id, rank) rows, its words ranked by ``count``."""
    ranked = sorted(words, key=lambda w: rarity(count[w], w))
    for rank, word in enumerate(ranked[:TOKENS_PER_RECORD]):
        yield word, rid, rank


class TokenIndex(Protocol):
    """Where the index lives: the store's read view (``errkb.store.ReadView``)."""

    def candidate_ids(self, tokens: Sequence[str]) -> list[str]: ...
    def related_ids(self, tokens: Sequence[str], limit: int, *, common: int = ...) -> list[str]: ...


def candidate_ids(index: TokenIndex, text: str) -> list[str]:
    """Ids of the records that may match ``text``: it holds every one of their indexed words."""
    return index.candidate_ids(message_tokens(text))


def related_ids(
    index: TokenIndex, text: str, limit: int, *, common: int = RELATED_COMMON
) -> list[str]:
    """Ids of the records sharing the most indexed words with ``text`` (for suggestions).

    A word held by more than ``common`` records' index rows is not counted.
    """
    return index.related_ids(message_tokens(text), limit, common=common)
