"""What the store is fed with: each record's compiled matcher and index words, and their ranks.

The store computes nothing about matching (it imports no matching code): a unit of work is
given, beside each record, its ``PatternSpec`` as narrow columns and the words it is indexed
under (``Derived``), and is handed ``FEED`` to rank those words by rarity across the knowledge
base and to derive what a record came without. A sync's worker processes call ``derive`` as
they validate (``errkb.sync.repofile``), so the transaction parses no template at all; at
500,000 records parsing them again inside it was a tenth of main's sync.

Not on the explain path: explain reads the stored specs (``ReadView.pattern_specs``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from errkb.match.index import rank_record, rank_words, template_tokens
from errkb.records.patterns import COMPILER_VERSION, PatternSpec, compile_record
from errkb.records.template import Template, parse_template
from errkb.store.engine import spec_columns

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


#: Past this share of the live records, ``rerank`` leaves the index to be ranked whole: one
#: bulk rewrite of it then costs less than deleting and inserting most of it row by row.
RERANK_MOST = 0.25


def rerank(
    words: Iterable[tuple[str, Sequence[str]]],
    previous: Mapping[str, Sequence[str] | None],
    after: Mapping[str, Sequence[str]],
) -> tuple[frozenset[str] | None, Iterator[tuple[str, str, int]]]:
    """The match index rows that change when the records of ``previous`` changed.

    ``words`` is every live record's (id, index words) after the change; ``previous`` each
    changed record's words before it (None: it was not live), ``after`` its words now (absent:
    not live now). The rows are ``rank_words``'s over ``words``, for only the records whose
    rows can differ: the changed ones, and those holding a word whose count across the
    knowledge base moved (a record's ranks depend on its own words' counts and nothing
    else). Returns those ids (their old rows are to be replaced) and their rows, or (None, no
    rows) when they are more than ``RERANK_MOST`` of the records: the caller ranks them all.

    One pass over ``words`` keeps only counts and the words of those records. At 500,000
    records with 1% changed (their messages as they were), the whole index (two million
    rows) was ranked and written again for 5,535 records' rows. When no record's words
    changed (each is live with the words it had, or was not live and is not now), no row
    can change and ``words`` is not read at all: reading every live record's words for the
    counts was 2.6 s of that incremental sync's 25.
    """
    if all(_same(before, after.get(rid)) for rid, before in previous.items()):
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


def _same(before: Sequence[str] | None, now: Sequence[str] | None) -> bool:
    """Whether a record's index words (None: not live) are the same before and after."""
    if before is None or now is None:
        return before is now
    return tuple(before) == tuple(now)


class _Feed:
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
FEED = _Feed()
