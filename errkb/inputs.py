"""Opening and reading untrusted inputs within bounds: the one opener for every file errkb reads.

:func:`open_regular` refuses anything but a
regular file without blocking, :func:`read_regular` refuses a file over its cap from its size,
and :func:`read_json` bounds a JSON file's nesting and value count on the bytes, in C, before
parsing. A refusal is one :class:`InputError` line naming the file (or the caller's class).

``explain`` reads with :func:`read_input` (a FIFO read like stdin) then
:func:`decompress_input`: gzip, bzip2, xz, zstd told by content (up to :data:`MAX_NESTING`
layers), capped like a plain file; an archive, an unknown compression or binary data is an
:class:`~errkb.errors.UnreadableInputError`, never "no known error found".
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from errkb import _lazy
from errkb.errors import InputError, UnreadableInputError

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
    """Open ``path`` for binary reading, non-blocking, refusing anything but a regular file."""
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


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    *,
    what: str = "file",
    error: type[InputError] = InputError,
) -> bytes:
    """A regular file's bytes, refused past ``limit`` from its size before a byte is read.

    Never blocks; a growing file is refused past the cap plus one chunk. ``what`` names the file
    in the refusal; ``error`` is the error class raised.
    """
    name = os.fspath(path)
    with open_regular(path, error) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise error(f"{name}: {what} larger than {limit} bytes (not read)")
        try:
            return _read_regular(fh, name, size, limit)
        except OSError as exc:
            raise error(describe_oserror(name, exc)) from None
        except InputError as exc:
            raise error(str(exc)) from None


@dataclass(frozen=True)
class JsonBounds:
    """What a JSON file may make the parser allocate: its bytes, nesting and values."""

    max_bytes: int
    max_depth: int = 32
    max_values: int = 1_000_000


_escape_re = _lazy.pattern(rb"\\.", re.DOTALL)
_string_re = _lazy.pattern(rb'"[^"]*"')
#: Brackets only, as ``[`` and ``]``: one ``bytes.replace`` of ``[]`` removes a level a pass.
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def _without(data: bytes, pattern: re.Pattern[bytes]) -> bytes:
    """``pattern.sub(b"", data)`` holding ``data`` and the result only (views joined)."""
    view = memoryview(data)
    pieces: list[memoryview] = []
    pos = 0
    for m in pattern.finditer(data):
        pieces.append(view[pos : m.start()])
        pos = m.end()
    if not pieces:
        return data
    pieces.append(view[pos:])
    return b"".join(pieces)


def json_shape_problem(data: bytes, bounds: JsonBounds) -> str | None:
    """Why ``data`` is beyond ``bounds`` before it is parsed, or None (C passes, no parse)."""
    if len(data) > bounds.max_bytes:
        return f"larger than {bounds.max_bytes} bytes"
    too_many = f"more than {bounds.max_values} JSON values"
    if data.count(b'"') // 2 > bounds.max_values:
        return too_many  # each string is a value: cut out only a bounded number of them
    bare = _without(_escape_re().sub(b"", data) if b"\\" in data else data, _string_re())
    # Counted before the brackets are copied out.
    if 1 + sum(bare.count(c) for c in (b",", b":", b"[", b"{")) > bounds.max_values:
        return too_many
    brackets = bare.translate(_BRACKETS, _NOT_BRACKETS)
    del bare
    for _ in range(bounds.max_depth):
        if not brackets:
            break
        brackets = brackets.replace(b"[]", b"")
    return f"nested deeper than {bounds.max_depth} levels" if brackets else None


def read_json(
    path: str | os.PathLike[str],
    bounds: JsonBounds,
    *,
    what: str = "JSON file",
    error: type[InputError] = InputError,
) -> object:
    """A JSON file read through :func:`read_regular` and parsed within ``bounds``.

    Refused in one line (``error``): not a regular file, too large, deep or many, not UTF-8 or
    not JSON (``NaN`` included).
    """
    name = os.fspath(path)
    data = read_regular(path, bounds.max_bytes, what=what, error=error)
    problem = json_shape_problem(data, bounds)
    if problem is not None:
        raise error(f"{name}: not a {what}: {problem}")
    import json

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(data, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise error(f"{name}: not a {what}: {str(exc)[:200]}") from None


def read_stream(stream: BinaryIO, name: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read all of ``stream``, refusing it once more than ``limit`` bytes have arrived."""
    # BytesIO hands its one bytes object over without a copy (``getvalue()``).
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
    """Read a regular file of ``size`` bytes into one buffer of that size."""
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
    """Read one ``explain`` input: a path, or ``-`` for ``stdin``; at most ``limit`` bytes."""
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
            # A device or directory is refused before a byte is read; a FIFO is read like stdin.
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


