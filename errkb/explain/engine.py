"""The explain engine of one knowledge base: its routes run over the prepared per-state artefacts.

An ``Engine`` (one per ``KnowledgeBase``) runs the route ``choose_route`` picks inside one read
snapshot and keeps the report within its ``Limits``. Per-state artefacts (compiled records,
anchor table, record anchors) are built once under one lock and dropped when the state
changes; ``build_anchor_files`` stores the anchor files for later processes. Thread-safe.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from errkb import __version__
from errkb.explain.routes import (
    DEFAULT_THRESHOLDS,
    Route,
    Scannable,
    Thresholds,
    choose_route,
)
from errkb.match.decide import decide
from errkb.match.matcher import IndexedMatcher, SpecCache
from errkb.parse.events import EventKind, LogEvent
from errkb.report import Confidence, KnowledgeBaseInfo, Match, Report, Unmatched
from errkb.store import ReadView, RecordJSON, Store, anchors_key, gc_paused

if TYPE_CHECKING:
    from errkb.match.anchordelta import AnchorBuild, Compaction
    from errkb.match.beside import AnchorFault
    from errkb.match.recordanchors import RecordAnchors
    from errkb.match.recordscan import Decider, Limits
    from errkb.match.scan import AnchorTable

__all__ = ["BUNDLED_SAMPLE_KEY", "DEFAULT", "DefaultLimits", "Engine"]


class DefaultLimits:
    """The type of ``DEFAULT``: a report's default ``Limits``."""


#: ``explain``'s default ``limits``: ``Limits()`` over ``Thresholds.paste_upto``, else none.
DEFAULT = DefaultLimits()


def _chosen_limits(
    size: int, limits: Limits | DefaultLimits | None, thresholds: Thresholds
) -> Limits:
    """The ``Limits`` a report of an input of ``size`` bytes keeps (``explain``'s rule)."""
    from errkb.match.recordscan import UNLIMITED, Limits

    if isinstance(limits, DefaultLimits):
        return Limits() if size > thresholds.paste_upto else UNLIMITED
    return limits or UNLIMITED


def _within(report: Report, limits: Limits) -> Report:
    """``report`` kept within ``limits``, as the scan folds its own (``recordscan.Folded``).

    Unchanged when nothing is cut: the same entries, in the same order.
    """
    from errkb.match.recordscan import Folded

    folded = Folded(limits)
    folded.add_matches(report.matches)  # its exact and possible ones (suggestions below)
    folded.add_unmatched(report.unmatched)
    matches, unmatched, omitted = folded.result()
    if omitted is None:
        return report
    others = tuple(m for m in report.matches if m.confidence is Confidence.SIMILAR)
    return dataclasses.replace(
        report, matches=matches + others, unmatched=unmatched, omitted=omitted
    )


