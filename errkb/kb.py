"""The knowledge base: the library's front door (``errkb.open()``).

A ``KnowledgeBase`` wraps one store (``errkb.store``). Candidates for a message come from the
match index in the database and are compiled on first use into a cache shared by threads
(bounded, one per state of the store). It is safe to share between threads: each thread reads
through its own connection, and every explain runs inside one read transaction, so an answer is
consistent with exactly one dataset version even while a sync commits a new one. When the store
changes (a sync in another process), the next explain notices the changed state counter and
starts a fresh cache; ``refresh()`` does it on demand.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from errkb import __version__, _json
from errkb.errors import NotFoundError, StoreError, StoreReadOnlyError
from errkb.explain.routes import DEFAULT_THRESHOLDS, Route, Scannable, Thresholds, choose_route
from errkb.match.decide import decide
from errkb.match.matcher import IndexedMatcher, SpecCache
from errkb.parse.events import EventKind, LogEvent
from errkb.report import Confidence, KnowledgeBaseInfo, Match, RecordView, Report, Unmatched
from errkb.store import ReadView, RecordJSON, Store, anchors_key, gc_paused, open_store

if TYPE_CHECKING:
    from errkb.match.beside import AnchorFault
    from errkb.match.recordanchors import RecordAnchors
    from errkb.match.recordscan import Decider, Limits
    from errkb.match.scan import AnchorTable
    from errkb.records import Record
    from errkb.report.check import CheckReport
    from errkb.report.ingest import IngestReport
    from errkb.report.records import Stats
    from errkb.report.sync import RecordHistory, SyncReport, UpdateCheck, VersionList
    from errkb.search import SearchReport
    from errkb.store import VersionInfo


class _Default:
    """The type of ``DEFAULT``: a report's default ``Limits``."""


#: ``explain``'s ``limits`` when not given: ``errkb.match.recordscan.Limits()`` for an input
#: over ``Thresholds.paste_upto``, none for a smaller one.
DEFAULT = _Default()


def _chosen_limits(size: int, limits: Limits | _Default | None, thresholds: Thresholds) -> Limits:
    """The ``Limits`` a report of an input of ``size`` bytes keeps (``explain``'s rule)."""
    from errkb.match.recordscan import UNLIMITED, Limits

    if isinstance(limits, _Default):
        # Cut past a paste's size only: a scanned input of at most that size (every serving
        # call's text) holds too few lines for an unbounded report.
        return Limits() if size > thresholds.paste_upto else UNLIMITED
    return limits or UNLIMITED


def _within(report: Report, limits: Limits) -> Report:
    """``report`` kept within ``limits``, as the scan folds its own (``recordscan.Folded``).

    Unchanged when nothing is cut: the same entries, in the same order.
    """
    from errkb.match.recordscan import Folded

    folded = Folded(limits)
    folded.add_matches(report.matches)  # its exact ones (the others are kept below)
    folded.add_unmatched(report.unmatched)
    matches, unmatched, omitted = folded.result()
    if omitted is None:
        return report
    others = tuple(m for m in report.matches if m.confidence is not Confidence.EXACT)
    return dataclasses.replace(
        report, matches=matches + others, unmatched=unmatched, omitted=omitted
    )


