"""A large sync's records written while the next repository files are still being checked.

``StreamedApply`` opens the transaction (or SQLite's fresh build) in a writer thread as the plan
starts and feeds it checked records through a bounded queue (``QUEUE_CHUNKS`` chunks of
``CHUNK``): memory holds a few chunks, a slow writer holds the plan back. It commits only after
the plan ended well (``finish``); any failure, deadline or stop rolls it back (``abort``), and a
writer's error stops the plan at its next record.

Used for a sync of at least ``MIN_RECORDS`` distinct records, at most ``MAX_OVERLAP`` of them
stored already: their hashes (a fresh build's copy) wait for ``overlap_done``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from errkb.errors import SyncError
from errkb.store import Incoming, Store, VersionKind
from errkb.store.interface import Ending
from errkb.store.values import ApplyCounts
from errkb.sync.ranking import COUNTING_FEED
from errkb.sync.repofile import derived_from

#: Records per chunk handed to the writer, and chunks the queue holds at most.
CHUNK = 2_000
QUEUE_CHUNKS = 8
#: Records a sync must bring for its apply to be streamed (as many as a fresh build needs).
MIN_RECORDS = 5_000
#: At most this share of them may be stored already (their hashes wait for ``overlap_done``).
MAX_OVERLAP = 0.05


@dataclass(frozen=True)
class Begin:
    """What the version row says, known once the index is read."""

    source: str
    dataset_version: str | None
    full: bool
    hashes: dict[str, str] | None


@dataclass(frozen=True)
class _End:
    ending: Ending
    state: str | None  #: the sync state to record, its ``versionId`` still to come
    state_key: str


class _Aborted(SyncError):
    """The plan failed or was stopped: the writer rolls back."""


_ABORT = object()


class StreamedApply(Collection[Incoming]):
    """Checked records, written by a writer thread as they come.

    The plan: ``add_line`` each record, ``overlap_done``, then ``finish`` or ``abort``. The
    writer iterates it and asks ``content_hashes`` and ``ending`` (``store.Streamed``).
    """

    def __init__(self, store: Store, expected: int, overlap: frozenset[str]) -> None:
        self.ids: list[str] = []
        self.changed = 0  #: records that came with their ``Derived`` (as ``Spool.changed``)
        self._store = store
        self._expected = expected
        self.overlap = overlap  #: incoming ids already stored
        self._overlap_hashes: dict[str, str] = {}
        self._copy_ready = threading.Event()
        self._aborted = threading.Event()
        self._chunk: list[tuple[str, str]] = []
        self._held: list[list[tuple[str, str]]] = []  #: chunks waiting for ``overlap_done``
        self._queue: queue.Queue[object] = queue.Queue(QUEUE_CHUNKS)
        self._end: _End | None = None
        self._thread: threading.Thread | None = None
        self._begin: Begin | None = None
        self.error: BaseException | None = None
        self.result: tuple[int, ApplyCounts] | None = None

    def start(self, begin: Begin) -> None:
        """Open the transaction in the writer thread; records may be added from now on."""
        self._begin = begin
        self._thread = threading.Thread(target=self._write, name="errkb-writer", daemon=True)
        self._thread.start()

    def add_line(self, rid: str, line: str) -> None:
        """One checked record, encoded by ``spool_line``."""
        first = line.index("\t")
        second = line.index("\t", first + 1)
        third = line.index("\t", second + 1)
        if rid in self.overlap:
            self._overlap_hashes[rid] = line[second + 1 : third]
        self.ids.append(rid)
        if line[third + 1] != "\t":
            self.changed += 1
        self._chunk.append((rid, line))
        if len(self._chunk) >= CHUNK:
            chunk, self._chunk = self._chunk, []
            self._send(chunk)

    def _send(self, chunk: list[tuple[str, str]]) -> None:
        # Held here until ``overlap_done``: the bounded queue would stop the plan first.
        if self._copy_ready.is_set():
            self._put(chunk)
        else:
            self._held.append(chunk)

    def overlap_done(self) -> None:
        """Every stored record among the incoming ones has come (or was rejected)."""
        self._copy_ready.set()
        held, self._held = self._held, []
        for chunk in held:
            self._put(chunk)

    def finish(self, ending: Ending, state: str | None, state_key: str) -> tuple[int, ApplyCounts]:
        """Commit; the (version id, counts). ``state`` (JSON) is written under ``state_key``."""
        self.overlap_done()
        if self._chunk:
            chunk, self._chunk = self._chunk, []
            self._put(chunk)
        self._put(_End(ending, state, state_key))
        self._join()
        if self.error is not None:
            raise self.error
        assert self.result is not None  # noqa: S101 - the writer ended without an error
        return self.result

    def abort(self) -> None:
        """Roll the writer's transaction back (idempotent; waits for the writer to end)."""
        if self._thread is None or not self._thread.is_alive():
            return
        self._aborted.set()
        self._copy_ready.set()
        while True:  # room for the signal: what the writer has not read is dropped
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        with contextlib.suppress(queue.Full):  # emptied just above, by the one producer
            self._queue.put_nowait(_ABORT)
        self._join()

    def _put(self, item: object) -> None:
        while True:
            if self.error is not None:
                raise self.error
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _write(self) -> None:
        begin = self._begin
        assert begin is not None  # noqa: S101 - started by ``start``
        try:
            fresh = self._store.fresh_build(self._expected, changed=self._expected)
            with fresh if fresh is not None else self._store.write() as tx:
                vid, counts = tx.apply(
                    self,
                    kind=VersionKind.SYNC,
                    source=begin.source,
                    dataset_version=begin.dataset_version,
                    feed=COUNTING_FEED,
                    full=begin.full,
                    hashes=begin.hashes,
                )
                end = self._end
                assert end is not None  # noqa: S101 - iterated to its end
                if end.state is not None:
                    value = json.dumps({**json.loads(end.state), "versionId": vid}, sort_keys=True)
                    tx.set_meta(end.state_key, value)
                if self._aborted.is_set():
                    raise _Aborted("the sync was stopped; nothing was changed")
            self.result = (vid, counts)
        except BaseException as exc:
            self.error = exc

    def content_hashes(self) -> Iterator[tuple[str, str]]:
        """(id, content hash) of the incoming records already stored: a fresh build's copy."""
        self._copy_ready.wait()
        if self._aborted.is_set():
            raise _Aborted("the sync was stopped; nothing was changed")
        yield from sorted(self._overlap_hashes.items())

    def ending(self) -> Ending:
        assert self._end is not None  # noqa: S101 - asked after the records' end
        return self._end.ending

    def __iter__(self) -> Iterator[Incoming]:
        versions: dict[str, str | None] = {}
        while True:
            item = self._queue.get()
            if item is _ABORT:
                raise _Aborted("the sync was stopped; nothing was changed")
            if isinstance(item, _End):
                self._end = item
                return
            chunk: list[tuple[str, str]] = item  # type: ignore[assignment]
            for rid, line in chunk:
                _rid, _, rest = line.partition("\t")
                version, _, rest = rest.partition("\t")
                chash, _, rest = rest.partition("\t")
                derived, _, text = rest.partition("\t")
                text = text.removesuffix("\n")  # the line's end (JSON escapes any other)
                if version not in versions:
                    versions[version] = json.loads(version)
                yield Incoming(
                    text, versions[version], rid, content_hash=chash, derived=derived_from(derived)
                )

    def __len__(self) -> int:
        # Asked before the first record (a bulk fill of the search index pays past a size).
        return self._expected

    def __contains__(self, item: object) -> bool:
        return isinstance(item, Incoming) and item.id in set(self.ids)


def stream_state(state: Any) -> str | None:
    """The sync state as the JSON ``finish`` takes (None: none)."""
    return None if state is None else json.dumps(state, sort_keys=True)
