"""Atomic file writes: a file is either its old content or its complete new content.

Write to a temporary file in the same directory, flush and fsync, then ``os.replace`` it over
the target. A crash mid-write leaves the old file (or none) and a stray temporary, never half a
file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_write_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Open a temporary text file that replaces ``path`` only when the block succeeds."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="\n") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
