"""Slot kinds (errkb.records.slots): inference, grammars, and property tests over a corpus.

The corpus is generated: each record's template mixes literal words with placeholders of every
kind, written in each way the kind can be inferred (a conversion, a format spec, an
expression, an assignment in the record's sourceCode, a unit after the value). For each record
a rendered positive must match with exactly the rendered values, under trailing text that ends
a message; and each sibling (one slot's value of another kind, one extra literal word, one
placeholder shown as ``<name>`` or ``{name}``) must never match. The default tier runs a small
corpus; the 5,000-record run is ``slow``. The kb-level test runs the same records through the
whole pipeline (prefixes, a wrap, JSON and markup containers, a traceback).
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import errkb
from errkb.match.matcher import verify
from errkb.records.patterns import PatternSpec, compile_re2, compile_record, template_regex
from errkb.records.slots import (
    SlotKind,
    grammar,
    infer_kinds,
    is_placeholder_text,
    sample,
)
from errkb.records.specificity import is_generic, specificity
from errkb.records.template import Placeholder, parse_template
from errkb.records.upstream import message_pattern
from tests.tiers import examples

K = SlotKind

# -- inference -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "source", "kinds"),
    [
        ("a {x!r} b", None, [K.REPR]),
        ("took {t:.3f} s", None, [K.FLOAT]),
        ("got {n:d} and {m:,}", None, [K.INT, K.GENERIC]),
        ("got {n:,d}", None, [K.INT]),
        ("read {n} bytes", None, [K.INT]),
        ("got %d of %5.2f, %s", None, [K.INT, K.FLOAT, K.GENERIC]),
        ("rank {len(xs)} vs {t.ndim}", None, [K.INT, K.INT]),
        ("shape {tuple(w.shape)} size {w.shape}", None, [K.SHAPE, K.SHAPE]),
        ("pair {tuple(p)} keys {sorted(k)}", None, [K.TUPLE, K.LIST]),
        ("dtype {t.dtype} / {s.get_dtype()}", None, [K.DTYPE, K.DTYPE]),
        ("class {type(o).__name__}", None, [K.IDENT]),
        ("got shape={s}", None, [K.SHAPE]),
        ("line %r of %s, line={n!r}", None, [K.REPR, K.GENERIC, K.REPR]),
        ("scale {scale_shape} w {weight_dtype}", None, [K.SHAPE, K.DTYPE]),
        ("bad {v}", "    v = tuple(x.items())\n", [K.TUPLE]),
        ("bad {v}", "def f(v: int):\n    pass\n", [K.INT]),
        ("bad {v!r}", "    v = len(a)\n", [K.INT]),
        ("a {arg!r:.100}", None, [K.GENERIC]),
        ("a %.40s", None, [K.GENERIC]),
        ("thing {thing}", "    thing = compute()\n", [K.GENERIC]),
        ("pad {x:*>8}", None, [K.GENERIC]),
        ("got {repr(x)}", None, [K.REPR]),
        ("cut {repr(x)[:9]}", None, [K.GENERIC]),
        # typing.assert_never: a repr, then cut to a length: not a whole repr.
        ("got: {value}", "    value = repr(a)\n    if len(value) > m:\n"
         "        value = value[:m] + '...'\n", [K.GENERIC]),
        ("n {count}", "    count = len(x)\n    count += 1\n", [K.INT]),
        ("n {v}", "    a, v = f()\n    v = len(x)\n", [K.GENERIC]),
        ("n {v}", "    v = len(x)\n    v = tuple(y)\n", [K.GENERIC]),
        ("w {w_shape}", "    w_dtype, w_shape = meta[k]\n", [K.SHAPE]),
        # A noun after a name is no unit (subprocess, pickle, typing in the standard library).
        ("{kw} argument not allowed", None, [K.GENERIC]),
        ("args[0] from {} args has no __new__", None, [K.GENERIC]),
        ("Too {('many' if a > b else 'few')} items for {cls}", None, [K.GENERIC, K.GENERIC]),
        ("Unknown {kind}s", None, [K.GENERIC]),
        ("took {t} s, {m}MB", None, [K.FLOAT, K.FLOAT]),
        # One value printed plainly twice: the unit after one says what both are (dask's
        # "Explode a function with {nout} outputs, ... list of {nout} items").
        ("with {n} outputs, a list of {n} items", None, [K.INT, K.INT]),
        ("{n} items, then {n} again", None, [K.INT, K.INT]),
        # Printed otherwise (a repr, a format spec) or told apart: each keeps its own kind.
        ("with {n!r} outputs, a list of {n} items", None, [K.REPR, K.INT]),
        ("took {n:.3} s, {n} items", None, [K.GENERIC, K.INT]),
        ("{n} items, {n} ms", None, [K.INT, K.FLOAT]),
        ("{n} outputs, {m} items", None, [K.GENERIC, K.INT]),
    ],
)  # fmt: skip
def test_kinds_are_inferred_from_the_template_and_the_source(
    template: str, source: str | None, kinds: list[SlotKind]
) -> None:
    got = infer_kinds(parse_template(template), source)
    assert [i.kind for i in got] == kinds
    assert all(i.reason for i in got)


def test_the_seed_records_are_typed_from_their_template_and_source_code() -> None:
    from tests.conftest import load_seed_envelopes

    kinds = {}
    for env in load_seed_envelopes():
        r = env["record"]
        spec = compile_record(
            r["id"], r["errorMessage"], r["messagePattern"], source_code=r["sourceCode"]
        )
        kinds[r["id"]] = spec.kinds
    assert kinds == {
        "5c84e15f4be2c1a6": ("repr", "dtype", "shape"),
        "b9825390f5c3ae68": ("repr", "shape", "shape"),
        "129d60f3f6e5f4e0": ("shape",),
    }


def test_a_repr_call_is_captured_as_a_repr_conversion_is() -> None:
    # {repr(name)} prints what {name!r} does: the capture is the value, without its quotes.
    for template in ("no package for {repr(name)} here", "no package for {name!r} here"):
        spec = compile_record("r", template, message_pattern(template))
        hit = verify(spec, compile_re2(spec.regex), "no package for 'enc.0' here")
        assert hit is not None, template
        assert dict(hit.captures) == {spec.names[0]: "enc.0"}, template


def test_a_hand_written_pattern_keeps_its_groups_untyped() -> None:
    spec = compile_record("r", "took {n} ms", r"took (\d+) ms")
    assert spec.origin.value == "messagePattern"
    assert spec.kinds == ()


def test_an_untyped_record_matches_as_upstream_does() -> None:
    template = parse_template("Failed to load {thing} from {where}")
    assert template_regex(template, tuple(i.kind for i in infer_kinds(template))) == (
        template_regex(template)
    )
    # Only a container's trailer after the message is told from the last value (the matcher
    # cuts it before the record's regex runs): a value's own " | None" stays the value's.
    spec = compile_record("r", template.source, message_pattern(template.source))
    cases = [("int | None", t) for t in ("", "</code> |", "</td></tr>")]
    cases += [("x.y", t) for t in (" |", " | more | cells |")]
    for value, tail in cases:
        hit = verify(spec, compile_re2(spec.regex), f"Failed to load a from {value}{tail}")
        assert hit is not None, tail
        assert dict(hit.captures) == {"thing": "a", "where": value}, tail


def test_a_record_ending_in_literal_text_is_found_before_a_trailer() -> None:
    template = "Cannot load {thing} here"
    spec = compile_record("r", template, message_pattern(template))
    regex = compile_re2(spec.regex)
    hit = verify(spec, regex, "Cannot load a.b here</code> |")
    assert hit is not None
    assert dict(hit.captures) == {"thing": "a.b"}
    assert verify(spec, regex, "Cannot load a.b here and more") is None


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        (K.REPR, ["'a b'", '"it\'s"', "3", "(1, 'x')", "[1]", "None", "torch.float32",
                  "PosixPath('/a')", "<E.A: 1>"], ["a b", "'open", "x y z"]),
        (K.INT, ["0", "-12", "4096"], ["1.5", "F32", "(1,)", "'3'"]),
        (K.FLOAT, ["1.5", "-2", "1e-05", "3.000", "inf"], ["F32", "(1,)", "1.5.2"]),
        (K.TUPLE, ["()", "(1,)", "(1, ('a', [2]))", "('a)',)"], ["[1]", "3", "(1, 2", "F32"]),
        (K.SHAPE, ["()", "(3072,)", "(1, 3072)", "[2, 3]", "torch.Size([2, 3])"],
         ["('a', 1)", "F32", "3", "(1, 2"]),
        (K.LIST, ["[]", "['a', 'b']", "[(1, 2)]"], ["(1,)", "'a'", "3"]),
        (K.DTYPE, ["F32", "torch.bfloat16", "float8_e4m3fn"], ["(1,)", "3", "'F32'", "a b"]),
        (K.IDENT, ["ValueError", "a.B"], ["3", "a b", "(1,)"]),
    ],
)  # fmt: skip
def test_each_kind_matches_its_values_only(kind: SlotKind, good: list[str], bad: list[str]) -> None:
    regex = compile_re2(f"^(?:{grammar(kind, Placeholder('x', '{x}'))})$")
    assert [v for v in good if regex.search(v) is None] == []
    assert [v for v in bad if regex.search(v) is not None] == []


def test_placeholders_shown_as_such_are_never_values() -> None:
    assert is_placeholder_text("<prefix>")
    assert is_placeholder_text("<weight shape>")
    assert is_placeholder_text("{scale_shape}")
    assert is_placeholder_text("{tuple(loaded_weight.shape)}")
    assert not is_placeholder_text("<object object at 0x7f3a2c>")
    assert not is_placeholder_text("<E.A: 1>")
    assert not is_placeholder_text("{'a': 1}")
    assert not is_placeholder_text("prefix")


def test_the_issues_sibling_and_trailing_text() -> None:
    from tests.conftest import load_seed_envelopes

    r = next(e["record"] for e in load_seed_envelopes() if e["record"]["id"] == "5c84e15f4be2c1a6")
    spec = compile_record(
        r["id"], r["errorMessage"], r["messagePattern"], source_code=r["sourceCode"]
    )
    regex = compile_re2(spec.regex)
    assert verify(spec, regex, "Quanto layer 'x' has incompatible scale dtype F64") is None
    assert verify(spec, regex, "Quanto layer '<prefix>' has incompatible scale F32 (3,)") is None
    for tail in ("", "</code> |", ".", ". Rolling back", " ", "')]", "`"):
        hit = verify(spec, regex, f"Quanto layer 'x' has incompatible scale F32 (3072,){tail}")
        assert hit is not None, tail
        assert dict(hit.captures)["scale_shape"] == "(3072,)"
    for tail in (" user@gpu-node-07:~/sglang/python$", " extra", ", and more", "\nnext"):
        text = f"Quanto layer 'x' has incompatible scale F32 (3072, 2){tail}"
        assert verify(spec, regex, text) is None, tail


def test_a_validator_vetoes_captures_that_cannot_be_its_records() -> None:
    from errkb.validators import admits

    q = "5c84e15f4be2c1a6"
    ok = {"prefix": "x", "scale_slice.get_dtype()": "F64", "scale_shape": "(3,)"}
    assert admits(q, ok)
    assert not admits(q, {**ok, "scale_slice.get_dtype()": "dtype"})
    assert not admits(q, {**ok, "scale_shape": "F64"})
    assert not admits("b9825390f5c3ae68", {"weight_shape": "(1, 2)", "scale_shape": "big"})
    assert admits("0000000000000000", {"anything": "at all"})


# -- the generated corpus ------------------------------------------------------------------------

WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)  # fmt: skip
EXTRA = "interloper"


@dataclass(frozen=True)
class Form:
    """One way to write a placeholder of a kind: its field, a sourceCode line, a unit after."""

    kind: SlotKind
    field: str  #: with {i} for the placeholder's index
    source: str = ""
    unit: str = ""


FORMS = (
    Form(K.REPR, "{{p{i}!r}}"),
    Form(K.INT, "{{len(items{i})}}"),
    Form(K.INT, "{{n{i}:d}}"),
    Form(K.INT, "{{count{i}}}", "    count{i} = len(found)\n"),
    Form(K.INT, "{{size{i}}}", unit=" bytes"),
    Form(K.FLOAT, "{{x{i}:.3f}}"),
    Form(K.TUPLE, "{{tuple(v{i})}}"),
    Form(K.TUPLE, "{{pair{i}}}", "    pair{i} = tuple(found.items())\n"),
    Form(K.SHAPE, "{{tuple(w{i}.shape)}}"),
    Form(K.SHAPE, "{{w{i}_shape}}"),
    Form(K.SHAPE, "{{t{i}.shape}}"),
    Form(K.LIST, "{{sorted(keys{i})}}"),
    Form(K.DTYPE, "{{t{i}.dtype}}"),
    Form(K.DTYPE, "{{s{i}.get_dtype()}}"),
    Form(K.IDENT, "{{type(o{i}).__name__}}"),
    Form(K.GENERIC, "{{thing{i}}}"),
)


@dataclass(frozen=True)
class Gen:
    """A generated record: its template, sourceCode and the kind of each placeholder."""

    index: int
    template: str
    source: str
    kinds: tuple[SlotKind, ...]
    ends_typed: bool  #: the template ends with a typed value (trailing text is judged)

    def spec(self) -> PatternSpec:
        return compile_record(
            f"g{self.index}", self.template, message_pattern(self.template),
            source_code=self.source,
        )  # fmt: skip


def make_corpus(count: int, seed: int = 22) -> list[Gen]:
    """``count`` templates, each with 1-4 placeholders, every form used evenly."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        words = rng.sample(WORDS, 8)
        head = f"{words[0].capitalize()}{index} {words[1]}"  # a distinct anchor per record
        slots = [FORMS[(index + k * 7) % len(FORMS)] for k in range(rng.randint(1, 4))]
        parts, source = [head], ""
        for k, form in enumerate(slots):
            parts.append(" " + form.field.format(i=k) + form.unit)
            source += form.source.format(i=k)
            if k + 1 < len(slots) or rng.random() < 0.4:
                parts.append(" " + words[2 + k])
        template = "".join(parts)
        ends_typed = template.endswith("}") and slots[-1].kind is not K.GENERIC
        out.append(Gen(index, template, source, tuple(f.kind for f in slots), ends_typed))
    return out


