"""The unit of work, history and inventory reads: written once, against a small dialect.

Everything whose meaning does not depend on the database lives here (``UnitOfWork.apply``,
history, retirement, the state counter, the match index, the reads); a backend supplies an
``Sql`` and a ``WriteSql`` and keeps connections, locks, errors and full-text search.

SQL is written once: ``?`` placeholders, ``$IDS`` for a bound list of ids, ``{c}`` after a
sorted text column (byte order on both), ``FALSE``/``TRUE`` and ``NULLS FIRST``. The store is
fed, not computing: ``Derived`` and ``Feed.rank`` come from the caller. ``Rebuild`` runs the
same unit of work into a new database and leaves exactly the rows the one transaction would.
"""

from __future__ import annotations

import enum
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from errkb import records as rec
from errkb.errors import SchemaVersionError, StoreError
from errkb.records.fields import BOOK_COLUMNS, CHILD_FIELDS, COLUMN_FIELDS, RECORD_COLUMNS
from errkb.records.patterns import SPEC_INPUTS, record_spec_key, spec_key
from errkb.store.interface import (
    ANCHORS_NONCE_KEY,
    ANCHORS_STATE_KEY,
    ANCHORS_VERSION_KEY,
    NO_KEEP,
    SCHEMA_HEAD,
    AnchorRow,
    Change,
    ChangeKind,
    CountedRank,
    Feed,
    Keep,
    PatternRow,
    RecordJSON,
    Streamed,
    VersionKind,
    classify,
    now_iso,
)

if TYPE_CHECKING:
    from errkb.records.patterns import PatternSpec
    from errkb.store.values import (
        ApplyCounts,
        Derived,
        Diff,
        Incoming,
        Inventory,
        RecordChange,
        StoreCounts,
        StoredRecord,
        VersionInfo,
    )

_T = TypeVar("_T")
_APPLY_CHUNK = 2000  # records classified and written together: bounds apply's memory


class Sql(Protocol):
    """What a backend's read connection offers the engine."""

    #: Appended to a sorted text column: PostgreSQL's ``COLLATE "C"`` (byte order), or "".
    collate: str

    def rows(self, sql: str, params: Sequence[object] = ()) -> Iterable[Sequence[Any]]: ...
    def one(self, sql: str, params: Sequence[object] = ()) -> Sequence[Any] | None: ...
    def in_ids(
        self, sql: str, ids: Sequence[str], params: Sequence[object] = ()
    ) -> Iterator[Sequence[Any]]:
        """Rows of ``sql`` with ``$IDS`` bound to ``ids`` (after ``params``), all of them."""
        ...


class BulkSearch(Protocol):
    """A full-text index's work for one apply, done once at its end (``finish``)."""

    def added(self, rids: Sequence[str]) -> None: ...
    def finish(self) -> None: ...


class WriteSql(Sql, Protocol):
    """What a backend's write transaction offers the engine."""

    def execute(self, sql: str, params: Sequence[object] = ()) -> None: ...
    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None: ...
    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[object]]
    ) -> None:
        """Bulk insert (``executemany``, or ``COPY``)."""
        ...

    def bulk_search(self, incoming: Iterable[Incoming]) -> BulkSearch | None: ...
    def replace_index(self, rows: Iterable[tuple[str, str, int]]) -> None:
        """Delete the match index and write ``rows`` (token, record id, rank) instead."""
        ...

    def fill_words(self) -> None:
        """Refill ``match_words`` from the live records' ``pattern_specs.words``, in SQL."""
        ...


#: The ``pattern_specs`` columns after ``record_id``, in ``Derived.spec`` order (tuples as JSON).
SPEC_COLUMNS = (
    "regex",
    "names",
    "repr_groups",
    "kinds",
    "anchor",
    "literal_length",
    "origin",
    "reason",
    "error_class",
    "file_path",
    "line_number",
    "functions",
    "template",
    "literals",
    "specificity",
)
#: Compact JSON text from one encoder made once (``json.dumps`` with options builds one per call).
compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_SPEC_TUPLES = frozenset({"names", "repr_groups", "kinds", "functions", "literals"})
_SPEC_SQL = (
    "SELECT s.record_id, "  # noqa: S608 - fixed column names
    + ", ".join(f"s.{c}" for c in SPEC_COLUMNS)
    + " FROM pattern_specs s JOIN records r ON r.id = s.record_id "
    "WHERE r.retired = FALSE AND s.record_id $IDS"
)


def spec_columns(spec: PatternSpec) -> tuple[object, ...]:
    """``spec`` as the ``pattern_specs`` values in ``SPEC_COLUMNS`` order (JSON for tuples)."""
    out: list[object] = []
    for name in SPEC_COLUMNS:
        value = getattr(spec, name)
        if name in _SPEC_TUPLES:
            value = compact_json(list(value)) if value else "[]"
        elif name == "origin":
            value = str(value.value)
        out.append(value)
    return tuple(out)


def spec_from(row: Sequence[Any]) -> PatternSpec:
    """A ``PatternSpec`` from a ``pattern_specs`` row (record id, then ``SPEC_COLUMNS``)."""
    from errkb.records.patterns import PatternOrigin, PatternSpec

    values: dict[str, Any] = {"record_id": str(row[0])}
    for name, value in zip(SPEC_COLUMNS, row[1:], strict=True):
        if name in _SPEC_TUPLES:
            # Most of the five lists are empty: no decoder call for them.
            value = () if value == "[]" else tuple(json.loads(value))
        elif name == "origin":
            value = PatternOrigin(value)
        values[name] = value
    return PatternSpec(**values)


def raw_record_texts(sql: Sql, ids: Sequence[str]) -> dict[str, str]:
    """Each existing record's stored JSON text (retired too), one query per chunk of ids."""
    return {str(rid): str(text) for rid, text in sql.in_ids(_RAW_SQL, sorted(set(ids)))}


_RAW_SQL = "SELECT id, raw_json FROM records WHERE id $IDS"


def envelopes_query(*, include_retired: bool, collate: str) -> str:
    """Every (live, or every) record's stored JSON and dataset version, in id order (export)."""
    where = "" if include_retired else " WHERE retired = FALSE"
    return f"SELECT raw_json, dataset_version FROM records{where} ORDER BY id{collate}"  # noqa: S608


def pattern_specs(sql: Sql, ids: Sequence[str]) -> list[PatternSpec]:
    """The stored ``PatternSpec`` of each live record of ``ids`` that has one."""
    return [spec_from(row) for row in sql.in_ids(_SPEC_SQL, sorted(set(ids)))]


#: Every live record's anchor, literals, regex and template (NULL without a ``pattern_specs`` row).
_ANCHOR_SQL = (
    "SELECT r.id, s.anchor, s.literals, s.regex, s.template FROM records r "
    "LEFT JOIN pattern_specs s ON s.record_id = r.id WHERE r.retired = FALSE ORDER BY r.id"
)