#: Compressed inputs by their leading bytes, not by name: gzip, bzip2, xz, zstd.
_COMPRESSED = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
#: bzip2: ``BZh``, the block size digit, then a block's or the end's magic (text seldom has it).
_BZIP2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")
#: Compression layers undone at most (a gzip in a gzip); a fourth is refused.
MAX_NESTING = 3
#: What errkb knows but cannot read, by leading bytes: said in one line, never explained.
_UNREADABLE = (
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x04\x22\x4d\x18", "lz4-compressed data"),
    (b"\x89LZO\x00", "lzop-compressed data"),
    (b"LZIP", "lzip-compressed data"),
    (b"\x1f\x9d", "compress (.Z) data"),
    (b"\x7fELF", "an ELF executable"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"%PDF-", "a PDF document"),
    (b"SQLite format 3\x00", "an SQLite database"),
)
#: The zstd window errkb allocates at most for one frame (zstd's own default limit).
_ZSTD_MAX_WINDOW = 1 << 27
#: Compressed bytes handed to the zstd decoder per call (at most 32 MiB out before a check).
_ZSTD_FEED = 1 << 10


def compression_of(data: bytes) -> str | None:
    """The compression ``data`` starts with (``gzip``, ``bzip2``, ``xz``, ``zstd``), or None."""
    for magic, kind in _COMPRESSED:
        if data.startswith(magic):
            return kind
    if data[:3] == b"BZh" and data[3:4] in b"123456789" and data[4:10] in _BZIP2_BLOCKS:
        return "bzip2"
    if len(data) >= 8 and _skippable(data[:4]):
        return "zstd"  # a skippable frame (metadata) before the first real one
    return None


def _skippable(magic: bytes | memoryview) -> bool:
    """Whether ``magic`` opens a zstd skippable frame (0x184D2A50 to 0x184D2A5F)."""
    return len(magic) == 4 and 0x50 <= magic[0] <= 0x5F and bytes(magic[1:]) == b"\x2a\x4d\x18"


def unreadable_kind(data: bytes) -> str | None:
    """What ``data`` is when errkb cannot read it as text ("a zip archive", "binary data")."""
    for magic, kind in _UNREADABLE:
        if data.startswith(magic):
            return kind
    if data[257:262] == b"ustar":
        return "a tar archive"
    head = data[:4096]
    if b"\x00" not in head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    if not head.strip(b"\x00"):
        # A leading run of NULs is judged by what follows it; nothing but NULs is binary.
        text = _not_nul().search(data)
        if text is None:
            return "binary data (NUL bytes)"
        head = data[text.start() : text.start() + 4096]
    odd, even = head[1::2].count(0), head[0::2].count(0)
    half = len(head) // 2 or 1
    if min(odd, even) * 10 <= half and max(odd, even) * 10 >= half * 9:
        return None  # UTF-16 without a BOM: a NUL in every other byte
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if head.count(0) * 4 >= len(head) or controls * 20 >= len(head):
        return "binary data (NUL bytes)"
    return None


_not_nul = _lazy.pattern(rb"[^\x00]")
#: Bytes no text holds (C0 controls but tab, line ends, form feed and ESC; DEL).
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])


