"""Rendering reports for people and tools: one registry keyed by (report type, format).

A renderer registers each pair with :func:`renders`; :func:`formats` lists a type's formats
(the CLI offers those) and :func:`render` refuses an unregistered pair
(:class:`~errkb.errors.UsageError`). Human formats get a copy with control characters
escaped (:func:`sanitize`); machine formats stay exact and never hold ``NaN``. Pure; the
renderer modules load on first :func:`render`.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from errkb import _json
from errkb.errors import UsageError

R = TypeVar("R")


class OutputFormat(enum.StrEnum):
    """Every output format of every command (each command offers those its report has)."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
    SARIF = "sarif"  #: SARIF 2.1.0, for code-scanning tools
    GITHUB = "github"  #: GitHub Actions workflow commands (annotations)
    JSONL = "jsonl"  #: one JSON object a line (triage's rows, for a warehouse)
    CSV = "csv"  #: a header and one row a line (triage's rows)
    HTML = "html"  #: one self-contained page (inline CSS and JS, no network)


#: Formats read by people: their strings are sanitised (machine formats stay exact).
HUMAN_FORMATS = frozenset(
    {OutputFormat.TEXT, OutputFormat.MARKDOWN, OutputFormat.GITHUB, OutputFormat.HTML}
)


@dataclass(frozen=True)
class RenderOptions:
    """What a renderer may need beyond the report."""

    color: bool = False  #: ANSI styling allowed (a terminal, colour not disabled)
    #: The inputs' text by name ("-" for standard input): the HTML page shows the log itself.
    sources: Mapping[str, str] | None = None
    #: The inputs' names, in order ("-" for standard input): where CI formats put annotations.
    inputs: tuple[str, ...] = ()


Renderer = Callable[[R, RenderOptions], str]

_REGISTRY: dict[tuple[type[Any], OutputFormat], Renderer[Any]] = {}

#: The module registering each report type's renderers, by type name, imported on first use.
_MODULES = {
    "Report": "errkb.render.explain",
    "RecordView": "errkb.render.explain",
    "CheckReport": "errkb.render.check",
    "RecordList": "errkb.render.tables",
    "Stats": "errkb.render.tables",
    "IngestReport": "errkb.render.tables",
    "Diagnostics": "errkb.render.tables",
    "LintReport": "errkb.render.tables",
    "SyncReport": "errkb.render.sync",
    "UpdateCheck": "errkb.render.sync",
    "VersionList": "errkb.render.sync",
    "RecordHistory": "errkb.render.sync",
    "SearchReport": "errkb.render.search",
    "TriageReport": "errkb.render.triage",
}
#: Renderers of one format kept out of the type's module, imported only when asked for.
_FORMAT_MODULES = {
    ("Report", OutputFormat.HTML): "errkb.render.html",
    ("TriageReport", OutputFormat.HTML): "errkb.render.html",
    ("Report", OutputFormat.GITHUB): "errkb.render.ci",
    ("Report", OutputFormat.SARIF): "errkb.render.ci",
    ("TriageReport", OutputFormat.GITHUB): "errkb.render.ci",
    ("TriageReport", OutputFormat.MARKDOWN): "errkb.render.ci",
}


def renders(report_type: type[R], fmt: OutputFormat) -> Callable[[Renderer[R]], Renderer[R]]:
    """Register the decorated function as the renderer of ``report_type`` in ``fmt``."""

    def register(fn: Renderer[R]) -> Renderer[R]:
        key = (report_type, fmt)
        if key in _REGISTRY:
            raise RuntimeError(f"two renderers for {report_type.__name__} as {fmt.value}")
        _REGISTRY[key] = fn
        return fn

    return register


def renders_json(
    report_type: type[R], to_json: Callable[[R], object], *, ensure_ascii: bool = True
) -> None:
    """Register ``report_type``'s JSON renderer: ``to_json(report)`` as :func:`json_text`."""
    renders(report_type, OutputFormat.JSON)(
        lambda report, _options: json_text(to_json(report), ensure_ascii=ensure_ascii)
    )


def _load(report_type: type[Any] | None = None) -> None:
    if report_type is None:
        for module in sorted(set(_MODULES.values()) | set(_FORMAT_MODULES.values())):
            importlib.import_module(module)
    elif report_type.__name__ in _MODULES:
        importlib.import_module(_MODULES[report_type.__name__])


def formats(report_type: type[Any]) -> tuple[OutputFormat, ...]:
    """The formats registered for ``report_type``, in enum order."""
    _load(report_type)
    name = report_type.__name__
    return tuple(
        fmt
        for fmt in OutputFormat
        if (report_type, fmt) in _REGISTRY or (name, fmt) in _FORMAT_MODULES
    )


def registered() -> tuple[tuple[type[Any], OutputFormat], ...]:
    """Every registered (report type, format) pair."""
    _load()
    return tuple(_REGISTRY)


def render(report: object, fmt: OutputFormat | str, options: RenderOptions | None = None) -> str:
    """Render ``report`` in ``fmt``; UsageError when that pair has no renderer."""
    _load(type(report))
    try:
        key = (type(report), OutputFormat(fmt))
    except ValueError:
        raise UsageError(f"unknown output format {fmt!r}") from None
    if key not in _REGISTRY and (key[0].__name__, key[1]) in _FORMAT_MODULES:
        importlib.import_module(_FORMAT_MODULES[key[0].__name__, key[1]])
    renderer = _REGISTRY.get(key)
    if renderer is None:
        raise UsageError(f"{type(report).__name__} has no {key[1].value} output")
    options = options or RenderOptions()
    if key[1] in HUMAN_FORMATS:
        report = sanitize(report)  # the records a report carries too
        if options.sources is not None:
            options = dataclasses.replace(options, sources=sanitize(dict(options.sources)))
    return renderer(report, options)


def json_text(value: object, *, ensure_ascii: bool = True) -> str:
    """``value`` as the indented, strict JSON (no NaN) every JSON renderer prints."""
    return _json.dumps(value, indent=2, ensure_ascii=ensure_ascii) + "\n"


def text_lines(lines: Iterable[str]) -> str:
    """Each line followed by a newline (nothing for no lines)."""
    return "".join(line + "\n" for line in lines)


# Our own pattern: C0 controls but tab and newline, DEL, C1, and the bidirectional overrides.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def sanitize_text(text: str) -> str:
    """Escape every terminal control character of ``text``, so it shows instead of acting."""
    return _UNSAFE.sub(_escape, text)


def sanitize(value: R) -> R:
    """A copy of ``value`` (a report, record, or any nesting of them) with sanitised strings."""
    return _clean(value)  # type: ignore[no-any-return]


def _clean(value: Any) -> Any:
    if isinstance(value, enum.Enum) or value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return sanitize_text(value) if _UNSAFE.search(value) else value
    if isinstance(value, Mapping):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_clean(v) for v in value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return dataclasses.replace(
            value, **{f.name: _clean(getattr(value, f.name)) for f in fields if f.init}
        )
    return value


__all__ = [
    "HUMAN_FORMATS",
    "OutputFormat",
    "RenderOptions",
    "formats",
    "registered",
    "render",
    "renders",
    "sanitize",
    "sanitize_text",
]
