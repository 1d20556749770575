"""A session guard: the test suite fails when a test leaves files behind in the source tree.

A test that writes relative to the working directory (or passes a ``Path`` where a URL string
was meant: ``Path("sqlite:///x")`` is ``sqlite:/x``) litters the checkout, and nothing else
notices. At session start the guard records ``git status --porcelain`` of the tree pytest runs
in (ignored paths, such as ``bench/out/`` and caches, are not listed); at the end, any entry
that was not there before fails the run, naming the files. Outside a git checkout (an sdist)
there is nothing to compare and the guard does nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

_BEFORE = pytest.StashKey[frozenset[str] | None]()


def tree_changes(root: Path) -> frozenset[str] | None:
    """``git status --porcelain`` lines of ``root`` (untracked files listed one by one)."""
    git = shutil.which("git")
    if git is None:
        return None
    proc = subprocess.run(
        [git, "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:  # not a checkout
        return None
    return frozenset(line for line in proc.stdout.splitlines() if line and not _bytecode(line))


def _bytecode(line: str) -> bool:
    """Python's own bytecode cache, written wherever PYTHONDONTWRITEBYTECODE is unset: never a
    test's doing, whatever the checkout's .gitignore says."""
    path = line[3:]
    return "__pycache__/" in path or path.endswith((".pyc", ".pyo"))


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = tree_changes(session.config.rootpath)


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    after = tree_changes(session.config.rootpath) or frozenset()
    left = sorted(after - before)
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"tests left {len(left)} change(s) in {session.config.rootpath} "
            "(write under tmp_path instead):",
            red=True,
        )
        for line in left:
            reporter.write_line(f"  {line}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
