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

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from errkb.match.index import rank_words, template_tokens
from errkb.records.patterns import compile_record
from errkb.records.template import Template, parse_template
from errkb.store.engine import spec_columns

if TYPE_CHECKING:
    from errkb.store import RecordJSON
    from errkb.store.values import Derived


def words_of(error_message: str | Template) -> tuple[str, ...]:
    """A record's index words: its template's whole literal words, distinct, in order."""
    template = parse_template(error_message) if isinstance(error_message, str) else error_message
    return tuple(dict.fromkeys(template_tokens(template)))


def derive(record: RecordJSON) -> Derived:
    """The compiled matcher and index words of one validated record (one template parse)."""
    from errkb.store.values import Derived

    message = str(record["errorMessage"])
    template = parse_template(message)
    spec = compile_record(
        str(record["id"]),
        message,
        str(record.get("messagePattern") or ""),
        error_class=record.get("errorClass"),
        file_path=str(record.get("filePath") or ""),
        line_number=record.get("lineNumber"),
        source_code=record.get("sourceCode"),
        template=template,
    )
    return Derived(spec_columns(spec), words_of(template))


class _Feed:
    """``derive`` and ``rank`` as the store's ``Feed``."""

    def derive(self, record: RecordJSON) -> Derived:
        return derive(record)

    def rank(self, words: Iterable[tuple[str, Sequence[str]]]) -> Iterator[tuple[str, str, int]]:
        # Rank 0 is the rarest word across the knowledge base (``rank_words``'s rule).
        return rank_words(words)


#: The one feed every writer passes to ``WriteTx.apply`` and ``Store.reindex``.
FEED = _Feed()
