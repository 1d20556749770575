"""What errkb offers a bot: the operations the MCP server and the HTTP API both expose.

``Service`` wraps ONE thread-safe ``KnowledgeBase`` per process, caps every input, and returns
exactly the objects ``--format json`` prints, whichever door a bot uses. Bad input raises an
``ErrkbError`` the transports turn into a tool error or an HTTP 4xx. Nothing here writes to the
knowledge base or needs an optional dependency (the transports, ``mcp_tools`` and ``http``, do).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.errors import ErrkbError, NotFoundError, UsageError

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase
    from errkb.report import Report
    from errkb.serve.workers import WorkerPool

#: Largest text an explain (or a search query) accepts through a service.
MAX_TEXT_CHARS = 1 << 20
#: A single message is a line or a few, not a log.
MAX_MESSAGE_CHARS = 64 * 1024
MAX_KEY_CHARS = 256
MAX_PATH_CHARS = 4096
#: Seconds between two looks at the store's state counter while serving (one meta read each).
PREPARE_INTERVAL = 0.05


class AccessError(UsageError):
    """A path outside the roots the operator allowed (``--allow-path``)."""


class MissingExtraError(ErrkbError):
    """The MCP server and HTTP API need the ``errkb[mcp]`` extra, which is not installed."""


def require_extra(command: str) -> None:
    """Raise ``MissingExtraError`` naming the install command unless the MCP SDK imports."""
    try:
        import mcp.server.mcpserver  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(
            f"errkb {command} needs the MCP SDK ({exc.name or exc}): "
            "install the extra with: pip install 'errkb[mcp]'"
        ) from exc


@dataclass(frozen=True)
class Service:
    """The read-only operations a bot can call, over one shared knowledge base."""

    kb: KnowledgeBase
    allowed_paths: tuple[Path, ...] = ()  #: resolved roots ``check_checkpoint`` may read under
    #: Where explain, match and search run when set: worker processes a deadline can stop.
    pool: WorkerPool | None = None

    @classmethod
    def create(
        cls,
        kb: KnowledgeBase,
        allow_paths: Sequence[str | os.PathLike[str]] = (),
        pool: WorkerPool | None = None,
    ) -> Service:
        roots = []
        for root in allow_paths:
            resolved = Path(root).resolve()
            if not resolved.is_dir():
                raise UsageError(f"--allow-path {os.fspath(root)!r}: not a directory")
            roots.append(resolved)
        return cls(kb, tuple(roots), pool)

    @contextlib.contextmanager
    def preparing(self, interval: float = PREPARE_INTERVAL) -> Iterator[None]:
        """While serving: one thread builds each new state's artefacts; no request waits."""
        stop = threading.Event()
        self.kb.prepare_ahead = True

        def watch() -> None:
            while not stop.is_set():
                # A failed read is retried on the next look; requests report their own errors.
                with contextlib.suppress(ErrkbError):
                    self.kb.prepare()
                stop.wait(interval)

        thread = threading.Thread(target=watch, name="errkb-prepare", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.kb.prepare_ahead = False

    def explain(self, text: str, detail: str | None = None, offset: int = 0) -> dict[str, Any]:
        """Every known error in ``text``: the JSON object, or a ``detail`` page from ``offset``."""
        _cap("text", text, MAX_TEXT_CHARS)
        _check_view(detail, offset)
        if self.pool is not None:
            return self.pool.call("explain", {"text": text, "detail": detail, "offset": offset})
        return self.explain_local(text, detail, offset)

    def explain_json(self, text: str, detail: str | None = None, offset: int = 0) -> str:
        """``explain`` as JSON text, forwarded from a worker as it came (the HTTP route's body)."""
        _cap("text", text, MAX_TEXT_CHARS)
        _check_view(detail, offset)
        args = {"text": text, "detail": detail, "offset": offset}
        if self.pool is not None:
            return self.pool.call_json("explain", args)
        import json

        return json.dumps(self.explain_local(text, detail, offset))

    def explain_local(
        self, text: str, detail: str | None = None, offset: int = 0
    ) -> dict[str, Any]:
        """``explain`` in this process (what a worker runs)."""
        _cap("text", text, MAX_TEXT_CHARS)
        return _view(self.kb.explain(text), detail, offset)

    def match(
        self,
        message: str,
        error_class: str | None = None,
        detail: str | None = None,
        offset: int = 0,
    ) -> dict[str, Any]:
        """One exception message: the ``match --format json`` object (or a view of it)."""
        _cap("message", message, MAX_MESSAGE_CHARS)
        if not message.strip():
            raise UsageError("message is empty: give the exception's message text")
        if error_class is not None:
            _cap("errorClass", error_class, MAX_KEY_CHARS)
        _check_view(detail, offset)
        if self.pool is not None:
            args = {"message": message, "error_class": error_class, "detail": detail}
            return self.pool.call("match", {**args, "offset": offset})
        return self.match_local(message, error_class, detail, offset)

    def match_local(
        self,
        message: str,
        error_class: str | None = None,
        detail: str | None = None,
        offset: int = 0,
    ) -> dict[str, Any]:
        """``match`` in this process (what a worker runs)."""
        _cap("message", message, MAX_MESSAGE_CHARS)
        return _view(self.kb.match_message(message, error_class or None), detail, offset)

    def search(
        self,
        query: str,
        *,
        repo: str | None = None,
        tag: str | None = None,
        error_class: str | None = None,
        severity: str | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """Records by words, message or pasted traceback: the ``search --format json`` object."""
        _cap("query", query, MAX_TEXT_CHARS)
        for name, value in (("repo", repo), ("tag", tag), ("errorClass", error_class)):
            if value is not None:
                _cap(name, value, MAX_KEY_CHARS)
        args = {"repo": repo, "tag": tag, "error_class": error_class, "severity": severity}
        if self.pool is not None:
            return self.pool.call("search", {"query": query, **args, "limit": limit})
        return self.search_local(query, **args, limit=limit)

    def search_local(
        self,
        query: str,
        *,
        repo: str | None = None,
        tag: str | None = None,
        error_class: str | None = None,
        severity: str | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """``search`` in this process (what a worker runs)."""
        _cap("query", query, MAX_TEXT_CHARS)
        report = self.kb.search(
            query, repo=repo, tag=tag, error_class=error_class, severity=severity, limit=limit
        )
        return report.to_dict()

    def get_error(self, key: str) -> dict[str, Any]:
        """One record by id or slug: every field, validator backing, history summary."""
        _cap("id", key, MAX_KEY_CHARS)
        key = key.strip()
        if not key:
            raise UsageError("give a record id (16 hex digits) or slug")
        try:
            record_id = self.kb.record_id(key)
        except NotFoundError:
            raise NotFoundError(
                f"no record with id or slug {key!r} (search_errors finds records)"
            ) from None
        entries = self.kb.history(record_id).entries
        view = self.kb.view(record_id)
        return {
            "id": record_id,
            "retired": view.retired,
            "validator": view.validated,
            "record": view.record,
            "history": {
                "changes": len(entries),
                "firstVersion": entries[0].dataset_version if entries else None,
                "lastChanged": entries[-1].at if entries else None,
                "entries": [
                    {
                        "versionId": e.version_id,
                        "datasetVersion": e.dataset_version,
                        "kind": e.kind.value,
                        "change": e.change.value,
                        "at": e.at,
                        "retired": e.retired,
                    }
                    for e in entries
                ],
            },
        }

    def check_checkpoint(self, path: str) -> dict[str, Any]:
        """Pre-flight one checkpoint under an allowed root: the ``check --format json`` object."""
        from errkb.validators.preflight import check

        _cap("path", path, MAX_PATH_CHARS)
        if "\x00" in path:
            raise UsageError("path contains a NUL byte")
        if not self.allowed_paths:
            raise AccessError(
                "checking checkpoints is disabled: the operator allowed no directory "
                "(start the server with --allow-path DIR)"
            )
        # Symlinks resolved first: a link under an allowed root may point anywhere.
        resolved = Path(path).expanduser().resolve()
        if not any(
            resolved == root or resolved.is_relative_to(root) for root in self.allowed_paths
        ):
            allowed = ", ".join(str(r) for r in self.allowed_paths)
            raise AccessError(f"{path!r} is outside the allowed directories ({allowed})")
        if not resolved.exists():
            raise NotFoundError(f"{path!r}: no such file or directory")
        return check([resolved], within=self.allowed_paths).to_dict()

    def status(self) -> dict[str, Any]:
        """Dataset version, record and repository counts, and the last sync."""
        from errkb._resources import bundled_dataset_dir

        self.kb.refresh()
        stats = self.kb.stats()
        last = self.kb.latest_version()
        # Only the bundled sample while the last version applied is its ingest.
        sample = (
            last is not None
            and last.kind.value == "ingest"
            and last.source == str(bundled_dataset_dir())
        )
        return {
            "errkb": _version(),
            "datasetVersion": stats.dataset_version,
            "records": stats.records,
            "retired": stats.retired,
            "repos": stats.repos,
            "bundledSample": sample,
            "lastSync": None
            if last is None
            else {
                "versionId": last.id,
                "kind": last.kind.value,
                "source": None if last.source is None else redact_url(last.source),
                "at": last.finished_at,
                "datasetVersion": last.dataset_version,
            },
        }


def _version() -> str:
    from errkb import __version__

    return __version__


def redact_url(url: str) -> str:
    """``url`` without userinfo, query or fragment: what a status may show of a sync source."""
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if not parts.scheme or not parts.netloc:
        return url  # a local path
    netloc = parts.netloc.rpartition("@")[2]
    query = "<redacted>" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _check_view(detail: str | None, offset: int) -> None:
    from errkb.serve.views import Detail

    if detail is not None and detail not in tuple(Detail):
        choices = ", ".join(d.value for d in Detail)
        raise UsageError(f"detail must be one of {choices}, not {detail!r}")
    if offset < 0 or (offset and detail is None):
        raise UsageError(f"offset {offset} needs detail=compact or full and must be >= 0")


def _view(report: Report, detail: str | None, offset: int) -> dict[str, Any]:
    from errkb.serve.views import Detail, explanation_view

    _check_view(detail, offset)
    if detail is None:
        return report.to_dict()
    return explanation_view(report, Detail(detail), offset=offset).to_dict()


def _cap(name: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise UsageError(f"{name} is {len(value):,} characters; the limit is {limit:,}")
