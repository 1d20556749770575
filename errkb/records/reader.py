"""One reader for every shape the dataset comes in.

Accepted: an envelope object ``{"record": ..., "datasetVersion": ...}`` (the seeds' ``.txt``
files), a bare record, a JSON array of either (upstream's per-repo files), JSON Lines, a
directory (recursively), and any of these gzip-compressed (detected by magic bytes, not by name).
JSON Lines is streamed line by line; a JSON document is parsed whole.

The reader only shapes and locates: it yields every item with where it came from (file and
line or array index), and validation (``errkb.records``) turns problems into reports that name
that place. Malformed JSON becomes a ``Problem`` too, so one bad line never hides the others.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from errkb.errors import InputError, Problem

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

    @property
    def path_prefix(self) -> str:
        """JSON path of the record inside the object read."""
        return "$.record" if self.envelope is not None else "$"


def read_sources(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Item]:
    """Yield every item of every path (files and directories), in a stable order."""
    for path in paths:
        p = Path(path)
        if p.is_dir():
            for file in sorted(_walk(p)):
                yield from read_file(file)
        elif p.exists():
            yield from read_file(p)
        else:
            raise InputError(f"{p}: no such file or directory")


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith(".") or name in PUBLISHED_METADATA:
                continue
            if name.endswith(_RECORD_SUFFIXES):
                yield Path(dirpath) / name


def open_text(path: Path) -> IO[str]:
    """Open ``path`` as UTF-8 text, transparently gunzipping it when it starts with gzip magic."""
    try:
        with path.open("rb") as probe:
            magic = probe.read(2)
        # The returned wrapper owns the stream and closes it.
        stream = (
            cast(IO[bytes], gzip.open(path, "rb"))  # noqa: SIM115
            if magic == _GZIP_MAGIC
            else path.open("rb")
        )
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return io.TextIOWrapper(stream, encoding="utf-8", errors="strict", newline=None)


def read_file(path: Path) -> Iterator[Item]:
    """Yield the items of one file; unreadable content becomes a problem item."""
    source = str(path)
    try:
        with open_text(path) as fh:
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
    except (UnicodeDecodeError, OSError, EOFError, gzip.BadGzipFile) as exc:
        yield _problem(source, "", f"cannot read: {exc}")


def _peek_nonspace(fh: IO[str]) -> str:
    while True:
        ch = fh.read(1)
        if ch == "" or not ch.isspace():
            return ch


def _first_line_is_json(fh: IO[str]) -> bool:
    """True when the first non-blank line is a complete JSON object on its own."""
    for line in fh:
        if line.strip():
            try:
                return isinstance(json.loads(line), dict)
            except json.JSONDecodeError:
                return False
    return False


def _read_document(source: str, text: str) -> Iterator[Item]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        yield _problem(source, f"line {exc.lineno}", f"invalid JSON: {exc.msg}")
        return
    if isinstance(doc, list):
        for index, element in enumerate(doc):
            yield _item(source, f"index {index}", element)
    else:
        yield _item(source, "", doc)


def _read_lines(source: str, fh: IO[str]) -> Iterator[Item]:
    for lineno, line in enumerate(fh, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield _problem(source, f"line {lineno}", f"invalid JSON: {exc.msg}")
            continue
        yield _item(source, f"line {lineno}", obj)


def _item(source: str, location: str, obj: Any) -> Item:
    if isinstance(obj, dict) and isinstance(obj.get("record"), dict):
        return Item(source, location, obj["record"], obj.get("datasetVersion"), envelope=obj)
    if isinstance(obj, dict):
        return Item(source, location, obj)
    kind = type(obj).__name__
    return _problem(source, location, f"expected a record or an envelope object, got {kind}")


def _problem(source: str, location: str, rule: str) -> Item:
    return Item(source, location, None, problem=Problem(source, location, None, "$", rule))
