"""Wrapped, indented and quoted messages: found whatever the renderer did, with exact captures.

Renderers, terminals and mail clients wrap the final ``Class: message`` line (rich and typer pad
each wrapped line to the width; email wraps at 72; issue text is hard-wrapped), indent a
traceback as a block (Markdown code, nbconvert, rich's RichHandler) or quote it (``> ``,
``>> ``, ``> > ``). The properties: every seed message, with varied values, wrapped at any width
from 30 to 200 in any of these shapes (also after a class too long for the width, and in
RichHandler's box at its message column), and then HTML-escaped or put in a JSON string (once
or twice), is the record with exact captures; the near-miss siblings never are; and a line
after a complete message is never glued onto it.
"""

from __future__ import annotations

import html
import json
import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.match.decide import rejoins
from errkb.parse.events import MessageLine
from tests.tiers import examples

QUANTO, COMFY, LINEAR = "5c84e15f4be2c1a6", "b9825390f5c3ae68", "129d60f3f6e5f4e0"


@pytest.fixture(scope="module")
def wrap_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("wrap") / "kb.sqlite3") as kb:
        yield kb


names = st.from_regex(r"[a-z][a-z_]{0,11}(\.[a-z0-9_]{1,12}){0,6}", fullmatch=True)
dtypes = st.sampled_from(["F32", "BF16", "F16", "I32", "F64", "F8_E4M3"])
dims = st.integers(min_value=0, max_value=70000)


def _shape(values: list[int]) -> str:
    return f"({values[0]},)" if len(values) == 1 else "(" + ", ".join(map(str, values)) + ")"


shapes = st.lists(dims, min_size=1, max_size=4).map(_shape)


@st.composite
def positives(draw: st.DrawFn) -> tuple[str, str, dict[str, str]]:
    """(record id, message, captures) for one of the three seed records, values varied."""
    which = draw(st.sampled_from([QUANTO, COMFY, LINEAR]))
    if which == QUANTO:
        prefix, dtype, shape = draw(names), draw(dtypes), draw(shapes)
        message = f"Quanto layer {prefix!r} has incompatible scale {dtype} {shape}"
        captures = {"prefix": prefix, "scale_slice.get_dtype()": dtype, "scale_shape": shape}
    elif which == COMFY:
        prefix, weight, scale = draw(names), draw(shapes), draw(shapes)
        message = (
            f"Comfy INT8 layer {prefix!r} has incompatible weight/scale shapes: "
            f"{weight} and {scale}"
        )
        captures = {"prefix": prefix, "weight_shape": weight, "scale_shape": scale}
    else:
        shape = draw(shapes)
        message = (
            "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
            f"got shape {shape}"
        )
        captures = {"tuple(loaded_weight.shape)": shape}
    return which, message, captures


@st.composite
def near_misses(draw: st.DrawFn) -> str:
    """Sibling messages of the records (shared/notes/CHECKS.md): never the record."""
    prefix, a, b = draw(names), draw(shapes), draw(shapes)
    fmt = draw(st.sampled_from(["W4A4", "NVFP4"]))
    return draw(
        st.sampled_from(
            [
                f"Comfy {fmt} layer {prefix!r} has incompatible weight/scale shapes: {a} and {b}",
                f"Comfy W4A8 layer {prefix!r} has incompatible weight/scale shapes: "
                f"{a}, {b}, and {a}",
                f"MXFP8 layer {prefix!r} has incompatible weight/scale metadata: {a} and {b}",
                "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when "
                f"loaded_shard_id is None, got shape {a}",
                f"Quanto layer {prefix!r} needs a 2D I8 weight, got F32 {a}",
                f"Quanto auxiliary scale {prefix!r} must be a float scalar",
            ]
        )
    )


SHAPES = [
    "plain", "padded", "indented", "quoted", "nested-quote", "spaced-quote", "bare",
    "long-class", "handler-box",
]  # fmt: skip
#: A class longer than most widths: a wrapper that keeps words whole (email) ends its line
#: right after the colon and puts the whole message below it.
LONG_CLASS = "sglang.multimodal_gen.runtime.loader.component_loader.ComponentCheckpointError"