_ALPHABET = "abc XYZ01'\"\\()[]<>{}:,.-_/ \u00e9\u4e2d"
_DTYPES = ("F32", "BF16", "I8", "torch.float32", "float8_e4m3fn")


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))


def _ints(rng: random.Random) -> list[int]:
    return [rng.randint(0, 10**6) for _ in range(rng.randint(0, 4))]


def value_of(kind: SlotKind, rng: random.Random) -> str:
    """A value of ``kind`` as Python prints it."""
    if kind is K.REPR:
        text = _text(rng)
        while is_placeholder_text(text):  # reads as a shown placeholder: refused by design
            text = _text(rng)
        return repr(text if rng.random() < 0.8 else rng.randint(-99, 10**6))
    if kind is K.INT:
        return str(rng.randint(-(10**9), 10**9))
    if kind is K.FLOAT:
        return f"{rng.uniform(-1e6, 1e6):.3f}"
    if kind is K.TUPLE:
        return repr(tuple(rng.choice((rng.randint(0, 99), _text(rng))) for _ in range(3)))
    if kind is K.SHAPE:
        shape = _ints(rng)
        return repr(tuple(shape)) if rng.random() < 0.7 else f"torch.Size({shape!r})"
    if kind is K.LIST:
        return repr(sorted(_text(rng) for _ in range(rng.randint(0, 3))))
    if kind is K.DTYPE:
        return rng.choice(_DTYPES)
    if kind is K.IDENT:
        return rng.choice("ABCxyz_") + "".join(
            rng.choice("abcXYZ019_") for _ in range(rng.randint(0, 8))
        )
    return "".join(rng.choice("abcxyz019_./-") for _ in range(rng.randint(1, 10)))


