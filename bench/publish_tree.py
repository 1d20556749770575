"""A published tree written as upstream publishes a version: the inverse of ``errkb.sync.publish``.

Test and benchmark data only (``tests/published.py``, ``bench.corpus``, ``bench.sync_scale``):
one file per repository, the hashed gzip index (whole or in parts), ``repos.json`` and the
manifest.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

RepoFields = Callable[[str, bytes, Sequence[Mapping[str, Any]]], Mapping[str, Any]]


def write_tree(
    root: Path,
    records: Iterable[Mapping[str, Any]],
    dataset_version: str,
    *,
    repo_fields: RepoFields | None = None,
    extra_repos: Iterable[str] = (),
    index_parts: int = 0,
    parts_listing: str = "object",
) -> Path:
    """Write ``records`` under ``root`` as upstream publishes a version; return ``root``.

    The inverse of what this module reads: one file per repository, the hashed gzip index,
    repos.json and the manifest. Each repos.json entry takes its ``analyzedSha`` and
    ``analyzedAt`` from the repository's records; ``repo_fields(repo, file_bytes, records)``
    may override any field (the test trees make ``analyzedSha`` follow the file's content).

    ``index_parts`` > 0 splits the index as upstream has since 2026-09-17: ``index-N.json.gz``
    files of equal-count slices, each ``{schemaVersion, datasetVersion, part, parts, errors}``,
    listed in the manifest as ``parts_listing`` says: "object" (``files.index.parts``), "list"
    (``files.index`` a list) or "numbered" (``files["index-N"]``); "none" writes and lists no
    index at all (a layout a sync reads by ``repos.json`` alone). The tree also carries
    ``data/published.json`` and ``schema.json`` (listed, not read), as the site does.
    """
    data = root / "data"
    (data / "repos").mkdir(parents=True, exist_ok=True)
    by_repo: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        by_repo.setdefault(str(r["repo"]), []).append(r)
    for name in extra_repos:
        by_repo.setdefault(name, [])
    index_rows: list[dict[str, Any]] = []
    repo_entries: list[dict[str, Any]] = []
    for repo in sorted(by_repo):
        items = by_repo[repo]
        body = json.dumps(list(items), ensure_ascii=False).encode("utf-8")
        target = data / "repos" / f"{repo}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
        entry: dict[str, Any] = {
            "repo": repo,
            "description": None,
            "language": None,
            "stars": 0,
            "sourceFiles": len({r["filePath"] for r in items}),
            "defaultBranch": "main",
            "analyzedSha": items[0]["analyzedSha"] if items else "0" * 40,
            "analyzedAt": items[0]["analyzedAt"] if items else dataset_version,
            "contentChangedAt": None,
            "errorCount": len(items),
        }
        if repo_fields is not None:
            entry.update(repo_fields(repo, body, items))
        repo_entries.append(entry)
        index_rows.extend(
            {
                "id": r["id"],
                "repo": r["repo"],
                "slug": r["slug"],
                "code": r["errorCode"],
                "msg": r["errorMessage"],
                "pattern": r["messagePattern"],
                "type": r["errorType"],
                "cls": r["errorClass"],
                "tags": r["tags"],
                "sev": r["severity"],
            }
            for r in items
        )
    index_raw = json.dumps(
        {"schemaVersion": 2, "datasetVersion": dataset_version, "errors": index_rows},
        ensure_ascii=False,
    ).encode("utf-8")
    index_gz = gzip.compress(index_raw, mtime=0)
    listing: dict[str, Any] = {"index": _file_spec("/data/index.json.gz", index_gz, index_raw)}
    if parts_listing == "none":
        listing = {}
    elif index_parts > 0:
        listing = _write_parts(data, index_rows, dataset_version, index_parts, parts_listing)
    else:
        (data / "index.json.gz").write_bytes(index_gz)
    published = json.dumps(sorted(by_repo)).encode("utf-8")
    (data / "published.json").write_bytes(published)
    (root / "schema.json").write_text(json.dumps(_SCHEMA), encoding="utf-8")
    repos_raw = json.dumps(repo_entries, ensure_ascii=False).encode("utf-8")
    (data / "repos.json").write_bytes(repos_raw)
    manifest = {
        "schemaVersion": 2,
        "datasetVersion": dataset_version,
        "counts": {"repos": len(repo_entries), "errors": len(index_rows)},
        "files": {
            **listing,
            "published": {
                "path": "/data/published.json",
                "bytes": len(published),
                "sha256": hashlib.sha256(published).hexdigest(),
            },
            "repos": {
                "path": "/data/repos.json",
                "bytes": len(repos_raw),
                "sha256": hashlib.sha256(repos_raw).hexdigest(),
            },
        },
    }
    (data / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return root


#: The test tree's ``schema.json``: a Draft-07 record schema requiring what errkb requires.
_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {
        "ErrorRecord": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "errorMessage": {"type": "string"},
                "messagePattern": {"type": "string"},
            },
            "required": ["id", "errorMessage", "messagePattern"],
        }
    },
}


def _file_spec(path: str, body: bytes, raw: bytes) -> dict[str, Any]:
    return {
        "path": path,
        "bytes": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "encoding": "gzip",
        "rawBytes": len(raw),
        "rawSha256": hashlib.sha256(raw).hexdigest(),
    }


def _write_parts(
    data: Path, rows: Sequence[Mapping[str, Any]], version: str, count: int, listing: str
) -> dict[str, Any]:
    """Write ``count`` index parts (equal-count slices); return the manifest's listing of them."""
    size = -(-len(rows) // count) if rows else 0
    specs = []
    for n in range(1, count + 1):
        chunk = list(rows[(n - 1) * size : n * size])
        raw = json.dumps(
            {
                "schemaVersion": 2,
                "datasetVersion": version,
                "part": n,
                "parts": count,
                "errors": chunk,
            },
            ensure_ascii=False,
        ).encode("utf-8")
        body = gzip.compress(raw, mtime=0)
        (data / f"index-{n}.json.gz").write_bytes(body)
        specs.append({**_file_spec(f"/data/index-{n}.json.gz", body, raw), "part": n})
    if listing == "list":
        return {"index": specs}
    if listing == "numbered":
        return {f"index-{n}": spec for n, spec in enumerate(specs, 1)}
    return {"index": {"parts": specs}}