def render(message: str, width: int, shape: str, hyphens: bool) -> str:
    """A traceback whose last line is wrapped at ``width`` the way ``shape`` renders it."""
    cls = LONG_CLASS if shape == "long-class" else "ValueError"
    lines = textwrap.wrap(
        f"{cls}: {message}",
        width,
        break_long_words=shape != "long-class",
        break_on_hyphens=hyphens,
    )
    if shape in ("padded", "handler-box"):  # rich / typer pad each wrapped line to the width
        lines = [line.ljust(width) for line in lines]
    if shape == "handler-box":
        # RichHandler(rich_tracebacks=True): the record's line, then rich's box and the
        # wrapped exception line, all at the handler's message column.
        head = [
            "╭───── Traceback (most recent call last) ─────╮",
            "│ /srv/app/loader.py:12 in load                │",
            "│ ❱ 12 │   raise ValueError(message)            │",
            "╰──────────────────────────────────────────────╯",
        ]
    elif shape == "bare":
        head = []
    else:
        head = [
            "Traceback (most recent call last):",
            '  File "/srv/app/loader.py", line 12, in load',
            "    raise ValueError(message)",
        ]
    block = [*head, *lines, "", "INFO the next log line"]
    if shape == "indented":
        block = [("    " + line) if line else line for line in block]
    elif shape == "handler-box":
        column = " " * 20
        block = ["[08:23:26] ERROR    Failed to load    loader.py:9", *(column + b for b in block)]
    elif shape == "quoted":
        block = ["> " + line for line in block]
    elif shape == "nested-quote":
        block = [(">> " if k % 2 else "> ") + line for k, line in enumerate(block)]
    elif shape == "spaced-quote":
        block = ["> > " + line for line in block]
    return "Reply from the user:\n\n" + "\n".join(block) + "\n"


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    positive=positives(),
    width=st.integers(min_value=30, max_value=200),
    shape=st.sampled_from(SHAPES),
    hyphens=st.booleans(),
)
def test_wrapped_positive_matches_with_exact_captures(
    wrap_kb: errkb.KnowledgeBase,
    positive: tuple[str, str, dict[str, str]],
    width: int,
    shape: str,
    hyphens: bool,
) -> None:
    record_id, message, captures = positive
    report = wrap_kb.explain(render(message, width, shape, hyphens))
    assert [(m.id, m.capture_dict) for m in report.exact] == [(record_id, captures)]
    assert report.exact[0].exception.message == message


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    message=near_misses(),
    width=st.integers(min_value=30, max_value=200),
    shape=st.sampled_from(SHAPES),
    hyphens=st.booleans(),
)
def test_wrapped_near_miss_never_matches(
    wrap_kb: errkb.KnowledgeBase, message: str, width: int, shape: str, hyphens: bool
) -> None:
    assert wrap_kb.explain(render(message, width, shape, hyphens)).exact == ()


CONTAINERS = ["html", "html-twice", "json", "json-twice"]


def contain(text: str, container: str) -> str:
    """``text`` as a saved page shows it, or as a JSON log record's string value holds it."""
    if container.startswith("html"):
        body = html.escape(text, quote=True)
        if container == "html-twice":
            body = html.escape(body, quote=True)
        return f"<html><body>\n<pre>{body}</pre>\n</body></html>\n"
    doc = json.dumps({"level": "error", "exception": text})
    if container == "json-twice":
        doc = json.dumps({"reply": doc})
    return doc + "\n"


@settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    positive=positives(),
    width=st.integers(min_value=30, max_value=200),
    shape=st.sampled_from(SHAPES),
    container=st.sampled_from(CONTAINERS),
)
def test_wrapped_and_escaped_positive_matches_with_exact_captures(
    wrap_kb: errkb.KnowledgeBase,
    positive: tuple[str, str, dict[str, str]],
    width: int,
    shape: str,
    container: str,
) -> None:
    record_id, message, captures = positive
    report = wrap_kb.explain(contain(render(message, width, shape, False), container))
    assert [(m.id, m.capture_dict) for m in report.exact] == [(record_id, captures)]


@settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    message=near_misses(),
    width=st.integers(min_value=30, max_value=200),
    shape=st.sampled_from(SHAPES),
    container=st.sampled_from(CONTAINERS),
)
def test_wrapped_and_escaped_near_miss_never_matches(
    wrap_kb: errkb.KnowledgeBase, message: str, width: int, shape: str, container: str
) -> None:
    assert wrap_kb.explain(contain(render(message, width, shape, False), container)).exact == ()


def test_line_after_a_whole_message_is_not_glued_on(wrap_kb: errkb.KnowledgeBase) -> None:
    message = (
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
        "got shape (2,)"
    )
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/srv/app/loader.py", line 12, in load',
            "ValueError: " + message,
            "Got exit code 1",
        ]
    )
    (match,) = wrap_kb.explain(text).exact
    assert match.capture_dict == {"tuple(loaded_weight.shape)": "(2,)"}
    # Wrapped, a short last line ends the message: the next line is no continuation.
    wrapped = text.replace("checkpoint load, ", "checkpoint load,\n")
    (match,) = wrap_kb.explain(wrapped).exact
    assert match.capture_dict == {"tuple(loaded_weight.shape)": "(2,)"}
    assert match.exception.message == message


def _lines(*texts: str, width: int = 0) -> list[MessageLine]:
    out = []
    for k, text in enumerate(texts):
        length = len(text) + (len("ValueError: ") if k == 0 else 0)
        out.append(MessageLine(text, k + 1, length, max(width, length)))
    return out


