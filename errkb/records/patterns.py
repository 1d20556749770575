"""Compiling a record's message into a safe, anchored matcher.

Dataset patterns are untrusted JavaScript regexes, so: every dataset-derived regex runs only
under RE2; it is end-anchored (a trailing ``(.+?)`` takes the whole value), and start-anchored
when the template starts with a placeholder; each capture is named after its placeholder and
compiled to its slot kind's grammar (``errkb.records.slots``; generic: upstream's ``(.+?)``).
When the messagePattern is upstream's mechanical derivation, the regex is built from the
template; a hand-written pattern is used when it compiles and agrees with the template, else
the template is used and ``PatternSpec.reason`` says why (``errkb lint``). ``PatternSpec`` is a
plain value.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from errkb import _lazy
from errkb.records.slots import SELF_DELIMITING, TAIL, SlotKind, grammar, infer_kinds
from errkb.records.specificity import specificity

if TYPE_CHECKING:
    from errkb.records.template import Placeholder, Template

#: Prefilter anchors shorter than this match too much text to be useful.
MIN_ANCHOR_CHARS = 4
#: The version of what ``compile_record`` makes of a record: bump it with any change that can
#: give a record another ``PatternSpec``. A store notes it (meta ``compiler``) and a write into
#: one compiled by another version compiles every record again. 2: a value printed plainly
#: twice takes one kind. 3: each spec carries its template's specificity.
COMPILER_VERSION = 3
#: Each regex metacharacter and its escape: a translation, not a regex (no compile when cold).
_RE2_ESCAPES = str.maketrans({c: "\\" + c for c in "\\.^$|?*+()[]{}"})
#: A function definition in a record's sourceCode: ``_DEF_AT`` (a literal first), its line up
#: to the ``def`` ``_DEF_LEAD``.
_DEF_AT = _lazy.pattern(r"def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_DEF_LEAD = _lazy.pattern(r"\s*(?:async\s+)?")


def _functions(source: str) -> tuple[str, ...]:
    """The names of the functions ``source`` defines, distinct, in order (``_DEF_AT``)."""
    lead = _DEF_LEAD()
    names = []
    for m in _DEF_AT().finditer(source):
        start = m.start()
        if lead.fullmatch(source, source.rfind("\n", 0, start) + 1, start) is not None:
            names.append(m.group(1))
    return tuple(dict.fromkeys(names))


class PatternOrigin(enum.StrEnum):
    """Where a record's compiled regex came from."""

    TEMPLATE = "template"  #: built from errorMessage (messagePattern is its plain derivation)
    MESSAGE_PATTERN = "messagePattern"  #: a hand-written messagePattern, used as is
    FALLBACK = "fallback"  #: messagePattern unusable; built from errorMessage (see reason)


@dataclass(frozen=True)
class PatternSpec:
    """Everything the matcher needs about one record, as plain data."""

    record_id: str
    regex: str  #: RE2 syntax, anchored, groups named c0..cN
    names: tuple[str, ...]  #: capture name of group cI
    repr_groups: tuple[bool, ...]  #: group cI is a ``!r`` value: strip its quotes
    anchor: str  #: the literal the prefilter looks for ("" = no usable anchor)
    literal_length: int
    origin: PatternOrigin
    reason: str | None
    error_class: str | None
    file_path: str
    line_number: int | None
    functions: tuple[str, ...]  #: functions defined in the record's sourceCode window
    template: str  #: the errorMessage
    #: The template's literal texts, each held as is by a text the template's own regex matches.
    literals: tuple[str, ...] = ()
    #: The slot kind of group cI; () when not inferred (then a generic slot).
    kinds: tuple[str, ...] = ()
    #: The template's specificity; None in a row stored before it (``specificity_of``).
    specificity: float | None = None


@functools.lru_cache(maxsize=1 << 14)
def _computed_specificity(template: str) -> float:
    return specificity(template)


def specificity_of(spec: PatternSpec) -> float:
    """The spec's specificity: stored, or computed from its template (rows before it was)."""
    if spec.specificity is not None:
        return spec.specificity
    return _computed_specificity(spec.template)


