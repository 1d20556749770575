"""Message templates: a record's ``errorMessage`` split into literal text and placeholders.

Placeholders: f-string and ``str.format`` fields, JavaScript ``${name}`` and printf
conversions. Everything errkb does with a message starts from this one parse. A placeholder's
*name* is its expression without conversion or spec. Parsing never fails: a malformed field
stays literal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from errkb import _lazy

_PRINTF_CONVERSIONS = frozenset("sdifFgGeExXorcau")
_SPECIAL = _lazy.pattern(r"[{}%$]")


@dataclass(frozen=True)
class Literal:
    """Literal text of a template."""

    text: str


@dataclass(frozen=True)
class Placeholder:
    """One substituted value in a template."""

    name: str  #: the expression (``prefix``, ``tuple(loaded_weight.shape)``, ``arg1``)
    raw: str  #: the field exactly as written (``{prefix!r}``)
    conversion: str | None = None  #: ``r``, ``s`` or ``a`` for Python fields; None otherwise
    #: The format spec as written (``.3f``, a printf field's ``5.2f``), "" when none: slot kinds
    #: read it.
    spec: str = ""

    @property
    def is_repr(self) -> bool:
        """True when the value is printed with ``repr`` (``!r``, ``%r``, ``{repr(x)}``)."""
        if self.conversion == "r":
            return True
        return self.conversion in (None, "s") and _is_call_of("repr", self.name)


Segment = Literal | Placeholder


@dataclass(frozen=True)
class Template:
    """A parsed ``errorMessage``."""

    source: str
    segments: tuple[Segment, ...]

    @cached_property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(s for s in self.segments if isinstance(s, Placeholder))

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Placeholder names in template order, each once."""
        return tuple(dict.fromkeys(p.name for p in self.placeholders))

    @cached_property
    def literals(self) -> tuple[str, ...]:
        return tuple(s.text for s in self.segments if isinstance(s, Literal))

    @property
    def literal_length(self) -> int:
        """How much literal text the template has: the measure of how specific it is."""
        return sum(len(t) for t in self.literals)

    @property
    def starts_with_placeholder(self) -> bool:
        return bool(self.segments) and isinstance(self.segments[0], Placeholder)

    def render(self, values: dict[str, str]) -> str:
        """Substitute ``values`` (by placeholder name); a ``!r`` str value gets Python quotes."""
        out: list[str] = []
        for seg in self.segments:
            if isinstance(seg, Literal):
                out.append(seg.text)
            else:
                value = values.get(seg.name, seg.name)
                out.append(repr(value) if seg.is_repr else value)
        return "".join(out)

    def masked(self, mask: str = "\u2026") -> str:
        """The template with every placeholder replaced by ``mask`` (for fuzzy comparison)."""
        return "".join(s.text if isinstance(s, Literal) else mask for s in self.segments)


def _is_call_of(function: str, expr: str) -> bool:
    """Tell whether ``expr`` is one whole call of ``function``: ``repr(x)``, not ``repr(x)[:9]``."""
    if not (expr.startswith(function + "(") and expr.endswith(")")):
        return False
    return _closing(expr, len(function), len(expr)) == len(expr) - 1


def parse_template(message: str) -> Template:
    """Split ``message`` into literals and placeholders. Never raises."""
    segments: list[Segment] = []
    buf: list[str] = []
    positional = 0
    i, n = 0, len(message)

    def flush() -> None:
        if buf:
            segments.append(Literal("".join(buf)))
            buf.clear()

    special_re = _SPECIAL()
    while i < n:
        # Jump over plain text in one step: only these characters can start a field.
        special = special_re.search(message, i)
        if special is None:
            buf.append(message[i:])
            break
        if special.start() > i:
            buf.append(message[i : special.start()])
            i = special.start()
        ch = message[i]
        if ch == "{" and i + 1 < n and message[i + 1] == "{":
            buf.append("{")
            i += 2
            continue
        if ch == "}" and i + 1 < n and message[i + 1] == "}":
            buf.append("}")
            i += 2
            continue
        # "${{" is a literal "$" before an escaped brace, not a JavaScript field.
        if ch == "$" and message[i + 1 : i + 2] == "{" and message[i + 2 : i + 3] != "{":
            end = _matching_brace(message, i + 1)
            if end is not None:
                expr = message[i + 2 : end].strip()
                if expr:
                    flush()
                    segments.append(Placeholder(expr, message[i : end + 1]))
                    i = end + 1
                    continue
        if ch == "{":
            end = _matching_brace(message, i)
            if end is not None:
                field = message[i + 1 : end]
                name, conversion, spec = _split_field(field)
                if name is None and field and field[0] not in "!:":
                    name = ""  # "{ }" is prose; only an empty field ({}, {!r}, {:>4}) is numbered
                elif name is None:
                    positional += 1
                    name = f"arg{positional}"
                elif name.isdigit():
                    name = f"arg{int(name) + 1}"
                if _plausible_expression(name):
                    flush()
                    segments.append(Placeholder(name, message[i : end + 1], conversion, spec))
                    i = end + 1
                    continue
        if ch == "%" and i + 1 < n:
            parsed = _printf_field(message, i)
            if parsed is not None:
                end, key, conv = parsed
                if conv == "%":
                    buf.append("%")
                else:
                    flush()
                    if key is None:
                        positional += 1
                        key = f"arg{positional}"
                    segments.append(
                        Placeholder(
                            key,
                            message[i:end],
                            "r" if conv == "r" else None,
                            _printf_spec(message[i:end]),
                        )
                    )
                i = end
                continue
        buf.append(ch)
        i += 1
    flush()
    return Template(message, tuple(segments))


