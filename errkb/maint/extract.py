"""``errkb extract``: draft records from the raise sites of Python source.

Source is read with :mod:`ast` only (never imported or run). Every ``raise SomeError(<message>)``
whose message carries literal text becomes an upstream-shaped draft record: the template as
written, ``messagePattern``, ``id`` and ``slug`` by upstream's formulas, a source window, a
pinned ``githubUrl``, prose saying it is unreviewed. The template is built so that
:func:`errkb.records.template.parse_template` reads back exactly its parts. Known gaps: a
literal ``$`` right before ``{`` and a printf conversion followed by a letter or digit.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import json
import logging
import os
import re
import string
import tokenize
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from errkb.errors import InputError, UsageError
from errkb.records import upstream
from errkb.records.template import Placeholder, parse_template

__all__ = [
    "DEFAULT_SHA",
    "Field",
    "Part",
    "RaiseSite",
    "Text",
    "build_template",
    "extract",
    "github_url",
    "message_parts",
    "raise_sites",
    "write_jsonl",
]

log = logging.getLogger(__name__)

#: The ``--sha`` default: "commit unknown". Upstream pins every record to a real commit.
DEFAULT_SHA = "0" * 40
#: Lines of context kept on each side of the raise: upstream's windows are 18 + 1 + 18 lines.
CONTEXT_LINES = 18
MAX_SOURCE_LINES = 40
#: ``parse_template`` gives up on a field longer than 200 characters; stay well below.
MAX_FIELD_CHARS = 160

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
# Python's own printf grammar (what `str % args` accepts), not parse_template's.
_PRINTF = re.compile(
    r"%(?:\((?P<key>[^()]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?"
    r"(?P<conv>[diouxXeEfFgGcrsa%])"
)
_CONVERSIONS = {-1: "", ord("r"): "!r", ord("s"): "!s", ord("a"): "!a"}
_KEBAB_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_EXCEPTION_SUFFIXES = ("error", "exception", "warning", "exit", "interrupt", "failure")


@dataclass(frozen=True)
class Text:
    """Literal message text, as the program prints it (escapes decoded, braces single)."""

    text: str
    #: From a ``%``-format string: every ``%`` is written ``%%``, as in the source.
    printf: bool = False


@dataclass(frozen=True)
class Field:
    """A value substituted at run time, exactly as the template writes it: ``{prefix!r}``."""

    raw: str


Part = Text | Field
OnSkip = Callable[[str, str], None]


def unreviewed_fields() -> dict[str, Any]:
    """The fields every draft record leaves for a maintainer (extracted or triaged alike)."""
    return {
        "triggerScenarios": "Draft: trigger scenarios not yet reviewed.",
        "commonSituations": "Draft: common situations not yet reviewed.",
        "solutions": [],
        "exampleFix": None,
        "handlingStrategy": None,
        "validationCode": None,
        "typeGuard": None,
        "tryCatchPattern": None,
        "preventionTips": [],
    }


def message_parts(node: ast.expr, lines: Sequence[str]) -> list[Part]:
    """Split a message expression into parts; anything that is not a string is one field."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [Text(node.value)]
    if isinstance(node, ast.JoinedStr):
        return _fstring_parts(node, lines)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return message_parts(node.left, lines) + message_parts(node.right, lines)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = _constant_string(node.left)
        if fmt is not None:
            return _printf_parts(fmt)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        fmt = _constant_string(node.func.value)
        if fmt is not None:
            parts = _format_parts(fmt)
            if parts is not None:
                return parts
    return [Field(_field("{", _expression_text(node, lines), "}"))]


