"""Is a newer dataset version published? (``errkb sync --check``, ``kb.check_for_update()``).

Only the manifest is read (conditionally: a 304 is "current"); for a newer version also its
hashed ``repos.json``, compared with the last sync's fingerprints: no repository's commit
changed means only in-place rewrites can be pending (``Pending.REWRITES_ONLY``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.errors import UsageError
from errkb.report.sync import Pending, UpdateCheck
from errkb.sync import publish, transport

if TYPE_CHECKING:
    from errkb.store import Store


def check_for_update(
    store: Store,
    source: str | os.PathLike[str] | None = None,
    *,
    timeout: float = publish.DEFAULT_TIMEOUT,
    deadline: float | None = 120.0,
    allow_redirect_hosts: Collection[str] = (),
) -> UpdateCheck:
    """Read the manifest of ``source`` (default: ``publish.default_source()``) and compare."""
    where = publish.resolve_source(source)
    tree = publish.locate(where)
    if tree is None:
        raise UsageError(f"{where}: --check needs a published tree (a manifest), not record files")
    limit = transport.Deadline(deadline)
    with limit.watch(), tempfile.TemporaryDirectory(prefix="errkb-check-") as tmp:
        if isinstance(tree, publish.HttpTree):
            client = transport.HttpClient(
                read_timeout=timeout, deadline=limit, allow_hosts=allow_redirect_hosts
            )
            tree = replace(tree, timeout=timeout, client=client)
        try:
            from errkb.sync import sync_state

            state = sync_state(store)
            current = store.meta_value("dataset_version")
            etags = state.get("etags", {}) if state else {}
            got = tree.fetch(
                tree.manifest_path,
                Path(tmp) / "manifest.json",
                max_bytes=publish.MANIFEST_MAX_BYTES,
                etag=etags.get(tree.where(tree.manifest_path)) if current else None,
            )
            if got.path is None:  # 304: the manifest the last sync applied
                applied = state.get("datasetVersion") if state else None
                return UpdateCheck(
                    tree.location, current, applied if isinstance(applied, str) else str(current)
                )
            manifest = publish.parse_manifest(got.path.read_bytes(), got.where)
            found = UpdateCheck(tree.location, current, manifest.dataset_version)
            if found.update_available:
                found = replace(found, pending=_pending(store, tree, manifest, Path(tmp)))
        finally:
            if isinstance(tree, publish.HttpTree) and tree.client is not None:
                tree.client.close()
    return found


def _pending(
    store: Store, tree: publish.Tree, manifest: publish.Manifest, tmp: Path
) -> Pending | None:
    """Whether the newer version moves any repository's commit (None: cannot tell)."""
    from errkb.sync import sync_state

    state = sync_state(store)
    entry = manifest.files.get("repos")
    if state is None or entry is None:
        return None
    tree = tree.for_version(manifest.dataset_version)
    got = tree.fetch(entry.path, tmp / "repos.json", max_bytes=publish.DEFAULT_MAX_BYTES)
    content = publish.verify_file(got, entry, max_bytes=publish.DEFAULT_MAX_BYTES)
    repos = publish.parse_repos(content, got.where)
    before = state.get("repos", {})
    same = set(before) == set(repos) and all(
        info.analyzed_sha is not None and before.get(name) == list(info.fingerprint)
        for name, info in repos.items()
    )
    return Pending.REWRITES_ONLY if same else Pending.REPOSITORIES
