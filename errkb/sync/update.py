"""Is a newer dataset version published? (``errkb sync --check``, ``kb.check_for_update()``).

Only the source's manifest is read (a few hundred bytes, requested with ``Cache-Control:
no-cache``), so a cron job or timer can ask cheaply and run the full sync only when it says so.
"""

from __future__ import annotations

import enum
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.errors import UsageError
from errkb.sync import publish, transport

if TYPE_CHECKING:
    from errkb.store import Store


class UpdateStatus(enum.StrEnum):
    """What the source holds compared with the knowledge base."""

    CURRENT = "current"  #: the same version (or an older one): nothing to sync
    AVAILABLE = "available"  #: a newer version: ``errkb sync`` would apply it


@dataclass(frozen=True)
class UpdateCheck:
    """The knowledge base's dataset version and the one the source publishes."""

    source: str
    current: str | None  #: None: the knowledge base has no dataset version yet
    available: str

    @property
    def status(self) -> UpdateStatus:
        new = publish.parse_version(self.available)
        old = publish.parse_version(self.current) if self.current is not None else None
        if old is None or (new is not None and new > old):
            return UpdateStatus.AVAILABLE
        return UpdateStatus.CURRENT

    @property
    def update_available(self) -> bool:
        return self.status is UpdateStatus.AVAILABLE

    @property
    def exit_code(self) -> int:
        """0 when current, 1 when a newer version is available (2, an error, is raised)."""
        return 1 if self.update_available else 0

    def summary(self) -> str:
        state = "newer version available" if self.update_available else "up to date"
        return f"current {self.current or '(none)'}, available {self.available}: {state}"

    def to_dict(self) -> dict[str, str | bool | None]:
        return {
            "source": self.source,
            "current": self.current,
            "available": self.available,
            "status": self.status.value,
            "updateAvailable": self.update_available,
        }


def check_for_update(
    store: Store,
    source: str | os.PathLike[str] | None = None,
    *,
    timeout: float = publish.DEFAULT_TIMEOUT,
    deadline: float | None = 120.0,
) -> UpdateCheck:
    """Read the manifest of ``source`` (default: ``publish.default_source()``) and compare."""
    where = publish.resolve_source(source)
    tree = publish.locate(where)
    if tree is None:
        raise UsageError(f"{where}: --check needs a published tree (a manifest), not record files")
    limit = transport.Deadline(deadline)
    with limit.watch(), tempfile.TemporaryDirectory(prefix="errkb-check-") as tmp:
        if isinstance(tree, publish.HttpTree):
            client = transport.HttpClient(read_timeout=timeout, deadline=limit)
            tree = publish.HttpTree(tree.base, tree.manifest_path, timeout, client=client)
        try:
            got = tree.fetch(
                tree.manifest_path,
                Path(tmp) / "manifest.json",
                max_bytes=publish.MANIFEST_MAX_BYTES,
            )
        finally:
            if isinstance(tree, publish.HttpTree) and tree.client is not None:
                tree.client.close()
        assert got.path is not None  # noqa: S101 - no ETag sent: never a 304
        manifest = publish.parse_manifest(got.path.read_bytes(), got.where)
    return UpdateCheck(tree.location, store.meta_value("dataset_version"), manifest.dataset_version)
