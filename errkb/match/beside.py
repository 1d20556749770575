r"""The files beside the database: one header, one opener and one writer for all of them.

``<db>.recordanchors``, ``<db>.recordanchors.maps`` and ``<db>.anchors``, written after a commit
and read as untrusted input. Each file is one header line and a body::

    errkb-beside 2 <kind> <key> <dataset version or -> <engine or -> <platform> <bytes>
                   <checked bytes> <crc32 of them> <sha256>\n     (one line)
    <body>

``kind`` names the file; ``key`` is ``store.anchors_key`` (a copy from another knowledge base is
stale); ``engine`` the automaton's (``-`` for none); ``platform`` where it was compiled;
``bytes``/``sha256`` the body's length and digest; ``checked bytes`` the body's prefix no engine
validates itself, ``crc32`` its CRC-32.

:func:`read` follows no link, never blocks (no FIFO or device), refuses more than ``MAX_BYTES``,
reads ``HEADER_MAX`` bytes first and requires the exact size; it checks the CRC-32, the sha256
only with ``verify=True``. :func:`write` writes a new temporary file, checks its size, syncs it
and renames it over the path: nothing half-written is ever there, a link's target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from errkb.errors import ErrkbError

__all__ = [
    "FORMAT",
    "HEADER_MAX",
    "MAX_BYTES",
    "AnchorDatabaseError",
    "AnchorFault",
    "Stamp",
    "key_of",
    "platform_name",
    "read",
    "write",
]

FORMAT = b"errkb-beside 2"
#: Bytes a header line may take at most (it is read before anything else).
HEADER_MAX = 4096
#: The largest file beside a database that is read at all.
MAX_BYTES = 2 << 30


class AnchorFault(StrEnum):
    """Why a file beside the database was not used."""

    MISSING = "missing"
    STALE = "stale"  #: another key, dataset version, engine, platform or format
    TRUNCATED = "truncated"
    CORRUPT = "corrupt"
    NOT_REGULAR = "not a regular file"  #: a link, a FIFO, a device or a directory


class AnchorDatabaseError(ErrkbError):
    """A file beside the database cannot be used (``AnchorFault`` says why)."""

    def __init__(self, path: Path, fault: AnchorFault, detail: str) -> None:
        self.path = path
        self.fault = fault
        super().__init__(f"{path}: {fault.value}: {detail}")


def platform_name() -> str:
    """The machine a compiled image is for: operating system, architecture and byte order."""
    import platform
    import sys

    return f"{sys.platform}-{platform.machine() or 'unknown'}-{sys.byteorder}"


@dataclass(frozen=True)
class Stamp:
    """What a file beside the database must be: its kind, key, dataset version and engine."""

    kind: str
    key: str
    version: str | None
    engine: str = "-"

    def fields(self) -> list[bytes]:
        """The header's fields before the body's length and digest."""
        values = [self.kind, self.key, self.version or "-", self.engine, platform_name()]
        for value in values:
            if not value or any(c.isspace() for c in value):
                raise ValueError(f"a file stamp field holds whitespace or nothing: {value!r}")
        return [*FORMAT.split(b" "), *(v.encode() for v in values)]

    def header(self, size: int, checked: int, crc: int, digest: str) -> bytes:
        numbers = [b"%d" % size, b"%d" % checked, b"%08x" % crc]
        return b" ".join([*self.fields(), *numbers, digest.encode()]) + b"\n"


def read(path: Path, stamp: Stamp, *, verify: bool = False) -> memoryview:
    """The body of the file at ``path`` when its header is ``stamp``'s.

    Else ``AnchorDatabaseError``; the checks and their order are the module's. ``verify``: the
    body's sha256 is checked too.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise AnchorDatabaseError(path, AnchorFault.MISSING, "no such file") from None
    except OSError as exc:  # ELOOP: a link; EACCES; ENXIO: a socket
        fault = AnchorFault.NOT_REGULAR if path.is_symlink() else AnchorFault.MISSING
        raise AnchorDatabaseError(path, fault, exc.strerror or str(exc)) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise AnchorDatabaseError(path, AnchorFault.NOT_REGULAR, "refused, not read")
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if info.st_size > MAX_BYTES:
            raise AnchorDatabaseError(
                path, AnchorFault.CORRUPT, f"{info.st_size} bytes, more than {MAX_BYTES}"
            )
        head = fh.read(HEADER_MAX) or b""
        header_size, size, checked, crc, digest = _checked_header(path, head, stamp)
        if info.st_size < header_size + size:
            raise AnchorDatabaseError(
                path,
                AnchorFault.TRUNCATED,
                f"{info.st_size - header_size} of {size} body bytes present",
            )
        if info.st_size > header_size + size:
            raise AnchorDatabaseError(
                path, AnchorFault.CORRUPT, f"{info.st_size - header_size - size} bytes too many"
            )
        data = bytearray(info.st_size)
        view = memoryview(data)
        view[: len(head)] = head
        got = len(head)
        while got < len(data):
            read_now = fh.readinto(view[got:])
            if not read_now:
                raise AnchorDatabaseError(path, AnchorFault.TRUNCATED, "shorter than its size")
            got += read_now
    body = view[header_size:]
    import zlib

    if checked > size or zlib.crc32(body[:checked]) != crc:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "its CRC-32 does not match")
    if verify:
        import hashlib

        if hashlib.sha256(body).hexdigest() != digest:
            raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "body does not match its sha256")
    return body


