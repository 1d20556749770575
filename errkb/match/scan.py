r"""The anchor table: every record's candidates found in memory, with no query per message.

A message can match a record only if it holds every word the match index stores for that record
(``errkb.match.index``: rank 0 is the record's rarest word). Asking SQLite for the candidates
of each distinct message costs ~140 µs a query; a dense 50 MB log has ~26,000 distinct messages,
so the queries were ~40% of its scan. The anchor table is the same index held as a dictionary:
rank-0 word -> the records it selects, each with its other indexed words. The candidates of a
message are then a dictionary look-up per word of the message and a set test per selected record
— the very rule of ``candidate_ids`` (same words, same 500-word cap), so the records verified
under RE2, and hence every answer, are the same whichever path found them.

The table is derived from ``match_tokens``, which every write rebuilds in its own transaction. It
is stored beside the database in a plain text file (``<db>.anchors``; never pickle: nothing in it
is executed) keyed by the store's ``state`` counter and dataset version, with a SHA-256 of its
body: a file from another state or a damaged one is rebuilt from the reader's snapshot, and a
directory that cannot be written just keeps the table in memory. Loading it costs a read and one
split per line, so a process pays it only when it pays off: for a large input, or from the
second explain on in a long-running process; a one-shot ``errkb explain`` of a small paste never
opens the file.

File format (UTF-8, ``\n`` line ends)::

    errkb-anchors 1 <state> <dataset version or -> <sha256 of everything after this line>
    <word> TAB <record id>[:<word>,<word>...] [SPACE <record id>[:...]]...

Words are runs of ``\w`` (no tab, space, colon or comma); record ids are ``[0-9a-f]{16}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.match.index import message_tokens

if TYPE_CHECKING:
    from errkb.store import ReadView

FORMAT = "errkb-anchors 1"
#: Inputs at least this large (characters or bytes) load the table: their distinct messages
#: outnumber what the one-off load costs. Smaller ones ask the index in SQLite.
SCAN_ABOVE = 1 << 18


def anchor_path(db_path: Path) -> Path:
    """Where the anchor table of the database at ``db_path`` is stored."""
    return db_path.with_name(db_path.name + ".anchors")


def build_body(rows: Iterable[tuple[str, str, int]]) -> str:
    """The table's body from (record id, word, rank) rows, ordered by record id then rank."""
    by_word: dict[str, list[str]] = {}
    current: str | None = None
    words: list[str] = []

    def flush() -> None:
        if current is not None and words:
            entry = current if len(words) == 1 else current + ":" + ",".join(words[1:])
            by_word.setdefault(words[0], []).append(entry)

    for rid, word, _rank in rows:
        if rid != current:
            flush()
            current, words = rid, []
        words.append(word)
    flush()
    return "".join(f"{word}\t{' '.join(entries)}\n" for word, entries in sorted(by_word.items()))


class AnchorTable:
    """Rank-0 word -> the records it selects (parsed on first look-up). Thread-safe for reads."""

    def __init__(self, body: str) -> None:
        # Entries stay unparsed strings until a message holds their word: a 500k-record table
        # loads as ~200k short strings, not a million tuples.
        self._raw: dict[str, str] = {}
        for line in body.splitlines():
            word, _, entries = line.partition("\t")
            self._raw[word] = entries
        self._parsed: dict[str, tuple[tuple[str, frozenset[str]], ...]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._raw)

    def _entries(self, word: str) -> tuple[tuple[str, frozenset[str]], ...]:
        parsed = self._parsed.get(word)
        if parsed is None:
            out = []
            for entry in self._raw[word].split(" "):
                rid, _, others = entry.partition(":")
                out.append((rid, frozenset(others.split(",")) if others else frozenset()))
            parsed = tuple(out)
            with self._lock:
                self._parsed[word] = parsed
        return parsed

    def candidates(self, text: str) -> list[str]:
        """Ids of the records that may match ``text``: the rule of ``index.candidate_ids``."""
        tokens = message_tokens(text)
        present = None
        found: list[str] = []
        for word in tokens:
            if word not in self._raw:
                continue
            for rid, others in self._entries(word):
                if others:
                    if present is None:
                        present = frozenset(tokens)
                    if not others <= present:
                        continue
                found.append(rid)
        return found


def _header(state: str, dataset_version: str | None, body: bytes) -> str:
    return f"{FORMAT} {state} {dataset_version or '-'} {hashlib.sha256(body).hexdigest()}\n"


def read_table(path: Path, state: str, dataset_version: str | None) -> AnchorTable | None:
    """The table stored at ``path`` if it belongs to this state and is intact; else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header, newline, body = data.partition(b"\n")
    if not newline:
        return None
    expected = _header(state, dataset_version, body).encode()
    if header + newline != expected:
        return None
    try:
        return AnchorTable(body.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def write_table(path: Path, state: str, dataset_version: str | None, body: str) -> bool:
    """Store the table atomically; False (and nothing written) when the directory refuses."""
    from errkb.atomic import atomic_write_text

    raw = body.encode("utf-8")
    with contextlib.suppress(OSError):
        with atomic_write_text(path) as fh:
            fh.write(_header(state, dataset_version, raw))
            fh.write(body)
        return True
    return False


def load_table(
    view: ReadView, db_path: Path | None, state: str, dataset_version: str | None
) -> AnchorTable:
    """The anchor table of the snapshot ``view`` reads: from its file, else built (and stored)."""
    path = anchor_path(db_path) if db_path is not None else None
    if path is not None:
        table = read_table(path, state, dataset_version)
        if table is not None:
            return table
    body = build_body(view.token_rows())
    if path is not None:
        write_table(path, state, dataset_version, body)
    return AnchorTable(body)
