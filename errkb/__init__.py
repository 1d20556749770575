"""errkb: an error-knowledge database and matcher for the ErrLookup dataset.

Typical use::

    import errkb

    kb = errkb.open()                      # the default knowledge base (bundled data on first use)
    report = kb.explain(log_text)          # every known error in a log or traceback
    for match in report.exact:
        print(match.id, match.capture_dict, match.record["solutions"])

``Report.to_dict()`` is exactly what ``errkb explain --format json`` prints.
"""

from __future__ import annotations

__version__ = "0.1.0"

from errkb.check import CheckReport, check
from errkb.errors import (
    CheckpointError,
    ErrkbError,
    InputError,
    IntegrityError,
    NetworkError,
    NotFoundError,
    Problem,
    RecordError,
    SchemaVersionError,
    StoreError,
    SyncError,
    SyncLockedError,
    UsageError,
)
from errkb.events import EventKind, LogEvent
from errkb.explain import Confidence, ExceptionInfo, Match, Report, Unmatched
from errkb.ingest import IngestReport
from errkb.kb import KnowledgeBase, Stats
from errkb.kb import open_kb as open
from errkb.records import Record

__all__ = [
    "CheckReport",
    "CheckpointError",
    "Confidence",
    "ErrkbError",
    "EventKind",
    "ExceptionInfo",
    "IngestReport",
    "InputError",
    "IntegrityError",
    "KnowledgeBase",
    "LogEvent",
    "Match",
    "NetworkError",
    "NotFoundError",
    "Problem",
    "Record",
    "RecordError",
    "Report",
    "SchemaVersionError",
    "Stats",
    "StoreError",
    "SyncError",
    "SyncLockedError",
    "Unmatched",
    "UsageError",
    "__version__",
    "check",
    "open",
]
