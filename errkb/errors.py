"""The one exception tree of errkb.

Library code raises only these; it never prints or exits. The CLI turns them into a message on
standard error and an exit code in one place (``errkb.cli``), so the mapping below is the single
source of truth for the exit codes documented in the README.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class ErrkbError(Exception):
    """Base class of every error errkb raises on purpose."""

    #: Exit code the CLI uses for this error. 2 = "an error" for every command.
    exit_code: int = 2


class InputError(ErrkbError):
    """An input file or stream could not be read or parsed."""


class UnreadableInputError(InputError):
    """An input errkb cannot read as text: an archive, an unknown compression, binary data."""


class UsageError(ErrkbError):
    """The caller asked for something that does not make sense (bad option value, unknown id)."""


class OutputError(ErrkbError):
    """An output file cannot be written (missing folder, not a regular file, disk full)."""


class NotFoundError(ErrkbError):
    """A record, version or other named thing does not exist."""


@dataclass(frozen=True)
class Problem:
    """One rule a record (or dataset file) broke, with where it was found."""

    source: str  #: file path or URL
    location: str  #: "line 3", "index 12", or "" for a whole-file object
    record_id: str | None
    json_path: str  #: "$.record.severity"
    rule: str  #: human-readable: what was wrong

    def __str__(self) -> str:
        where = self.source + (f" {self.location}" if self.location else "")
        rid = f" [{self.record_id}]" if self.record_id else ""
        return f"{where}{rid} {self.json_path}: {self.rule}"


class RecordError(InputError):
    """One or more records are invalid; ``problems`` lists every one of them."""

    def __init__(self, problems: Sequence[Problem], summary: str | None = None) -> None:
        self.problems = tuple(problems)
        head = summary or f"{len(self.problems)} invalid record(s)"
        lines = [head, *(f"  {p}" for p in self.problems[:50])]
        if len(self.problems) > 50:
            lines.append(f"  ... and {len(self.problems) - 50} more")
        super().__init__("\n".join(lines))


class StoreError(ErrkbError):
    """The knowledge-base database cannot be opened, migrated or written."""


class StoreLockedError(StoreError):
    """Another process held the database's write lock for longer than the busy timeout."""


class StoreReadOnlyError(StoreError):
    """A write was asked of a database that can only be read."""


class SchemaVersionError(StoreError):
    """The database was created by a newer errkb than this one."""


class CheckpointError(InputError):
    """A checkpoint file (safetensors, index, config) is malformed."""


class SyncError(ErrkbError):
    """A dataset sync could not be completed; nothing was changed."""


class SyncLockedError(SyncError):
    """Another sync is running on the same database."""


class IntegrityError(SyncError):
    """Downloaded or mirrored content does not match its published hash or index."""


class NetworkError(SyncError):
    """A download failed (connection, HTTP status, size cap)."""


class SyncInterruptedError(ErrkbError):
    """Ctrl-C after a sync committed: the new version is in place (the message says which)."""

    exit_code = 130
