"""The formulas upstream (ErrLookup) uses to derive a record's id, slug and messagePattern.

Used to check ingested ids (off-formula: a warning) and to write upstream-shaped drafts.
"""

from __future__ import annotations

from errkb import _lazy
from errkb.records.template import Literal, Template, parse_template

#: Upstream falls back to the escaped literal message when a template has less literal text
#: than this: a pattern made mostly of wildcards would match nearly anything.
MIN_LITERAL_CHARS = 6

_SLUG_RUN = _lazy.pattern(r"[^a-z0-9]+")
_JS_METACHARS = _lazy.pattern(r"[.*+?^${}()|\[\]\\]")


def record_id(repo: str, error_code: str | None, error_message: str, file_path: str) -> str:
    r"""First 16 hex digits of sha256(repo \x01 (errorCode or errorMessage) \\x01 filePath)."""
    import hashlib  # here, not at import: loading OpenSSL costs the explain path start-up time

    key = "\x01".join((repo, error_code or error_message, file_path))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def slug(error_code: str | None, error_message: str) -> str:
    """First 50 chars of errorCode or errorMessage, lowercased, non-alphanumeric runs -> '-'."""
    text = (error_code or error_message)[:50].lower()
    return _SLUG_RUN().sub("-", text).strip("-")


def js_escape(text: str) -> str:
    """Escape ``text`` the way upstream's JavaScript escapes regex metacharacters."""
    return _JS_METACHARS().sub(lambda m: "\\" + m.group(0), text)


def message_pattern(error_message: str) -> str:
    """Derive messagePattern from errorMessage as upstream does (never run as is by errkb).

    Placeholders become ``(.+?)``, literals are escaped; too little literal text gives the
    escaped message.
    """
    return template_pattern(parse_template(error_message))


def template_pattern(template: Template) -> str:
    """``message_pattern`` of an already parsed errorMessage (compiling a record parses it once)."""
    if template.literal_length < MIN_LITERAL_CHARS or not template.placeholders:
        return js_escape(template.source)
    return "".join(
        js_escape(seg.text) if isinstance(seg, Literal) else "(.+?)" for seg in template.segments
    )