def anchor_rows(sql: Sql) -> Iterator[AnchorRow]:
    """(record id, anchor or None, literals, regex, template) of live records by id, streamed."""
    return map(_anchor_row, sql.rows(_ANCHOR_SQL))


def _anchor_row(row: Sequence[Any]) -> AnchorRow:
    rid, anchor, literals, regex, template = row
    return (
        str(rid),
        None if anchor is None else str(anchor),
        _tuple(literals),
        str(regex or ""),
        str(template or ""),
    )


#: The anchor rows of some live records (``anchor_rows_of``).
_SOME_ANCHOR_SQL = (
    "SELECT r.id, s.anchor, s.literals, s.regex, s.template FROM records r "
    "LEFT JOIN pattern_specs s ON s.record_id = r.id WHERE r.retired = FALSE AND r.id $IDS"
)


def anchor_rows_of(sql: Sql, ids: Sequence[str]) -> list[AnchorRow]:
    """``anchor_rows`` of the live records among ``ids``, in the byte order of their ids.

    What an incremental anchor build reads: the rows of the records a write added or changed,
    not every live record's.
    """
    rows = [_anchor_row(row) for row in sql.in_ids(_SOME_ANCHOR_SQL, sorted(set(ids)))]
    rows.sort(key=lambda row: row[0].encode("utf-8"))
    return rows


#: Every live record's id and content hash (``ix_records_inventory`` covers it).
_LIVE_HASHES_SQL = "SELECT id, content_hash FROM records WHERE retired = FALSE"


def live_hashes(sql: Sql) -> Iterator[tuple[str, str]]:
    """(id, content hash) of every live record, in no set order.

    What an incremental anchor build compares with the records its files hold, to find
    those added, changed or retired since: an index read, no record decoded.
    """
    for rid, content_hash in sql.rows(_LIVE_HASHES_SQL):
        yield str(rid), str(content_hash)


_PATTERN_ROWS_SQL = (
    "SELECT id, error_message, message_pattern, error_class, file_path, line_number, "
    "source_code FROM records WHERE retired = FALSE AND id $IDS"
)


