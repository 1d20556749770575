r"""The match index: which records can possibly match a message, found in the database.

A message matches a record only if it contains every literal word of the record's template. So
each live record is indexed under its rarest literal words (``match_tokens``: rank 0 is the
rarest across the knowledge base), and the candidates for a message are the records whose
rank-0 word the message contains: one indexed query (``errkb.store``), whatever the size of the
knowledge base. Only those candidates are compiled (under RE2) and verified.

Why not an in-memory Aho-Corasick automaton over every record's anchor (``errkb.match.matcher``)?
Measured at 150,000 records on this project's 2-core machine: building the automaton takes
~0.7 s at every start of a process (far beyond a CLI's start-up budget), and scanning a large
automaton falls out of cache (~23 MB/s). The index costs nothing at start-up, stays consistent
with the records because it is rebuilt in the same transaction as every change to them, and a
look-up is a few dozen microseconds. The in-memory matcher remains for whole-dataset work
(``errkb lint``), where building once pays off.

A word is a run of Unicode word characters (``\\w``) of at least ``MIN_TOKEN`` characters that
the template shows whole: a word touching a placeholder (``layer{n}``) is not one, because the
value glued to it changes the word a message contains.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from errkb.records.template import Literal, Template, parse_template
from errkb.store.interface import RELATED_COMMON

MIN_TOKEN = 3
#: How many of a record's rarest words are stored: rank 0 selects candidates, the others must
#: be in the message too; any of them makes a record a ``similar`` suggestion.
TOKENS_PER_RECORD = 4
#: SQLite binds at most this many parameters in one statement here; messages are cut to it.
MAX_QUERY_TOKENS = 500
WORD = _WORD = re.compile(r"\w+")
#: MODIFIER LETTER SMALL H: a word character (so it glues to its neighbours) that error
#: messages do not contain.
MARK = _MARK = "\u02b0"


def template_tokens(template: Template) -> list[str]:
    """The words a message rendered from ``template`` is sure to contain, in template order."""
    # Placeholders become a word character that literal text never holds, so a word touching
    # a placeholder comes out with the marker in it and is dropped: one regex pass in all.
    text = "".join(s.text if isinstance(s, Literal) else _MARK for s in template.segments)
    return [w for w in _WORD.findall(text) if len(w) >= MIN_TOKEN and _MARK not in w]


def message_tokens(text: str) -> list[str]:
    """The distinct words of a message (bounded, for one query)."""
    seen = dict.fromkeys(w for w in _WORD.findall(text) if len(w) >= MIN_TOKEN)
    return list(seen)[:MAX_QUERY_TOKENS]


def index_rows(records: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str, int]]:
    """(token, record id, rank) rows: each record's rarest words across ``records``.

    ``records`` are (id, errorMessage) pairs, streamed in record id order (the index's key
    order). Ties in rarity go to the longer word (more selective), then alphabetical order,
    so the index is deterministic.
    """
    return rank_words(
        (rid, dict.fromkeys(template_tokens(parse_template(message)))) for rid, message in records
    )


def rank_words(records: Iterable[tuple[str, Iterable[str]]]) -> Iterator[tuple[str, str, int]]:
    """(token, record id, rank) rows from every record's (id, distinct index words).

    Built for 500,000 records in a small container: one pass keeps each record's words as
    numbers into one array (each distinct word held once), not every message, and the rows
    are yielded, not listed, so the writer streams them to the database. Sorting by record
    id lets the index's primary key grow by appending. Every record is read before the first
    row is yielded (rarity is over all of them). A tuple of shared strings per record in a
    list, with a ``Counter``, took the process 120 MB at 500k records (the store's rows read
    as ``rebuild_index`` reads them), the numbers 72 MB, most of it the ids.
    """
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

    def rarity(k: int) -> tuple[int, int, str]:
        word = vocabulary[k]
        return frequency[k], -len(word), word

    order: Iterable[int] = (
        range(len(rids)) if ordered else sorted(range(len(rids)), key=rids.__getitem__)
    )
    for r in order:
        rid = rids[r]
        ranked = sorted(flat[offsets[r] : offsets[r + 1]], key=rarity)
        for rank, k in enumerate(ranked[:TOKENS_PER_RECORD]):
            yield vocabulary[k], rid, rank


def rank_record(
    rid: str, words: Iterable[str], count: Mapping[str, int]
) -> Iterator[tuple[str, str, int]]:
    """One record's (token, record id, rank) rows, its words ranked by ``count``.

    ``rank_words``'s order: fewest records holding the word first, then the longer word, then
    by text (``feed.rerank`` and the sync's counted rank rank a few records so).
    """
    ranked = sorted(words, key=lambda w: (count[w], -len(w), w))
    for rank, word in enumerate(ranked[:TOKENS_PER_RECORD]):
        yield word, rid, rank


class TokenIndex(Protocol):
    """Where the index lives: the store's read view (``errkb.store.ReadView``)."""

    def candidate_ids(self, tokens: Sequence[str]) -> list[str]: ...
    def related_ids(self, tokens: Sequence[str], limit: int, *, common: int = ...) -> list[str]: ...


def candidate_ids(index: TokenIndex, text: str) -> list[str]:
    """Ids of the records that may match ``text``: it holds every one of their indexed words.

    The rank-0 (rarest) word selects through the index; the record's other indexed words must
    be in the text too, which weeds out the near-identical templates a large dataset is full
    of before anything is compiled.
    """
    return index.candidate_ids(message_tokens(text))


def related_ids(
    index: TokenIndex, text: str, limit: int, *, common: int = RELATED_COMMON
) -> list[str]:
    """Ids of the records sharing the most indexed words with ``text`` (for suggestions).

    A word held by more than ``common`` records' index rows is not counted.
    """
    return index.related_ids(message_tokens(text), limit, common=common)