def key_of(path: Path, kind: str) -> tuple[str, str | None] | None:
    """(key, dataset version) the header of the ``kind`` file at ``path`` names, else None.

    Only the header is read, and nothing is trusted: a caller reads the file with ``read``
    and the stamp these make, which checks it all. What an incremental build asks first: the
    key the files it extends were built for.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        head = fh.read(HEADER_MAX) or b""
    fields = head.partition(b"\n")[0].split(b" ")
    if len(fields) < 5 or b" ".join(fields[:2]) != FORMAT or fields[2] != kind.encode():
        return None
    key, version = fields[3].decode("utf-8", "replace"), fields[4].decode("utf-8", "replace")
    return key, None if version == "-" else version


def _checked_header(path: Path, head: bytes, stamp: Stamp) -> tuple[int, int, int, int, str]:
    """(header, body, checked bytes, CRC-32, sha256) of ``stamp``'s header, else raises."""
    cut = head.find(b"\n")
    if cut < 0:
        cut_short = head.startswith(FORMAT) or (head and FORMAT.startswith(head))
        fault = AnchorFault.TRUNCATED if cut_short else None
        raise AnchorDatabaseError(path, fault or AnchorFault.CORRUPT, "no errkb header")
    fields = head[:cut].split(b" ")
    name, number = FORMAT.split(b" ")
    if len(fields) < 2 or fields[0] != name:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "no errkb header")
    if fields[1] != number:
        shown = fields[1].decode("ascii", "replace")
        raise AnchorDatabaseError(
            path, AnchorFault.STALE, f"format {shown}; this errkb reads {number.decode()}"
        )
    want = stamp.fields()
    if len(fields) != len(want) + 4:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "a header of other fields")
    if fields[: len(want)] != want:
        got = b" ".join(fields[2 : len(want)]).decode("utf-8", "replace")
        wanted = b" ".join(want[2:]).decode("utf-8", "replace")
        raise AnchorDatabaseError(
            path, AnchorFault.STALE, f"built as {got}; this knowledge base reads {wanted}"
        )
    size, checked, crc, digest = fields[-4:]
    if not (size.isdigit() and checked.isdigit() and len(crc) == 8 and len(digest) == 64):
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "bad body length or digest")
    try:
        crc_value = int(crc, 16)
    except ValueError:
        raise AnchorDatabaseError(path, AnchorFault.CORRUPT, "bad CRC-32") from None
    return cut + 1, int(size), int(checked), crc_value, digest.decode("ascii", "replace")


def write(
    path: Path,
    stamp: Stamp,
    body: bytes | Callable[[], Iterable[bytes | memoryview]],
    database: Path,
    *,
    checked: int | None = None,
) -> bool:
    """Store ``body`` (bytes, or a callable giving its pieces, asked twice) at ``path``.

    ``checked``: the body's leading bytes no engine validates itself (every byte when None),
    CRC-checked on every open. False when the directory refuses it (nothing is left at
    ``path`` then but what was there). The file is readable as ``database`` is.
    """
    import hashlib
    import tempfile
    import zlib

    pieces: Callable[[], Iterable[bytes | memoryview]] = (
        (lambda: (body,)) if isinstance(body, bytes) else body
    )
    digest = hashlib.sha256()
    size = crc = 0
    for piece in pieces():
        digest.update(piece)
        if checked is None or size < checked:
            crc = zlib.crc32(piece if checked is None else piece[: checked - size], crc)
        size += len(piece)
    covered = size if checked is None else min(checked, size)
    header = stamp.header(size, covered, crc, digest.hexdigest())
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            # The database's permission bits (a temporary file is created 0600).
            try:
                mode = database.stat().st_mode & 0o666
            except OSError:
                mode = 0o644
            os.fchmod(fh.fileno(), mode)
            fh.write(header)
            for piece in pieces():
                fh.write(piece)
            fh.flush()
            if os.fstat(fh.fileno()).st_size != len(header) + size:
                raise OSError(f"{tmp}: not the size written")
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # over a link at ``path``: the link goes, its target stays
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            return False
        raise
    return True
