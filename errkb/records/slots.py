"""Slot kinds: what kind of value each placeholder of a record's message prints.

Upstream's ``(.+?)`` takes anything; the template and the raise site's ``sourceCode`` say
what each value is. :func:`infer_kinds` infers one :class:`SlotKind` per placeholder when a
record is compiled; :func:`grammar` gives each kind's RE2 grammar: a value of another kind is
no match, and a self-delimiting value ending the message is followed only by :data:`TAIL`. An
uninferable placeholder is :attr:`SlotKind.GENERIC` (``(.+?)``; ``errkb lint`` reports it).
Every grammar is plain RE2 with bounded nesting (:data:`MAX_NESTING`): linear time. Kinds are
stored as their string values in ``PatternSpec.kinds``.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from errkb import _lazy

if TYPE_CHECKING:
    from errkb.records.template import Placeholder, Template


class SlotKind(enum.StrEnum):
    """The kind of value a placeholder prints."""

    GENERIC = "generic"  #: unknown: anything (upstream's ``(.+?)``)
    REPR = "repr"  #: a Python repr: a quoted string, a number, a container, a call, ``<...>``
    INT = "int"  #: an integer (``len(x)``, ``x.ndim``, ``{n:d}``, ``%d``, ``{n} bytes``)
    FLOAT = "float"  #: a number printed as a float (``{x:.3f}``, ``%f``, ``float(x)``)
    TUPLE = "tuple"  #: a balanced Python tuple (``tuple(...)``)
    SHAPE = "shape"  #: a tensor shape: a tuple or list of integers, or ``torch.Size([...])``
    LIST = "list"  #: a balanced Python list (``sorted(...)``, ``list(...)``)
    DTYPE = "dtype"  #: a dtype token: ``F32``, ``torch.bfloat16``, ``float8_e4m3fn``
    IDENT = "ident"  #: a dotted Python name (``type(x).__name__``)


#: Kinds whose grammar ends where the value ends (see :data:`TAIL`).
SELF_DELIMITING = frozenset(SlotKind) - {SlotKind.GENERIC}

#: How deep brackets may nest inside a tuple, list or repr value (RE2 has no recursion).
MAX_NESTING = 4


@dataclass(frozen=True)
class Inferred:
    """One placeholder's kind and why it was inferred (or why it stayed generic)."""

    kind: SlotKind
    reason: str


# -- grammars ----------------------------------------------------------------------------------