def test_rejoin_shapes() -> None:
    # Padded lines broke at a space; the first non-wrap break ends the candidates.
    got = list(rejoins(_lines("a b c", "dddd e", "f", width=20)))
    assert got == [(2, "a b c dddd e")]
    # A full-width chopped block (every line but the last equally long) joins with "" first.
    # ("ValueError: abcdefgh" is 20 columns, as are the next two lines; one starts with a space)
    got = list(rejoins(_lines("abcdefgh", "ijklmnopqrstuvwxyzab", " defghijklmnopqrstuv", "wx")))
    assert got[0] == (4, "abcdefghijklmnopqrstuvwxyzab defghijklmnopqrstuvwx")
    # Two equal lines are no such evidence: a word wrapper's space comes first.
    got = list(rejoins(_lines("abcdefgh", "ijklmnopqrst", "uv")))
    assert got[0] == (2, "abcdefgh ijklmnopqrst")
    # A line ending in a hyphen may have been broken after it.
    assert next(rejoins(_lines("x fused-", "in"))) == (2, "x fused-in")


def _headless(cls: str, *texts: str) -> list[MessageLine]:
    """``cls:`` alone on its line, the message on the lines after it."""
    head = MessageLine("", 1, len(cls) + 1, len(cls) + 1)
    return [head, *(MessageLine(t, k + 2, len(t), len(t)) for k, t in enumerate(texts))]


def test_rejoin_of_a_message_that_starts_below_its_class() -> None:
    long_class = "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.ComponentError"
    lines = _headless(long_class, "Cannot load 'x': Quanto", "layer 'y' is bad at x", "F32")
    got = list(rejoins(lines))
    # The message is the lines below the class, longest join first; the class line adds nothing.
    assert got[0] == (4, "Cannot load 'x': Quanto layer 'y' is bad at x F32")
    assert got[-1] == (2, "Cannot load 'x': Quanto")
    # A short class that its message's first word would have fitted after: no wrap, no join.
    assert list(rejoins(_headless("ValueError", "Cannot load 'x': Quanto", "layer"))) == []


def test_a_lone_class_line_with_nothing_confirmed_is_not_reported(
    wrap_kb: errkb.KnowledgeBase,
) -> None:
    report = wrap_kb.explain(
        "some.very.long.module.path.of.the.package.that.raised.it.ComponentLoadError:\n"
        "Cannot configure checkpoint quantization: nothing a record knows\n"
    )
    assert report.exact == () and report.unmatched == ()


def test_terminal_chop_keeps_the_space_that_starts_the_next_line(
    wrap_kb: errkb.KnowledgeBase,
) -> None:
    message = "Quanto layer 'enc.block.0' has incompatible scale F32 (4096,)"
    full = "ValueError: " + message
    chopped = [full[k : k + 24] for k in range(0, len(full), 24)]  # a terminal at 24 columns
    text = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\n' + "\n".join(chopped)
    (match,) = wrap_kb.explain(text).exact
    assert match.capture_dict == {
        "prefix": "enc.block.0",
        "scale_slice.get_dtype()": "F32",
        "scale_shape": "(4096,)",
    }


RICH_HANDLER = """\
[12/01/26 06:02:08] ERROR    Worker failed                         worker.py:12
                    Traceback (most recent call last):
                      File "/x/quanto_int8_config.py", line 168, in inspect
                        raise ValueError(
                    ValueError: Quanto layer
                    'encoder.block.0.layer.0.SelfAttention.q' has incompatible   
                    scale F32 (4096,)                                            
[12/01/26 06:02:09] INFO     next
"""  # noqa: W291 - the padding is what RichHandler writes

NBCONVERT = """\
Some text

    ---------------------------------------------------------------------------

    ValueError                                Traceback (most recent call last)

    Cell In[2], line 3
          1 import x
    ----> 3 x.load()


    File /x/quanto_int8_config.py:168, in inspect(path)
        166     if bad:
    --> 168         raise ValueError(f"Quanto layer {prefix!r} has incompatible scale {d} {s}")


    ValueError: Quanto layer 'encoder.block.0.layer.0.SelfAttention.q' has incompatible scale F32 (4096,)

More text
"""  # noqa: E501 - nbconvert does not wrap


@pytest.mark.parametrize(
    ("text", "line"),
    [(RICH_HANDLER, 5), (NBCONVERT, 17)],
    ids=["rich-handler", "nbconvert-markdown"],
)
def test_indented_traceback_block_is_a_traceback(
    wrap_kb: errkb.KnowledgeBase, text: str, line: int
) -> None:
    (match,) = wrap_kb.explain(text).exact
    assert match.id == QUANTO and match.lines == (line,)
    assert match.capture_dict["prefix"] == "encoder.block.0.layer.0.SelfAttention.q"
    assert match.capture_dict["scale_shape"] == "(4096,)"


def test_indented_source_is_still_not_an_occurrence(wrap_kb: errkb.KnowledgeBase) -> None:
    # An indented block that does not start with a traceback header stays source.
    text = (
        "    raise ValueError(\n"
        "        f\"Quanto layer 'a.b' has incompatible scale F32 (1,)\"\n"
        "    )\n"
    )
    assert wrap_kb.explain(text).exact == ()
