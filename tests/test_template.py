from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from errkb.records.template import Literal, Placeholder, parse_template


@pytest.mark.parametrize(
    ("message", "names"),
    [
        (
            "Quanto layer {prefix!r} has incompatible scale "
            "{scale_slice.get_dtype()} {scale_shape}",
            ("prefix", "scale_slice.get_dtype()", "scale_shape"),
        ),
        ("got shape {tuple(loaded_weight.shape)}", ("tuple(loaded_weight.shape)",)),
        (
            "missing metadata={sorted(missing_map)[:5]}, x={d['k']}",
            ("sorted(missing_map)[:5]", "d['k']"),
        ),
        ("width {w:>8} and {v!r:^3}", ("w", "v")),
        ("positional {} and {} then {0}", ("arg1", "arg2")),
        ("printf %s and %(name)r and %5.2f", ("arg1", "name", "arg2")),
        ("JS template ${user.id} failed", ("user.id",)),
        ("debug {value=}", ("value",)),
    ],
)
def test_placeholder_names(message: str, names: tuple[str, ...]) -> None:
    assert parse_template(message).names == names


@pytest.mark.parametrize(
    "message",
    ["100% sure", "literal {{braces}} stay", 'a JSON body {"k": 1}', "50%% done", "{ }"],
)
def test_prose_stays_literal(message: str) -> None:
    template = parse_template(message)
    assert template.placeholders == ()


def test_repr_conversion_and_render() -> None:
    t = parse_template("layer {prefix!r} scale {shape}")
    assert t.segments == (
        Literal("layer "),
        Placeholder("prefix", "{prefix!r}", "r"),
        Literal(" scale "),
        Placeholder("shape", "{shape}", None),
    )
    assert t.render({"prefix": "enc.0", "shape": "(3,)"}) == "layer 'enc.0' scale (3,)"
    assert t.masked("*") == "layer * scale *"
    assert t.literal_length == len("layer ") + len(" scale ")


@given(st.text(max_size=200))
def test_parse_never_raises_and_round_trips_literals(text: str) -> None:
    template = parse_template(text)
    # Rendering every placeholder as its raw text gives back the message (escapes folded).
    rebuilt = "".join(s.text if isinstance(s, Literal) else s.raw for s in template.segments)
    assert rebuilt.replace("{{", "{").replace("}}", "}").replace("%%", "%") == (
        text.replace("{{", "{").replace("}}", "}").replace("%%", "%")
    )


@pytest.mark.parametrize(
    ("message", "names", "literal"),
    [
        ("cost ${{amount}}", (), "cost ${amount}"),
        ("ratio %5.1F%% of %G", ("arg1", "arg2"), "ratio % of "),
        ("bytes %b stay", (), "bytes %b stay"),
    ],
)
def test_dollar_brace_escape_and_printf_conversions(
    message: str, names: tuple[str, ...], literal: str
) -> None:
    template = parse_template(message)
    assert template.names == names
    assert "".join(template.literals) == literal