class EngineReads(Sql):
    """The reads written once here, for a backend's read view (its ``Sql`` methods first)."""

    def raw_record(self, record_id: str) -> RecordJSON | None:
        return self.raw_records([record_id]).get(record_id)

    raw_records: Callable[[Sequence[str]], dict[str, RecordJSON]]  #: the backend's own

    def pattern_rows(self, ids: Sequence[str]) -> list[PatternRow]:
        return [PatternRow(*row) for row in self.in_ids(_PATTERN_ROWS_SQL, ids)]

    def messages(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        rows = self.in_ids("SELECT id, error_message FROM records WHERE id $IDS", ids)
        return [(str(rid), str(message)) for rid, message in rows]

    def pattern_specs(self, ids: Sequence[str]) -> list[PatternSpec]:
        return pattern_specs(self, ids)

    def anchor_rows(self) -> Iterator[AnchorRow]:
        return anchor_rows(self)

    def anchor_rows_of(self, ids: Sequence[str]) -> list[AnchorRow]:
        return anchor_rows_of(self, ids)

    def live_hashes(self) -> Iterator[tuple[str, str]]:
        return live_hashes(self)


def same_words(before: Sequence[str] | None, now: Sequence[str] | None) -> bool:
    """Whether a record's index words (None: not live) are the same before and after."""
    if before is None or now is None:
        return before is now
    return tuple(before) == tuple(now)


def _tuple(text: object) -> tuple[str, ...]:
    return tuple(json.loads(text)) if isinstance(text, str) and text != "[]" else ()


class _Write(enum.Enum):
    """How one classified record is written."""

    INSERT = "insert"
    UPDATE = "update"  #: new content (and the retired flag it should have)
    FLAG = "flag"  #: same content, only the retired flag changes


def _plan(
    existing: tuple[str, bool] | None, chash: str, retired: bool
) -> tuple[_Write | None, ChangeKind | None, str]:
    """(how to write, history row, which count) for one record: ``classify`` plus retirement.

    ``retired``: the record ends up retired with this content (a rollback): counted as retired
    when it was live, updated when only its content changes, not at all when retired as it was.
    """
    change = classify(existing, chash)
    was_live = existing is not None and not existing[1]
    if not retired:
        return {
            Change.ADDED: (_Write.INSERT, ChangeKind.ADDED, "added"),
            Change.UPDATED: (_Write.UPDATE, ChangeKind.UPDATED, "updated"),
            Change.RESTORED: (_Write.FLAG, ChangeKind.RESTORED, "updated"),
            Change.UNCHANGED: (None, None, "unchanged"),
        }[change]
    if change is Change.ADDED:
        return _Write.INSERT, ChangeKind.ADDED, "added"
    if change is Change.UPDATED:
        if was_live:
            return _Write.UPDATE, ChangeKind.RETIRED, "retired"
        return _Write.UPDATE, ChangeKind.UPDATED, "updated"
    if was_live:
        return _Write.FLAG, ChangeKind.RETIRED, "retired"
    return None, None, ""


class _Classified:
    """One incoming record of a chunk, decoded once, with what applying it does."""

    __slots__ = (
        "added_in",
        "chash",
        "count",
        "dataset_version",
        "derived",
        "history",
        "id",
        "obj",
        "retired",
        "text",
        "write",
    )  # fmt: skip

    def __init__(
        self,
        item: Incoming,
        obj: RecordJSON,
        existing: tuple[str, bool] | None,
        added_in: int | None = None,
    ) -> None:
        # A spooled record's id is the spool's own string: the kept ids are held once.
        self.id = item.packed_id if item.packed_id is not None else str(obj["id"])
        self.obj = obj
        self.text = item.data if isinstance(item.data, str) else None
        self.dataset_version = item.dataset_version
        self.chash = item.content_hash or rec.content_hash(obj)
        self.retired = item.retired
        self.derived = item.derived
        self.added_in = added_in  #: a rebuild's: when the old file's row first came
        self.write, self.history, self.count = _plan(existing, self.chash, item.retired)


def _batches(incoming: Iterable[Incoming]) -> Iterator[list[Incoming]]:
    batch: list[Incoming] = []
    for item in incoming:
        batch.append(item)
        if len(batch) >= _APPLY_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def _classify_chunk(sql: Sql, batch: list[Incoming], source: str = "") -> list[_Classified]:
    """Classify one chunk against the stored records (``source``: a rebuild's old file)."""
    # Decode packed records once for the chunk (the text doubles as the stored raw_json).
    by_id: dict[str, tuple[Incoming, RecordJSON]] = {}
    for item in batch:
        obj = item.obj
        by_id[item.packed_id if item.packed_id is not None else str(obj["id"])] = (item, obj)
    ids = sorted(by_id)
    existing: dict[str, tuple[str, bool]] = {}
    added: dict[str, int] = {}
    table = f"{source}.records" if source else "records"
    for rid, chash, retired, added_in in sql.in_ids(
        f"SELECT id, content_hash, retired, added_in FROM {table} WHERE id $IDS",  # noqa: S608
        ids,
    ):
        existing[str(rid)] = (str(chash), bool(retired))
        added[str(rid)] = int(added_in)
    # Key order keeps B-tree inserts local.
    return [
        _Classified(*by_id[rid], existing.get(rid), added.get(rid) if source else None)
        for rid in ids
    ]


def _kept_ids(sql: Sql, keep: Keep, exclude: set[str]) -> list[str]:
    """Ids of the stored live records kept as they are (unchanged repositories, rejects)."""
    out: list[str] = []
    seen = set(exclude)
    for column, keys in (("repo", sorted(keep.repos)), ("id", sorted(keep.ids))):
        # Only a fixed column name is interpolated; the keys are bound.
        query = _KEPT_SQL.format(column=column, collate=sql.collate)
        for (rid,) in sql.in_ids(query, keys):
            if rid not in seen:
                seen.add(str(rid))
                out.append(str(rid))
    return out


#: A sync's inventory and the live ids it keeps: both read ``ix_records_inventory`` alone.
_INVENTORY_SQL = "SELECT id, repo, retired, content_hash FROM records"
_KEPT_SQL = "SELECT id FROM records WHERE retired = FALSE AND {column} $IDS ORDER BY id{collate}"


def _kept_and_retired(sql: Sql, keep: Keep, seen: set[str], *, full: bool) -> tuple[int, list[str]]:
    """``len(_kept_ids(sql, keep, seen))``, and ``_to_retire`` of what they spare (if ``full``)."""
    kept_repos: frozenset[str] = frozenset()
    others: list[str] = []
    if keep.repos:
        live_repos = {
            str(r) for (r,) in sql.rows("SELECT DISTINCT repo FROM records WHERE retired = FALSE")
        }
        kept_repos = keep.repos & live_repos
        others = sorted(live_repos - kept_repos)
    kept = 0
    retire: list[str] = []
    if kept_repos or full:
        rows: Iterable[Sequence[Any]] = (
            sql.in_ids("SELECT id FROM records WHERE retired = FALSE AND repo $IDS", others)
            if kept_repos
            else sql.rows("SELECT id FROM records WHERE retired = FALSE")
        )
        other_count = 0
        for (rid,) in rows:
            other_count += 1
            if full and rid not in seen and rid not in keep.ids:
                retire.append(str(rid))
        retire.sort()
    if kept_repos:
        row = sql.one("SELECT count(*) FROM records WHERE retired = FALSE")
        kept = int(row[0]) - other_count if row is not None else 0
        # An id of this apply among the kept repositories' live records is not kept.
        kept -= sum(
            1
            for _rid, repo in sql.in_ids(
                "SELECT id, repo FROM records WHERE retired = FALSE AND id $IDS", sorted(seen)
            )
            if repo in kept_repos
        )
    if keep.ids:
        kept += sum(
            1
            for rid, repo in sql.in_ids(
                "SELECT id, repo FROM records WHERE retired = FALSE AND id $IDS", sorted(keep.ids)
            )
            if repo not in kept_repos and rid not in seen
        )
    return kept, retire


def _stored_spec_keys(sql: Sql, ids: Sequence[str], source: str = "") -> dict[str, str]:
    """The spec key of each of ``ids`` stored with a spec row (``source``: a rebuild's old file)."""
    prefix = f"{source}." if source else ""
    columns = ", ".join(f"r.{column}" for _name, column in SPEC_INPUTS)
    query = (
        f"SELECT {columns} FROM {prefix}records r "  # noqa: S608 - fixed names
        f"JOIN {prefix}pattern_specs s ON s.record_id = r.id WHERE r.id $IDS"
    )
    return {str(row[0]): spec_key(row) for row in sql.in_ids(query, ids)}


def _to_retire(sql: Sql, spare: set[str]) -> list[str]:
    """Live records a full unit of work retires: those not in ``spare``."""
    query = f"SELECT id FROM records WHERE retired = FALSE ORDER BY id{sql.collate}"  # noqa: S608
    return [str(rid) for (rid,) in sql.rows(query) if rid not in spare]


_KEEP_ON_UPDATE = frozenset({"id", "added_in"})  #: a record's identity and when it first came
_UPDATE_COLUMNS = tuple(c for c in RECORD_COLUMNS if c not in _KEEP_ON_UPDATE)
_UPDATE_RECORD = (
    "UPDATE records SET "  # noqa: S608 - fixed names
    + ", ".join(f"{c} = ?" for c in _UPDATE_COLUMNS)
    + " WHERE id = ?"
)
_FIELD_NAMES = tuple(f.name for f in COLUMN_FIELDS)  #: JSON names, in column order
_UPDATE_POSITIONS = tuple(RECORD_COLUMNS.index(c) for c in _UPDATE_COLUMNS)
_ID_POSITION = RECORD_COLUMNS.index("id")
_SPEC_TABLE_COLUMNS = ("record_id", *SPEC_COLUMNS, "words")


def _record_values(item: _Classified, vid: int) -> tuple[object, ...]:
    """The ``records`` row of one record, in ``RECORD_COLUMNS`` order, built in one pass."""
    obj = item.obj
    extra = {k: obj[k] for k in rec.unknown_fields(obj)}
    book: dict[str, object] = {
        "extra_json": json.dumps(extra, ensure_ascii=False) if extra else None,
        "raw_json": item.text if item.text is not None else rec.verbatim_json(obj),
        "content_hash": item.chash,
        "dataset_version": item.dataset_version,
        "retired": item.retired,
        "added_in": vid if item.added_in is None else item.added_in,
        "changed_in": vid,
    }
    return (*map(obj.get, _FIELD_NAMES), *(book[c] for c in BOOK_COLUMNS))


def _update_values(values: tuple[object, ...]) -> tuple[object, ...]:
    """The parameters of ``_UPDATE_RECORD`` from a ``_record_values`` row: new values, then id."""
    return (*(values[i] for i in _UPDATE_POSITIONS), values[_ID_POSITION])


#: Every live record's index words, and those of some (``$IDS``).
_LIVE_WORDS = (
    "SELECT s.record_id, s.words FROM pattern_specs s JOIN records r "
    "ON r.id = s.record_id WHERE r.retired = FALSE"
)
_SOME_LIVE_WORDS = _LIVE_WORDS + " AND s.record_id $IDS"
_STALE_INDEX = "SELECT value FROM meta WHERE key = 'match_index'"
#: The records holding any of some words, and those holding both a word and one of some others.
_HOLDERS = "SELECT DISTINCT record_id FROM match_words WHERE word $IDS"
_HOLDING_BOTH = (
    "SELECT DISTINCT b.record_id FROM match_words b WHERE EXISTS (SELECT 1 FROM match_words a "
    "WHERE a.word = ? AND a.record_id = b.record_id) AND b.word $IDS"
)
_META = "SELECT value FROM meta WHERE key = ?"
#: What the anchor files are built from, of a ``pattern_specs`` row, and its ``_spec_values`` place.
_ANCHOR_INPUTS = ("anchor", "literals", "regex", "template", "words")
_ANCHOR_INPUTS_SQL = (
    "SELECT r.id, r.retired, "  # noqa: S608 - fixed column names
    + ", ".join(f"s.{c}" for c in _ANCHOR_INPUTS)
    + " FROM records r JOIN pattern_specs s ON s.record_id = r.id WHERE r.id $IDS"
)
_ANCHOR_INPUT_POSITIONS = tuple(_SPEC_TABLE_COLUMNS.index(c) for c in _ANCHOR_INPUTS)
#: Records ``fill_specs`` reads, compiles and writes at a time (bounds its memory).
_FILL_CHUNK = 2_000
#: Meta key: the compiler version (``Feed.compiler``) every stored ``pattern_specs`` row is of.
COMPILER_KEY = "compiler"


def _spec_values(item: _Classified, feed: Feed) -> tuple[object, ...]:
    """The ``pattern_specs`` row of one record: what came with it, or what ``feed`` derives."""
    derived: Derived = item.derived if item.derived is not None else feed.derive(item.obj)
    words = compact_json(list(derived.words))
    return (item.id, *derived.spec, words)


class Rebuild(Protocol):
    """A unit of work writing a new database from the old one, the schema ``source``.

    ``copy`` first copies what the apply does not rewrite; the rest is classified and inserted.
    """

    source: str

    def copy(self, incoming: Iterable[tuple[str, str]]) -> None:
        """Copy what stays; ``incoming`` is each incoming record's (id, content hash)."""
        ...

    def rows_written(self) -> None:
        """Every record row is in: the new file's secondary indexes may be built now."""
        ...


@runtime_checkable
class HashedIncoming(Protocol):
    """Incoming records that list their (id, content hash) without being read whole (a spool)."""

    def content_hashes(self) -> Iterator[tuple[str, str]]: ...


class UnitOfWork:
    """One write transaction's operations (``WriteTx``), on a backend's ``WriteSql``."""

    def __init__(self, sql: WriteSql, rebuild: Rebuild | None = None) -> None:
        self.sql = sql
        self.rebuild = rebuild
        self._copied = rebuild is None
        #: Whether this unit of work changed what the anchor files are built from.
        self.anchors_changed = False
        #: The stored specs are another compiler's (``apply``): none is kept (``_same_specs``).
        self._specs_stale = False

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.sql.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.sql.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def version_count(self) -> int:
        row = self.sql.one("SELECT count(*) FROM dataset_versions")
        return int(row[0]) if row else 0

    def bump_state(self, dataset_version: str | None, *, anchors: bool = True) -> None:
        """Record that the knowledge base changed; ``anchors`` False: the anchor inputs did not."""
        row = self.sql.one(_META, ("state",))
        state = str(int(row[0]) + 1 if row else 1)
        self.set_meta("state", state)
        if dataset_version is not None:
            self.set_meta("dataset_version", dataset_version)
        if anchors or self.sql.one(_META, (ANCHORS_STATE_KEY,)) is None:
            if dataset_version is None:  # unchanged by this write: the one stored
                found = self.sql.one(_META, ("dataset_version",))
                dataset_version = None if found is None else str(found[0])
            self.set_meta(ANCHORS_STATE_KEY, state)
            self.set_meta(ANCHORS_VERSION_KEY, dataset_version)
            import secrets  # only a write needs it: cold explain does not import hashlib

            self.set_meta(ANCHORS_NONCE_KEY, secrets.token_hex(8))

    def fill_specs(self, feed: Feed) -> int:
        """Derive every missing ``pattern_specs`` row, ``_FILL_CHUNK`` at a time; the count."""
        missing = [
            str(row[0])
            for row in self.sql.rows(
                "SELECT r.id FROM records r WHERE NOT EXISTS "
                "(SELECT 1 FROM pattern_specs s WHERE s.record_id = r.id)"
            )
        ]
        for start in range(0, len(missing), _FILL_CHUNK):
            rows = []
            chunk = missing[start : start + _FILL_CHUNK]
            for (raw,) in list(
                self.sql.in_ids("SELECT raw_json FROM records WHERE id $IDS", chunk)
            ):
                obj = json.loads(raw)
                derived = feed.derive(obj)
                words = compact_json(list(derived.words))
                rows.append((str(obj["id"]), *derived.spec, words))
            self.sql.insert_rows("pattern_specs", _SPEC_TABLE_COLUMNS, rows)
        return len(missing)

    def rebuild_index(
        self, feed: Feed, previous: Mapping[str, Sequence[str] | None] | None = None
    ) -> int:
        """Recompute the match index from the live records' stored words; the rows written.

        With ``previous`` (each changed record's words before, None: not live), only the rows that
        change are replaced and the word counts kept current (``_rank_counted``).
        """
        if previous is not None and self.sql.one(_STALE_INDEX) is None:
            after = {
                str(rid): tuple(rec.decode_json(text))
                for rid, text in self.sql.in_ids(_SOME_LIVE_WORDS, sorted(previous))
            }
            moved = self._count_words(previous, after)
            if moved is not None and isinstance(feed, CountedRank):
                return self._rank_counted(feed, previous, after, moved)
            live = self.sql.rows(_LIVE_WORDS)
            redo, rows = feed.rerank(
                ((str(rid), rec.decode_json(text)) for rid, text in live), previous, after
            )
            if redo is not None:
                self._each_in("DELETE FROM match_tokens WHERE record_id $IDS", sorted(redo))
                listed = list(rows)
                self.sql.insert_rows("match_tokens", ("token", "record_id", "rank"), listed)
                return len(listed)
        live = self.sql.rows(_LIVE_WORDS)
        ranked = feed.rank((str(rid), rec.decode_json(text)) for rid, text in live)
        first = list(itertools.islice(ranked, 1))
        written = 0

        def counted() -> Iterator[tuple[str, str, int]]:
            nonlocal written
            for row in itertools.chain(first, ranked):
                written += 1
                yield row

        self.sql.replace_index(counted())
        self.sql.execute("DELETE FROM match_word_counts")
        self.sql.fill_words()
        self.sql.execute(
            "INSERT INTO match_word_counts (word, n) SELECT word, count(*) FROM match_words "
            "GROUP BY word"
        )
        self.sql.execute("DELETE FROM meta WHERE key = 'match_index'")
        return written

    def _count_words(
        self,
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
    ) -> dict[str, tuple[int, int]] | None:
        """Bring the word tables to the records' words now: each moved count's (old, new), or None.

        None when a count would fall below zero: the caller ranks the whole index.
        """
        delta: Counter[str] = Counter()
        gone: list[tuple[str, str]] = []
        came: list[tuple[str, str]] = []
        for rid, before in previous.items():
            now = after.get(rid)
            if same_words(before, now):
                continue
            delta.subtract(before or ())
            delta.update(now or ())
            gone.extend((w, rid) for w in before or ())
            came.extend((w, rid) for w in now or ())
        moved = sorted(w for w, n in delta.items() if n)
        if not gone and not came:
            return {}
        old = {
            str(w): int(n)
            for w, n in self.sql.in_ids(
                "SELECT word, n FROM match_word_counts WHERE word $IDS", moved
            )
        }
        counts = {w: (old.get(w, 0), old.get(w, 0) + delta[w]) for w in moved}
        if any(new < 0 for _old, new in counts.values()):
            return None
        if gone:
            self.sql.executemany(
                "DELETE FROM match_words WHERE word = ? AND record_id = ?", sorted(gone)
            )
        if came:
            self.sql.insert_rows("match_words", ("word", "record_id"), sorted(came))
        self._each_in(
            "DELETE FROM match_word_counts WHERE word $IDS",
            [w for w, (_o, new) in counts.items() if new == 0],
        )
        self.sql.executemany(
            "INSERT INTO match_word_counts (word, n) VALUES (?, ?) "
            "ON CONFLICT (word) DO UPDATE SET n = excluded.n",
            [(w, new) for w, (_o, new) in counts.items() if new > 0],
        )
        return counts

    def _rank_counted(
        self,
        feed: CountedRank,
        previous: Mapping[str, Sequence[str] | None],
        after: Mapping[str, Sequence[str]],
        moved: Mapping[str, tuple[int, int]],
    ) -> int:
        """Rank again only the records whose match index rows can change; the rows written.

        Those are the changed records and any record holding a moved word with a word whose rarity
        lies between that word's old and new rarity (a word's place moves only past those).
        """
        import bisect  # only here: explain imports this module, and never ranks

        noted = {rid for rid, before in previous.items() if not same_words(before, after.get(rid))}
        if not noted:
            return 0
        held: Counter[str] = Counter()  # holders among the noted records, now
        for rid in noted:
            held.update(after.get(rid, ()))
        # Words still held by a record this unit of work did not change (``outside``).
        spans = {
            w: (min(old, new), max(old, new), new - held[w])
            for w, (old, new) in moved.items()
            if new - held[w] > 0
        }
        by_high = sorted((hi, lo, w) for w, (lo, hi, _out) in spans.items())
        highs = [hi for hi, _lo, _w in by_high]
        others: set[str] = set()
        direct: list[str] = []  # words whose holders are all read (one query for them all)
        sums: dict[tuple[int, int], int] = {}  # live holders of the words counted in a range
        for w, (lo, hi, outside) in spans.items():
            if (lo, hi) not in sums:
                row = self.sql.one(
                    "SELECT sum(n) FROM match_word_counts WHERE n BETWEEN ? AND ?", (lo, hi)
                )
                sums[lo, hi] = int(row[0] or 0) if row is not None else 0
            # The holders of the words in between; as many as the word's own: read those.
            if sums[lo, hi] - moved[w][1] >= outside:
                direct.append(w)
                continue
            # A narrow span: the moved words whose own span crosses it are few.
            crossing = [
                v
                for _hi, v_lo, v in by_high[bisect.bisect_left(highs, lo) :]
                if v_lo <= hi and v != w
            ]
            if sums[lo, hi] - moved[w][1] + sum(spans[v][2] for v in crossing) >= outside:
                direct.append(w)
                continue
            words = {
                str(v)
                for (v,) in self.sql.rows(
                    "SELECT word FROM match_word_counts WHERE n BETWEEN ? AND ?", (lo, hi)
                )
            }
            words.update(crossing)
            words.discard(w)
            others.update(
                str(rid) for (rid,) in self.sql.in_ids(_HOLDING_BOTH, sorted(words), (w,))
            )
        others.update(str(rid) for (rid,) in self.sql.in_ids(_HOLDERS, sorted(direct)))
        others -= noted
        ranked: dict[str, Sequence[str]] = {rid: after[rid] for rid in noted if rid in after}
        for rid, text in self.sql.in_ids(_SOME_LIVE_WORDS, sorted(others)):
            ranked[str(rid)] = tuple(rec.decode_json(text))
        needed = sorted({w for words in ranked.values() for w in words})
        count = {
            str(w): int(n)
            for w, n in self.sql.in_ids(
                "SELECT word, n FROM match_word_counts WHERE word $IDS", needed
            )
        }
        self._each_in("DELETE FROM match_tokens WHERE record_id $IDS", sorted(noted | others))
        rows = list(feed.rank_counted(sorted(ranked.items()), count))
        self.sql.insert_rows("match_tokens", ("token", "record_id", "rank"), rows)
        return len(rows)

    def apply(
        self,
        incoming: Iterable[Incoming],
        *,
        kind: VersionKind,
        source: str,
        dataset_version: str | None,
        feed: Feed,
        full: bool = False,
        partial: bool = False,
        rejected: int = 0,
        hashes: Mapping[str, str] | None = None,
        keep: Keep = NO_KEEP,
        restores: int | None = None,
    ) -> tuple[int, ApplyCounts]:
        """Upsert ``incoming`` in ``_APPLY_CHUNK`` chunks (last wins) and record the version row."""
        sql = self.sql
        old = self._copy_unchanged(incoming)  # a rebuild's old file, else ""
        # Asked before the records are written: the specs kept from before are all there is.
        stale = self.compiled_by_another(feed)
        # Specs of another compiler are compiled again, every one: none is kept as stored.
        self._specs_stale = stale
        started = now_iso()
        row = sql.one(
            'INSERT INTO dataset_versions (dataset_version, kind, source, partial, "full", '
            "hashes_json, added, updated, unchanged, retired, rejected, started_at, finished_at, "
            "restores) VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 0, ?, ?, ?) RETURNING id",
            (
                dataset_version,
                VersionKind(kind).value,
                source,
                partial,
                full,
                json.dumps(dict(hashes)) if hashes else None,
                started,
                started,
                restores,
            ),
        )
        assert row is not None  # noqa: S101 - RETURNING gives one row
        vid = int(row[0])

        tally = {"added": 0, "updated": 0, "unchanged": 0, "retired": 0}
        seen: set[str] = set()
        # Each written record's index words before, so the index is rewritten only where it changes.
        empty = not old and sql.one("SELECT 1 FROM records LIMIT 1") is None
        previous: dict[str, tuple[str, ...] | None] | None = None if old or empty else {}
        bulk = sql.bulk_search(incoming)
        for batch in _batches(incoming):
            items = _classify_chunk(sql, batch, old)
            if bulk is not None and any(i.id in seen for i in items):
                # An id repeated across chunks: index everything so far, then go on row by row.
                bulk.finish()
                bulk = None
            if previous is not None:
                self._words_before([i.id for i in items if i.write is not None], previous)
            self._apply_chunk(items, vid, tally, seen, feed, bulk)
        if bulk is not None:
            bulk.finish()
        if isinstance(incoming, Streamed):  # what the records' reading learned at its end
            ending = incoming.ending()
            keep, partial, rejected = ending.keep, ending.partial, ending.rejected
        if old and self.rebuild is not None:
            self.rebuild.rows_written()  # before the reads below, which use the indexes

        kept, live = _kept_and_retired(sql, keep, seen, full=full)
        if full:
            if previous is not None:
                self._words_before(live, previous)
            self._copy_to_history(live, vid, ChangeKind.RETIRED)
            self._mark_retired(live, vid, retired=True)
            tally["retired"] += len(live)

        from errkb.store.values import ApplyCounts

        counts = ApplyCounts(
            added=tally["added"],
            updated=tally["updated"],
            unchanged=tally["unchanged"] + kept,
            retired=tally["retired"],
            rejected=rejected,
        )
        sql.execute(
            "UPDATE dataset_versions SET added = ?, updated = ?, unchanged = ?, retired = ?, "
            "rejected = ?, finished_at = ?, partial = ? WHERE id = ?",
            (
                counts.added,
                counts.updated,
                counts.unchanged,
                counts.retired,
                rejected,
                now_iso(),
                partial,
                vid,
            ),
        )
        if stale:
            self.recompile(feed, written_in=vid)
        self.set_meta(COMPILER_KEY, feed.compiler)
        if counts.added or counts.updated or counts.retired or old or stale:
            self.rebuild_index(feed, None if stale else previous)
        if old or stale or counts.retired:
            self.anchors_changed = True
        self.bump_state(dataset_version, anchors=self.anchors_changed)
        return vid, counts

    def compiled_by_another(self, feed: Feed) -> bool:
        """Whether stored specs are another compiler's than ``feed``'s (no key: another's)."""
        noted = self.sql.one(_META, (COMPILER_KEY,))
        if noted is not None and str(noted[0]) == feed.compiler:
            return False
        return self.sql.one("SELECT 1 FROM pattern_specs LIMIT 1") is not None

    def recompile(self, feed: Feed, *, written_in: int | None = None) -> int:
        """Compile again every record (retired too) version ``written_in`` did not write."""
        if written_in is None:
            self.sql.execute("DELETE FROM pattern_specs")
        else:
            self.sql.execute(
                "DELETE FROM pattern_specs WHERE record_id IN "
                "(SELECT id FROM records WHERE changed_in <> ? OR retired = TRUE)",
                (written_in,),
            )
        return self.fill_specs(feed)

    def _copy_unchanged(self, incoming: Iterable[Incoming]) -> str:
        """A rebuild's first step (``Rebuild.copy``); the schema its old records are read from."""
        if self._copied or self.rebuild is None:
            return ""
        self._copied = True
        hashes: Iterable[tuple[str, str]]
        if isinstance(incoming, HashedIncoming):
            hashes = incoming.content_hashes()
        else:
            hashes = ((i.id, i.content_hash or rec.content_hash(i.obj)) for i in incoming)
        self.rebuild.copy(hashes)
        return self.rebuild.source

    def _apply_chunk(
        self,
        items: list[_Classified],
        vid: int,
        tally: dict[str, int],
        seen: set[str],
        feed: Feed,
        bulk: BulkSearch | None = None,
    ) -> None:
        """Write one classified chunk (rows are built for this chunk only)."""
        sql = self.sql
        seen.update(item.id for item in items)
        for item in items:
            if item.count:
                tally[item.count] += 1
        source = self.rebuild.source if self.rebuild is not None else ""
        for kind in ChangeKind:
            if kind is not ChangeKind.ADDED:
                ids = [i.id for i in items if i.history is kind]
                self._copy_to_history(ids, vid, kind, source)
        new = [i for i in items if i.write is _Write.INSERT]
        changed = [i for i in items if i.write is _Write.UPDATE]
        # Updated records that came uncompiled keep a stored spec row of the same inputs.
        same = self._same_specs(changed, source)
        # A rebuild's new file holds no row of a record it rewrites: one insert, whole.
        rows = [*new, *changed] if source else new
        if source:
            changed = []
        if not self.anchors_changed:
            self.anchors_changed = (
                bool(new)
                or any(i.write is _Write.FLAG for i in items)
                or self._anchor_inputs_change(changed, feed, same)
            )
        if rows:
            rows.sort(key=lambda i: i.id)
            sql.insert_rows("records", RECORD_COLUMNS, (_record_values(i, vid) for i in rows))
            if bulk is not None:
                bulk.added([i.id for i in rows])
        if new:
            sql.insert_rows(
                "record_history",
                ("record_id", "version_id", "change"),
                ((i.id, vid, ChangeKind.ADDED.value) for i in new),
            )
        # An updated record's child and spec rows are rewritten only where they change.
        rewrite: dict[str, list[_Classified]] = {}
        if changed:
            sql.executemany(
                _UPDATE_RECORD, [_update_values(_record_values(i, vid)) for i in changed]
            )
            rewrite = self._rewritten(changed, feed, same)
            for table, items_of in rewrite.items():
                # Only fixed table names (the field table's) are interpolated.
                self._each_in(
                    f"DELETE FROM {table} WHERE record_id $IDS",  # noqa: S608
                    [i.id for i in items_of],
                )
        for flag in (False, True):
            ids = [i.id for i in items if i.write is _Write.FLAG and i.retired is flag]
            self._mark_retired(ids, vid, retired=flag)
        for f in CHILD_FIELDS:
            children = rows + rewrite.get(f.column, [])
            sql.insert_rows(
                f.column,
                ("record_id", "position", f.value_column),
                ((i.id, n, text) for i in children for n, text in enumerate(i.obj[f.name])),
            )
        compiled = [i for i in rows if i.id not in same]
        sql.insert_rows(
            "pattern_specs",
            _SPEC_TABLE_COLUMNS,
            (_spec_values(i, feed) for i in compiled + rewrite.get("pattern_specs", [])),
        )
        if source and len(compiled) < len(rows):  # a rebuild: the kept rows from the old file
            columns = ", ".join(_SPEC_TABLE_COLUMNS)
            self._each_in(
                f"INSERT INTO pattern_specs ({columns}) SELECT {columns} "  # noqa: S608
                f"FROM {source}.pattern_specs WHERE record_id $IDS",
                sorted(i.id for i in rows if i.id in same),
            )

    def _same_specs(self, changed: Sequence[_Classified], source: str) -> frozenset[str]:
        """Ids of ``changed`` that came uncompiled and whose stored spec has their inputs."""
        uncompiled = [i for i in changed if i.derived is None]
        if not uncompiled or self._specs_stale:
            return frozenset()
        stored = _stored_spec_keys(self.sql, [i.id for i in uncompiled], source)
        return frozenset(i.id for i in uncompiled if stored.get(i.id) == record_spec_key(i.obj))

    def _rewritten(
        self, changed: Sequence[_Classified], feed: Feed, same: frozenset[str] = frozenset()
    ) -> dict[str, list[_Classified]]:
        """Per child table and ``pattern_specs``: the updated records whose rows there change."""
        ids = [i.id for i in changed]
        out: dict[str, list[_Classified]] = {}
        for f in CHILD_FIELDS:
            stored: dict[str, list[object]] = {}
            # Only fixed table and column names (the field table's) are interpolated.
            query = (
                f"SELECT record_id, position, {f.value_column} FROM {f.column} "  # noqa: S608
                "WHERE record_id $IDS"
            )
            found = sorted(self.sql.in_ids(query, ids), key=lambda r: (str(r[0]), int(r[1])))
            for rid, _position, value in found:
                stored.setdefault(str(rid), []).append(value)
            out[f.column] = [i for i in changed if stored.get(i.id, []) != list(i.obj[f.name])]
        columns = ", ".join(_SPEC_TABLE_COLUMNS)
        compiled = [i for i in changed if i.id not in same]
        specs = {
            str(row[0]): tuple(row)
            for row in self.sql.in_ids(
                f"SELECT {columns} FROM pattern_specs WHERE record_id $IDS",  # noqa: S608
                [i.id for i in compiled],
            )
        }
        for item in compiled:
            if item.derived is None:
                item.derived = feed.derive(item.obj)  # kept: its row is written from it next
        out["pattern_specs"] = [i for i in compiled if specs.get(i.id) != _spec_values(i, feed)]
        return out

    def _anchor_inputs_change(
        self, changed: Sequence[_Classified], feed: Feed, same: frozenset[str] = frozenset()
    ) -> bool:
        """Whether rewriting ``changed`` changes an anchor file's input (liveness, spec columns)."""
        if not changed:
            return False
        stored = {
            str(row[0]): tuple(row[1:])
            for row in self.sql.in_ids(_ANCHOR_INPUTS_SQL, [i.id for i in changed])
        }
        for item in changed:
            before = stored.get(item.id)
            if before is None or bool(before[0]) != item.retired:
                return True
            if item.id in same:
                continue
            if item.derived is None:
                item.derived = feed.derive(item.obj)  # kept: its row is written from it next
            values = _spec_values(item, feed)
            if tuple(values[p] for p in _ANCHOR_INPUT_POSITIONS) != before[1:]:
                return True
        return False

    def _words_before(
        self, rids: Sequence[str], previous: dict[str, tuple[str, ...] | None]
    ) -> None:
        """Note the live index words of each of ``rids`` not noted yet (the first note wins)."""
        fresh = [rid for rid in rids if rid not in previous]
        if not fresh:
            return
        found = {
            str(rid): tuple(rec.decode_json(text))
            for rid, text in self.sql.in_ids(_SOME_LIVE_WORDS, fresh)
        }
        for rid in fresh:
            previous[rid] = found.get(rid)

    def _each_in(self, statement: str, ids: Sequence[str], params: Sequence[object] = ()) -> None:
        if ids:
            for _row in self.sql.in_ids(statement, ids, params):
                pass  # a statement: no rows, but every chunk must run

    def _copy_to_history(
        self, rids: Sequence[str], vid: int, change: ChangeKind, source: str = ""
    ) -> None:
        """Copy the content of ``rids`` to history, SQL-side (``source``: a rebuild's old file)."""
        table = f"{source}.records" if source else "records"
        self._each_in(
            "INSERT INTO record_history (record_id, version_id, change, previous_json, "  # noqa: S608
            "previous_retired, previous_dataset_version) SELECT id, ?, ?, raw_json, "
            f"retired, dataset_version FROM {table} WHERE id $IDS ORDER BY id{self.sql.collate}",
            list(rids),
            (vid, change.value),
        )

    def _mark_retired(self, rids: Sequence[str], vid: int, *, retired: bool) -> None:
        """Set or clear the retired flag of ``rids``, as changed by version ``vid``."""
        self._each_in(
            "UPDATE records SET retired = ?, changed_in = ? WHERE id $IDS", rids, (retired, vid)
        )


def upgrade_schema(
    name: str,
    revision: str | None,
    sa_engine: Any,
    *,
    is_db_error: Callable[[BaseException], bool],
    fail: Callable[[BaseException, str], StoreError],
    prepare: Callable[[Any], None] | None = None,
) -> None:
    """Bring the database from ``revision`` to the head with Alembic (a newer one: refused)."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    from errkb._resources import bundle_path

    cfg = Config()
    cfg.set_main_option("script_location", str(bundle_path("migrations")))
    script = ScriptDirectory.from_config(cfg)
    if revision is not None:
        try:
            known = script.get_revision(revision) is not None
        except CommandError:
            known = False
        if not known:
            raise SchemaVersionError(
                f"{name}: database schema revision {revision!r} is newer than this "
                f"errkb (which knows up to {SCHEMA_HEAD!r}); upgrade errkb or use another --db"
            )
    try:
        with sa_engine.begin() as conn:
            if prepare is not None:
                prepare(conn)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except StoreError:
        raise
    except Exception as exc:
        if is_db_error(exc):
            raise fail(exc, "migrating its schema") from exc
        raise


def _version(row: Sequence[Any]) -> VersionInfo:
    from errkb.store.values import ApplyCounts, VersionInfo

    hashes = json.loads(row[14]) if row[14] else {}
    return VersionInfo(
        id=int(row[0]),
        dataset_version=row[1],
        kind=VersionKind(row[2]),
        source=str(row[3]),
        full=bool(row[4]),
        partial=bool(row[5]),
        counts=ApplyCounts(*(int(n) for n in row[6:11])),
        started_at=str(row[11]),
        finished_at=str(row[12]),
        restores=row[13],
        hashes=tuple(sorted((str(k), str(v)) for k, v in hashes.items())),
    )


_VERSION_SQL = (
    'SELECT id, dataset_version, kind, source, "full", partial, added, updated, unchanged, '
    "retired, rejected, started_at, finished_at, restores, hashes_json FROM dataset_versions"
)


class StoreEngine:
    """The ``Store`` methods the same on every backend, over a backend's ``_read``/``write``."""

    def _read(self, action: str, fn: Callable[[Any], _T]) -> _T:
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def write(self) -> AbstractContextManager[UnitOfWork]:
        raise NotImplementedError

    def fresh_build(
        self, records: int, *, changed: int | None = None
    ) -> AbstractContextManager[UnitOfWork] | None:
        """A unit of work building a new database put in place whole, or None (``write``)."""
        return None

    def reindex(self, feed: Feed) -> None:
        """Derive what a pre-0006 database lacks and rebuild the match index, in one write."""
        with self.write() as tx:
            # Kept specs are another compiler's unless noted; a table filled here is this one's.
            empty = tx.sql.one("SELECT 1 FROM pattern_specs LIMIT 1") is None
            tx.fill_specs(feed)
            if empty:
                tx.set_meta(COMPILER_KEY, feed.compiler)
            tx.rebuild_index(feed)
            tx.bump_state(None)

    def recompile(self, feed: Feed) -> int:
        """Compile again the records another compiler compiled, in one write; the count."""
        if self.meta_value(COMPILER_KEY) == feed.compiler:
            return 0
        with self.write() as tx:
            if not tx.compiled_by_another(feed):
                tx.set_meta(COMPILER_KEY, feed.compiler)
                return 0
            count = tx.recompile(feed)
            tx.set_meta(COMPILER_KEY, feed.compiler)
            tx.rebuild_index(feed)
            tx.bump_state(None)
        return count

    def meta_value(self, key: str) -> str | None:
        """One meta key: what the explain path reads, without the sync's bulky state."""
        value: str | None = self._read("reading", lambda v: v.meta_value(key))
        return value

    def raw_record(self, record_id: str) -> RecordJSON | None:
        found: RecordJSON | None = self._read("reading", lambda v: v.raw_record(record_id))
        return found

    def is_empty(self) -> bool:
        row = self._read("reading", lambda v: v.one("SELECT count(*) FROM dataset_versions"))
        return not row or int(row[0]) == 0

    def find_ids(self, key: str) -> list[str]:
        def run(v: Sql) -> list[str]:
            sql = (
                "SELECT id FROM records WHERE id = ? OR slug = ? "  # noqa: S608 - collation only
                f"ORDER BY retired, repo{v.collate}, id{v.collate}"
            )
            return [str(r[0]) for r in v.rows(sql, (key, key))]

        return self._read("reading", run)

    def is_retired(self, record_id: str) -> bool:
        sql = "SELECT retired FROM records WHERE id = ?"
        row = self._read("reading", lambda v: v.one(sql, (record_id,)))
        return bool(row and row[0])

    def live_records(
        self, *, repo: str | None = None, tag: str | None = None, error_class: str | None = None
    ) -> list[RecordJSON]:
        sql = "SELECT raw_json FROM records r WHERE retired = FALSE"
        params: list[str] = []
        if repo:
            sql += " AND repo = ?"
            params.append(repo)
        if error_class:
            sql += " AND error_class = ?"
            params.append(error_class)
        if tag:
            sql += (
                " AND EXISTS (SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ?)"
            )
            params.append(tag)

        def run(v: Sql) -> list[RecordJSON]:
            ordered = sql + f" ORDER BY repo{v.collate}, id{v.collate}"
            return [json.loads(raw) for (raw,) in v.rows(ordered, params)]

        return self._read("reading", run)

    def counts(self) -> StoreCounts:
        from errkb.store.values import StoreCounts

        def run(v: Any) -> StoreCounts:
            def one(sql: str) -> int:
                row = v.one(sql)
                return int(row[0]) if row else 0

            by_class = tuple(
                (str(c or "(none)"), int(n))
                for c, n in v.rows(
                    "SELECT error_class, count(*) FROM records WHERE retired = FALSE "  # noqa: S608
                    f"GROUP BY error_class ORDER BY count(*) DESC, error_class{v.collate} "
                    "NULLS FIRST LIMIT 10"
                )
            )
            return StoreCounts(
                records=one("SELECT count(*) FROM records WHERE retired = FALSE"),
                retired=one("SELECT count(*) FROM records WHERE retired = TRUE"),
                repos=one("SELECT count(DISTINCT repo) FROM records WHERE retired = FALSE"),
                versions=one("SELECT count(*) FROM dataset_versions"),
                dataset_version=v.meta_value("dataset_version"),
                by_class=by_class,
            )

        return self._read("reading", run)

    def versions(self) -> list[VersionInfo]:
        sql = _VERSION_SQL + " ORDER BY id"
        return self._read("reading", lambda v: [_version(r) for r in v.rows(sql)])

    def latest_version(self) -> VersionInfo | None:
        sql = _VERSION_SQL + " ORDER BY id DESC LIMIT 1"
        row = self._read("reading", lambda v: v.one(sql))
        return _version(row) if row else None

    def resolve_version(self, key: str) -> int | None:
        """The version row id for a row id or a datasetVersion (its latest row), or None."""
        text = key.strip()
        arg: int | str
        if text.isdigit():
            if int(text) > 2**31 - 1:
                return None  # beyond PostgreSQL's integer column: no such row anywhere
            sql, arg = "SELECT id FROM dataset_versions WHERE id = ?", int(text)
        else:
            sql, arg = "SELECT max(id) FROM dataset_versions WHERE dataset_version = ?", text
        row = self._read("reading", lambda v: v.one(sql, (arg,)))
        return None if not row or row[0] is None else int(row[0])

    def record(self, record_id: str) -> StoredRecord | None:
        sql = (
            "SELECT id, raw_json, retired, content_hash, dataset_version FROM records WHERE id = ?"
        )
        row = self._read("reading", lambda v: v.one(sql, (record_id,)))
        if row is None:
            return None
        from errkb.store.values import StoredRecord

        return StoredRecord(str(row[0]), json.loads(row[1]), bool(row[2]), str(row[3]), row[4])

    def record_changes(self, record_id: str) -> list[RecordChange]:
        from errkb.store.values import record_changes_from

        sql = (
            "SELECT h.version_id, v.dataset_version, v.kind, v.finished_at, h.change, "
            "h.previous_json, h.previous_retired "
            "FROM record_history h JOIN dataset_versions v ON v.id = h.version_id "
            "WHERE h.record_id = ? ORDER BY h.version_id, h.id"
        )
        rows = self._read("reading", lambda v: list(v.rows(sql, (record_id,))))
        return record_changes_from(rows)

    def inventory(self) -> Inventory:
        from errkb.store.values import inventory_from

        return self._read("reading", lambda v: inventory_from(v.rows(_INVENTORY_SQL)))

    def spec_keys(self, ids: Sequence[str]) -> dict[str, str]:
        """``records.patterns.spec_key`` of each of ``ids`` stored with its spec row."""
        return self._read("reading", lambda v: _stored_spec_keys(v, ids))

    def state_at(self, version_id: int) -> list[Incoming]:
        """Every record as it was right after ``version_id``, live and retired."""
        from errkb.store.values import state_from

        def run(v: Sql) -> list[Incoming]:
            first_after = list(
                v.rows(
                    "SELECT h.record_id, h.previous_json, h.previous_retired, "
                    "h.previous_dataset_version FROM record_history h JOIN ("
                    "  SELECT record_id, min(id) AS hid FROM record_history "
                    "  WHERE version_id > ? GROUP BY record_id"
                    ") f ON f.hid = h.id",
                    (version_id,),
                )
            )  # read before the next statement
            current = v.rows(
                "SELECT id, raw_json, retired, dataset_version FROM records "  # noqa: S608
                f"ORDER BY id{v.collate}"
            )
            return state_from(first_after, current)

        return self._read("reading", run)

    def classify(self, incoming: Iterable[Incoming], *, full: bool, keep: Keep = NO_KEEP) -> Diff:
        """What applying ``incoming`` would do, by the same rules (``_classify_chunk``)."""
        from errkb.store.values import diff_from

        def run(v: Sql) -> Diff:
            classified = (
                (item.id, item.count)
                for batch in _batches(incoming)
                for item in _classify_chunk(v, batch)
            )
            return diff_from(
                classified,
                lambda seen: _kept_ids(v, keep, seen),
                (lambda spared: _to_retire(v, spared)) if full else None,
            )

        with self.snapshot() as view:
            return run(view)
