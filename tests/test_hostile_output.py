"""Hostile output targets for ``export -o``, ``extract -o`` and ``--reject-report``.

``os.replace`` replaces whatever is at a path: a device node, a FIFO, a symlink. The atomic
writer refuses anything but a regular file, writes through a symlink, keeps modes and the umask,
and leaves nothing half-written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from errkb.atomic import atomic_write_text
from errkb.errors import OutputError
from tests.hostile import run_errkb, run_python


def _export(tmp_path: Path, target: Path | str) -> tuple[int, str]:
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "export", "-o", str(target)])
    assert not out.crashed, out.stderr
    return out.returncode, out.stderr


def test_export_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    code, err = _export(tmp_path, fifo)
    assert code == 2 and "a FIFO; errkb writes only regular files" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root; the FIFO case covers the rest")
def test_export_refuses_a_device_node(tmp_path: Path) -> None:
    device = tmp_path / "full"  # a private copy of /dev/full: the real one must never be at risk
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    code, err = _export(tmp_path, device)
    assert code == 2 and "a character device" in err
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_export_refuses_a_symlink_to_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "fifo")
    code, err = _export(tmp_path, link)
    assert code == 2 and "a FIFO" in err
    assert link.is_symlink()


def test_export_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "out.jsonl"
    link.symlink_to(real)
    code, err = _export(tmp_path, link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith('{"record"')


def test_export_keeps_an_existing_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    target.chmod(0o664)
    code, err = _export(tmp_path, target)
    assert code == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o664


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_respect_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    target = tmp_path / "new.txt"
    code = (
        "import os, sys\n"
        f"os.umask({umask})\n"
        "from errkb.atomic import atomic_write_text\n"
        "with atomic_write_text(sys.argv[1]) as fh:\n"
        "    fh.write('x')\n"
    )
    out = run_python(code, str(target))
    assert out.returncode == 0, out
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_export_into_a_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    code, err = _export(tmp_path, "/nonexistent/dir/x")
    assert code == 2
    assert (
        err.strip() == "errkb: error: /nonexistent/dir/x: cannot write: No such file or directory"
    )


def test_extract_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "drafts.jsonl"
    os.mkfifo(fifo)
    src = tmp_path / "mod.py"
    src.write_text("def f(x):\n    raise ValueError(f'bad value {x}')\n")
    out = run_errkb(["extract", str(src), "--repo", "org/repo", "-o", str(fifo)])
    assert not out.crashed, out.stderr
    assert out.returncode == 2, out
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_write_text(target) as fh:
        fh.write("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_directory_target_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="a directory"), atomic_write_text(tmp_path):
        pass


def test_a_symlink_loop_target_is_named(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(OutputError, match="symlink loop"), atomic_write_text(loop):
        pass