#: A value of another kind, refused by the slot's grammar (none contains a corpus word).
WRONG = {
    K.REPR: "two words",
    K.INT: "(1, 2)",
    K.FLOAT: "F32",
    K.TUPLE: "[1, 2]",
    K.SHAPE: "('a', 1)",
    K.LIST: "(1, 2)",
    K.DTYPE: "(1, 2)",
    K.IDENT: "12",
}
TAILS = ("", " ", ".", "</code> |", " |", "`", '"', ")", ". Then more.", "; retrying")


def render(gen: Gen, values: list[str], shown: dict[int, str] | None = None) -> str:
    """The template with each placeholder's value (or, for ``shown``, its shown form)."""
    template = parse_template(gen.template)
    out, k = [], 0
    for seg in template.segments:
        if isinstance(seg, Placeholder):
            out.append((shown or {}).get(k, values[k]))
            k += 1
        else:
            out.append(seg.text)
    return "".join(out)


def check_record(gen: Gen, rng: random.Random) -> None:
    spec = gen.spec()
    assert tuple(SlotKind(k) for k in spec.kinds) == gen.kinds, gen.template
    regex = compile_re2(spec.regex)
    values = [value_of(kind, rng) for kind in gen.kinds]
    want = {
        p.name: (v[1:-1] if p.is_repr and v[:1] in "'\"" else v)
        for p, v in zip(parse_template(gen.template).placeholders, values, strict=True)
    }
    text = render(gen, values)
    tail = rng.choice(TAILS) if gen.ends_typed else ""
    hit = verify(spec, regex, text + tail)
    assert hit is not None, (gen.template, text + tail)
    got = dict(hit.captures)
    for name, value in want.items():
        if "\\" not in value:  # an escape is decoded in the capture: compared below
            assert got[name] == value, (gen.template, text, name)
    # Siblings: one typed slot's value of another kind.
    for k, kind in enumerate(gen.kinds):
        if kind is not K.GENERIC:
            wrong = [*values[:k], WRONG[kind], *values[k + 1 :]]
            assert verify(spec, regex, render(gen, wrong)) is None, (gen.template, k)
    # Siblings: one extra literal word inside the record's first literal ("Alpha12 <here> bravo").
    head, rest = text.split(" ", 1)
    assert verify(spec, regex, f"{head} {EXTRA} {rest}") is None, gen.template
    if gen.ends_typed or not gen.template.endswith("}"):
        assert verify(spec, regex, f"{text} {EXTRA}") is None, gen.template
    # Siblings: a placeholder shown as <name> or {name}.
    for k, p in enumerate(parse_template(gen.template).placeholders):
        words = p.name.replace("_", " ").replace(".", " ").split("(")[-1].strip(") ")
        for shown in (f"<{''.join(c for c in words if not c.isdigit()).strip()}>", p.raw):
            if p.is_repr and shown.startswith("<"):
                shown = f"'{shown}'"
            assert verify(spec, regex, render(gen, values, {k: shown})) is None, (
                gen.template,
                shown,
            )