def _constant_string(node: ast.expr) -> str | None:
    """Return a string literal's value, or a ``+`` concatenation's (``"a" "b"`` is one)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_string(node.left), _constant_string(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def _fstring_parts(node: ast.JoinedStr, lines: Sequence[str]) -> list[Part]:
    parts: list[Part] = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(Text(value.value))
        elif isinstance(value, ast.FormattedValue):
            parts.append(Field(_formatted_value(value, lines)))
    return parts


def _formatted_value(node: ast.FormattedValue, lines: Sequence[str]) -> str:
    """``{expr!r:spec}`` as written: conversion and format spec kept, nested fields included."""
    conversion = _CONVERSIONS.get(node.conversion, "")
    spec = ""
    if isinstance(node.format_spec, ast.JoinedStr):
        pieces: list[str] = []
        for value in node.format_spec.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                pieces.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                pieces.append(_formatted_value(value, lines))
        spec = ":" + "".join(pieces)
    return _field("{", _expression_text(node.value, lines), conversion + spec + "}")


def _field(opening: str, expression: str, closing: str) -> str:
    raw = opening + expression + closing
    # A field the template parser would not read (too long) is kept a placeholder by an ellipsis.
    return raw if len(raw) <= MAX_FIELD_CHARS else opening + "..." + closing


def _expression_text(node: ast.expr, lines: Sequence[str]) -> str:
    """Return the expression's source text when trustworthy; ``ast.unparse`` otherwise."""
    text = _segment(lines, node)
    if text is None or "\n" in text or not _same_expression(text, node):
        # f-string positions are unreliable on some Pythons: a segment must parse back to the tree.
        text = ast.unparse(node)
    if text[:1] in ("'", '"', "{"):
        # Parentheses keep a field starting with a quote or "{" a placeholder, and valid Python.
        text = f"({text})"
    return text


def _segment(lines: Sequence[str], node: ast.expr) -> str | None:
    """Source text of ``node`` (``ast.get_source_segment`` re-splits the file on every call)."""
    end_line, end_col = node.end_lineno, node.end_col_offset
    if end_line is None or end_col is None or not 1 <= node.lineno <= end_line <= len(lines):
        return None
    # AST columns are UTF-8 byte offsets.
    first = lines[node.lineno - 1].encode("utf-8")
    if node.lineno == end_line:
        return first[node.col_offset : end_col].decode("utf-8", "replace")
    middle = lines[node.lineno : end_line - 1]
    last = lines[end_line - 1].encode("utf-8")[:end_col].decode("utf-8", "replace")
    head = first[node.col_offset :].decode("utf-8", "replace")
    return "\n".join([head, *middle, last])


def _same_expression(text: str, node: ast.expr) -> bool:
    try:
        parsed = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return False
    return ast.dump(parsed) == ast.dump(node)


def _format_parts(fmt: str) -> list[Part] | None:
    """Parts of a ``str.format`` template; None when Python itself would reject it."""
    parts: list[Part] = []
    try:
        for literal, name, spec, conversion in string.Formatter().parse(fmt):
            if literal:
                parts.append(Text(literal))
            if name is not None:
                raw = "{" + name + (f"!{conversion}" if conversion else "")
                raw += (f":{spec}" if spec else "") + "}"
                parts.append(Field(raw))
    except ValueError:
        return None
    return parts


def _printf_parts(fmt: str) -> list[Part]:
    """Parts of a ``%``-format template (``%%`` is literal text)."""
    parts: list[Part] = []
    pos = 0
    for m in _PRINTF.finditer(fmt):
        if m.start() > pos:
            parts.append(Text(fmt[pos : m.start()], printf=True))
        parts.append(Text("%", printf=True) if m.group("conv") == "%" else Field(m.group(0)))
        pos = m.end()
    if pos < len(fmt):
        parts.append(Text(fmt[pos:], printf=True))
    return parts


def build_template(parts: Sequence[Part]) -> str:
    """Write the errorMessage for ``parts``: ``parse_template`` reads the same parts back."""
    out: list[str] = []  # finished pieces, in reverse order
    for part in reversed(parts):
        if isinstance(part, Field):
            out.append(part.raw)
            continue
        for ch in reversed(part.text):
            if ch == "{":
                out.append("{{")
            elif ch == "}":
                out.append("}}")
            elif ch == "%" and (part.printf or _reads_as_conversion(out)):
                out.append("%%")
            else:
                out.append(ch)
    return "".join(reversed(out))


def _reads_as_conversion(following_reversed: list[str]) -> bool:
    """Tell whether a ``%`` before this (reversed) text would parse as more than a ``%``."""
    after: list[str] = []
    size = 0
    # A printf conversion is short; 80 characters of lookahead always decide.
    for piece in reversed(following_reversed):
        after.append(piece)
        size += len(piece)
        if size >= 80:
            break
    text = "%" + "".join(after)
    if text[1:2] == "%":
        return True  # "%%" would collapse into one "%"
    segments = parse_template(text).segments
    return bool(segments) and isinstance(segments[0], Placeholder)


@dataclass(frozen=True)
class RaiseSite:
    """One ``raise Class(message)`` with a message that has literal text."""

    line: int
    error_class: str | None
    template: str


