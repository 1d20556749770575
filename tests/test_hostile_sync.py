"""Hostile published trees for ``errkb sync`` (memory despite byte caps), and symlink loops
given to ``ingest`` and ``lint``.

Each sync case builds a hostile tree in ``tmp_path`` and runs ``errkb sync`` in a child under a
memory limit and a timeout (``tests.hostile``): the sync must refuse with one clear error
naming the file and the limit, leave the database unchanged, and stay inside the limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import run_errkb


# ---------------------------------------------------------------------------- symlink loops
@pytest.mark.parametrize("command", ["ingest", "lint"])
def test_a_symlink_loop_is_not_called_missing(tmp_path: Path, command: str) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), command, str(loop)], timeout=60)
    assert out.returncode == 2, out
    assert not out.crashed, out.stderr
    assert "loop.json: symlink loop" in out.stderr
    assert "does not exist" not in out.stderr


@pytest.mark.parametrize("command", ["ingest", "lint"])
def test_a_missing_path_is_still_an_error_naming_it(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "missing.json"
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), command, str(missing)], timeout=60)
    assert out.returncode == 2, out
    assert not out.crashed, out.stderr
    assert "missing.json: no such file or directory" in out.stderr
