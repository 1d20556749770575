"""Atomic file writes: a file is either its old content or its complete new content.

A temporary in the same directory, fsynced, then ``os.replace``; pipes written whole
(``write_all``). A device, FIFO or directory target is refused; a symlink is written through.
An existing file keeps its mode; a new one gets ``0o666 & ~umask``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from errkb.errors import OutputError
from errkb.inputs import file_kind

# Errors only a write can cause (as opposed to whatever else the caller's block does).
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _umask() -> int:
    # The only portable way to read the umask is to set it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _resolve_target(path: str | os.PathLike[str]) -> tuple[Path, int | None]:
    """The file to replace (symlinks followed) and its mode bits (None: it does not exist)."""
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target, None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(f"{os.fspath(path)}: symlink loop") from None
        raise OutputError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"{os.fspath(path)}: {file_kind(st.st_mode)}; errkb writes only regular files"
        )
    return target, stat.S_IMODE(st.st_mode)


@contextlib.contextmanager
def atomic_write_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Open a temporary text file that replaces ``path`` only when the block succeeds.

    OutputError (naming ``path``) when the target cannot be written; nothing is half-written.
    """
    target, mode = _resolve_target(path)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or "."
        )
    except OSError as exc:
        raise OutputError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None

    def failed(exc: OSError) -> OutputError:
        return OutputError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}")

    try:
        fh = os.fdopen(fd, "w", encoding=encoding, newline="\n")
        with fh:
            try:
                yield fh
            except OSError as exc:
                # Only "the disk is full" is surely the write's fault; any other OSError propagates.
                if exc.errno in _FULL_ERRNOS:
                    raise failed(exc) from None
                raise
            try:
                os.fchmod(fh.fileno(), mode if mode is not None else 0o666 & ~_umask())
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:
                raise failed(exc) from None
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise failed(exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` whole to the pipe ``fd``, with ``os.write`` until every byte is taken.

    Not through a buffered stream: CPython 3.11's ``BufferedWriter`` loses bytes when a large
    write to a full pipe is stopped and continued (SIGSTOP/SIGCONT).
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