class KnowledgeBase:
    """An opened knowledge base. Create it with ``errkb.open()``."""

    def __init__(self, store: Store, *, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.store = store
        #: The sizes that choose each input's route (``errkb.explain.Thresholds``), unless an
        #: ``explain`` is given its own.
        self.thresholds = thresholds
        self._lock = threading.Lock()
        self._cache: SpecCache | None = None
        self._state: str | None = None
        self._table: AnchorTable | None = None
        #: The record anchors' engine (``errkb.match.anchordb.ENGINES``); None: the fastest
        #: installed.
        self.scan_engine: str | None = None
        self._explains = 0
        # One anchor-table build at a time: concurrent reports after a sync wait for it (or, for
        # a small input, go on with the database's index) instead of each building their own.
        self._build_lock = threading.Lock()
        #: When True, a small input never builds the anchor table: it uses the table once
        #: ``prepare()`` has loaded it, else the database's index. A long-running server sets
        #: it and calls ``prepare()`` from one background thread after each sync, so no request
        #: waits for a build (seconds at 500,000 records).
        self.prepare_ahead = False
        self._anchors: RecordAnchors | None = None
        self._warned_in_memory = False

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def read_only(self) -> bool:
        """True when this knowledge base can only be read (``Store.read_only``).

        Every read works; ``ingest``, ``sync`` and ``rollback`` raise ``StoreReadOnlyError``.
        """
        return self.store.read_only

    def _writable(self, action: str) -> None:
        if self.store.read_only:
            raise StoreReadOnlyError(
                f"knowledge base {self.store.describe()} is read-only (its file, directory, "
                f"file system or database role cannot be written): cannot {action}"
            )

    # ------------------------------------------------------------------ explain
    def explain(
        self,
        text: str | bytes,
        *,
        limits: Limits | _Default | None = DEFAULT,
        thresholds: Thresholds | None = None,
    ) -> Report:
        """Find every known error in ``text`` (a log, a traceback, any pasted output).

        A large input's report keeps at
        most ``limits`` entries (``errkb.match.recordscan.Limits``; None keeps all; by default,
        an input of at most ``Thresholds.paste_upto`` keeps all), counts exact, and says what
        it cut (``Report.omitted``). ``thresholds`` (default: the knowledge base's) choose the
        route that reads it (``errkb.explain.choose_route``).
        """
        from errkb.parse.regions import parse_input

        data = bytes(text) if isinstance(text, bytearray) else text
        sizes = thresholds or self.thresholds
        route, scannable = choose_route(data, sizes)
        if route is Route.SCAN and scannable is not None:
            with self.store.snapshot() as view:
                report = self._scanned(view, scannable, limits, sizes)
            if len(scannable.data) >= sizes.release_from:
                from errkb.match.anchordb import release_heap

                # What the scan freed (its windows' events, hit arrays, decoded lines, the
                # folded entries) stays in glibc's heap until given back.
                release_heap()
            if report is not None:
                return report
            route = Route.PASTE if len(data) <= sizes.paste_upto else Route.REGIONS
        events = parse_input(data, narrow_above=sizes.paste_upto)
        with self.store.snapshot() as view:
            report = self._explain_in(view, data, events, sizes)
        if route is Route.PASTE and isinstance(limits, _Default):
            return report  # a paste: reported whole, nothing more imported
        # The region parse's report is kept within the same ``Limits`` as the scan's (the
        # scan hands it what it does not hold: millions of distinct tracebacks).
        return _within(report, _chosen_limits(len(data), limits, sizes))

    def explain_files(
        self, names: Sequence[str], read: Callable[[str], bytes], *, everything: bool = False
    ) -> Report:
        """Explain each named input, read by ``read`` one at a time as it is explained.

        One input gives its report as it is; several give one merged report in which each match
        names its file and keeps that file's own line numbers. ``everything``: no ``Limits``.
        """
        limits: Limits | _Default | None = None if everything else DEFAULT
        if len(names) == 1:
            return self.explain(read(names[0]), limits=limits)
        return Report.merge([(name, self.explain(read(name), limits=limits)) for name in names])

    def match_message(self, message: str, exc_class: str | None = None) -> Report:
        """Explain one exception message (what a bot has when it catches an error)."""
        with self.store.snapshot() as view:
            return self._message_in(view, message, exc_class)

    def _explain_in(
        self,
        view: ReadView,
        data: str | bytes,
        events: list[LogEvent],
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
    ) -> Report:
        """``explain`` of ``data`` (parsed into ``events``) over an open read view."""
        large = len(data) >= thresholds.scan_from
        return self._report(view, events, anchors=large, text=data)

    def _scanned(
        self,
        view: ReadView,
        scannable: Scannable,
        limits: Limits | _Default | None,
        thresholds: Thresholds,
    ) -> Report | None:
        """The record-driven scan's report of ``scannable``, or None.

        None when the store cannot feed it, or when the shape pass names more lines than the
        scan holds (``TooManyShapes``): the region parse reads the input then.
        """
        from errkb.match.decide import MAX_SIMILAR_QUERIES, similar_matches
        from errkb.match.msgfirst import found_at
        from errkb.match.recordscan import Folded, TooManyShapes, record_scan

        state = view.meta_value("state") or "0"
        dataset_version = view.meta_value("dataset_version")
        cache = self._cache_for(state)
        anchors = self._record_anchors(view, state)
        if not anchors.complete:
            return None  # a database from before migration 0006: the region parse reads it
        decide_events, matcher, lookup, sample = self._deciding(
            view, cache, state, anchors=True, similar=False
        )
        raw = scannable.data
        folded = Folded(_chosen_limits(len(raw), limits, thresholds))
        try:
            # The scan makes millions of small acyclic objects (lines, events, hits) and
            # frees them by reference counting; the cyclic collector's passes over them found
            # nothing to collect and took 0.57 s of a 4.7 s scan (dense 50 MB bench log, 150k
            # records: 751 young, 68 middle and 7 full collections, 0 objects collected).
            with gc_paused():
                record_scan(
                    raw,
                    anchors,
                    decide_events,
                    folded,
                    found=lambda data, lines: found_at(data, lines, matcher),
                    may_match=matcher.may_match_alone,
                    load=matcher.load,
                    json_lines=scannable.json_lines,
                )
        except TooManyShapes:
            return None  # millions of exception lines: the region parse folds them as it goes
        suggestions = similar_matches(folded.unmatched_events(MAX_SIMILAR_QUERIES), matcher, lookup)
        matches, unmatched, omitted = folded.result()
        return Report(
            __version__,
            dataset_version,
            matches + tuple(suggestions),
            unmatched,
            sample,
            omitted,
        )

    def _record_anchors(self, view: ReadView, state: str) -> RecordAnchors:
        """The state's record anchors (built once, under the build lock; stored beside).

        The files beside the knowledge base are keyed by ``anchors_key``: the state of the
        last write that changed what they are built from.
        """
        from errkb.match.recordanchors import RecordAnchors, record_anchordb_path

        with self._build_lock:
            with self._lock:
                anchors = self._anchors
            if anchors is None or anchors.engine != (self.scan_engine or anchors.engine):
                path = record_anchordb_path(self.store.path)
                key, version = anchors_key(view.meta_value)
                anchors = RecordAnchors(
                    view.anchor_rows,  # read only when the stored maps cannot be used
                    self.scan_engine,
                    store_at=path,
                    state=key,
                    dataset_version=version,
                )
                self._say_rebuilt(path, anchors.db.fault, len(anchors.words))
                with self._lock:
                    if self._state == state:
                        self._anchors = anchors
            return anchors

    def _say_rebuilt(self, path: Path, fault: AnchorFault | None, words: int) -> None:
        """Say once per knowledge base that its record anchors' file could not be used.

        A writable knowledge base rebuilt and stored it; that is news only when the file was
        there and bad (stale, truncated, corrupt, not a regular file). A read-only one compiled
        it in memory, as every process that scans a large input will (seconds at 150,000
        records), which a user should hear about, once, with the fix.
        """
        from errkb.match.beside import AnchorFault

        writable = not self.store.read_only
        if fault is None or self._warned_in_memory or (writable and fault is AnchorFault.MISSING):
            return
        self._warned_in_memory = True
        import logging  # only here: cold start does not pay for it

        if writable:
            logging.getLogger("errkb").warning(
                "errkb: the anchor database %s was %s: rebuilt from the knowledge base", path, fault
            )
            return
        logging.getLogger("errkb").warning(
            "errkb: the anchor database %s is %s and the knowledge base is read-only: its "
            "%d anchors were compiled in memory for this process (every process will); a sync "
            "where the knowledge base is writable builds and stores it",
            path,
            fault.value,
            words,
        )

    def _message_in(self, view: ReadView, message: str, exc_class: str | None = None) -> Report:
        """``match_message`` over an open read view."""
        return self._report(view, [LogEvent(EventKind.BARE, exc_class, message, (1,))])

    def _report(
        self,
        view: ReadView,
        events: list[LogEvent],
        *,
        anchors: bool = False,
        text: str | bytes | None = None,
    ) -> Report:
        """Decide ``events`` against the state ``view`` reads: one dataset version throughout."""
        state = view.meta_value("state") or "0"
        dataset_version = view.meta_value("dataset_version")
        cache = self._cache_for(state)
        decide_events, matcher, _lookup, sample = self._deciding(
            view, cache, state, anchors=anchors
        )
        matches, unmatched = decide_events(events)
        if text is not None and not any(m.confidence is Confidence.EXACT for m in matches):
            # Structure-first parsing explained nothing: the message-first pass looks for
            # known messages on the lines no event covers (a large input's: the record
            # anchors' hit lines, as the scan's). Its events only ever give exact matches,
            # never unmatched or similar entries, so they are decided on their own and put
            # first.
            found = self._message_first(view, state, text, events, matcher, large=anchors)
            if found:
                extra, _none = decide_events(found)
                matches = extra + matches
        return Report(__version__, dataset_version, matches, unmatched, sample)

    def _deciding(
        self,
        view: ReadView,
        cache: SpecCache,
        state: str,
        *,
        anchors: bool,
        similar: bool = True,
    ) -> tuple[
        Decider,
        IndexedMatcher,
        Callable[[str], RecordJSON | None],
        KnowledgeBaseInfo | None,
    ]:
        """What deciding over ``view`` needs.

        Decide over events, the matcher, record look-up and the bundled-sample note.
        """
        from errkb.validators import admits, diagnose, records_with_validators

        # Asked once per match (thousands in a dense log): a set test, not a walk of every
        # validator's rules.
        validated = frozenset(records_with_validators())

        def has_validator(rid: str) -> bool:
            return rid in validated

        def diagnose_known(rid: str, captures: Mapping[str, str]) -> object:
            return diagnose(rid, captures) if rid in validated else None

        def admits_known(rid: str, captures: Mapping[str, str]) -> bool:
            return rid not in validated or admits(rid, captures)

        sample = _bundled_sample(view.meta_value(BUNDLED_SAMPLE_KEY), state)
        with self._lock:
            self._explains += 1
            # A one-shot CLI run of a small paste never loads the anchor table; a large
            # input or a long-running process (second report on) does, once per state.
            want = anchors or (self._explains > 1 and not self.prepare_ahead)
            table = self._table
            record_anchors = self._anchors if self._state == state else None
        if table is None and want:
            table = self._anchor_table(view, state, wait=anchors)
            if table is not None and not anchors:
                # A long-running process (its second report): suggestions from memory too.
                table.build_related()
        matcher = IndexedMatcher(
            view,
            cache,
            table,
            admits_known,
            record_anchors.matchable if record_anchors is not None else None,
        )
        records: dict[str, RecordJSON | None] = {}

        def lookup(rid: str) -> RecordJSON | None:
            if rid not in records:
                records[rid] = view.raw_record(rid)
            return records[rid]

        def prefetch(rids: Sequence[str]) -> None:
            # One query per chunk for a batch's matches, not one per record.
            missing = [rid for rid in rids if rid not in records]
            if missing:
                read = view.raw_records(missing)
                for rid in missing:
                    records[rid] = read.get(rid)

        def decide_events(
            some: list[LogEvent], can_match: Callable[[LogEvent], bool] | None = None
        ) -> tuple[tuple[Match, ...], tuple[Unmatched, ...]]:
            return decide(
                some,
                matcher,
                lookup,
                diagnose=diagnose_known,
                has_validator=has_validator,
                similar=similar,
                can_match=can_match,
                prefetch=prefetch,
            )

        return decide_events, matcher, lookup, sample

    def _cache_for(self, state: str) -> SpecCache:
        # Compiled records are valid for one state of the store: a sync (in any process)
        # bumps the state, and the next report starts a fresh cache and anchor table.
        with self._lock:
            if self._cache is None or self._state != state:
                self._cache = SpecCache()
                self._table = None
                self._anchors = None
                self._state = state
            return self._cache

    def _anchor_table(self, view: ReadView, state: str, *, wait: bool = True) -> AnchorTable | None:
        from errkb.match.scan import load_table

        # A small input does not wait for another thread's build: the index answers it as well.
        if not self._build_lock.acquire(blocking=wait):
            return None
        try:
            with self._lock:
                if self._state == state and self._table is not None:
                    return self._table  # built by the thread we waited for
            table = load_table(view, self.store.path, *anchors_key(view.meta_value))
            with self._lock:
                if self._state == state:
                    self._table = table
            return table
        finally:
            self._build_lock.release()

    def _message_first(
        self,
        view: ReadView,
        state: str,
        text: str | bytes,
        events: Sequence[LogEvent],
        matcher: IndexedMatcher,
        *,
        large: bool,
    ) -> list[LogEvent]:
        """``FOUND`` events for the lines of ``text`` no event covers.

        A large input's candidate lines are the record anchors' hit lines (one whole-buffer
        pass, the scan's); a small one's, or one whose store cannot feed the record anchors,
        are all its lines (``msgfirst.message_first``).
        """
        from errkb.match.msgfirst import covered_lines, found_at, message_first

        if large:
            anchors = self._record_anchors(view, state)
            if anchors.complete:
                from errkb.parse.text import decode_input, needs_decoding

                raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
                if needs_decoding(raw):
                    raw = decode_input(raw).encode("utf-8", "surrogatepass")
                covered = covered_lines(events)
                lines = [(n, at) for n, at in anchors.hit_lines(raw) if n not in covered]
                return found_at(raw, lines, matcher)
        return message_first(text, events, matcher)

    def prepare(self) -> bool:
        """Load what a large input's explain reads, for the current state; True if it changed.

        The anchor table (its longest entry lists parsed ahead: ``AnchorTable.warm``) and its
        suggestion index, and the
        record-driven scan's anchors (``<db>.recordanchors`` and its maps) and its shape
        pass: a first large input paid 0.22-0.24 s of CPU for them (150k records, the bench's
        sparse 50 MB log: 1.13-1.40 s against 0.79-0.88 s once they were loaded). A
        long-running process calls this after a sync (``errkb serve`` does, from a background
        thread, see ``prepare_ahead``) so that no request pays for the loads.
        """
        with self.store.snapshot() as view:
            state = view.meta_value("state") or "0"
            with self._lock:
                changed = state != self._state
                ready = not changed and self._table is not None
                anchors_ready = not changed and self._anchors is not None
            if not ready:
                self._cache_for(state)
                table = self._anchor_table(view, state)
                if table is not None:
                    table.build_related()  # its suggestion index too: no request builds it
                    table.warm()
            if not anchors_ready:
                from errkb.match.recordscan import prepare_passes

                # With the id table the single-traceback path's literal test reads, and the
                # arrays the anchor pass derives from its words.
                anchors = self._record_anchors(view, state)
                anchors.id_table()
                anchors.db.prepare()
                prepare_passes()
        return changed

    def build_anchor_files(self) -> None:
        """Build, for the store's current state, every file a large input's explain reads.

        The record anchors (``<db>.recordanchors`` and its maps) and the anchor table
        (``<db>.anchors``), each beside the knowledge base (a PostgreSQL one: beside its sync
        lock in the local data directory, per machine), written whole under a temporary name
        and renamed, keyed by the anchor key (``store.anchors_key``) and engine; a file already
        current is kept, not compiled again. ``sync``, ``ingest`` and ``rollback`` call it after
        their commit, so that no explain compiles them and a knowledge base mounted read-only
        afterwards never does. Each file is built and dropped before the next (held together
        they were the sync's peak). A file an older errkb left that no route reads (the buffer
        pass's ``<db>.anchordb``) is removed. Nothing here touches the store's transaction.
        """
        if self.store.read_only:
            return
        from errkb.match.anchordb import default_engine, release_heap
        from errkb.match.recordanchors import record_anchordb_path, store_record_anchors
        from errkb.match.scan import table_body

        engine = self.scan_engine or default_engine()
        with self.store.snapshot() as view, self._build_lock:
            self._cache_for(view.meta_value("state") or "0")
            # Keyed by the last write that changed what they are built from: a write that
            # left every input as it was finds them current (``store.anchors_key``).
            state, dataset_version = anchors_key(view.meta_value)
            store_record_anchors(
                view.anchor_rows,
                engine,
                store_at=record_anchordb_path(self.store.path),
                state=state,
                dataset_version=dataset_version,
            )
            release_heap()
            table_body(view, self.store.path, state, dataset_version)
            release_heap()
        _remove_stale(self.store.path.with_name(self.store.path.name + ".anchordb"))

    def _after_commit(self, interrupted: Callable[[], BaseException]) -> None:
        """``build_anchor_files`` after a write committed; Ctrl-C raises ``interrupted()``.

        The write stands whatever happens here: an interrupted build leaves no file (the next
        large input builds it), and the caller still hears which version was applied.
        """
        self.refresh()
        try:
            self.build_anchor_files()
        except KeyboardInterrupt:
            raise interrupted() from None
        except StoreError:
            pass  # the write stands; a large input's explain builds them (or says why not)

    def refresh(self) -> bool:
        """Drop compiled records if the store changed since they were compiled; True if so."""
        with self.store.snapshot() as view:
            state = view.meta_value("state") or "0"
        changed = state != self._state
        self._cache_for(state)
        return changed

    # ------------------------------------------------------------------ search
    def search(
        self,
        query: str | bytes,
        *,
        repo: str | None = None,
        tag: str | None = None,
        error_class: str | None = None,
        severity: str | None = None,
        limit: int = 10,
    ) -> SearchReport:
        """Records that best answer ``query`` (words, a message, or a whole traceback or log).

        One read transaction for the whole answer: the matcher's exact hits and the full-text
        candidates come from the same dataset version, even while a sync commits another.
        """
        from errkb.search import search
        from errkb.store.search import Filters

        filters = Filters(repo, tag, error_class, severity)
        with self.store.snapshot() as view:

            def explained(text: str, events: list[LogEvent]) -> Report:
                if events:
                    return self._explain_in(view, text, events)
                return self._message_in(view, text)

            return search(view, explained, query, filters, limit)

    # ------------------------------------------------------------------ check
    def check(self, paths: Sequence[str | Path], *, all_layers: bool = False) -> CheckReport:
        """``errkb.check`` of ``paths``, with the records its findings name (for their fixes).

        The validators read no database; the records come from one read transaction after.
        """
        from errkb.validators.preflight import check

        report = check(paths, all_layers=all_layers)
        with self.store.snapshot() as view:
            found = {rid: view.raw_record(rid) for rid in report.record_ids}
        records = {rid: record for rid, record in found.items() if record is not None}
        return dataclasses.replace(report, records=records)

    # ------------------------------------------------------------------ records
    def get(self, key: str) -> Record:
        """The record with this id (or slug); NotFoundError if none."""
        ids = self.store.find_ids(key)
        if not ids:
            raise NotFoundError(f"no record with id or slug {key!r}")
        raw = self.store.raw_record(ids[0])
        if raw is None:  # pragma: no cover - deleted between two reads: records never are
            raise NotFoundError(f"no record with id or slug {key!r}")
        from errkb.records import Record

        return Record.from_json(raw)

    def view(self, key: str) -> RecordView:
        """The record with this id (or slug) as ``errkb show`` presents it."""
        from errkb.validators import validator_for

        record = self.get(key)
        return RecordView(
            record.to_json(),
            validated=validator_for(record.id) is not None,
            retired=self.is_retired(record.id),
        )

    def is_retired(self, record_id: str) -> bool:
        return self.store.is_retired(record_id)

    def records(
        self, *, repo: str | None = None, tag: str | None = None, error_class: str | None = None
    ) -> list[Record]:
        """Live records, filtered; ordered by repo then id."""
        from errkb.records import Record

        found = self.store.live_records(repo=repo, tag=tag, error_class=error_class)
        return [Record.from_json(raw) for raw in found]

    def stats(self) -> Stats:
        from errkb.report.records import Stats

        c = self.store.counts()
        return Stats(
            path=self.store.describe(),
            records=c.records,
            retired=c.retired,
            repos=c.repos,
            versions=c.versions,
            dataset_version=c.dataset_version,
            by_class=c.by_class,
        )

    def iter_envelopes(self, *, include_retired: bool = False) -> Iterator[dict[str, Any]]:
        """Every record as a ``{"record", "datasetVersion"}`` envelope, in id order."""
        for record, version in self.store.envelopes(include_retired=include_retired):
            yield {"record": record, "datasetVersion": version}

    def export(self, out: IO[str], *, include_retired: bool = False) -> int:
        """Write JSON Lines of envelopes to ``out``; return how many."""
        count = 0
        for envelope in self.iter_envelopes(include_retired=include_retired):
            # NaN/Infinity in unknown fields become null: export must be valid JSON Lines.
            out.write(_json.dumps(envelope, separators=(",", ":")) + "\n")
            count += 1
        return count

    # ------------------------------------------------------------------ writes
    def ingest(self, paths: Iterable[str | os.PathLike[str]]) -> IngestReport:
        """Validate every record of ``paths``, then upsert the valid ones in one transaction."""
        from errkb.ingest import ingest_paths

        self._writable("ingest records into it")
        report = ingest_paths(self.store, paths)
        if report.version_id is not None:
            self._after_commit(KeyboardInterrupt)
        return report

    def sync(self, source: str | os.PathLike[str] | None = None, **options: Any) -> SyncReport:
        """Apply the dataset version ``source`` holds (see ``errkb.sync.sync`` for options)."""
        from errkb.errors import SyncInterruptedError
        from errkb.sync import interrupted_message, sync

        self._writable("sync it")
        report = sync(self.store, source, **options)
        if report.changed or report.recompiled:  # the anchors and literals may differ too
            # After the commit, outside its transaction: a SIGKILL now loses only these
            # files, which the next large input builds.
            self._after_commit(lambda: SyncInterruptedError(interrupted_message(report)))
        else:
            self.refresh()
        return report

    def check_for_update(
        self, source: str | os.PathLike[str] | None = None, **options: Any
    ) -> UpdateCheck:
        """Compare our dataset version with the one ``source`` publishes (its manifest only).

        ``source`` defaults to ``$ERRKB_SOURCE``, else ErrLookup's site.
        """
        from errkb.sync.update import check_for_update

        return check_for_update(self.store, source, **options)

    # ------------------------------------------------------------------ history
    def versions(self) -> VersionList:
        """Every applied version, oldest first (``errkb versions``)."""
        from errkb.report.sync import VersionList
        from errkb.sync.history import versions

        return VersionList(tuple(versions(self.store)))

    def latest_version(self) -> VersionInfo | None:
        """The version applied last (a sync, ingest or rollback), or None before any."""
        return self.store.latest_version()

    def record_id(self, key: str) -> str:
        """The id ``key`` names: an id, or a slug naming one record (UsageError for several)."""
        from errkb.sync.history import resolve_record

        return resolve_record(self.store, key)

    def history(self, key: str) -> RecordHistory:
        """How the record ``key`` names (an id, or a slug naming one) changed, oldest first."""
        from errkb.report.sync import RecordHistory
        from errkb.sync.history import record_history

        return RecordHistory(key, tuple(record_history(self.store, key)))

    def rollback(self, version: str | int) -> SyncReport:
        """Roll back to ``version`` (a version id or a datasetVersion), as a new version.

        The new version is of kind "rollback"; nothing is deleted, so it can be undone.
        """
        from errkb.errors import SyncInterruptedError
        from errkb.sync import interrupted_message
        from errkb.sync.history import rollback_to

        self._writable("roll it back")
        report = rollback_to(self.store, version)
        if report.changed:
            self._after_commit(lambda: SyncInterruptedError(interrupted_message(report)))
        else:
            self.refresh()
        return report

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def open_kb(
    target: str | os.PathLike[str] | None = None,
    *,
    bundled: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> KnowledgeBase:
    """Open (creating and migrating if needed) a knowledge base.

    ``target`` is a database path or SQLite URL; by default ``$ERRKB_DB``, else a file in the
    user's data directory. A database errkb creates is filled from the bundled dataset unless
    ``bundled`` is False. ``thresholds``: the sizes that choose each input's explain route
    (``errkb.explain.Thresholds``). When the default location is not writable, errkb still works: it
    builds a private temporary database from the bundled data for this process.
    """
    explicit = target is not None or bool(os.environ.get("ERRKB_DB"))
    store = open_store(target)
    try:
        store.ensure_schema()
    except StoreError:
        if explicit:
            raise
        store = _temporary_store()
    kb = KnowledgeBase(store, thresholds=thresholds)
    if store.read_only:
        return kb  # read as it is: a reader neither migrates, reindexes nor seeds it
    if store.meta_value("match_index") == "stale":
        from errkb.match.feed import FEED

        store.reindex(FEED)  # a database migrated from before the match index (or 0006)
    if bundled and store.is_empty():
        from errkb._resources import bundled_dataset_dir
        from errkb.ingest import ingest_paths

        seeded = ingest_paths(store, [bundled_dataset_dir()], only_if_empty=True)
        state = store.meta_value("state")
        if seeded.version_id is not None and state is not None:
            value = {"state": state, "records": seeded.counts.added}
            with store.write() as tx:
                tx.set_meta(BUNDLED_SAMPLE_KEY, _json.dumps(value))
    return kb


#: Meta key written after the bundled sample is ingested into a new database: the store's state
#: counter then. Every later change (sync, ingest, rollback) bumps the counter, so the key is
#: true only while the sample is all there is, nothing has to clear it, and explain, which
#: reads the counter anyway, pays one more meta read for it.
BUNDLED_SAMPLE_KEY = "bundled_sample"


def _bundled_sample(text: str | None, state: str) -> KnowledgeBaseInfo | None:
    """The bundled-sample note's facts, while the store is in the state the seeding left."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or value.get("state") != state:
        return None
    records = value.get("records")
    return KnowledgeBaseInfo(records if isinstance(records, int) else 0, bundled_sample=True)


def _remove_stale(path: Path) -> None:
    """Remove ``path`` when it is a regular file (never a link's target, never a directory)."""
    try:
        if path.is_file() and not path.is_symlink():
            path.unlink()
    except OSError:
        pass  # another process removed it, or the directory is not ours to change


def _temporary_store() -> Store:
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="errkb-")
    atexit.register(shutil.rmtree, folder, True)
    store = open_store(Path(folder) / "errkb.sqlite3")
    store.ensure_schema()
    return store