def _matching_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``start``, skipping nested brackets and strings."""
    # A field longer than this is not a placeholder but prose that happens to contain a brace.
    end = _closing(text, start, min(len(text), start + 200))
    return end if end is not None and text[end] == "}" else None


def _closing(text: str, start: int, limit: int) -> int | None:
    """Index of the bracket closing the one at ``start`` (before ``limit``), strings skipped."""
    depth = 0
    quote: str | None = None
    i = start
    while i < limit:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth <= 0:
                return i if depth == 0 else None
        i += 1
    return None


def _split_field(field: str) -> tuple[str | None, str | None, str]:
    """``prefix!r:>8`` -> (``prefix``, ``r``, ``>8``). Only top-level ``!`` and ``:`` count."""
    depth = 0
    quote: str | None = None
    conversion: str | None = None
    end = len(field)
    spec = ""
    for i, ch in enumerate(field):
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif depth == 0 and ch == "!" and field[i + 1 : i + 2] in ("r", "s", "a"):
            if i + 2 == len(field) or field[i + 2] == ":":
                conversion = field[i + 1]
                end = i
                spec = field[i + 3 :]
                break
        elif depth == 0 and ch == ":":
            end = i
            spec = field[i + 1 :]
            break
    name = field[:end].strip()
    # f-string debug form {x=} prints "x=<value>"; the expression is still x.
    if name.endswith("=") and not name.endswith(("==", "!=", "<=", ">=")):
        name = name[:-1].strip()
    return (name or None), conversion, spec


def _printf_spec(field: str) -> str:
    """``%(n)5.2f`` -> ``5.2f``: a printf field without its ``%`` and mapping key."""
    body = field[1:]
    if body.startswith("("):
        body = body[body.index(")") + 1 :]
    return body


def _plausible_expression(name: str) -> bool:
    """Reject brace pairs that are clearly prose or JSON, such as ``{"a": 1}`` or ``{ }``."""
    if not name or name[0] in "\"'" or "\n" in name:
        return False
    return not (name.startswith(("'", '"')) or (": " in name and name[0] == '"'))


def _printf_field(text: str, start: int) -> tuple[int, str | None, str] | None:
    """Parse a printf conversion at ``start`` -> (end, mapping key, conversion char)."""
    i = start + 1
    n = len(text)
    if i < n and text[i] == "%":
        return i + 1, None, "%"
    key: str | None = None
    if i < n and text[i] == "(":
        close = text.find(")", i, i + 64)
        if close < 0:
            return None
        key = text[i + 1 : close]
        if not key.isidentifier():
            return None
        i = close + 1
    while i < n and text[i] in "#0- +":
        i += 1
    while i < n and (text[i].isdigit() or text[i] == "*"):
        i += 1
    if i < n and text[i] == ".":
        i += 1
        while i < n and (text[i].isdigit() or text[i] == "*"):
            i += 1
    while i < n and text[i] in "hlL":
        i += 1
    if i < n and text[i] in _PRINTF_CONVERSIONS:
        # "100% done" is prose, not a conversion: require the conversion to end a word.
        if i + 1 < n and text[i + 1].isalnum() and key is None:
            return None
        return i + 1, key, text[i]
    return None
