"""Reading ErrLookup's published tree, from a local copy or over http(s).

A tree (the README's "Published layouts") is ``data/manifest.json`` (the version and the sha256
of the files it lists: the index or its parts, ``repos.json``) and unhashed repository files
that ``errkb.sync`` cross-checks against the index. This module locates a tree, fetches its
files and parses and verifies the metadata. Downloaded content is only ever JSON (no exec,
eval or pickle); downloads stream to temporary files under a size cap; any failure is one
``NetworkError`` naming the URL.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import json
import os
import queue
import re
import secrets
import stat
import threading
import urllib.parse
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol, cast

from errkb.errors import IntegrityError, SyncError
from errkb.inputs import file_kind
from errkb.records import dataset_version_problem, orjson_functions
from errkb.sync.transport import DEFAULT_READ_TIMEOUT, HttpClient, shown_url

#: Default cap on any one downloaded (or decompressed) file.
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
#: Most rows an index may list: four times the 500,000 records ErrLookup plans.
DEFAULT_MAX_INDEX_ROWS = 2_000_000
#: Most repositories an index or repos.json may name (ErrLookup has about 1,800).
DEFAULT_MAX_REPOS = 100_000
#: Most bytes one repository's records file may hold or inflate to (unhashed, parsed whole).
DEFAULT_MAX_REPO_FILE_BYTES = 64 * 1024 * 1024
#: Most characters one index row or repos.json entry may take (a row is a few hundred bytes).
MAX_ROW_BYTES = 16 * 1024 * 1024
#: Most JSON values one repository file may hold (an upper bound, ``check_value_count``).
DEFAULT_MAX_REPO_FILE_VALUES = 2_000_000
#: The manifest is a few hundred bytes; anything this large is not a manifest.
MANIFEST_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT = DEFAULT_READ_TIMEOUT
MANIFEST_PATH = "data/manifest.json"
#: Most parts a split index may be listed in; a part's ``parts`` must equal the number listed.
MAX_INDEX_PARTS = 10_000
#: Where ErrLookup publishes its dataset: what ``errkb sync`` fetches when given no SOURCE.
DEFAULT_SOURCE = "https://errors.standardbeagle.com"
#: Environment variable naming another default source (a mirror, a local tree).
SOURCE_ENV = "ERRKB_SOURCE"
_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# Same rule as the record schema's repo field; it also keeps a repo name from escaping the tree.
#: The manifest entries a sync fetches and verifies; any other entry is only listed.
_FETCHED = frozenset({"index", "repos"})
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
#: A manifest key naming index files: "index", "indexParts", "index-1", "index_parts", ...
_INDEX_KEY = re.compile(r"^index(?:[-_.]?\d+|[-_.]?parts?|[-_.]?files)?$", re.IGNORECASE)
#: A listed path naming one part of a split index (upstream's ``index-N.json.gz``).
_INDEX_PART = re.compile(r"(?:^|/)index[-_.]?(\d+)\.json(?:\.gz)?$")


@dataclass(frozen=True)
class Limits:
    """What a published tree may hold; past any of these a sync refuses, nothing changed."""

    index_rows: int = DEFAULT_MAX_INDEX_ROWS
    repos: int = DEFAULT_MAX_REPOS
    repo_file_bytes: int = DEFAULT_MAX_REPO_FILE_BYTES
    repo_file_values: int = DEFAULT_MAX_REPO_FILE_VALUES
    row_bytes: int = MAX_ROW_BYTES


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class FileEntry:
    """One file the manifest lists, with the hashes it promises."""

    name: str  #: the key in ``manifest.files`` ("index", "repos"; "index-2" for a part)
    path: str  #: as listed: "/data/index.json.gz"
    sha256: str | None  #: None only for an index part the manifest lists without one
    bytes: int | None = None
    encoding: str | None = None  #: "gzip" for the index
    raw_sha256: str | None = None  #: sha256 of the decompressed content
    raw_bytes: int | None = None


@dataclass(frozen=True)
class Manifest:
    """A parsed ``data/manifest.json``."""

    dataset_version: str
    schema_version: int
    counts: Mapping[str, Any]
    files: Mapping[str, FileEntry]
    sha256: str  #: of the manifest bytes themselves
    #: other ``files`` entries (name, path if any): listed, never fetched, never fatal
    others: tuple[tuple[str, str | None], ...] = ()
    #: the parts of a split index (``index-N.json.gz``), in the order listed; empty: one file
    index_parts: tuple[FileEntry, ...] = ()

    def index_files(self) -> tuple[FileEntry, ...]:
        """The index as listed: its parts, else the one ``index`` file, else nothing."""
        if self.index_parts:
            return self.index_parts
        single = self.files.get("index")
        return (single,) if single is not None else ()

    def entry(self, name: str, where: str) -> FileEntry:
        try:
            return self.files[name]
        except KeyError:
            raise SyncError(f"{where}: the manifest lists no {name!r} file") from None


@dataclass(frozen=True)
class RepoInfo:
    """One ``repos.json`` entry: what tells a changed repository from an unchanged one."""

    repo: str
    analyzed_sha: str | None
    content_changed_at: str | None
    error_count: int | None = None  #: ``errorCount``: how many records its file holds

    @property
    def fingerprint(self) -> tuple[str | None, str | None]:
        return (self.analyzed_sha, self.content_changed_at)


@dataclass(frozen=True)
class Fetched:
    """The outcome of fetching one file: a local path, or "not modified" (HTTP 304)."""

    where: str  #: URL or local path, for messages
    path: Path | None
    etag: str | None = None
    bytes: int = 0  #: transferred (0 for a local file read in place)
    last_modified: str | None = None  #: the response's Last-Modified (If-Modified-Since next time)

    @property
    def not_modified(self) -> bool:
        return self.path is None


class Tree(Protocol):
    """A published tree errkb can fetch files from."""

    @property
    def location(self) -> str:
        """The tree's base (URL or directory), as shown to the user."""

    @property
    def manifest_path(self) -> str:
        """Path of the manifest relative to the base."""

    def where(self, rel: str) -> str:
        """Where ``rel`` lives (URL or file path), for messages."""

    def for_version(self, version: str) -> Tree:
        """The same tree, fetching the files of ``version`` (cache-busting over http)."""

    def fetch(
        self,
        rel: str,
        dest: Path,
        *,
        max_bytes: int,
        etag: str | None = None,
        fresh: bool = False,
        on_bytes: Callable[[int], None] | None = None,
        last_modified: str | None = None,
    ) -> Fetched:
        """Fetch ``rel``; ``fresh`` defeats every cache between us and the origin."""


