"""Is a newer dataset version published? (``errkb sync --check``, ``kb.check_for_update()``).

Only the source's manifest is read (a few hundred bytes, requested with ``Cache-Control:
no-cache``), so a cron job or timer can ask cheaply and run the full sync only when it says so.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.errors import UsageError
from errkb.report.sync import UpdateCheck
from errkb.sync import publish, transport

if TYPE_CHECKING:
    from errkb.store import Store


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