def re2_escape(text: str) -> str:
    r"""Escape regex metacharacters only (RE2's own escape turns every symbol into ``\x``)."""
    return text.translate(_RE2_ESCAPES)


#: What ``compile_record`` builds a record's matcher from, as (JSON name, ``records`` column).
SPEC_INPUTS: tuple[tuple[str, str], ...] = (
    ("id", "id"),
    ("errorMessage", "error_message"),
    ("messagePattern", "message_pattern"),
    ("errorClass", "error_class"),
    ("filePath", "file_path"),
    ("lineNumber", "line_number"),
    ("sourceCode", "source_code"),
)


def spec_key(values: Sequence[object]) -> str:
    """The sha256 of a record's ``SPEC_INPUTS`` values, in order (equal keys: no compile)."""
    import hashlib  # OpenSSL costs ~3 ms at import: only a sync gets here

    text = json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def record_spec_key(record: Mapping[str, Any]) -> str:
    """``spec_key`` of a record's JSON."""
    return spec_key([record.get(name) for name, _column in SPEC_INPUTS])


def compile_record(
    record_id: str,
    error_message: str,
    message_pattern: str,
    *,
    error_class: str | None = None,
    file_path: str = "",
    line_number: int | None = None,
    source_code: str | None = None,
    template: Template | None = None,
) -> PatternSpec:
    """Build the PatternSpec of one record (never raises: a bad pattern falls back)."""
    from errkb.records.template import parse_template  # writes compile; explain reads specs

    if template is None:
        template = parse_template(error_message)
    kinds = tuple(inferred.kind for inferred in infer_kinds(template, source_code))
    origin, regex, reason = _choose_regex(template, message_pattern, kinds)
    functions = _functions(source_code or "")
    return PatternSpec(
        record_id=record_id,
        regex=regex,
        names=tuple(p.name for p in template.placeholders),
        repr_groups=tuple(p.is_repr for p in template.placeholders),
        anchor=choose_anchor(template),
        literal_length=template.literal_length,
        origin=origin,
        reason=reason,
        error_class=error_class,
        file_path=file_path,
        line_number=line_number,
        functions=functions,
        template=error_message,
        literals=template.literals if origin is not PatternOrigin.MESSAGE_PATTERN else (),
        # A hand-written messagePattern's groups are its own: their kinds are not known.
        kinds=tuple(k.value for k in kinds) if origin is not PatternOrigin.MESSAGE_PATTERN else (),
        specificity=specificity(template),
    )


def choose_anchor(template: Template) -> str:
    """The literal the prefilter scans for: the template's longest literal run."""
    best = max((t.strip() for t in template.literals), key=len, default="")
    return best if len(best) >= MIN_ANCHOR_CHARS else ""


def template_regex(template: Template, kinds: tuple[SlotKind, ...] = ()) -> str:
    """An anchored RE2 regex for the template, groups c0..cN in ``kinds``' slot grammars."""
    from errkb.records.template import Literal

    parts: list[str] = []
    index = 0
    for seg in template.segments:
        if isinstance(seg, Literal):
            parts.append(re2_escape(seg.text))
        else:
            kind = kinds[index] if index < len(kinds) else SlotKind.GENERIC
            parts.append(_group(index, seg, kind))
            index += 1
    if _judges_tail(template, kinds):
        parts.append(TAIL)
    return _anchor("".join(parts), _anchored_start(template))


def _judges_tail(template: Template, kinds: tuple[SlotKind, ...]) -> bool:
    """Tell whether text after the message can be told from it (a typed, self-ending template)."""
    from errkb.records.template import Literal

    count = len(template.placeholders)
    if not template.segments or not any(k in SELF_DELIMITING for k in kinds[:count]):
        return False
    if isinstance(template.segments[-1], Literal):
        return True
    return len(kinds) >= count and kinds[count - 1] in SELF_DELIMITING


def _anchored_start(template: Template) -> bool:
    """Tell whether the regex is start-anchored: a template starting with, or without, a value."""
    return template.starts_with_placeholder or not template.placeholders


def _group(index: int, placeholder: Placeholder, kind: SlotKind = SlotKind.GENERIC) -> str:
    return f"(?P<c{index}>{grammar(kind, placeholder)})"