class Engine:
    """What explains for one knowledge base (``KnowledgeBase`` holds one)."""

    def __init__(self, store: Store, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.store = store
        self.thresholds = thresholds  #: choose each input's route, unless ``explain`` is given some
        self._lock = threading.Lock()
        self._cache: SpecCache | None = None
        self._state: str | None = None
        self._table: AnchorTable | None = None
        #: The record anchors' engine (``anchordb.ENGINES``); None: the fastest installed.
        self.scan_engine: str | None = None
        #: When a write compiles every record's anchors (``Compaction``); None: the default.
        self.compaction: Compaction | None = None
        self._explains = 0
        self._build_lock = threading.Lock()  # one anchor build at a time
        #: True: a small input never builds the anchor table (a server calls ``prepare()``).
        self.prepare_ahead = False
        self._anchors: RecordAnchors | None = None
        self._warned: set[Path] = set()  # the files beside the database said to be bad

    def explain(
        self,
        text: str | bytes,
        *,
        limits: Limits | DefaultLimits | None = DEFAULT,
        thresholds: Thresholds | None = None,
    ) -> Report:
        """Find every known error in ``text`` (a log, a traceback, any pasted output).

        The report keeps at most ``limits`` entries (``recordscan.Limits``; None: all; default:
        all up to ``Thresholds.paste_upto``) and says what it cut (``Report.omitted``).
        ``thresholds`` (default: the knowledge base's) choose the route.
        """
        from errkb.parse.regions import parse_input

        data = bytes(text) if isinstance(text, bytearray) else text
        sizes = thresholds or self.thresholds
        route, scannable = choose_route(data, sizes, self._unloaded_anchors)
        if route is Route.SCAN and scannable is not None:
            with self.store.snapshot() as view:
                report = self._scanned(view, scannable, limits, sizes)
            if len(scannable.data) >= sizes.release_from:
                from errkb.match.anchordb import release_heap

                release_heap()  # what the scan freed
            if report is not None:
                return report
            route = Route.PASTE if len(data) <= sizes.paste_upto else Route.REGIONS
        events = parse_input(data, narrow_above=sizes.paste_upto)
        with self.store.snapshot() as view:
            report = self.explain_in(view, data, events, sizes)
        if route is Route.PASTE and isinstance(limits, DefaultLimits):
            return report  # a paste: reported whole, nothing more imported
        return _within(report, _chosen_limits(len(data), limits, sizes))

    def _unloaded_anchors(self) -> int:
        """The stored bytes of record anchors a scan would load first (0: loaded, or none).

        Only a process's first report counts them: one that goes on (several files, triage's
        workers, a server) loads them once and scans from then on.
        """
        from errkb.match.recordanchors import record_anchordb_path

        with self._lock:
            if self._anchors is not None or self._explains > 0 or self.prepare_ahead:
                return 0
        try:
            return record_anchordb_path(self.store.path).stat().st_size
        except (OSError, ValueError):
            return 0

    def explain_in(
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
        limits: Limits | DefaultLimits | None,
        thresholds: Thresholds,
    ) -> Report | None:
        """The record-driven scan's report, or None (store cannot feed it, ``TooManyShapes``)."""
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
            # Millions of small acyclic objects: the cyclic collector finds nothing in them.
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
                    segment=thresholds.segment,
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
        """The state's record anchors (built once, under the build lock)."""
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
                self._say_rebuilt(path, anchors.db.fault, len(anchors.db))
                for bad, fault in anchors.faults.items():
                    self._say_rebuilt(bad, fault)
                with self._lock:
                    if self._state == state:
                        self._anchors = anchors
            return anchors

    def _say_rebuilt(self, path: Path, fault: AnchorFault | None, words: int = -1) -> None:
        """Log once per file that a file beside the database was bad (read-only: or missing)."""
        from errkb.match.beside import AnchorFault

        writable = not self.store.read_only
        if fault is None or path in self._warned or (writable and fault is AnchorFault.MISSING):
            return
        self._warned.add(path)
        import logging  # only here: cold start does not pay for it

        log = logging.getLogger("errkb")
        if writable:
            log.warning("errkb: %s was %s: rebuilt from the knowledge base", path, fault.value)
        elif words >= 0:
            log.warning(
                "errkb: the anchor database %s is %s and the knowledge base is read-only: its "
                "%d anchors were compiled in memory for this process (every process will); a "
                "sync where the knowledge base is writable builds and stores it",
                path,
                fault.value,
                words,
            )
        else:
            log.warning(
                "errkb: %s is %s and the knowledge base is read-only: read from its rows for "
                "this process; a sync where it is writable stores it again",
                path,
                fault.value,
            )

    def message_in(self, view: ReadView, message: str, exc_class: str | None = None) -> Report:
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
            # Nothing exact: the message-first pass's events (exact matches only) go first.
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
        """What deciding over ``view`` needs: decide, the matcher, record look-up, sample note."""
        from errkb.validators import admits, diagnose, records_with_validators

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
            # A small input's first report (with ``prepare_ahead``: every one) never builds it.
            want = anchors or (self._explains > 1 and not self.prepare_ahead)
            table = self._table
            record_anchors = self._anchors if self._state == state else None
        if table is None and want:
            table = self._anchor_table(view, state, wait=anchors)
            if table is not None and not anchors:
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
        """The compiled records' cache of ``state`` (a new state drops every artefact)."""
        with self._lock:
            if self._cache is None or self._state != state:
                self._cache = SpecCache()
                self._table = None
                self._anchors = None
                self._state = state
            return self._cache

    def _anchor_table(self, view: ReadView, state: str, *, wait: bool = True) -> AnchorTable | None:
        from errkb.match.scan import load_table

        if not self._build_lock.acquire(blocking=wait):
            return None
        try:
            with self._lock:
                if self._state == state and self._table is not None:
                    return self._table  # built by the thread we waited for
            faults: dict[Path, AnchorFault] = {}
            key, version = anchors_key(view.meta_value)
            table = load_table(view, self.store.path, key, version, faults)
            for bad, fault in faults.items():
                self._say_rebuilt(bad, fault)
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
        """``FOUND`` events for the lines no event covers (a large input's: anchor hit lines)."""
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
        """Load what a large input's explain reads, for the current state; True if it changed."""
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

                anchors = self._record_anchors(view, state)
                anchors.id_table()
                anchors.db.prepare()
                prepare_passes()
        return changed

    def build_anchor_files(self, *, compact: bool = False) -> AnchorBuild | None:
        """Build, for the store's current state, every file a large input's explain reads.

        The record anchors (a delta where it can; ``compact``: every record) and the anchor
        table, one at a time, keyed by ``store.anchors_key``; current files are kept. Returns
        the record anchors' ``AnchorBuild``, None for a read-only store.
        """
        if self.store.read_only:
            return None
        from errkb.match.anchordb import default_engine, release_heap
        from errkb.match.anchordelta import DEFAULT_COMPACTION, build_record_anchors
        from errkb.match.recordanchors import record_anchordb_path
        from errkb.match.scan import table_body

        engine = self.scan_engine or default_engine()
        with self.store.snapshot() as view, self._build_lock:
            self._cache_for(view.meta_value("state") or "0")
            state, dataset_version = anchors_key(view.meta_value)
            built = build_record_anchors(
                view,
                engine,
                store_at=record_anchordb_path(self.store.path),
                state=state,
                dataset_version=dataset_version,
                policy=self.compaction or DEFAULT_COMPACTION,
                compact=compact,
            )
            release_heap()
            table_body(view, self.store.path, state, dataset_version)
            release_heap()
        _remove_stale(self.store.path.with_name(self.store.path.name + ".anchordb"))
        return built

    def refresh(self) -> bool:
        """Drop compiled records if the store changed since they were compiled; True if so."""
        with self.store.snapshot() as view:
            state = view.meta_value("state") or "0"
        changed = state != self._state
        self._cache_for(state)
        return changed


#: Meta key set to the state counter when the bundled sample is ingested (true until a change).
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
