"""Locate the files errkb ships beside its code: migrations, the bundled dataset, JSON Schemas.

In a wheel they live under ``errkb/_bundle/`` (see ``force-include`` in pyproject.toml); in a
source checkout or an editable install they are the top-level ``migrations/``, ``data/`` and
``schemas/`` folders. Looking in both places keeps one code path for users and developers.
"""

from __future__ import annotations

from pathlib import Path

from errkb.errors import StoreError

_PACKAGE_DIR = Path(__file__).resolve().parent


def bundle_path(name: str) -> Path:
    """Directory of a shipped folder: ``migrations``, ``data`` or ``schemas``."""
    for candidate in (_PACKAGE_DIR / "_bundle" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise StoreError(f"errkb is installed without its {name!r} folder; reinstall errkb")


def schema_path(filename: str) -> Path:
    """Path of one JSON Schema shipped in ``schemas/``."""
    return bundle_path("schemas") / filename


def bundled_dataset_dir() -> Path:
    """The directory holding the bundled records."""
    return bundle_path("data") / "dataset"