def raise_sites(tree: ast.AST, lines: Sequence[str]) -> Iterator[RaiseSite]:
    """Every raise site of ``tree`` with a usable message, in source order."""
    raises = [n for n in _statements(tree) if isinstance(n, ast.Raise)]
    raises.sort(key=lambda n: (n.lineno, n.col_offset))
    for node in raises:
        site = _raise_site(node, lines)
        if site is not None:
            yield site


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement (and except handler, match case) of ``tree``: expressions are not visited."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for _name, value in ast.iter_fields(node):
            if isinstance(value, list):
                stack.extend(
                    v for v in value if isinstance(v, ast.stmt | ast.excepthandler | ast.match_case)
                )


def _raise_site(node: ast.Raise, lines: Sequence[str]) -> RaiseSite | None:
    call = node.exc
    if not isinstance(call, ast.Call):
        return None
    name = _callee_name(call.func)
    if name is None or not _looks_like_exception(name):
        return None
    message: ast.expr | None = None
    if call.args and not isinstance(call.args[0], ast.Starred):
        message = call.args[0]
    elif not call.args:
        message = next(
            (k.value for k in call.keywords if k.arg in ("msg", "message", "detail")), None
        )
    if message is None:
        return None
    parts = message_parts(message, lines)
    if not any(isinstance(p, Text) and p.text.strip() for p in parts):
        return None  # nothing literal to recognise the message by
    if all(isinstance(p, Text) for p in parts):
        # A message without fields is written as printed: upstream escapes it into the pattern.
        return RaiseSite(node.lineno, name, "".join(p.text for p in parts if isinstance(p, Text)))
    return RaiseSite(node.lineno, name, build_template(parts))


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr  # errors.Foo -> Foo: the class, not the module it came from
    return None


def _looks_like_exception(name: str) -> bool:
    """Accept class names (``ValueError``) and lowercase aliases (``re.error``, ``timeout``)."""
    return name[:1].isupper() or name.lower().endswith(_EXCEPTION_SUFFIXES) or name == "timeout"


def github_url(repo: str, sha: str, file_path: str, start: int, end: int | None = None) -> str:
    """Upstream's pinned link: ``https://github.com/<repo>/blob/<sha>/<path>#L<start>-L<end>``."""
    anchor = f"#L{start}" if end is None else f"#L{start}-L{end}"
    return f"https://github.com/{repo}/blob/{sha}/{quote(file_path, safe='/')}{anchor}"


def _kebab(name: str) -> str:
    return _NON_ALNUM.sub("-", _KEBAB_SPLIT.sub("-", name).lower()).strip("-")


def _window(lines: Sequence[str], line: int) -> tuple[str, int, int]:
    """Cut the source around ``line``: at most 40 lines as ``str.splitlines`` counts them."""
    start = max(1, line - CONTEXT_LINES)
    end = max(line, min(len(lines), line + CONTEXT_LINES))
    while True:
        code = "\n".join(lines[start - 1 : end])
        # splitlines also breaks at form feeds and other separators the AST does not count.
        if len(code.splitlines()) <= MAX_SOURCE_LINES or start == end:
            return code, start, end
        if end > line:
            end -= 1
        else:
            start += 1


def _record(
    site: RaiseSite, *, repo: str, sha: str, file_path: str, lines: Sequence[str], analyzed_at: str
) -> dict[str, Any] | None:
    message = site.template
    slug = upstream.slug(None, message)
    if not slug:
        return None  # no letters or digits in the first 50 characters: no valid slug
    code, start, end = _window(lines, site.line)
    where = f"{file_path} line {site.line}"
    cls = site.error_class
    tags = ["draft"] + ([_kebab(cls)] if cls and _kebab(cls) else [])
    return {
        "id": upstream.record_id(repo, None, message, file_path),
        "repo": repo,
        "slug": slug,
        "errorCode": None,
        "errorMessage": message,
        "messagePattern": upstream.message_pattern(message),
        "errorType": "exception",
        "errorClass": cls,
        "httpStatus": None,
        "severity": "error",
        "filePath": file_path,
        "lineNumber": site.line,
        "sourceCode": code,
        "sourceCodeStart": start,
        "sourceCodeEnd": end,
        "githubUrl": github_url(repo, sha, file_path, start, end),
        "documentation": (
            f"Draft: {cls or 'an exception'} raised at {where}; extracted automatically from "
            "the source, not yet reviewed."
        ),
        **unreviewed_fields(),
        "tags": tags,
        "backgroundTag": None,
        "analyzedSha": sha,
        "analyzedAt": analyzed_at,
        "schemaVersion": 2,
    }