SMALL_CORPUS = make_corpus(300)
BIG_CORPUS = make_corpus(5000)


def test_the_corpus_has_every_kind_in_every_position() -> None:
    kinds = {k for g in BIG_CORPUS for k in g.kinds}
    assert kinds == set(SlotKind)
    assert len(BIG_CORPUS) >= 5000
    assert {g.kinds[-1] for g in BIG_CORPUS if g.ends_typed} == set(SlotKind) - {K.GENERIC}


@settings(max_examples=examples(50), deadline=None, derandomize=True)
@given(st.sampled_from(SMALL_CORPUS), st.randoms(use_true_random=False))
def test_generated_records_match_their_positives_and_refuse_their_siblings(
    gen: Gen, rng: random.Random
) -> None:
    check_record(gen, rng)


@pytest.mark.slow
@settings(max_examples=2, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_every_record_of_a_5000_record_corpus(seed: int) -> None:
    # Hypothesis picks the seed; the 5,000 records' values come from one seeded generator
    # (drawing them all through Hypothesis overflows its buffer).
    rng = random.Random(seed)
    for gen in BIG_CORPUS:
        check_record(gen, rng)


# -- through the whole pipeline --------------------------------------------------------------------


def _shapes(message: str) -> dict[str, str]:
    """The same message as different tools print it."""
    line = f"ValueError: {message}"
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/app/run.py", line 3, in <module>\n'
        "    main()\n"
        f"{line}\n"
    )
    return {
        "plain": line + "\n",
        "prefixed": f"2026-12-01 10:00:00,123 ERROR [worker 3] {line}\n",
        "journald": f"Dec 01 10:00:00 gpu-node-07 python[4242]: {line}\n",
        "json": json.dumps({"level": "error", "exc_info": tb}) + "\n",
        "traceback": tb,
        "wrapped": "\n".join(textwrap.wrap(line, 60)) + "\nuser@gpu-node-07:~/app$\n",
        "markdown": f"| run | <code>{line}</code> |\n",
        "html": f"<html><body><pre>{line.replace('<', '&lt;')}</pre></body></html>\n",
    }


