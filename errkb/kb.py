"""The knowledge base: the library's front door (``errkb.open()``), a facade.

A ``KnowledgeBase`` wraps one store and is every caller's way to it: explain, search and
check's records each read one snapshot; ``sync``, ``ingest`` and ``rollback`` write, then build
the files beside the database. The explain engine is ``errkb.explain.Engine``. Safe to share
between threads: each answer is consistent with exactly one dataset version.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from errkb import _json
from errkb.errors import NotFoundError, StoreError, StoreReadOnlyError
from errkb.explain.engine import BUNDLED_SAMPLE_KEY, DEFAULT, DefaultLimits, Engine
from errkb.explain.routes import DEFAULT_THRESHOLDS, Thresholds
from errkb.parse.events import LogEvent
from errkb.report import RecordView, Report
from errkb.store import Store, open_store

if TYPE_CHECKING:
    from errkb.match.anchordelta import AnchorBuild, Compaction
    from errkb.match.recordscan import Limits
    from errkb.records import Record
    from errkb.report.check import CheckReport
    from errkb.report.ingest import IngestReport
    from errkb.report.records import Stats
    from errkb.report.sync import RecordHistory, SyncReport, UpdateCheck, VersionList
    from errkb.search import SearchReport
    from errkb.store import VersionInfo


class KnowledgeBase:
    """An opened knowledge base. Create it with ``errkb.open()``."""

    def __init__(self, store: Store, *, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.store = store
        self._engine = Engine(store, thresholds)

    @property
    def thresholds(self) -> Thresholds:
        """The sizes that choose each input's route, unless an ``explain`` is given its own."""
        return self._engine.thresholds

    @property
    def scan_engine(self) -> str | None:
        """The record anchors' engine (``errkb.match.anchordb.ENGINES``); None: the fastest."""
        return self._engine.scan_engine

    @scan_engine.setter
    def scan_engine(self, engine: str | None) -> None:
        self._engine.scan_engine = engine

    @property
    def compaction(self) -> Compaction | None:
        """When a write compiles every record's anchors, not a delta; None: the default."""
        return self._engine.compaction

    @compaction.setter
    def compaction(self, policy: Compaction | None) -> None:
        self._engine.compaction = policy

    @property
    def prepare_ahead(self) -> bool:
        """True: a small input never builds the anchor table (``Engine.prepare_ahead``)."""
        return self._engine.prepare_ahead

    @prepare_ahead.setter
    def prepare_ahead(self, ahead: bool) -> None:
        self._engine.prepare_ahead = ahead

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def read_only(self) -> bool:
        """True when this knowledge base can only be read; writes raise ``StoreReadOnlyError``."""
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
        limits: Limits | DefaultLimits | None = DEFAULT,
        thresholds: Thresholds | None = None,
    ) -> Report:
        """Find every known error in ``text`` (a log, a traceback, any pasted output).

        A large input's report keeps at most ``limits`` entries (None: all; by default an input up
        to ``Thresholds.paste_upto`` keeps all), counts exact, cuts said in ``Report.omitted``.
        ``thresholds`` choose the route (``errkb.explain.choose_route``).
        """
        return self._engine.explain(text, limits=limits, thresholds=thresholds)

    def explain_files(
        self, names: Sequence[str], read: Callable[[str], bytes], *, everything: bool = False
    ) -> Report:
        """Explain each named input, read one at a time: one report, each match naming its file."""
        limits: Limits | DefaultLimits | None = None if everything else DEFAULT
        if len(names) == 1:
            return self.explain(read(names[0]), limits=limits)
        return Report.merge([(name, self.explain(read(name), limits=limits)) for name in names])

    def match_message(self, message: str, exc_class: str | None = None) -> Report:
        """Explain one exception message (what a bot has when it catches an error)."""
        with self.store.snapshot() as view:
            return self._engine.message_in(view, message, exc_class)

    def prepare(self) -> bool:
        """Load what a large input's explain reads, for the current state; True if it changed."""
        return self._engine.prepare()

    def build_anchor_files(self) -> AnchorBuild | None:
        """Build every file a large input's explain reads, for the store's current state.

        The record anchors compile only what changed where they can; None: a read-only store.
        """
        return self._engine.build_anchor_files()

    def compact_anchor_files(self) -> AnchorBuild:
        """Compile every record's anchors, folding the delta parts in (``errkb maint compact``)."""
        self._writable("compact its anchor files")
        with self.store.sync_lock():  # not beside a sync: SyncLockedError at once
            built = self._engine.build_anchor_files(compact=True)
        if built is None:  # pragma: no cover - ``_writable`` refused a read-only store
            raise StoreReadOnlyError(f"knowledge base {self.store.describe()} is read-only")
        return built

    def _after_commit(self, interrupted: Callable[[], BaseException]) -> None:
        """``build_anchor_files`` after a committed write; Ctrl-C raises ``interrupted()``."""
        self.refresh()
        try:
            self.build_anchor_files()
        except KeyboardInterrupt:
            raise interrupted() from None
        except StoreError:
            pass  # the write stands; a large input's explain builds them (or says why not)

    def refresh(self) -> bool:
        """Drop compiled records if the store changed since they were compiled; True if so."""
        return self._engine.refresh()

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
        """Records that best answer ``query`` (words, a message, a log), in one read."""
        from errkb.search import search
        from errkb.store.search import Filters

        filters = Filters(repo, tag, error_class, severity)
        with self.store.snapshot() as view:

            def explained(text: str, events: list[LogEvent]) -> Report:
                if events:
                    return self._engine.explain_in(view, text, events)
                return self._engine.message_in(view, text)

            return search(view, explained, query, filters, limit)

    # ------------------------------------------------------------------ check
    def check(self, paths: Sequence[str | Path], *, all_layers: bool = False) -> CheckReport:
        """``errkb.check`` of ``paths``, with the records its findings name (for their fixes)."""
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
            # After the commit: a SIGKILL now loses only these files.
            self._after_commit(lambda: SyncInterruptedError(interrupted_message(report)))
        else:
            self.refresh()
        return report

    def check_for_update(
        self, source: str | os.PathLike[str] | None = None, **options: Any
    ) -> UpdateCheck:
        """Compare our dataset version with ``source``'s manifest (default ``$ERRKB_SOURCE``)."""
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
        """Roll back to ``version`` (an id or a datasetVersion) as a new "rollback" version."""
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

    ``target``: a database path or URL (default ``$ERRKB_DB``, else the user's data directory). A
    new database is filled from the bundled dataset unless ``bundled`` is False. ``thresholds``
    choose each input's explain route. An unwritable default location gives a private temporary
    database built from the bundled data.
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


def _temporary_store() -> Store:
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="errkb-")
    atexit.register(shutil.rmtree, folder, True)
    store = open_store(Path(folder) / "errkb.sqlite3")
    store.ensure_schema()
    return store