def _encodable(text: str) -> bool:
    """Reject text with lone surrogates (an escaped surrogate in a literal): not UTF-8 JSON."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _excluded(rel: str, exclude: Sequence[str]) -> bool:
    """Match globs against the relative path and its last component (``tests``, ``*/v/*``)."""
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(name, g) for g in exclude)


def _python_files(path: Path, exclude: Sequence[str]) -> Iterator[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(path):
        here = Path(dirpath)
        dirnames[:] = [
            d
            for d in dirnames
            if not d.startswith(".")
            and d != "__pycache__"
            and not _excluded((here / d).relative_to(path).as_posix(), exclude)
        ]
        found.extend(
            here / f
            for f in filenames
            if f.endswith(".py") and not _excluded((here / f).relative_to(path).as_posix(), exclude)
        )
    yield from sorted(found)


def _targets(
    paths: Iterable[str | os.PathLike[str]],
    root: str | os.PathLike[str] | None,
    exclude: Sequence[str],
) -> Iterator[tuple[Path, str]]:
    """(file, its POSIX path relative to the scanned root) for every file to scan."""
    base = Path(root).absolute() if root is not None else None
    for arg in paths:
        p = Path(arg)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        files = _python_files(p, exclude) if p.is_dir() else iter([p])
        top = base or (p if p.is_dir() else p.parent).absolute()
        for file in files:
            try:
                rel = file.absolute().relative_to(top)
            except ValueError:
                raise UsageError(f"{file}: not under the root {top}") from None
            yield file, rel.as_posix()


def _read_source(path: Path) -> tuple[str, ast.Module]:
    """Decode (PEP 263 cookie honoured) and parse; never imports or executes anything."""
    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    with warnings.catch_warnings():
        # Invalid escape sequences in scanned code are its business, not a problem of ours.
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = ast.parse(text, filename=str(path))
    return text, tree


def _log_skip(path: str, reason: str) -> None:
    log.warning("skipped %s: %s", path, reason)


def extract(
    paths: Iterable[str | os.PathLike[str]],
    *,
    repo: str,
    sha: str = DEFAULT_SHA,
    root: str | os.PathLike[str] | None = None,
    exclude: Sequence[str] = (),
    analyzed_at: datetime | None = None,
    on_skip: OnSkip | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield a draft record for every raise site with a literal message under ``paths``.

    Files or directories (``*.py``, sorted, hidden and ``exclude``-matched ones left out);
    ``filePath`` relative to ``root`` (default: the argument's directory). An unreadable file goes
    to ``on_skip`` and is skipped. Records unique by id, stable order. UsageError for a bad
    ``repo`` or ``sha``, InputError for a missing path.
    """
    if not _REPO.match(repo):
        raise UsageError(f"repo must look like owner/name, got {repo!r}")
    sha = sha.lower()
    if not _SHA.match(sha):
        raise UsageError(f"sha must be 40 hexadecimal digits, got {sha!r}")
    when = (analyzed_at or datetime.now(UTC)).astimezone(UTC)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    skip = on_skip or _log_skip
    seen: set[str] = set()
    for file, rel in _targets(paths, root, exclude):
        try:
            text, tree = _read_source(file)
        except (SyntaxError, ValueError, LookupError, RecursionError, OSError) as exc:
            # UnicodeDecodeError is a ValueError; a bad coding cookie is a SyntaxError.
            skip(str(file), f"{type(exc).__name__}: {exc}")
            continue
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            sites = list(raise_sites(tree, lines))
        except RecursionError:
            skip(str(file), "expression nested too deeply")
            continue
        for site in sites:
            if not _encodable(site.template):
                skip(f"{file}:{site.line}", "message contains a lone surrogate")
                continue
            record = _record(
                site, repo=repo, sha=sha, file_path=rel, lines=lines, analyzed_at=stamp
            )
            if record is None or record["id"] in seen:
                continue
            seen.add(record["id"])
            yield record


def write_jsonl(records: Iterable[dict[str, Any]], fh: IO[str], *, envelope: bool = False) -> int:
    """Write one record (or ``{"record", "datasetVersion": null}`` envelope) per line; count."""
    count = 0
    for record in records:
        # A draft was published in no dataset version: null, as errkb export writes it.
        obj = {"record": record, "datasetVersion": None} if envelope else record
        fh.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        count += 1
    return count