@pytest.mark.slow
@pytest.mark.parametrize("count", [48])
def test_generated_records_through_every_shape(tmp_path: Path, count: int) -> None:
    from tests.conftest import load_seed_envelopes, make_record

    base = load_seed_envelopes()[0]["record"]
    rng = random.Random(5)
    gens = SMALL_CORPUS[:count]  # every form in turn (the corpus cycles through them)
    records = []
    for gen in gens:
        rec = make_record(base, gen.template, file_path=f"gen/m{gen.index}.py")
        rec["sourceCode"] = gen.source or None
        rec["sourceCodeStart"] = rec["sourceCodeEnd"] = rec["lineNumber"] = None
        records.append(rec)
    (tmp_path / "gen.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    with errkb.open(tmp_path / "kb.sqlite3", bundled=False) as kb:
        kb.ingest([tmp_path / "gen.jsonl"])
        for gen, rec in zip(gens, records, strict=True):
            values = [sample(kind, rng.randint(0, 9)) for kind in gen.kinds]
            want = {
                p.name: (v[1:-1] if p.is_repr and v[:1] == "'" else v)
                for p, v in zip(parse_template(gen.template).placeholders, values, strict=True)
            }
            text = render(gen, values)
            generic = is_generic(specificity(gen.template))
            for shape, log in _shapes(text).items():
                # A generated template may be generic (``Bravo1 kilo {}``): its match is then
                # possible rather than exact (issue 45), its captures the same; and the
                # message-first pass (the only reader of a Markdown cell's text) considers no
                # generic template.
                found = _found(kb.explain(log))
                if generic and shape in MESSAGE_FIRST_ONLY:
                    assert found == [], (shape, log)
                    continue
                assert [m.id for m in found] == [rec["id"]], (shape, log)
                assert dict(found[0].capture_dict) == want, (shape, log)
            sibling = render(gen, [*values[:-1], WRONG.get(gen.kinds[-1], "x")])
            if gen.kinds[-1] is not K.GENERIC:
                for shape, log in _shapes(sibling).items():
                    assert _found(kb.explain(log)) == [], (shape, log)


#: Shapes whose message only the message-first pass finds (no exception line is parsed).
MESSAGE_FIRST_ONLY = frozenset({"markdown"})


def _found(report: errkb.Report) -> list[errkb.report.Match]:
    """The report's exact and possible matches (not its similar suggestions)."""
    return [m for m in report.matches if m.confidence.value != "similar"]


# ---------------------------------------------------------------- one scan for every name
_SOURCE_PIECES = (
    "foo", "foobar", "x", "_foo", " ", "\t", "\n", "=", "==", " = ", "+=", "//=", ": int",
    ": float", "torch.dtype)", "=1", "(1, 2)", ",", ")", ".", "é", "1", ":", "foo:", " int,",
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_SOURCE_PIECES), max_size=16).map("".join))
def test_assignments_one_scan_finds_what_each_names_regex_finds(source: str) -> None:
    """The generic assignment scan and the annotation lookup give, for every name, exactly
    the matches (and the first annotation) of that name's own regex, the form compiled once
    per name before."""
    import re

    from errkb.records.slots import _ASSIGNMENT, _Assignments

    found = _Assignments(source)
    for name in ("foo", "x", "_foo", "foobar"):
        esc = re.escape(name)
        own = re.compile(_ASSIGNMENT.format(name=esc), re.MULTILINE)
        expected = [(m.group(0), m.group("op"), m.group("rhs")) for m in own.finditer(source)]
        got = [(m.group(0), m.group("op"), m.group("rhs")) for m in found._assignments(name)]
        assert got == expected
        first = re.search(rf"\b{esc}[ \t]*:[ \t]*([\w.]+)[ \t]*[,)=]", source)
        assert found._annotation(name) == (first.group(1) if first else None)