_QUOTED = r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*\""""
_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)"
_INT = r"[-+]?\d+"
_GROUPED_INT = r"[-+]?\d{1,3}(?:[,_]\d{3})*"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_DIM = r"\s*(?:-?\d+|None)\s*"
_INTS = rf"(?:{_DIM},)*(?:{_DIM})?"
_SHAPE = rf"\({_INTS}\)|\[{_INTS}\]|torch\.Size\(\[{_INTS}\]\)"


def _balanced(depth: int) -> str:
    """A bracketed value nested at most ``depth`` levels, quoted strings taken whole."""
    inner = r"""[^()\[\]{}'"]|""" + _QUOTED
    body = f"(?:{inner})*"
    for _ in range(depth - 1):
        body = rf"(?:{inner}|[(\[{{]{body}[)\]}}])*"
    return body


_BAL = _balanced(MAX_NESTING - 1)
_TUPLE = rf"\({_BAL}\)"
_LIST = rf"\[{_BAL}\]"
# One bracketed alternative stands for a tuple, a list, a dict and a call: a smaller regex.
_REPR = "|".join(
    (
        f"b?(?:{_QUOTED})",
        _NUMBER,
        rf"(?:{_NAME})?[(\[{{]{_BAL}[)\]}}]",
        _NAME,
        r"<[^<>\n]*>",
    )
)
_GRAMMARS: dict[SlotKind, str] = {
    SlotKind.REPR: _REPR,
    SlotKind.INT: _INT,
    SlotKind.FLOAT: _NUMBER,
    SlotKind.TUPLE: _TUPLE,
    SlotKind.SHAPE: _SHAPE,
    SlotKind.LIST: _LIST,
    SlotKind.DTYPE: _NAME,
    SlotKind.IDENT: _NAME,
}

#: What may follow a self-delimiting value that ends the message: spaces, a sentence end,
#: closing markup, a cell's edge, a closing quote or bracket; never a word or a line break.
TAIL = r"""(?:[ \t]*(?:[.!?;](?:[ \t][^\n]*)?|</[^\n]*|[|`*"')\]][^\n]*))?[ \t\r]*"""

#: Text after a message that is its container's on its last line (a closing tag, a cell's
#: edge), searched only in the last ``TRAILER_WINDOW`` characters.
_TRAILER = _lazy.pattern(r"(?:[ \t]*</[A-Za-z][^\n]*|[ \t]+\|(?:[^\n<]*\|)?)[ \t\r]*\Z")
TRAILER_WINDOW = 512


def trailer_start(text: str) -> int | None:
    """Where a container's trailer (``_TRAILER``) begins at the end of ``text``, if any."""
    start = max(text.rfind("\n") + 1, len(text) - TRAILER_WINDOW)
    if "</" not in text[start:] and "|" not in text[start:]:
        return None
    m = _TRAILER().search(text, start)
    return m.start() if m is not None and m.start() > 0 else None


def grammar(kind: SlotKind, placeholder: Placeholder) -> str:
    """The RE2 body of a slot of ``kind`` (no group around it)."""
    if kind is SlotKind.GENERIC:
        return f"{_QUOTED}|.+?" if placeholder.is_repr else ".+?"
    body = _GRAMMARS[kind]
    layout = _layout(placeholder)
    if layout.grouping and kind is SlotKind.INT:
        body = _GROUPED_INT
    elif layout.grouping and kind is SlotKind.FLOAT:
        body = rf"{_GROUPED_INT}(?:\.\d+)?(?:[eE][-+]?\d+)?"
    if kind is SlotKind.INT and layout.type in ("x", "X", "o", "b"):
        body = r"(?:0[xXob])?[0-9a-fA-F]+"
    if layout.type == "%":
        body = f"(?:{_NUMBER})%"
    if layout.padded:
        body = rf" *(?:{body}) *"  # padded to a width: spaces on either side (alignment)
    return body


class _Layout(NamedTuple):
    """What a placeholder's format spec does to the printed value (a named tuple: cheap to make)."""

    type: str = ""  #: the conversion type character ("" when none)
    padded: bool = False  #: a width: the value may be padded with spaces
    grouping: bool = False  #: thousands separators (``,`` or ``_``)


_PRINTF_SPEC = _lazy.pattern(
    r"(?P<flags>[#0\- +]*)(?P<width>\d+|\*)?(?:\.(?:\d+|\*))?[hlL]*(?P<type>.)"
)


def _layout(placeholder: Placeholder) -> _Layout:
    if placeholder.raw.startswith("%"):
        m = _PRINTF_SPEC().fullmatch(placeholder.spec)
        if m is None:
            return _Layout()
        return _Layout(m.group("type"), bool(m.group("width")) or " " in m.group("flags"))
    spec = _FormatSpec.parse(placeholder.spec) if placeholder.spec else None
    if spec is None:
        return _Layout()
    return _Layout(spec.type, spec.width, spec.grouping)


def sample(kind: SlotKind, index: int) -> str:
    """A distinctive value of ``kind`` (``index`` makes each placeholder's different)."""
    n = index + 2
    return {
        SlotKind.GENERIC: f"v{index}x",
        SlotKind.REPR: repr(f"v{index}x"),
        SlotKind.INT: str(n),
        SlotKind.FLOAT: f"{n}.5",
        SlotKind.TUPLE: f"({n}, 'v')",
        SlotKind.SHAPE: f"({n}, 1)",
        SlotKind.LIST: f"['v{index}x']",
        SlotKind.DTYPE: f"F{8 * n}",
        SlotKind.IDENT: f"V{index}x",
    }[kind]


# -- placeholders shown as values ---------------------------------------------------------------

_SHOWN = _lazy.pattern(r"<[A-Za-z_][A-Za-z_ .\-]*>|\{[A-Za-z_][A-Za-z0-9_.()\[\]!:,'\"]*\}")


def is_placeholder_text(value: str) -> bool:
    """Tell whether a captured value is a placeholder shown as such (``<prefix>``, ``{name}``)."""
    return value[:1] in ("<", "{") and _SHOWN().fullmatch(value) is not None


# -- inference ---------------------------------------------------------------------------------


class _FormatSpec(NamedTuple):
    """A Python format spec: ``[[fill]align][sign][z][#][0][width][grouping][.precision][type]``."""

    fill: str
    width: bool
    grouping: bool
    precision: bool
    type: str

    @classmethod
    def parse(cls, spec: str) -> _FormatSpec | None:
        m = _SPEC().fullmatch(spec)
        if m is None:
            return None
        return cls(
            m.group("fill") or (" " if m.group("align") else ""),
            bool(m.group("width")),
            bool(m.group("grouping")),
            bool(m.group("precision")),
            m.group("type") or "",
        )


_SPEC = _lazy.pattern(
    r"(?:(?P<fill>.)?(?P<align>[<>=^]))?[-+ ]?z?#?(?P<zero>0)?(?P<width>\d+)?"
    r"(?P<grouping>[,_])?(?P<precision>\.\d+)?(?P<type>[bcdeEfFgGnosxX%])?"
)
_SPEC_KINDS = {
    **dict.fromkeys("dnbcoxX", SlotKind.INT),
    **dict.fromkeys("eEfFgG%", SlotKind.FLOAT),
}
_SPEC_KINDS["c"] = SlotKind.GENERIC
_PRINTF_KINDS = {
    **dict.fromkeys("diuxXo", SlotKind.INT),
    **dict.fromkeys("eEfFgG", SlotKind.FLOAT),
}

#: Expression shapes, tried in order: (regex, kind, what it means).
_EXPRESSION_SHAPES: tuple[tuple[str, SlotKind, str], ...] = (
    # A whole call: ``repr(x)[:40]`` is a cut repr, any prefix of one.
    (r"^repr\((?:[^()]|\([^()]*\))*\)$", SlotKind.REPR, "repr(...) is a repr"),
    (r"^(?:len|int|ord|hash|id)\(", SlotKind.INT, "{0}(...) is an integer"),
    (
        r"\.(?:ndim|ndimension\(\)|numel\(\)|dim\(\)|nbytes|itemsize|element_size\(\))$",
        SlotKind.INT,
        "{0} is an integer",
    ),
    (r"^(?:float|round)\(", SlotKind.FLOAT, "{0}(...) is a number"),
    (
        r"^tuple\(.*(?:shape|get_shape\(\)|size\(\))",
        SlotKind.SHAPE,
        "tuple(...) of a shape is a shape",
    ),
    (r"^tuple\(", SlotKind.TUPLE, "tuple(...) is a tuple"),
    (
        r"(?:\.shape|\.get_shape\(\)|\.size\(\))$",
        SlotKind.SHAPE,
        "{0} is a shape",
    ),
    (r"^(?:sorted|list)\(", SlotKind.LIST, "{0}(...) is a list"),
    (r"^\[.*\bfor\b.*\]$", SlotKind.LIST, "a list comprehension is a list"),
    (r"(?:\.dtype|\.get_dtype\(\))$", SlotKind.DTYPE, "{0} is a dtype"),
    (
        r"(?:\.__name__|\.__qualname__)$",
        SlotKind.IDENT,
        "{0} is a Python name",
    ),
)
#: The last word of a bare name that says what it holds (``scale_shape``, ``weight_dtype``).
_NAME_WORDS = {
    "shape": SlotKind.SHAPE,
    "dtype": SlotKind.DTYPE,
    "ndim": SlotKind.INT,
    "numel": SlotKind.INT,
}


@functools.cache
def _expressions() -> tuple[tuple[re.Pattern[str], SlotKind, str], ...]:
    """``_EXPRESSION_SHAPES`` compiled, on first use: only compiling a record infers kinds."""
    return tuple((re.compile(rx), kind, why) for rx, kind, why in _EXPRESSION_SHAPES)


#: A unit right after the value: a count or an amount (plural units no name modifies).
_UNITS = _lazy.pattern(r"^ (?:bytes|elements|items|tokens|times|characters|chars|dimensions)\b")
_FLOAT_UNITS = _lazy.pattern(r"^(?: (?:seconds|secs|ms|s)|(?: ?)(?:MiB|GiB|KiB|MB|GB|KB))\b")
#: A label right before the value.
_LABELS = _lazy.pattern(r"\b(?P<word>shape|dtype|ndim|line|port)(?:=| )$")
_LABEL_KINDS = {
    "shape": SlotKind.SHAPE,
    "dtype": SlotKind.DTYPE,
    "ndim": SlotKind.INT,
    "line": SlotKind.INT,
    "port": SlotKind.INT,
}
_ANNOTATIONS = {"int": SlotKind.INT, "float": SlotKind.FLOAT, "torch.dtype": SlotKind.DTYPE}
_IDENTIFIER = _lazy.pattern(r"[A-Za-z_][A-Za-z0-9_]*")
#: A bare name, an attribute chain, a positional field (``{}``, ``{0}``) or a printf field.
_PLAIN_FIELD = _lazy.pattern(r"[A-Za-z_][\w.]*|\d*")
#: Kinds a repr prints exactly as str() does: ``{x!r}`` of one of these is that kind.
_REPR_SAME = frozenset(
    {SlotKind.INT, SlotKind.FLOAT, SlotKind.TUPLE, SlotKind.SHAPE, SlotKind.LIST}
)


def infer_kinds(template: Template, source_code: str | None = None) -> tuple[Inferred, ...]:
    """One :class:`Inferred` per placeholder of ``template``, in order; plain repeats agree."""
    from errkb.records.template import Literal, Placeholder  # only a write infers kinds

    assignments = _Assignments(source_code or "")
    out: list[Inferred] = []
    plain: list[Placeholder | None] = []  # the occurrence, when it prints its value plainly
    segments = template.segments
    for i, seg in enumerate(segments):
        if not isinstance(seg, Placeholder):
            continue
        before = segments[i - 1] if i > 0 else None
        after = segments[i + 1] if i + 1 < len(segments) else None
        out.append(
            _infer(
                seg,
                before.text if isinstance(before, Literal) else "",
                after.text if isinstance(after, Literal) else "",
                assignments,
            )
        )
        printed_plainly = not seg.raw.startswith("%") and not seg.conversion and not seg.spec
        plain.append(seg if printed_plainly else None)
    said: dict[str, set[SlotKind]] = {}
    for occurrence, inferred in zip(plain, out, strict=True):
        if occurrence is not None and inferred.kind not in (SlotKind.GENERIC, SlotKind.REPR):
            said.setdefault(occurrence.name, set()).add(inferred.kind)
    for index, (occurrence, inferred) in enumerate(zip(plain, out, strict=True)):
        kinds = said.get(occurrence.name, set()) if occurrence is not None else set()
        if occurrence is not None and inferred.kind is SlotKind.GENERIC and len(kinds) == 1:
            (kind,) = kinds
            out[index] = Inferred(
                kind, f"{occurrence.raw} elsewhere in the message is {kind.value}"
            )
    return tuple(out)


def _infer(p: Placeholder, before: str, after: str, assignments: _Assignments) -> Inferred:
    printf = p.raw.startswith("%")
    if printf:
        kind = _PRINTF_KINDS.get(p.spec[-1:])
        if kind is not None:
            return Inferred(kind, f"printf conversion {p.raw}")
        if "." in p.spec and p.spec[-1:] in ("s", "r", "a"):
            return Inferred(SlotKind.GENERIC, f"{p.raw} truncates the value")
    elif p.spec:
        spec = _FormatSpec.parse(p.spec)
        if spec is None:
            return Inferred(SlotKind.GENERIC, f"format spec {p.spec!r} is not understood")
        if spec.fill not in ("", " "):
            return Inferred(SlotKind.GENERIC, f"format spec {p.spec!r} pads with {spec.fill!r}")
        if spec.type:
            kind = _SPEC_KINDS.get(spec.type, SlotKind.GENERIC)
            if kind is not SlotKind.GENERIC:
                return Inferred(kind, f"format spec {p.spec!r}")
        if spec.precision and spec.type in ("", "s"):
            # A str cut to a precision is any prefix of the value: not a whole value of a kind.
            return Inferred(SlotKind.GENERIC, f"format spec {p.spec!r} truncates the value")
    found = _from_expression(p.name) or _from_source(p.name, assignments)
    if found is not None and found.kind is SlotKind.GENERIC:
        # The source binds the name to values of no one kind: nothing can say what it prints.
        return Inferred(SlotKind.REPR, f"{p.raw} is a repr") if p.is_repr else found
    named = _from_name(p.name)
    if (
        found is not None
        and named is not None
        and found.kind in (SlotKind.TUPLE, SlotKind.LIST)
        and named.kind is SlotKind.SHAPE
    ):
        found = Inferred(SlotKind.SHAPE, f"{found.reason}, named as a shape")
    # A unit or label around a repr says nothing: ``line %r`` prints a quoted name.
    found = found or named or (None if p.is_repr else _from_context(p, before, after))
    if p.is_repr:
        if found is not None and found.kind in _REPR_SAME:
            return Inferred(found.kind, f"{found.reason} (its repr is the same)")
        return Inferred(SlotKind.REPR, f"{p.raw} is a repr")
    if found is not None:
        return found
    if p.conversion == "a":
        return Inferred(SlotKind.GENERIC, f"{p.raw} is an ascii() of an unknown value")
    return Inferred(
        SlotKind.GENERIC,
        f"nothing says what {p.raw} prints (no conversion, format spec, known expression, "
        "assignment in sourceCode or unit)",
    )


def _from_expression(expr: str) -> Inferred | None:
    expr = expr.strip()
    for rx, kind, why in _expressions():
        m = rx.search(expr)
        if m is not None:
            return Inferred(kind, why.format(m.group(0).strip(".(").rstrip("(")))
    return None


def _from_name(expr: str) -> Inferred | None:
    # The last component of a bare name or attribute chain: scale_shape, self.weight_dtype.
    if not re.fullmatch(r"[A-Za-z_][\w.]*", expr):
        return None
    last = expr.rsplit(".", 1)[-1].lower()
    word = last.rsplit("_", 1)[-1]
    kind = _NAME_WORDS.get(word)
    return None if kind is None else Inferred(kind, f"the name {expr} says it is a {kind.value}")


def _from_context(p: Placeholder, before: str, after: str) -> Inferred | None:
    if _PLAIN_FIELD().fullmatch(p.name) is not None:
        if _UNITS().match(after):
            return Inferred(SlotKind.INT, f"followed by the unit {after.split()[0]!r}")
        if _FLOAT_UNITS().match(after):
            return Inferred(SlotKind.FLOAT, f"followed by the unit {after.split()[0]!r}")
    m = _LABELS().search(before)
    if m is not None:
        kind = _LABEL_KINDS[m.group("word")]
        return Inferred(kind, f"labelled {m.group(0).strip()!r}")
    return None


class _Assignments:
    """What a raise site's sourceCode binds to a bare name, read as text (one kind, or none)."""

    def __init__(self, source: str) -> None:
        self._source = source
        # Every name's assignments, found by one scan of the source on first need.
        self._assigned: dict[str, list[re.Match[str]]] | None = None

    def _assignments(self, name: str) -> list[re.Match[str]]:
        if self._assigned is None:
            found: dict[str, list[re.Match[str]]] = {}
            for m in _ANY_ASSIGNMENT().finditer(self._source):
                found.setdefault(m.group("name"), []).append(m)
            self._assigned = found
        return self._assigned.get(name, [])

    def _annotation(self, name: str) -> str | None:
        # Tried where the name occurs, leftmost first, as the name's own search would.
        source, at, annotation = self._source, self._source.find(name), _ANY_ANNOTATION()
        while at >= 0:
            m = annotation.match(source, at)
            if m is not None and m.group("name") == name:
                return m.group("type")
            at = source.find(name, at + 1)
        return None

    def kind_of(self, name: str) -> Inferred | None:
        if not self._source or not _IDENTIFIER().fullmatch(name) or name not in self._source:
            return None
        known: Inferred | None = None
        other: str | None = None  # a binding that does not say the same kind
        for m in self._assignments(name):
            rhs = m.group("rhs").strip()
            if m.group("op"):
                if not _NUMBER_LITERAL().fullmatch(rhs):
                    other = other or m.group(0)
                continue
            got = _from_expression(rhs)
            if got is None and rhs.startswith("(") and rhs.endswith(")") and "," in rhs:
                got = Inferred(SlotKind.TUPLE, "a tuple")
            if got is None or (known is not None and got.kind is not known.kind):
                other = other or m.group(0)
            elif known is None:
                known = Inferred(got.kind, f"sourceCode assigns {name} = {_short(rhs)}")
        if known is not None:
            binding = _other_bindings(name).search(self._source)
            other = other or (binding.group(0) if binding is not None else None)
            if other is not None:
                return Inferred(
                    SlotKind.GENERIC,
                    f"{known.reason}, but also binds it as {_short(other.strip())!r}",
                )
            return known
        annotated = self._annotation(name)
        if annotated is not None and annotated in _ANNOTATIONS:
            kind = _ANNOTATIONS[annotated]
            return Inferred(kind, f"sourceCode annotates {name}: {annotated}")
        return None


#: ``name = rhs``, ``name: T = rhs`` or an augmented ``name += rhs`` at a line's start.
_ASSIGNMENT = (
    r"^[ \t]*{name}[ \t]*(?::[ \t]*[\w.\[\], |]+)?"
    r"(?P<op>//|\*\*|>>|<<|[-+*/%|&^@])?=(?!=)[ \t]*(?P<rhs>.+)$"
)
#: Other ways a name is bound: a ``for`` or ``as`` target, a walrus, one of an unpacking.
_OTHER_BINDINGS = (
    r"\bfor[ \t]+[\w, ()]*\b{name}\b[\w, ()]*[ \t]in\b|\bas[ \t]+{name}\b|\b{name}[ \t]*:="
    r"|^[ \t]*\(?[\w.]+[ \t]*,[\w., \t()]*\b{name}\b[\w., \t()]*=(?!=)"
    r"|^[ \t]*\(?{name}[ \t]*,[\w., \t()]*=(?!=)"
)
_NUMBER_LITERAL = _lazy.pattern(r"-?\d+(?:\.\d+)?")


#: ``_ASSIGNMENT`` for any bare name at once, the name captured: the same matches, in order.
_ANY_ASSIGNMENT = _lazy.pattern(_ASSIGNMENT.format(name=r"(?P<name>[A-Za-z_]\w*)"), re.MULTILINE)
#: ``name: T`` followed by ``,``, ``)`` or ``=``, tried where a name occurs.
_ANY_ANNOTATION = _lazy.pattern(r"\b(?P<name>[A-Za-z_]\w*)[ \t]*:[ \t]*(?P<type>[\w.]+)[ \t]*[,)=]")


@functools.lru_cache(maxsize=1024)
def _other_bindings(name: str) -> re.Pattern[str]:
    """A bare name's other-binding regex, compiled once per name (read only in a rare case)."""
    return re.compile(_OTHER_BINDINGS.format(name=re.escape(name)), re.MULTILINE)


def _from_source(name: str, assignments: _Assignments) -> Inferred | None:
    return assignments.kind_of(name)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
