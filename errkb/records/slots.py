"""Slot kinds: what kind of value each placeholder of a record's message prints.

A placeholder compiled to upstream's ``(.+?)`` takes anything, so a near-miss sibling matches:
``Quanto layer 'x' has incompatible scale dtype F64`` (another raise in the same file) fills the
record's ``{scale_slice.get_dtype()} {scale_shape}`` with ``dtype`` and ``F64``, and a capture at
the end of a message runs on into whatever follows it (a shell prompt glued on by a terminal
wrap, ``</code> |`` in a Markdown row). But the record already says what each value is:

* the template: a conversion (``{x!r}`` prints a repr), a format spec (``{x:.3f}`` a float,
  ``{n:d}`` / ``%d`` an integer), the expression (``len(...)``, ``x.ndim`` integers,
  ``tuple(...)`` a tuple, ``x.shape`` a shape, ``x.dtype`` / ``x.get_dtype()`` a dtype token,
  ``sorted(...)`` a list, ``type(x).__name__`` a name), a literal unit after it (``{n} bytes``)
  or a label before it (``shape={s}``);
* the raise site's ``sourceCode``: what it assigns to the name (``scale_shape =
  tuple(scale_slice.get_shape())`` is a tuple) or how its signature annotates it (``n: int``).

:func:`infer_kinds` infers one :class:`SlotKind` per placeholder, once, when a record is
compiled (``errkb.records.patterns.compile_record``, at sync and ingest time), and
:func:`grammar` gives each kind's RE2 grammar: a value of another kind is no match at all (not a
lower score), and a self-delimiting value (a balanced tuple ends at its ``)``, a quoted string at
its quote) that ends the message is followed only by text that ends a message (:data:`TAIL`:
whitespace, a sentence end, closing markup or quotes), never by more words. A placeholder whose
kind cannot be inferred is :attr:`SlotKind.GENERIC` and matches as upstream's ``(.+?)`` does
(``errkb lint`` reports it, with the reason). Every grammar is plain RE2: no backreferences,
no lookaround, bracket nesting bounded (:data:`MAX_NESTING`), so matching stays linear-time.

Kinds are plain strings (the enum's values) in ``PatternSpec.kinds``, the form the store
writes at sync time.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

from errkb import _lazy
from errkb.records.template import Literal, Placeholder, Template


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


#: Kinds whose grammar ends where the value ends, so text after the message's last value can be
#: told from the value (see :data:`TAIL`).
SELF_DELIMITING = frozenset(SlotKind) - {SlotKind.GENERIC}

#: How deep brackets may nest inside a tuple, list or repr value (RE2 has no recursion; a shape
#: or a repr in a message nests two or three levels at most).
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
    """A bracketed value nested at most ``depth`` levels: ``(1, [2, 'a)'])``.

    Quoted strings inside are taken whole, so a bracket in a string does not count. Closers are
    not paired with their openers by type (that would triple the regex at each level); only the
    nesting depth is counted, which is what stops a tuple at its own ``)``.
    """
    inner = r"""[^()\[\]{}'"]|""" + _QUOTED
    body = f"(?:{inner})*"
    for _ in range(depth - 1):
        body = rf"(?:{inner}|[(\[{{]{body}[)\]}}])*"
    return body


_BAL = _balanced(MAX_NESTING - 1)
_TUPLE = rf"\({_BAL}\)"
_LIST = rf"\[{_BAL}\]"
# One bracketed alternative stands for a tuple, a list, a dict and a call (``Name(...)``), so
# the nested-bracket body appears once: the regex (and its RE2 compile, paid per record on
# first use) is a third of what one alternative per form cost.
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

#: What may follow a self-delimiting value that ends the message: spaces, then nothing, or a
#: sentence end (``.``, ``!``, ``?``, ``;``) followed by nothing or a space, or closing markup,
#: a table cell's edge, a closing quote or bracket — each then with anything up to the line's
#: end. Never a word: ``... (3072,) extra`` is another message. Never a line break: the next line
#: is not this message's (the wrap rejoiner offers the shorter text too).
TAIL = r"""(?:[ \t]*(?:[.!?;](?:[ \t][^\n]*)?|</[^\n]*|[|`*"')\]][^\n]*))?[ \t\r]*"""

#: Text after a message that is its container's, never the message's, on its last line: a
#: closing tag (``</code> |`` after a Markdown or HTML cell), a table cell's edge (`` |``, and
#: any further cells without markup up to the row's closing ``|``: `` | None</code> |`` is a
#: value's `` | None`` before its cell's closing tag). Not a shell prompt: a prompt is on a line
#: of its own, and a wrapped message joined to it is also offered without it (the rejoiner's
#: shorter text), while the rejoiner's no-space join (``two wordsuser@host:~$``) would make
#: any last word look like a prompt's user. Our own fixed regex, searched only in the last
#: ``TRAILER_WINDOW`` characters (bounded work), never part of a record's RE2 pattern: in
#: every pattern it doubled the RE2 compile of a generic record (0.067 -> 0.125 ms).
_TRAILER = _lazy.pattern(r"(?:[ \t]*</[A-Za-z][^\n]*|[ \t]+\|(?:[^\n<]*\|)?)[ \t\r]*\Z")
TRAILER_WINDOW = 512


def trailer_start(text: str) -> int | None:
    """Where a container's trailer (see ``_TRAILER``) begins at the end of ``text``, if any.

    The earliest such point of the last line: the matcher then verifies the text before it
    first (``errkb.match.matcher.verify``), so a value ends where the trailer begins (a
    generic slot's ``.+?`` would take it) and a record ending in literal text is found before
    it. A value that itself ends so (``<a></a>``, ``x |``) is cut there; its record is found.
    """
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


@dataclass(frozen=True)
class _Layout:
    """What a placeholder's format spec does to the printed value."""

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
    """Tell whether a captured value is a placeholder shown as such (``<prefix>``, ``{name}``).

    A quoted message in an issue form or docs (``'<prefix>' ... <weight shape>``) or a template
    pasted as is (``{scale_shape}``) names its values instead of printing them: never a match.
    Real reprs in angle brackets carry a digit (``<Foo object at 0x7f3a...>``, ``<E.A: 1>``); a
    shown field is an expression (no spaces: ``{Ze b}`` is a value). A str value that reads
    exactly like a shown placeholder is refused with them: the two cannot be told apart.
    """
    return value[:1] in ("<", "{") and _SHOWN().fullmatch(value) is not None


# -- inference ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FormatSpec:
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

#: Expression shapes, tried in order against a placeholder's expression or an assignment's
#: right-hand side. Each is (regex, kind, what it means).
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


#: A unit right after the value: the value is a count or an amount. Only units, plural, that
#: a name does not modify: ``{kw} argument``, ``from {} args``, ``Index %s columns`` and
#: ``Too {'many'} arguments`` (all in the standard library) print names before those nouns,
#: and ``{kind}s`` is a plural, not seconds. A unit is read only after a plain name or field.
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
    """One :class:`Inferred` per placeholder of ``template``, in placeholder order.

    A placeholder that appears twice is inferred each time, and its plain occurrences (no
    conversion, no format spec: they print the same text) then agree: one whose kind nothing
    said takes the kind another says, by its unit or label (``with {n} outputs ... list of {n}
    items``: both integers). Without that the same value was an integer in one slot and anything
    in the other, and a rendering with a word there matched the first slot's ``.+?``. Plain
    occurrences that disagree keep their own kinds. The ``source_code`` is only read as text,
    never run.
    """
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
        # The source binds the name to values of no one kind: neither its name nor the text
        # around it can say what it prints.
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
    """What a raise site's sourceCode binds to a bare name, read as text (never run).

    The source types a name only when every binding of it in the window says one kind:
    ``value = repr(arg)`` followed by ``value = value[:n] + '...'`` (``typing.assert_never``)
    prints a cut repr, so a known kind beside a binding of no known kind, or of another kind,
    leaves the slot generic whatever its name says. An augmented number (``count += 1``) keeps
    a numeric kind. Bindings that say nothing (all of no known kind: a call, an unpacking, a
    ``for`` or ``as`` target) leave the name and the text around it to decide, as before.
    """

    def __init__(self, source: str) -> None:
        self._source = source
        # Every name's assignments, found by one scan of the source the first time a
        # placeholder asks (``_ANY_ASSIGNMENT``).
        self._assigned: dict[str, list[re.Match[str]]] | None = None

    def _assignments(self, name: str) -> list[re.Match[str]]:
        if self._assigned is None:
            found: dict[str, list[re.Match[str]]] = {}
            for m in _ANY_ASSIGNMENT().finditer(self._source):
                found.setdefault(m.group("name"), []).append(m)
            self._assigned = found
        return self._assigned.get(name, [])

    def _annotation(self, name: str) -> str | None:
        # Tried where the name occurs, leftmost first: the first match is the one a search
        # for this name's own pattern finds.
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


#: ``_ASSIGNMENT`` for any bare name at once, the name captured: compiled once, where one
#: regex per placeholder name was most of a record's ``PatternSpec`` (a sync meets thousands of
#: names, each compiled again in every worker). It finds, for each name, exactly the matches
#: the name's own regex finds, in the same order: a match starts at a line's start, the name
#: is the whole identifier there (what follows it, blank, ``:``, an operator or ``=``, is no
#: word character), the rest of the pattern is the same, and no match leaves its line.
_ANY_ASSIGNMENT = _lazy.pattern(_ASSIGNMENT.format(name=r"(?P<name>[A-Za-z_]\w*)"), re.MULTILINE)
#: ``name: T`` followed by ``,``, ``)`` or ``=``, for any name, tried where a name occurs
#: (``_Assignments._annotation``): ``match`` at a position sees the character before it, so
#: ``\b`` means what it means in the name's own ``\bname[ \t]*:...`` search.
_ANY_ANNOTATION = _lazy.pattern(r"\b(?P<name>[A-Za-z_]\w*)[ \t]*:[ \t]*(?P<type>[\w.]+)[ \t]*[,)=]")


@functools.lru_cache(maxsize=1024)
def _other_bindings(name: str) -> re.Pattern[str]:
    """A bare name's other-binding regex, compiled once per name.

    Only read for a name the source also assigns a known kind (rare): the reason quotes the
    first binding the alternation finds, so it stays one regex per name.
    """
    return re.compile(_OTHER_BINDINGS.format(name=re.escape(name)), re.MULTILINE)


def _from_source(name: str, assignments: _Assignments) -> Inferred | None:
    return assignments.kind_of(name)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