@dataclass(frozen=True)
class LocalTree:
    """A published tree on the local file system; files are read in place, never copied."""

    base: Path
    manifest_path: str = MANIFEST_PATH

    @property
    def location(self) -> str:
        return str(self.base)

    def where(self, rel: str) -> str:
        return str(self.base / clean_rel(rel))

    def for_version(self, version: str) -> LocalTree:
        return self

    def fetch(
        self,
        rel: str,
        dest: Path,
        *,
        max_bytes: int,
        etag: str | None = None,
        fresh: bool = False,
        on_bytes: Callable[[int], None] | None = None,
        last_modified: str | None = None,
    ) -> Fetched:
        path = self.base / clean_rel(rel)
        try:
            info = path.stat()
        except OSError as exc:
            raise SyncError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        # A device (/dev/zero) never ends and a FIFO blocks the reader: only regular files.
        if not stat.S_ISREG(info.st_mode):
            raise SyncError(f"{path}: not a regular file ({file_kind(info.st_mode)}); refused")
        size = info.st_size
        if size > max_bytes:
            raise SyncError(f"{path}: {size} bytes is over the {max_bytes}-byte cap")
        return Fetched(str(path), path)


@dataclass(frozen=True)
class HttpTree:
    """A published tree over http(s): data files asked with ``?v=<datasetVersion>`` (a CDN)."""

    base: str  #: no trailing slash
    manifest_path: str = MANIFEST_PATH
    timeout: float = DEFAULT_TIMEOUT  #: per read
    version: str | None = None  #: the datasetVersion whose files are fetched (``?v=``)
    client: HttpClient | None = field(default=None, compare=False, repr=False)
    #: the source URL's own query string (``?token=X``): sent with every request, never shown
    query: str = field(default="", repr=False)

    #: ``base`` as shown and stored (``shown_url``), made once: ``where`` is asked per file
    _shown: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if urllib.parse.urlsplit(self.base).scheme not in ("http", "https"):
            raise SyncError(f"{shown_url(self.base)}: only http and https URLs are supported")
        object.__setattr__(self, "_shown", shown_url(self.base))

    @property
    def location(self) -> str:
        """The base URL as shown and stored: userinfo redacted (``shown_url``)."""
        return self._shown

    def where(self, rel: str) -> str:
        """``rel``'s URL for messages and the sync state's keys: no userinfo, no query."""
        return f"{self.location}/{urllib.parse.quote(clean_rel(rel), safe='/')}"

    def for_version(self, version: str) -> HttpTree:
        return replace(self, version=version)

    def url(self, rel: str, *, fresh: bool = False) -> str:
        """The URL requested for ``rel``: with ``?v=`` for data files, and ``&r=`` if ``fresh``."""
        url = f"{self.base}/{urllib.parse.quote(clean_rel(rel), safe='/')}"
        own = [self.query] if self.query else []
        if clean_rel(rel) == clean_rel(self.manifest_path):
            return url + "".join(f"?{q}" for q in own)
        query: list[tuple[str, str]] = []
        if self.version is not None:
            query.append(("v", self.version))
        if fresh:
            query.append(("r", secrets.token_hex(8)))
        # encodeURIComponent's safe set, as upstream's client sends; the source's own query first.
        parts = own + [f"{k}={_quote_component(v)}" for k, v in query]
        return url + ("?" + "&".join(parts) if parts else "")

    def fetch(
        self,
        rel: str,
        dest: Path,
        *,
        max_bytes: int,
        etag: str | None = None,
        fresh: bool = False,
        on_bytes: Callable[[int], None] | None = None,
        last_modified: str | None = None,
    ) -> Fetched:
        headers = {}
        if clean_rel(rel) == clean_rel(self.manifest_path) or fresh:
            headers["Cache-Control"] = "no-cache"
        client = self.client or HttpClient(read_timeout=self.timeout)
        try:
            got = client.get(
                self.url(rel, fresh=fresh),
                dest,
                max_bytes=max_bytes,
                headers=headers,
                etag=etag,
                on_bytes=on_bytes,
                last_modified=last_modified,
            )
        finally:
            if self.client is None:
                client.close()
        return Fetched(self.where(rel), got.path, got.etag, got.bytes, got.last_modified)


