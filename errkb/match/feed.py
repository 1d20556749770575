"""What the store is fed with: each record's compiled matcher and index words, and their ranks.

The store computes nothing about matching: a unit of work is given each record's ``Derived``
and ``FEED`` to rank words by rarity and derive what a record came without. A sync's workers
call ``derive`` as they validate, so the transaction parses no template. Not on the explain
path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from errkb.match.index import rank_record, rank_words, template_tokens
from errkb.records.patterns import COMPILER_VERSION, PatternSpec, compile_record
from errkb.records.template import Template, parse_template
from errkb.store.engine import same_words, spec_columns

if TYPE_CHECKING:
    from errkb.store import RecordJSON
    from errkb.store.values import Derived


def words_of(error_message: str | Template) -> tuple[str, ...]:
    """A record's index words: its template's whole literal words, distinct, in order."""
    template = parse_template(error_message) if isinstance(error_message, str) else error_message
    return tuple(dict.fromkeys(template_tokens(template)))


def compile_json(record: RecordJSON, template: Template | None = None) -> PatternSpec:
    """A record's compiled matcher, from its JSON as a sync compiles it (sourceCode included)."""
    message = str(record["errorMessage"])
    return compile_record(
        str(record["id"]),
        message,
        str(record.get("messagePattern") or ""),
        error_class=record.get("errorClass"),
        file_path=str(record.get("filePath") or ""),
        line_number=record.get("lineNumber"),
        source_code=record.get("sourceCode"),
        template=template if template is not None else parse_template(message),
    )


def derive(record: RecordJSON) -> Derived:
    """The compiled matcher and index words of one validated record (one template parse)."""
    from errkb.store.values import Derived

    template = parse_template(str(record["errorMessage"]))
    return Derived(spec_columns(compile_json(record, template)), words_of(template))


#: Past this share of the live records, ``rerank`` leaves the index to be ranked whole.
RERANK_MOST = 0.25


def rerank(
    words: Iterable[tuple[str, Sequence[str]]],
    previous: Mapping[str, Sequence[str] | None],
    after: Mapping[str, Sequence[str]],
) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
    """The match index rows that change when the records of ``previous`` changed.

    ``words``: every live record's (id, index words) after; ``previous``: each changed record's
    words before (None: not live); ``after``: its words now. Returns the ids whose rows can differ
    (the changed ones, and holders of a word whose count moved) and their rows, or (None, no rows)
    past ``RERANK_MOST``. When no record's words changed, ``words`` is not read.
    """
    if all(same_words(before, after.get(rid)) for rid, before in previous.items()):
        return frozenset(), iter(())
    moved: Counter[str] = Counter()
    for rid, before in previous.items():
        moved.update(after.get(rid, ()))
        moved.subtract(before or ())
    changed = {w for w, n in moved.items() if n}
    frequency: Counter[str] = Counter()
    held: dict[str, Sequence[str]] = {}
    live = 0
    for rid, record_words in words:
        live += 1
        frequency.update(record_words)
        if rid in previous or (changed and not changed.isdisjoint(record_words)):
            held[rid] = record_words
    redo = frozenset({*previous, *held})
    if len(redo) > RERANK_MOST * live:
        return None, iter(())

    def rows() -> Iterator[tuple[str, str, int]]:
        for rid in sorted(held):
            yield from rank_record(rid, held[rid], frequency)

    return redo, rows()


class IndexFeed:
    """``derive`` and ``rank`` as the store's ``Feed``."""

    compiler = str(COMPILER_VERSION)

    def derive(self, record: RecordJSON) -> Derived:
        return derive(record)

    def rank(self, words: Iterable[tuple[str, Sequence[str]]]) -> Iterator[tuple[str, str, int]]:
        # Rank 0 is the rarest word across the knowledge base (``rank_words``'s rule).
        return rank_words(words)

    def rerank(
        self,
        words: Iterable[tuple[str, Sequence[str]]],
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
        return rerank(words, previous, after)


#: The one feed every writer passes to ``WriteTx.apply`` and ``Store.reindex``.
FEED = IndexFeed()