def decompress_input(data: bytes, name: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """``data`` as text errkb reads: decompressed when compressed, refused when unreadable.

    gzip, bzip2, xz and zstd (concatenated members are one input), up to :data:`MAX_NESTING`
    layers, each read into one buffer never past ``limit`` (a bomb costs at most ``limit`` plus a
    chunk). A damaged stream is an :class:`InputError` naming ``name``; unreadable data (after any
    layer) an :class:`UnreadableInputError` saying what it is.
    """
    kind = compression_of(data)
    if kind is None:
        _refuse_unreadable(data, name, ())
        return data  # before the imports: plain text, nearly every input, loads none of them
    layers: list[str] = []
    while kind is not None:
        if len(layers) == MAX_NESTING:
            raise UnreadableInputError(
                f"{name}: {kind} data nested more than {MAX_NESTING} layers deep "
                f"({' inside '.join(reversed([kind, *layers]))}); not read"
            )
        data = _decompressed(data, kind, name, limit, layers)
        layers.append(kind)
        kind = compression_of(data)
    _refuse_unreadable(data, name, layers)
    return data


def _refuse_unreadable(data: bytes, name: str, layers: Sequence[str]) -> None:
    what = unreadable_kind(data)
    if what is None:
        return
    inside = f" inside {' inside '.join(reversed(layers))} data" if layers else ""
    raise UnreadableInputError(f"{name}: {what}{inside}, not a log")


def _decompressed(data: bytes, kind: str, name: str, limit: int, layers: Sequence[str]) -> bytes:
    """One layer of ``data`` (``kind``) undone within ``limit``."""
    what = f"{kind} data" + (f" inside {' inside '.join(reversed(layers))} data" if layers else "")
    out = _Output(_stated_size(data, kind, limit), name, limit)
    if kind == "zstd":
        _unzstd(data, out, name, what)
        return out.value()
    import bz2
    import gzip
    import lzma
    import zlib

    raw = io.BytesIO(data)
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
                out.write(chunk)
    except EOFError:
        raise InputError(f"{name}: truncated {what}") from None
    except (OSError, lzma.LZMAError, zlib.error) as exc:
        raise InputError(f"{name}: damaged {what}: {exc}") from None
    return out.value()


def _unzstd(data: bytes, out: _Output, name: str, what: str) -> None:
    """Every zstd frame of ``data`` into ``out``; truncated or damaged data is an InputError."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a declared dependency; a broken install says so
        raise UnreadableInputError(
            f"{name}: {what}, and the zstandard package is not installed"
        ) from None
    view = memoryview(data)
    pos = 0
    try:
        while pos < len(view):
            if _skippable(view[pos : pos + 4]):  # metadata the decoder does not take: skipped
                pos += 8 + int.from_bytes(view[pos + 4 : pos + 8], "little")
                continue
            frame = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW).decompressobj()
            while pos < len(view) and not frame.eof:
                piece = view[pos : pos + _ZSTD_FEED]
                out.write(frame.decompress(piece))
                pos += len(piece)
            if not frame.eof:
                raise InputError(f"{name}: truncated {what}")
            pos -= len(frame.unused_data)
    except zstandard.ZstdError as exc:
        raise InputError(f"{name}: damaged {what}: {exc}") from None


def _stated_size(data: bytes, kind: str, limit: int) -> int:
    """The decompressed size ``data`` states of itself (gzip, zstd) within ``limit``: a hint."""
    stated = 0
    if kind == "gzip" and len(data) >= 18:
        stated = int.from_bytes(data[-4:], "little")
        stated = min(stated, 1032 * len(data))  # deflate makes at most 1032 bytes of one
    elif kind == "zstd" and data[:4] == b"\x28\xb5\x2f\xfd":
        try:
            import zstandard

            stated = max(zstandard.frame_content_size(data), 0)
        except (ImportError, zstandard.ZstdError):
            stated = 0
    return stated if stated <= limit else 0


class _Output:
    """One growing buffer of decompressed bytes, refused past its limit, handed over uncopied."""

    __slots__ = ("buffer", "limit", "name")

    def __init__(self, stated: int, name: str, limit: int) -> None:
        self.buffer = io.BytesIO()
        self.name = name
        self.limit = limit
        if stated > _CHUNK:
            # Writing the last byte first sizes the buffer in one allocation.
            self.buffer.seek(stated - 1)
            self.buffer.write(b"\x00")
            self.buffer.seek(0)

    def write(self, chunk: bytes) -> None:
        self.buffer.write(chunk)
        if self.buffer.tell() > self.limit:
            raise InputError(f"{self.name}: decompressed input larger than {self.limit} bytes")

    def value(self) -> bytes:
        self.buffer.truncate(self.buffer.tell())
        return self.buffer.getvalue()