def _anchor(body: str, start: bool) -> str:
    # (?s): a value may span lines. $ without (?m) is the end of the text in RE2.
    return "(?s)" + ("^" if start else "") + "(?:" + body + ")$"


def _choose_regex(
    template: Template, pattern: str, kinds: tuple[SlotKind, ...] = ()
) -> tuple[PatternOrigin, str, str | None]:
    from errkb.records import upstream

    own = template_regex(template, kinds)
    if template.placeholders and pattern == upstream.template_pattern(template):
        return PatternOrigin.TEMPLATE, own, None
    converted, groups = _name_groups(pattern)
    if converted is None:
        return PatternOrigin.FALLBACK, own, "messagePattern has unbalanced groups"
    if groups != len(template.placeholders):
        why = (
            f"messagePattern has {groups} capture group(s) but errorMessage has "
            f"{len(template.placeholders)} placeholder(s)"
        )
        return PatternOrigin.FALLBACK, own, why
    regex = _anchor(converted, _anchored_start(template))
    error = compile_error(regex)
    if error is not None:
        return PatternOrigin.FALLBACK, own, f"messagePattern does not compile under RE2: {error}"
    if not _agrees(regex, template):
        return (
            PatternOrigin.FALLBACK,
            own,
            "messagePattern does not match its own errorMessage rendered with sample values",
        )
    return PatternOrigin.MESSAGE_PATTERN, regex, None


def _name_groups(pattern: str) -> tuple[str | None, int]:
    """Rename capturing groups (``(...)`` and JS ``(?<n>...)``) to c0..cN; count them."""
    out: list[str] = []
    i, n, count, depth = 0, len(pattern), 0, 0
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
        elif ch == "(":
            depth += 1
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                close = pattern.find(">", i)
                if close < 0:
                    return None, count
                out.append(f"(?P<c{count}>")
                count += 1
                i = close + 1
                continue
            if pattern.startswith("(?", i):
                out.append(ch)
            else:
                out.append(f"(?P<c{count}>")
                count += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return None, count
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return ("".join(out) if depth == 0 else None), count


def compile_error(regex: str) -> str | None:
    """None when RE2 accepts ``regex``; otherwise RE2's complaint."""
    try:
        compile_re2(regex)
    except Exception as exc:  # re2 raises its own error type
        return str(exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc)
    return None


@functools.lru_cache(maxsize=16)
def compile_re2(regex: str) -> Any:
    """Compile under RE2 with quiet options, keeping the last few programs (shared, immutable)."""
    import re2

    return re2.compile(regex, re2_options())


@functools.cache
def re2_options(*, latin1: bool = False) -> Any:
    """The RE2 options every dataset regex is compiled with (``latin1``: bytes read as Latin-1)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    # Bound the automaton's memory: a hostile pattern gets an error, not gigabytes.
    options.max_mem = 8 << 20
    if latin1:
        options.encoding = re2.Options.Encoding.LATIN1
    return options


def _agrees(regex: str, template: Template) -> bool:
    """Check that ``regex`` matches the template rendered with sample values, capturing them."""
    compiled = compile_re2(regex)
    # Two sample sets: words, and numbers (a hand-written pattern may type a value as \d+).
    for sample in ("v{}x", "1{}7"):
        values = {name: sample.format(i) for i, name in enumerate(template.names)}
        match = compiled.search(template.render(values))
        if match is not None and all(
            (unquote(match.group(f"c{i}")) if p.is_repr else match.group(f"c{i}")) == values[p.name]
            for i, p in enumerate(template.placeholders)
        ):
            return True
    return False


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def unquote(value: str) -> str:
    """Show a ``repr`` of a str without its quotes (``'enc.0'`` -> ``enc.0``), escapes decoded."""
    if len(value) < 2 or value[0] not in "'\"" or value[-1] != value[0]:
        return value
    body = value[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(nxt)
            digits = body[i + 2 : i + 2 + width] if width else ""
            if (
                width
                and len(digits) == width
                and all(c in "0123456789abcdefABCDEF" for c in digits)
            ):
                code = int(digits, 16)
                if code <= 0x10FFFF:
                    out.append(chr(code))
                    i += 2 + width
                    continue
        out.append(ch)
        i += 1
    return "".join(out)