def _quote_component(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.!~*'()")


def default_source() -> str:
    """``$ERRKB_SOURCE`` when set (and not empty), else ErrLookup's site."""
    return os.environ.get(SOURCE_ENV) or DEFAULT_SOURCE


def resolve_source(source: str | os.PathLike[str] | None) -> str:
    """The source a sync reads: ``source`` itself, or the default when it is None."""
    return default_source() if source is None else os.fspath(source)


def locate(source: str) -> Tree | None:
    """Return the published tree ``source`` names (local or http(s)), or None for plain records."""
    try:
        parts = urllib.parse.urlsplit(source)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            parts.port  # noqa: B018 - raises for a port out of range, as a request would later
    except ValueError as exc:  # "Invalid IPv6 URL" (an unclosed [), "Port out of range 0-65535"
        raise SyncError(f"{shown_url(source)}: not a valid URL: {exc}") from None
    if scheme in ("http", "https"):
        # The source's query string (a mirror's token) is sent with every request, never in a path.
        url, _, query = source.split("#", 1)[0].partition("?")
        path = urllib.parse.urlsplit(url).path
        if path.endswith(".json"):
            head, _, name = url.rpartition("/")
            if head.endswith("/data"):
                return HttpTree(head[: -len("/data")], f"data/{name}", query=query)
            return HttpTree(head, name, query=query)
        return HttpTree(url.rstrip("/"), query=query)
    if "://" in source:
        raise SyncError(
            f"{shown_url(source)}: unsupported URL scheme {scheme!r}; use http(s) or a path"
        )
    p = Path(source)
    if p.is_file() and p.name == "manifest.json":
        if p.parent.name == "data":
            return LocalTree(p.parent.parent, f"data/{p.name}")
        return LocalTree(p.parent, p.name)
    if p.is_dir():
        if (p / MANIFEST_PATH).is_file():
            return LocalTree(p)
        if (p / "manifest.json").is_file():
            if p.name == "data":
                return LocalTree(p.parent)
            return LocalTree(p, "manifest.json")
    return None


def clean_rel(path: str) -> str:
    """Make a listed path (absolute on the site) relative to the tree's base; refuse an escape."""
    rel = path.lstrip("/")
    parts = rel.split("/")
    if (
        not rel
        or "://" in path
        or "\\" in path
        or "\x00" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise IntegrityError(f"unsafe path {path!r} in the published tree")
    return rel


def repo_file(repo: str) -> str:
    """Path of one repository's records file: ``data/repos/{owner}/{name}.json``."""
    if not _REPO.fullmatch(repo) or any(part in (".", "..") for part in repo.split("/")):
        raise IntegrityError(f"invalid repository name {repo!r} in the published index")
    return f"data/repos/{repo}.json"


def parse_manifest(data: bytes, where: str) -> Manifest:
    """Parse and check a manifest's shape (hashes are checked when the files are fetched)."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SyncError(f"{where}: the manifest is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SyncError(f"{where}: the manifest is not a JSON object")
    if doc.get("schemaVersion") != 2:
        raise SyncError(
            f"{where}: manifest schemaVersion {doc.get('schemaVersion')!r} is not supported "
            "(errkb reads schemaVersion 2)"
        )
    version = doc.get("datasetVersion")
    if (why := dataset_version_problem(version)) is not None or not isinstance(version, str):
        raise SyncError(f"{where}: manifest {why}")
    files_doc = doc.get("files")
    if not isinstance(files_doc, dict):
        raise SyncError(f"{where}: the manifest has no 'files' object")
    files: dict[str, FileEntry] = {}
    others: list[tuple[str, str | None]] = []
    parts: list[FileEntry] = []
    for name, spec in files_doc.items():
        listed = _index_listing(str(name), spec)
        if listed == []:
            raise SyncError(f"{where}: manifest files.{name} lists no index parts (0 parts)")
        if listed is not None:
            parts.extend(_part_entry(f"files.{name}{sub}", item, where) for sub, item in listed)
            continue
        if name not in _FETCHED:
            # Files errkb does not read (upstream adds them over time): listed, never checked.
            path = spec.get("path") if isinstance(spec, dict) else None
            others.append((str(name), path if isinstance(path, str) else None))
            continue
        if not isinstance(spec, dict):
            raise SyncError(f"{where}: manifest files.{name} is not an object")
        path, sha = spec.get("path"), spec.get("sha256")
        if not isinstance(path, str) or not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise SyncError(f"{where}: manifest files.{name} needs a path and a sha256")
        raw_sha = spec.get("rawSha256")
        if raw_sha is not None and (not isinstance(raw_sha, str) or not _SHA256.fullmatch(raw_sha)):
            raise SyncError(f"{where}: manifest files.{name}.rawSha256 is not a sha256")
        files[str(name)] = FileEntry(
            name=str(name),
            path=path,
            sha256=sha,
            bytes=_int_or_none(spec.get("bytes")),
            encoding=spec.get("encoding") if isinstance(spec.get("encoding"), str) else None,
            raw_sha256=raw_sha,
            raw_bytes=_int_or_none(spec.get("rawBytes")),
        )
    for key, value in doc.items():  # a listing beside ``files`` ("indexParts": [...])
        if key != "files" and isinstance(value, list | dict):
            listed = _index_listing(str(key), value)
            if listed is not None:
                parts.extend(_part_entry(f"{key}{sub}", item, where) for sub, item in listed)
    if len(parts) > MAX_INDEX_PARTS:
        raise SyncError(
            f"{where}: the manifest lists {len(parts)} index parts, more than {MAX_INDEX_PARTS} "
            "(the index part limit); nothing changed"
        )
    seen: dict[str, str] = {}
    for part in parts:
        if part.path in seen:
            raise SyncError(
                f"{where}: the manifest lists index part {part.path} twice ({seen[part.path]} "
                f"and {part.name}); nothing changed"
            )
        seen[part.path] = part.name
    if parts and "index" in files:
        others.append(("index", files["index"].path))
    counts_doc = doc.get("counts")
    counts: dict[str, Any] = counts_doc if isinstance(counts_doc, dict) else {}
    return Manifest(
        version,
        2,
        counts,
        files,
        hashlib.sha256(data).hexdigest(),
        tuple(sorted(others)),
        tuple(parts),
    )


def _index_listing(name: str, spec: Any) -> list[tuple[str, Any]] | None:
    """The index parts a manifest entry lists, in any of several shapes, or None: not parts."""
    by_key = bool(_INDEX_KEY.fullmatch(name))
    if isinstance(spec, list) and by_key:
        return [(f"[{n}]", item) for n, item in enumerate(spec)]
    if isinstance(spec, dict):
        for sub in ("parts", "files"):
            inner = spec.get(sub)
            if by_key and isinstance(inner, list):
                return [(f".{sub}[{n}]", item) for n, item in enumerate(inner)]
        path = spec.get("path")
        if isinstance(path, str) and _INDEX_PART.search(path):
            return [("", spec)]
    if isinstance(spec, str) and by_key and _INDEX_PART.search(spec):
        return [("", spec)]
    return None


def _part_entry(name: str, spec: Any, where: str) -> FileEntry:
    """One listed index part: a path (a bare string will do) and, when given, its hashes."""
    if isinstance(spec, str):
        spec = {"path": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
        raise SyncError(f"{where}: manifest {name} lists an index part without a path")
    path, sha, raw_sha = spec["path"], spec.get("sha256"), spec.get("rawSha256")
    for key, value in (("sha256", sha), ("rawSha256", raw_sha)):
        if value is not None and (not isinstance(value, str) or not _SHA256.fullmatch(value)):
            raise SyncError(f"{where}: manifest {name}.{key} is not a sha256")
    encoding = spec.get("encoding")
    if not isinstance(encoding, str):
        encoding = "gzip" if path.endswith(".gz") else None
    return FileEntry(
        name=name,
        path=path,
        sha256=sha,
        bytes=_int_or_none(spec.get("bytes")),
        encoding=encoding,
        raw_sha256=raw_sha,
        raw_bytes=_int_or_none(spec.get("rawBytes")),
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class RawCheck:
    """The decompressed size and sha256 a gzip file must give, checked as it is read."""

    where: str
    cap: int  #: the cap on any download: a bomb is refused as soon as it passes it
    size: int | None  #: the manifest's ``rawBytes``
    sha256: str | None  #: the manifest's ``rawSha256``


@dataclass(frozen=True)
class Content:
    """A verified metadata file's content, read again as a stream (a gzip's never held inflated)."""

    where: str
    path: Path
    gzip: bool = False
    check: RawCheck | None = None

    def open(self) -> IO[bytes]:
        if self.gzip and self.check is not None:
            return cast(IO[bytes], _Checked(self.path, self.check))
        if self.gzip:
            return cast(IO[bytes], gzip.open(self.path, "rb"))
        return self.path.open("rb")

    def read_bytes(self) -> bytes:
        """The whole content (for small files and tests)."""
        with self.open() as fh:
            return fh.read()

    def confirm(self) -> None:
        """Read it all once more when its checks wait for its end (``check``)."""
        if self.check is not None:
            # In this thread: no second inflating thread beside what the refused read holds.
            for _chunk in _verified_chunks(self.path, self.check):
                pass


class _Checked(io.RawIOBase):
    """A gzip file inflated, counted and hashed ahead in a thread; its end refused on a mismatch."""

    def __init__(self, path: Path, check: RawCheck) -> None:
        super().__init__()
        self._check = check
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(_AHEAD)
        self._stop = threading.Event()
        self._left = b""
        self._error: BaseException | None = None
        self._done = False
        self._thread = threading.Thread(
            target=self._inflate, args=(path,), name="errkb-gunzip", daemon=True
        )
        self._thread.start()

    def _inflate(self, path: Path) -> None:
        try:
            for chunk in _verified_chunks(path, self._check, self._stop):
                self._put(chunk)
            self._put(b"")
        except BaseException as exc:
            # Any error is handed to the reader: a thread that died silently would leave it waiting.
            self._put(exc)

    def _put(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(_CHUNK), b""))
        if not self._left:
            if self._error is not None:
                raise self._error
            if self._done:
                return b""
            item = self._queue.get()
            if isinstance(item, BaseException):
                self._error = item
                raise item
            if not item:
                self._done = True
                return b""
            self._left = item
        chunk, self._left = self._left[:size], self._left[size:]
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def finish(self) -> None:
        """Read to the end: ``IntegrityError`` (or the cap's ``SyncError``) if it does not match."""
        while self.read(_CHUNK):
            pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        super().close()


#: Decompressed chunks ``_Checked``'s thread holds ready at most (``_INFLATED`` bytes each).
_AHEAD = 4
#: Compressed bytes read, and decompressed bytes made, per call of zlib in ``_gunzipped``.
_DEFLATED = 4 << 20
_INFLATED = 4 << 20


def _gunzipped(path: Path, stop: threading.Event) -> Iterator[bytes]:
    """The decompressed bytes of the gzip file at ``path``, as ``gzip.open`` reads them."""
    inflater = None
    started = False
    with path.open("rb") as fh:
        pending = b""
        while not stop.is_set():
            if not pending:
                pending = fh.read(_DEFLATED)
                if not pending:
                    break
            if inflater is None:
                if started:
                    pending = pending.lstrip(b"\x00")  # padding after a member
                    if not pending:
                        continue
                inflater, started = zlib.decompressobj(31), True
            out = inflater.decompress(pending, _INFLATED)
            if inflater.eof:
                # What follows the member's end (``unused_data`` only).
                pending = inflater.unused_data
                inflater = None
            else:
                pending = inflater.unconsumed_tail
            if out:
                yield out
    if inflater is not None and not stop.is_set():
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")


def _raw_matches(where: str, size: int, digest: str, check: RawCheck) -> None:
    if check.size is not None and size != check.size:
        raise IntegrityError(
            f"{where}: {size} bytes decompressed, but the manifest says "
            f"{check.size}; nothing changed"
        )
    if check.sha256 is not None and digest != check.sha256:
        raise IntegrityError(
            f"{where}: decompressed sha256 {digest} does not match the manifest's "
            f"rawSha256 {check.sha256}; nothing changed"
        )


def verify_file(
    fetched: Fetched, entry: FileEntry, *, max_bytes: int, streamed: bool = False
) -> Content:
    """Check ``entry``'s size and hashes against the fetched file; return its (raw) content.

    ``streamed``: the decompressed checks run as the caller reads to the end.
    """
    assert fetched.path is not None  # noqa: S101 - callers never pass a 304 here
    digest = hashlib.sha256()
    size = 0
    with fetched.path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            size += len(chunk)
            digest.update(chunk)
    if entry.bytes is not None and size != entry.bytes:
        raise IntegrityError(
            f"{fetched.where}: {size} bytes, but the manifest says {entry.bytes}; nothing changed"
        )
    if entry.sha256 is not None and digest.hexdigest() != entry.sha256:
        raise IntegrityError(
            f"{fetched.where}: sha256 {digest.hexdigest()} does not match the manifest's "
            f"{entry.sha256}; nothing changed"
        )
    if entry.encoding is None or entry.encoding == "identity":
        return Content(fetched.where, fetched.path)
    if entry.encoding != "gzip":
        raise SyncError(f"{fetched.where}: unsupported encoding {entry.encoding!r}")
    check = RawCheck(fetched.where, max_bytes, entry.raw_bytes, entry.raw_sha256)
    if streamed and entry.sha256 is not None:
        return Content(fetched.where, fetched.path, gzip=True, check=check)
    for _chunk in _verified_chunks(fetched.path, check):
        pass
    return Content(fetched.where, fetched.path, gzip=True)


def _verified_chunks(
    path: Path, check: RawCheck, stop: threading.Event | None = None
) -> Iterator[bytes]:
    """The decompressed bytes of ``path`` by chunks, checked as its entry says (``stop``: none)."""
    stop = stop or threading.Event()
    digest, total = hashlib.sha256(), 0
    try:
        for chunk in _gunzipped(path, stop):
            total += len(chunk)
            if total > check.cap:
                raise SyncError(
                    f"{check.where}: decompresses to over the {check.cap}-byte cap; nothing changed"
                )
            if check.size is not None and total > check.size:
                raise IntegrityError(
                    f"{check.where}: decompresses to more than the manifest's rawBytes "
                    f"{check.size}; nothing changed"
                )
            digest.update(chunk)
            yield chunk
    except (OSError, EOFError, zlib.error) as exc:
        raise IntegrityError(f"{check.where}: not a valid gzip file: {exc}") from None
    if not stop.is_set():
        _raw_matches(check.where, total, digest.hexdigest(), check)


class _Stream:
    """JSON values decoded one at a time from a UTF-8 stream, each at most ``max_value`` chars."""

    def __init__(self, fh: IO[bytes], where: str, max_value: int) -> None:
        self._fh, self.where, self._max = fh, where, max_value
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._decoder = json.JSONDecoder()
        # The C scanner behind raw_decode, called directly on the hot path (the stubs omit it).
        self.scan: Callable[[str, int], tuple[Any, int]] = self._decoder.scan_once  # type: ignore[attr-defined]
        self.buf, self.pos, self.eof = "", 0, False

    def error(self, what: str) -> IntegrityError:
        return IntegrityError(f"{self.where}: not valid JSON: {what}; nothing changed")

    def _fill(self, size: int) -> None:
        if self.eof:
            return
        try:
            data = self._fh.read(size)
            text = self._text.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise self.error(str(exc)) from None
        except (OSError, EOFError, zlib.error) as exc:
            raise IntegrityError(f"{self.where}: cannot read: {exc}") from None
        self.eof = not data
        self.buf = self.buf[self.pos :] + text  # drop what was consumed
        self.pos = 0

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self._fill(_CHUNK)

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"expected {char!r}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the next whole value, reading more while it runs past the window."""
        self.peek()
        size = _CHUNK
        while True:
            end = -1
            try:
                obj, end = self._decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise self.error(exc.msg) from None
            except RecursionError:
                raise self.error("nested too deeply") from None
            # A value that ends at the window's edge (a number) may go on in the next chunk.
            if end >= 0 and (end < len(self.buf) or self.eof):
                self.pos = end
                return obj
            if len(self.buf) - self.pos > self._max:
                raise SyncError(
                    f"{self.where}: holds a single value over {self._max} bytes "
                    "(the per-row limit); nothing changed"
                )
            self._fill(size)
            size *= 2


def _array_rows(
    source: bytes | Content,
    where: str,
    key: str,
    meta: dict[str, Any],
    what: str,
    max_row: int = MAX_ROW_BYTES,
) -> Generator[Any, None, None]:
    """Yield the array rows at ``key`` (or a bare array's); other members go to ``meta`` after."""
    with io.BytesIO(source) if isinstance(source, bytes) else source.open() as fh:
        try:
            yield from _array_body(fh, where, key, meta, what, max_row)
        except SyncError:
            if isinstance(fh, _Checked):
                fh.finish()  # a file other than the one hashed says so first
            raise


def _array_body(
    fh: IO[bytes], where: str, key: str, meta: dict[str, Any], what: str, max_row: int
) -> Iterator[Any]:
    """``_array_rows`` over an open stream."""
    stream = _Stream(fh, where, max_row)
    first = stream.peek()
    if first == "[":
        yield from _rows(stream)
    elif first == "{":
        stream.pos += 1
        found = False
        while stream.peek() != "}":
            if stream.peek() == "":
                raise stream.error("unexpected end")
            name = stream.value()
            if not isinstance(name, str):
                raise stream.error("an object key is not a string")
            stream.expect(":")
            if name == key and not found and stream.peek() == "[":
                found = True
                yield from _rows(stream)
            else:
                meta[name] = stream.value()
            if stream.peek() == ",":
                stream.pos += 1
            elif stream.peek() != "}":
                raise stream.error("expected ',' or '}'")
        stream.pos += 1
        if not found:
            raise SyncError(f"{where}: {what}")
    elif first == "":
        raise stream.error("the file is empty")
    else:
        raise SyncError(f"{where}: {what}")
    if stream.peek() != "":
        raise stream.error("extra data after the document")


def _rows(stream: _Stream) -> Iterator[Any]:
    stream.expect("[")
    if stream.peek() == "]":
        stream.pos += 1
        return
    scan = stream.scan
    bulk = _bulk_loads()
    # Where the last failed bulk parse ended, in which window: not tried again before it.
    tried_to, tried_in = -1, ""
    while True:
        buf, pos = stream.buf, stream.pos
        if bulk is not None and (pos > tried_to or buf is not tried_in):
            # Fastest path: every whole row left in the window at once (orjson), exactly the
            # scanner's rows; a row orjson refuses is read by the scanner.
            cut = buf.rfind("},", pos)
            rows = None
            while rows is None and cut - pos >= _BULK_MIN:
                try:
                    rows = bulk("[" + buf[pos : cut + 1] + "]")
                except ValueError as exc:
                    at = getattr(exc, "pos", None)
                    bad = pos + at - 1 if isinstance(at, int) and 0 < at <= cut + 1 - pos else cut
                    tried_to, tried_in = bad, buf
                    cut = buf.rfind("},", pos, min(bad, cut))
            if rows is not None:
                stream.pos = _WS.match(buf, cut + 2).end()  # type: ignore[union-attr]
                yield from rows
                continue
        # Fast path, most rows: a whole value then its separator, inside the window.
        try:
            obj, end = scan(buf, pos)
        except (StopIteration, json.JSONDecodeError, RecursionError):
            end = -1
        if 0 <= end < len(buf):
            char = buf[end]
            if char == ",":
                # Past the space a writer may put after the comma.
                stream.pos = _WS.match(buf, end + 1).end()  # type: ignore[union-attr]
                yield obj
                continue
            if char == "]":
                stream.pos = end + 1
                yield obj
                return
        # Anything else (whitespace, the window's edge, an error): the careful path.
        yield stream.value()
        char = stream.peek()
        stream.pos += 1
        if char == "]":
            return
        if char != ",":
            raise stream.error("expected ',' or ']' in the array")
        stream.peek()  # to the next value: the fast path's scanner does not skip whitespace


#: Text a bulk parse of rows must span at least (``_rows``): below it the scanner is as quick.
_BULK_MIN = 16 * 1024


def _bulk_loads() -> Callable[[str], Any] | None:
    """The ``loads`` of orjson where it is installed (``errkb[fast]``), else None."""
    fast = orjson_functions()
    return None if fast is None else fast[0]


@dataclass(frozen=True)
class IndexRows:
    """What the hashed index says: ids per repository, and an order-free digest of messages."""

    by_repo: dict[str, list[str]]
    digests: dict[str, str]
    #: Repositories whose digest was not summed (``read_index``'s ``digest``).
    undigested: frozenset[str] = frozenset()


_MOD = 1 << 256


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "\x01" + json.dumps(value)


def row_digest(rid: Any, msg: Any, pattern: Any, cls: Any) -> int:
    """One row's contribution to ``IndexRows.digests`` (the same for an index row and a record)."""
    if type(rid) is str and type(msg) is str and type(pattern) is str and type(cls) is str:
        # Nearly every row: one f-string, the same key as below.
        key = f"{rid}\x00{msg}\x00{pattern}\x00{cls}"
    else:
        key = "\x00".join((_text(rid), _text(msg), _text(pattern), _text(cls)))
    return int.from_bytes(_SHA256_OF(key.encode("utf-8", "surrogatepass")).digest(), "big")


_SHA256_OF = hashlib.sha256


def rows_digest(rows: Iterable[tuple[Any, Any, Any, Any]]) -> str:
    """The digest of a repository's (id, message, pattern, class) rows, in any order."""
    return format(sum(row_digest(*row) for row in rows) % _MOD, "064x")


class _IndexReader:
    """Rows of one index, read from one file or from every part of a split one."""

    def __init__(self, limits: Limits, digest: Callable[[str], bool] | None = None) -> None:
        self.limits = limits
        self.digest = digest
        self.by_repo: dict[str, list[str]] = {}
        self.sums: dict[str, int] = {}
        self.undigested: set[str] = set()
        self.seen: set[str] = set()
        self.duplicates: list[str] = []
        self.count = 0

    def read(self, raw: bytes | Content, where: str) -> dict[str, Any]:
        """Read one file's rows; return its other top-level members (``part``, ``parts``...)."""
        meta: dict[str, Any] = {}
        rows = _array_rows(
            raw, where, "errors", meta, "the index holds no 'errors' array", self.limits.row_bytes
        )
        try:
            self._read(rows, where)
        except SyncError:
            if isinstance(raw, Content) and raw.check is not None:
                # The stream closed first: confirming reads the file once more.
                rows.close()
                self.by_repo.clear()
                self.seen.clear()
                raw.confirm()
            raise
        return meta

    def _read(self, rows: Iterator[Any], where: str) -> None:
        by_repo, sums, seen = self.by_repo, self.sums, self.seen
        for n, row in enumerate(rows):
            if self.count >= self.limits.index_rows:
                raise SyncError(
                    f"{where}: lists more than {self.limits.index_rows} rows (the index row "
                    "limit); nothing changed"
                )
            self.count += 1
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("id"), str)
                or not isinstance(row.get("repo"), str)
            ):
                raise SyncError(f"{where}: index row {n} has no string id and repo")
            rid, repo = row["id"], row["repo"]
            if rid in seen:
                self.duplicates.append(rid)
            seen.add(rid)
            ids = by_repo.get(repo)
            if ids is None:
                if len(by_repo) >= self.limits.repos:
                    raise SyncError(
                        f"{where}: names more than {self.limits.repos} repositories (the "
                        "repository limit); nothing changed"
                    )
                ids = by_repo[repo] = []
                if self.digest is None or self.digest(repo):
                    sums[repo] = 0
                else:
                    self.undigested.add(repo)
            ids.append(rid)
            if sums.get(repo) is not None:
                if "msg" in row and "pattern" in row and "cls" in row:
                    sums[repo] += row_digest(rid, row["msg"], row["pattern"], row["cls"])
                else:
                    sums.pop(repo)  # an older index row: nothing to compare but the ids

    def result(self, where: str) -> IndexRows:
        if self.duplicates:
            raise IntegrityError(f"{where}: ids listed more than once: {some_ids(self.duplicates)}")
        digests = {repo: format(total % _MOD, "064x") for repo, total in self.sums.items()}
        return IndexRows(self.by_repo, digests, frozenset(self.undigested))


