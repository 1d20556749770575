"""errkb: an error-knowledge database and matcher for the ErrLookup dataset.

Typical use::

    import errkb

    kb = errkb.open()                      # the default knowledge base (bundled data on first use)
    report = kb.explain(log_text)          # every known error in a log or traceback
    for match in report.exact:
        print(match.id, match.capture_dict, match.record["solutions"])
    found = kb.search("quanto incompatible scale")   # a SearchReport
    update = kb.check_for_update()                    # an UpdateCheck; kb.sync() a SyncReport

``Report.to_dict()`` is exactly what ``errkb explain --format json`` prints.

The names below are imported on first use (PEP 562), so ``import errkb`` stays cheap for the
command line: explaining a log must not pay for the checkpoint readers or the ORM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from errkb import _lazy
from errkb.errors import (
    CheckpointError,
    ErrkbError,
    InputError,
    IntegrityError,
    NetworkError,
    NotFoundError,
    OutputError,
    Problem,
    RecordError,
    SchemaVersionError,
    StoreError,
    SyncError,
    SyncLockedError,
    UsageError,
)

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase
    from errkb.kb import open_kb as open
    from errkb.parse.events import EventKind, LogEvent
    from errkb.records import Record
    from errkb.report import (
        CheckReport,
        Confidence,
        Diagnosis,
        ExceptionInfo,
        Finding,
        IngestReport,
        Match,
        Report,
        Stats,
        SyncReport,
        Unmatched,
        UpdateCheck,
    )
    from errkb.search import SearchReport, SearchResult
    from errkb.validators.preflight import check

_LAZY: dict[str, tuple[str, str]] = {
    "CheckReport": ("errkb.report.check", "CheckReport"),
    "Diagnosis": ("errkb.report", "Diagnosis"),
    "Finding": ("errkb.report", "Finding"),
    "check": ("errkb.validators.preflight", "check"),
    "EventKind": ("errkb.parse.events", "EventKind"),
    "LogEvent": ("errkb.parse.events", "LogEvent"),
    "Confidence": ("errkb.report", "Confidence"),
    "ExceptionInfo": ("errkb.report", "ExceptionInfo"),
    "Match": ("errkb.report", "Match"),
    "Report": ("errkb.report", "Report"),
    "Unmatched": ("errkb.report", "Unmatched"),
    "IngestReport": ("errkb.report.ingest", "IngestReport"),
    "KnowledgeBase": ("errkb.kb", "KnowledgeBase"),
    "Stats": ("errkb.report.records", "Stats"),
    "open": ("errkb.kb", "open_kb"),
    "Record": ("errkb.records", "Record"),
    "SearchReport": ("errkb.search", "SearchReport"),
    "SearchResult": ("errkb.search", "SearchResult"),
    "SyncReport": ("errkb.report.sync", "SyncReport"),
    "UpdateCheck": ("errkb.report.sync", "UpdateCheck"),
}


def __getattr__(name: str) -> Any:
    return _lazy.load(__name__, globals(), _LAZY, name)


__all__ = [
    "CheckReport",
    "CheckpointError",
    "Confidence",
    "Diagnosis",
    "ErrkbError",
    "EventKind",
    "ExceptionInfo",
    "Finding",
    "IngestReport",
    "InputError",
    "IntegrityError",
    "KnowledgeBase",
    "LogEvent",
    "Match",
    "NetworkError",
    "NotFoundError",
    "OutputError",
    "Problem",
    "Record",
    "RecordError",
    "Report",
    "SchemaVersionError",
    "SearchReport",
    "SearchResult",
    "Stats",
    "StoreError",
    "SyncError",
    "SyncLockedError",
    "SyncReport",
    "Unmatched",
    "UpdateCheck",
    "UsageError",
    "__version__",
    "check",
    "open",
]
