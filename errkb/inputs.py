"""Opening and reading untrusted inputs within bounds.

Every path errkb reads from a user or a dataset goes through here, for two reasons. A path can
name something that is not a file: a FIFO blocks ``open`` forever, ``/dev/zero`` never ends, a
symlink loop is not "missing". And a file can be far larger than anything errkb should hold in
memory. So :func:`open_regular` refuses anything but a regular file (after following symlinks)
without blocking, and :func:`read_input` reads ``explain``'s input up to a cap, refusing more
after reading at most the cap plus one chunk.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO

from errkb.errors import InputError

#: ``explain`` refuses input larger than this (1 GiB): errkb answers within bounded memory.
MAX_INPUT_BYTES = 1 << 30
_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a character device", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def describe_oserror(
    path: str | os.PathLike[str], exc: OSError, reading: str = "cannot read"
) -> str:
    """A one-line reason for an OSError on ``path``, naming symlink loops as such."""
    if exc.errno == errno.ELOOP:
        return f"{os.fspath(path)}: symlink loop"
    if exc.errno == errno.EFBIG:
        return f"{os.fspath(path)}: file too large for this system (EFBIG)"
    return f"{os.fspath(path)}: {reading}: {exc.strerror or exc}"


def check_regular(path: str | os.PathLike[str], error: type[InputError] = InputError) -> int:
    """Raise ``error`` unless ``path`` (symlinks followed) is a regular file; return its size."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{os.fspath(path)}: no such file or directory") from None
    except OSError as exc:
        raise error(describe_oserror(path, exc)) from None
    except ValueError:  # an embedded NUL byte: no file can have that name
        raise error(f"{os.fspath(path)!r}: not a valid file name (NUL byte)") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{os.fspath(path)}: {file_kind(st.st_mode)}, not a regular file")
    return st.st_size


def open_regular(
    path: str | os.PathLike[str],
    error: type[InputError] = InputError,
    reading: str = "cannot read",
) -> BinaryIO:
    """Open ``path`` for binary reading, refusing anything but a regular file.

    The file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a FIFO
    never blocks the open and a file swapped for a device after a ``stat`` is still refused.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(describe_oserror(path, exc, reading)) from None
    except ValueError:
        raise error(f"{os.fspath(path)!r}: not a valid file name (NUL byte)") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{os.fspath(path)}: {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_stream(stream: BinaryIO, name: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read all of ``stream``, refusing it once more than ``limit`` bytes have arrived.

    Reads chunk by chunk into one growing buffer, so a refusal costs at most ``limit`` plus one
    chunk (never ``read(limit)``, which allocates the whole limit up front).
    """
    # BytesIO grows one bytes object in place and ``getvalue()`` hands that object over
    # without a copy; a bytearray turned into bytes at the end held the input twice (a 1 GB
    # pipe peaked at 1.93 GB).
    buffer = io.BytesIO()
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        buffer.write(chunk)
        if buffer.tell() > limit:
            raise InputError(f"{name}: input larger than {limit} bytes")
    return buffer.getvalue()


def _read_regular(fh: BinaryIO, name: str, size: int, limit: int) -> bytes:
    """Read a regular file of ``size`` bytes into one buffer of that size.

    A chunked read grows a buffer and copies it into the result: twice the input at the peak,
    where one read of the known size allocates it once. A file that grew meanwhile (a log being
    written) is read on in chunks, within the cap.
    """
    data = fh.read(size + 1)
    if len(data) <= size:
        return data
    try:
        if len(data) > limit:
            raise InputError(name)
        return data + read_stream(fh, name, limit - len(data))
    except InputError:
        raise InputError(f"{name}: input larger than {limit} bytes") from None


def read_input(name: str, stdin: BinaryIO | None = None, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read one ``explain`` input: a path, or ``-`` for ``stdin``; at most ``limit`` bytes.

    A regular file over the cap is refused from its size before anything is read. A named FIFO
    is read like standard input (``errkb explain <(make 2>&1)`` is a pipe), within the same cap.
    """
    if name == "-":
        if stdin is None:
            raise InputError("-: no standard input")
        try:
            st = os.fstat(stdin.fileno())
        except (OSError, ValueError):
            st = None
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise InputError(f"-: input larger than {limit} bytes")
        try:
            if st is not None and stat.S_ISREG(st.st_mode):
                return _read_regular(stdin, name, st.st_size, limit)
            return read_stream(stdin, name, limit)
        except OSError as exc:
            raise InputError(f"-: cannot read: {exc.strerror or exc}") from None
    try:
        fh = open(name, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(describe_oserror(name, exc)) from None
    except ValueError:
        raise InputError(f"{name!r}: not a valid file name (NUL byte)") from None
    with fh:
        st = os.fstat(fh.fileno())
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            # A device or a directory is refused before a byte is read (``/dev/zero`` was read
            # up to the cap first); a FIFO is a pipe (``<(make 2>&1)``), read like stdin.
            raise InputError(f"{name}: {file_kind(st.st_mode)}, not a regular file or a pipe")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise InputError(f"{name}: input larger than {limit} bytes")
        try:
            if stat.S_ISREG(st.st_mode):
                return _read_regular(fh, name, st.st_size, limit)
            return read_stream(fh, name, limit)
        except OSError as exc:
            raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None


def resolve_path(path: Path, error: type[InputError] = InputError) -> Path:
    """``path.resolve()``, with a symlink loop or a NUL byte turned into ``error``."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python < 3.13 reports loops so
        raise error(f"{path}: symlink loop") from exc
    except ValueError:
        raise error(f"{str(path)!r}: not a valid file name (NUL byte)") from None


#: Compressed inputs by their leading bytes (not by name: a ``.log`` may be gzip, a pipe has
#: no name): gzip, bzip2, xz.
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"))
#: bzip2: ``BZh``, the block size digit, then a block's or the end's magic (text seldom has it).
_BZIP2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")


def compression_of(data: bytes) -> str | None:
    """The compression ``data`` starts with (``gzip``, ``bzip2``, ``xz``), or None."""
    for magic, kind in _COMPRESSED:
        if data.startswith(magic):
            return kind
    if data[:3] == b"BZh" and data[3:4] in b"123456789" and data[4:10] in _BZIP2_BLOCKS:
        return "bzip2"
    return None


def decompress_input(data: bytes, name: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """``data`` decompressed when it is gzip, bzip2 or xz (concatenated members too), else as is.

    Read back one chunk at a time, so a small bomb costs at most ``limit`` plus one chunk before
    it is refused; a damaged or truncated stream is an :class:`InputError` naming ``name``.
    """
    kind = compression_of(data)
    if kind is None:
        return data  # before the imports: plain text, nearly every input, loads none of them
    import bz2
    import gzip
    import io
    import lzma
    import zlib

    raw = io.BytesIO(data)
    out = bytearray()
    try:
        opened: io.BufferedIOBase = (
            gzip.GzipFile(fileobj=raw)
            if kind == "gzip"
            else bz2.BZ2File(raw)
            if kind == "bzip2"
            else lzma.LZMAFile(raw)  # noqa: SIM115 - entered just below
        )
        with opened as fh:
            while chunk := fh.read(_CHUNK):
                out += chunk
                if len(out) > limit:
                    raise InputError(f"{name}: decompressed input larger than {limit} bytes")
    except EOFError:
        raise InputError(f"{name}: truncated {kind} data") from None
    except (OSError, lzma.LZMAError, zlib.error) as exc:
        raise InputError(f"{name}: damaged {kind} data: {exc}") from None
    return bytes(out)
