"""One reader for every shape the dataset comes in.

An envelope ``{"record": ..., "datasetVersion": ...}``, a bare record, a JSON array of either,
JSON Lines (streamed), a directory (recursively), any of them gzip-compressed (by magic
bytes). Only regular files are read, at most ``MAX_FILE_BYTES`` decompressed
(``ERRKB_MAX_FILE_BYTES``). Too-deep JSON and duplicate keys are reported with file and line.
The reader only shapes and locates: each item comes with where it came from, and malformed
JSON is a ``Problem`` too, so one bad line never hides the others.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from errkb.errors import InputError, Problem
from errkb.inputs import check_regular, open_regular

#: Default cap on the bytes one record file holds or decompresses to (256 MiB).
MAX_FILE_BYTES = 256 << 20

#: Files of a published tree that describe the dataset rather than hold records.
PUBLISHED_METADATA = frozenset({"manifest.json", "repos.json", "index.json", "index.json.gz"})
_RECORD_SUFFIXES = (".json", ".jsonl", ".ndjson", ".txt", ".gz")
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Item:
    """One record-shaped object read from a source, or the problem that stopped reading it."""

    source: str  #: file path
    location: str  #: "line 3" (JSON Lines), "index 12" (array), "" (whole file)
    obj: Any  #: the record object (envelope unwrapped); None when ``problem`` is set
    dataset_version: Any = None  #: the envelope's datasetVersion, if any
    envelope: Any = None  #: the whole envelope object, when the record came in one
    problem: Problem | None = None
    #: Warnings that do not make the record invalid (duplicate keys): lint makes them errors.
    warnings: tuple[Problem, ...] = ()
    #: Its parse read no float (nor NaN or Infinity): the faster encoder may write it (``_fast``).
    floatless: bool = False

    @property
    def path_prefix(self) -> str:
        """JSON path of the record inside the object read."""
        return "$.record" if self.envelope is not None else "$"


def max_file_bytes() -> int:
    """The per-file cap in force: ``ERRKB_MAX_FILE_BYTES`` if set, else ``MAX_FILE_BYTES``."""
    text = os.environ.get("ERRKB_MAX_FILE_BYTES", "")
    try:
        value = int(text) if text else MAX_FILE_BYTES
    except ValueError:
        raise InputError(f"ERRKB_MAX_FILE_BYTES={text!r} is not a number of bytes") from None
    if value <= 0:
        raise InputError(f"ERRKB_MAX_FILE_BYTES={text!r} must be positive")
    return value


def read_sources(
    paths: Iterable[str | os.PathLike[str]], *, max_bytes: int | None = None
) -> Iterator[Item]:
    """Yield every item of every path, in a stable order (a named non-file: InputError)."""
    cap = max_file_bytes() if max_bytes is None else max_bytes
    for path in paths:
        p = Path(path)
        if p.is_dir():
            for file in sorted(_walk(p)):
                yield from read_file(file, max_bytes=cap)
        else:
            check_regular(p)
            yield from read_file(p, max_bytes=cap)


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith(".") or name in PUBLISHED_METADATA:
                continue
            if name.endswith(_RECORD_SUFFIXES):
                yield Path(dirpath) / name


class FileTooLarge(InputError):
    """A record file holds, or decompresses to, more than the per-file cap."""


class _Capped(io.RawIOBase):
    """A binary stream that fails once more than ``cap`` bytes have been read from it."""

    def __init__(self, inner: IO[bytes], cap: int, name: str, raw: IO[bytes]) -> None:
        super().__init__()
        self._inner, self._cap, self._name, self._pos = inner, cap, name, 0
        self._raw = raw  # the file under a GzipFile, which does not close it itself

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._inner.seekable()

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = self._inner.seek(offset, whence)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._inner.read(len(view))
        self._pos += len(data)
        if self._pos > self._cap:
            raise FileTooLarge(
                f"{self._name}: holds or decompresses to more than {self._cap} bytes "
                "(the per-file cap, ERRKB_MAX_FILE_BYTES)"
            )
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        self._raw.close()
        super().close()


def open_text(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> IO[str]:
    """Open ``path`` as UTF-8 text, gunzipped when gzip; ``FileTooLarge`` past cap."""
    raw = open_regular(path)
    try:
        magic = raw.read(2)
        raw.seek(0)
        # The returned wrapper owns the stream and closes it.
        gunzip = magic == _GZIP_MAGIC
        stream = cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")) if gunzip else raw
    except OSError as exc:
        raw.close()
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    capped = io.BufferedReader(_Capped(stream, max_bytes, str(path), raw))
    return io.TextIOWrapper(capped, encoding="utf-8", errors="strict", newline=None)


def read_file(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> Iterator[Item]:
    """Yield the items of one file; unreadable content becomes a problem item."""
    source = str(path)
    try:
        with open_text(path, max_bytes=max_bytes) as fh:
            head = _peek_nonspace(fh)
            if head == "":
                yield _problem(source, "", "file is empty")
                return
            fh.seek(0)
            if head == "{" and _first_line_is_json(fh):
                # JSON Lines (whatever the file is called): stream it, never load it whole.
                fh.seek(0)
                yield from _read_lines(source, fh)
            else:
                fh.seek(0)
                yield from _read_document(source, fh.read())
    except InputError as exc:
        yield _problem(source, "", str(exc).removeprefix(f"{source}: "))
    except (UnicodeDecodeError, OSError, EOFError, gzip.BadGzipFile) as exc:
        yield _problem(source, "", f"cannot read: {exc}")


def _peek_nonspace(fh: IO[str]) -> str:
    # Chunked: a file of hundreds of megabytes of blanks must not cost one call per character.
    while True:
        chunk = fh.read(1 << 16)
        if chunk == "":
            return ""
        rest = chunk.lstrip()
        if rest:
            return rest[0]


def _first_line_is_json(fh: IO[str]) -> bool:
    """True when the first non-blank line is a complete JSON object on its own."""
    for line in fh:
        if line.strip():
            try:
                return isinstance(json.loads(line), dict)
            except (json.JSONDecodeError, RecursionError):
                return False
    return False


class _Nested(Exception):
    """The JSON parser ran out of stack: the text nests too deeply."""


#: Where the reader reports a too-deep document: records nest three levels at most.
_DEPTH_REPORTED = 512
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|\n')


def _loads(text: str) -> tuple[Any, list[str], bool]:
    """Parse JSON: the value, the keys an object repeated, and whether it holds no float."""
    duplicates: list[str] = []
    floats: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            seen: set[str] = set()
            for key, _value in items:
                if key in seen:
                    duplicates.append(key)
                seen.add(key)
        return obj

    def number(text: str) -> float:
        floats.append(text)  # called for floats only: integers and strings cost nothing
        return float(text)

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_float=number, parse_constant=number)
    except RecursionError:
        raise _Nested from None
    return doc, duplicates, not floats


def _deep_line(text: str) -> int:
    """The line where ``text`` first nests deeper than ``_DEPTH_REPORTED`` (strings skipped)."""
    depth, line = 0, 1
    for match in _TOKEN.finditer(text):
        piece = match.group()
        if piece == "\n":
            line += 1
        elif piece in "[{":
            depth += 1
            if depth > _DEPTH_REPORTED:
                return line
        elif piece in "]}":
            depth -= 1
        else:
            line += piece.count("\n")
    return line


def _read_document(source: str, text: str) -> Iterator[Item]:
    try:
        doc, duplicates, floatless = _loads(text)
    except json.JSONDecodeError as exc:
        yield _problem(source, f"line {exc.lineno}", f"invalid JSON: {exc.msg}")
        return
    except _Nested:
        yield _problem(source, f"line {_deep_line(text)}", _NESTED)
        return
    check = _SURROGATE_ESCAPE.search(text) is not None
    if isinstance(doc, list):
        # Duplicate keys are reported on the first element of the file.
        for index, element in enumerate(doc):
            first = duplicates if index == 0 else []
            yield _item(source, f"index {index}", element, first, check, floatless)
    else:
        yield _item(source, "", doc, duplicates, check, floatless)


_NESTED = f"JSON nested too deeply to parse (more than {_DEPTH_REPORTED} levels)"


def _read_lines(source: str, fh: IO[str]) -> Iterator[Item]:
    for lineno, line in enumerate(fh, start=1):
        if not line.strip():
            continue
        try:
            obj, duplicates, floatless = _loads(line)
        except json.JSONDecodeError as exc:
            yield _problem(source, f"line {lineno}", f"invalid JSON: {exc.msg}")
            continue
        except _Nested:
            yield _problem(source, f"line {lineno}", _NESTED)
            continue
        check = _SURROGATE_ESCAPE.search(line) is not None
        yield _item(source, f"line {lineno}", obj, duplicates, check, floatless)


def lone_surrogate(obj: Any, path: str) -> str | None:
    r"""JSON path of the first string (or key) holding a lone UTF-16 surrogate, if any."""
    if isinstance(obj, str):
        return path if _has_surrogate(obj) else None
    if isinstance(obj, dict):
        for key, value in obj.items():
            where = f"{path}.{key}"
            if _has_surrogate(key):
                return where
            if (found := lone_surrogate(value, where)) is not None:
                return found
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            if (found := lone_surrogate(value, f"{path}[{index}]")) is not None:
                return found
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _item(
    source: str,
    location: str,
    obj: Any,
    duplicates: Sequence[str] = (),
    check: bool = False,
    floatless: bool = False,
) -> Item:
    if check and (where := lone_surrogate(obj, "$")) is not None:
        rid = _record_id(obj)
        return Item(
            source,
            location,
            None,
            problem=Problem(
                source,
                location,
                rid,
                where,
                "lone UTF-16 surrogate (a \\udXXX escape without its pair): not valid Unicode text",
            ),
        )
    warnings = tuple(
        Problem(
            source,
            location,
            _record_id(obj),
            "$",
            f"duplicate JSON key {key!r}: only its last value is kept",
        )
        for key in dict.fromkeys(duplicates)
    )
    if isinstance(obj, dict) and isinstance(obj.get("record"), dict):
        return Item(
            source,
            location,
            obj["record"],
            obj.get("datasetVersion"),
            envelope=obj,
            warnings=warnings,
            floatless=floatless,
        )
    if isinstance(obj, dict):
        return Item(source, location, obj, warnings=warnings, floatless=floatless)
    kind = type(obj).__name__
    return _problem(source, location, f"expected a record or an envelope object, got {kind}")


def _record_id(obj: Any) -> str | None:
    if isinstance(obj, dict) and isinstance(obj.get("record"), dict):
        obj = obj["record"]
    rid = obj.get("id") if isinstance(obj, dict) else None
    return rid if isinstance(rid, str) and not _has_surrogate(rid) else None


def _problem(source: str, location: str, rule: str) -> Item:
    return Item(source, location, None, problem=Problem(source, location, None, "$", rule))