def read_index(
    raw: bytes | Content,
    where: str,
    dataset_version: str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    digest: Callable[[str], bool] | None = None,
) -> IndexRows:
    """Ids per repository and message digests (``IndexRows``) of ``{errors: [...]}`` or an array."""
    reader = _IndexReader(limits, digest)
    meta = reader.read(raw, where)
    other = meta.get("datasetVersion")
    if isinstance(other, str) and other != dataset_version:
        raise IntegrityError(
            f"{where}: index is for datasetVersion {other}, the manifest for {dataset_version}"
        )
    return reader.result(where)


def read_index_parts(
    parts: Sequence[Content],
    where: str,
    dataset_version: str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    digest: Callable[[str], bool] | None = None,
) -> IndexRows:
    """The rows of a split index: every part read, then the parts checked as one whole.

    Each part carries the manifest's ``datasetVersion``, one ``parts`` count (at most
    :data:`MAX_INDEX_PARTS`) and a distinct number 1..parts; else one error, before any write.
    """
    reader = _IndexReader(limits, digest)
    numbers: dict[int, str] = {}
    counts: set[int] = set()
    for content in parts:
        meta = reader.read(content, content.where)
        version = meta.get("datasetVersion")
        part, count = _int_or_none(meta.get("part")), _int_or_none(meta.get("parts"))
        if version != dataset_version:
            raise IntegrityError(
                f"{content.where}: index part is for datasetVersion {version!r}, the manifest "
                f"for {dataset_version}; nothing changed"
            )
        if part is None or count is None:
            raise IntegrityError(
                f"{content.where}: an index part needs integer 'part' and 'parts' members "
                f"(found {meta.get('part')!r} and {meta.get('parts')!r}); nothing changed"
            )
        if count > MAX_INDEX_PARTS:
            # Checked before 1..parts is listed or a number shown.
            raise IntegrityError(
                f"{content.where}: the index part says the index has more than "
                f"{MAX_INDEX_PARTS} parts (the index part limit); nothing changed"
            )
        if count < 1 or not 1 <= part <= count:
            raise IntegrityError(
                f"{content.where}: index part {part} of {count} is out of range (parts count "
                "from 1); nothing changed"
            )
        if part in numbers:
            raise IntegrityError(
                f"{content.where}: index part {part} of {count} is listed twice (also "
                f"{numbers[part]}); nothing changed"
            )
        numbers[part] = content.where
        counts.add(count)
    if len(counts) > 1:
        raise IntegrityError(
            f"{where}: the index parts disagree on how many parts there are "
            f"({', '.join(map(str, sorted(counts)))}); nothing changed"
        )
    total = counts.pop() if counts else 0
    missing = [n for n in range(1, total + 1) if n not in numbers]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        raise IntegrityError(
            f"{where}: index part(s) {shown} of {total} are not listed in the manifest "
            f"(it lists {len(parts)}); nothing changed"
        )
    return reader.result(where)


