"""The session guard (``repo_guard``): a test run that leaves a file in the checkout fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from repo_guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401
"""


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "already.txt").write_text("untracked before the run: not the tests' doing\n")
    (tmp_path / "test_x.py").write_text(f"def test_x():\n    {body}\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        # As a user runs it: the child writes __pycache__/ (the guard must not count it).
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_stray_file_fails_the_run_and_is_named(tmp_path: Path) -> None:
    proc = _run(tmp_path, "open('sqlite:', 'w').close()")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "tests left 1 change(s)" in proc.stdout and "?? sqlite:" in proc.stdout
    assert "already.txt" not in proc.stdout  # what was there before the run is not counted


def test_a_clean_run_passes(tmp_path: Path) -> None:
    proc = _run(tmp_path, "assert True")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tests left" not in proc.stdout