def parse_repos(
    raw: bytes | Content, where: str, limits: Limits = DEFAULT_LIMITS
) -> dict[str, RepoInfo]:
    """``repos.json`` (a bare array or ``{repos: [...]}``), by repository name."""
    out: dict[str, RepoInfo] = {}
    rows = _array_rows(
        raw, where, "repos", {}, "repos.json holds no array of repositories", limits.row_bytes
    )
    for n, entry in enumerate(rows):
        if n >= limits.repos:
            raise SyncError(
                f"{where}: lists more than {limits.repos} repositories (the repository limit); "
                "nothing changed"
            )
        if not isinstance(entry, dict) or not isinstance(entry.get("repo"), str):
            raise SyncError(f"{where}: repos.json entry {n} has no string 'repo'")
        sha, changed = entry.get("analyzedSha"), entry.get("contentChangedAt")
        out[entry["repo"]] = RepoInfo(
            entry["repo"],
            sha if isinstance(sha, str) else None,
            changed if isinstance(changed, str) else None,
            _int_or_none(entry.get("errorCount")),
        )
    return out


def check_value_count(path: Path, where: str, max_values: int, max_bytes: int) -> None:
    """Refuse a repository file holding more than ``max_values`` JSON values, before parsing it."""
    bound = 1
    quotes = total = 0
    try:
        with path.open("rb") as raw:
            gunzip = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            fh = cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")) if gunzip else raw
            while chunk := fh.read(_CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    return  # over the byte cap: the reader refuses it, naming that cap
                bound += chunk.count(b"{") + 2 * chunk.count(b"[")
                bound += chunk.count(b",") + chunk.count(b":")
                quotes += chunk.count(b'"')
                if bound + quotes // 2 > max_values:
                    raise SyncError(
                        f"{where}: holds more than {max_values} JSON values (the repository "
                        "file value limit); nothing changed"
                    )
    except (OSError, EOFError, zlib.error):
        return  # unreadable: the reader says so, with the file and the reason


def some_ids(ids: list[str], limit: int = 10) -> str:
    shown = ", ".join(sorted(ids)[:limit])
    return shown + (f" ... ({len(ids)} in all)" if len(ids) > limit else "")


#: Where the site publishes its Draft-07 JSON Schema of the dataset, and the most it may take.
SCHEMA_PATH = "schema.json"
SCHEMA_MAX_BYTES = 4 * 1024 * 1024


def schema_warnings(raw: bytes, where: str, known: Iterable[str]) -> tuple[str, ...]:
    """What upstream's ``schema.json`` requires of a record that errkb does not know (warnings)."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return (f"{where}: not valid JSON ({exc}); the dataset's schema was not compared",)
    names = set(known)
    missing: set[str] = set()
    found = False
    stack, seen = [doc], 0
    while stack and seen < 100_000:  # bounded: a hostile schema is as large as its cap
        node = stack.pop()
        seen += 1
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        props = node.get("properties")
        if isinstance(props, dict) and "errorMessage" in props and "messagePattern" in props:
            found = True
            required = node.get("required")
            if isinstance(required, list):
                missing.update(str(r) for r in required if isinstance(r, str) and r not in names)
        stack.extend(node.values())
    if not found:
        return (f"{where}: holds no record schema errkb recognises; not compared",)
    return tuple(
        f"{where}: upstream's schema makes record field {name!r} required; errkb does not know "
        "it (kept verbatim, not validated: a newer errkb may read it)"
        for name in sorted(missing)
    )
