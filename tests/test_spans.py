"""Message spans: where a known message can sit inside another message, innermost first."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from errkb.parse.spans import (
    MAX_SPANS,
    MAX_TOTAL_CHARS,
    MessageSpan,
    SpanVia,
    decode_string_literal,
    message_spans,
)
from tests.tiers import examples
from tests.workcount import assert_linear

QUANTO = "Quanto layer 'enc.0' has incompatible scale F32 (3072,)"
LINEAR = (
    "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape (2,)"
)
ROLLBACK = "Rolling back to original weights."
COMFY = (
    "Comfy INT8 layer 'double_blocks.0.img_attn.qkv' has incompatible weight/scale shapes: "
    "(9216, 3072) and (1, 9216)"
)


def texts(message: str) -> list[str]:
    return [s.text for s in message_spans(message)]


def span_for(message: str, text: str) -> MessageSpan:
    for span in message_spans(message):
        if span.text == text:
            return span
    raise AssertionError(f"{text!r} not among {texts(message)}")


# (message shape, the embedded message that must be offered, how it is found)
SHAPES = [
    pytest.param(
        f"Cannot configure checkpoint quantization for 'text_encoder': {QUANTO}",
        QUANTO,
        SpanVia.WRAPPER,
        id="wrapper",
    ),
    pytest.param(
        f"Failed to update weights: {LINEAR}", LINEAR, SpanVia.WRAPPER, id="update-wrapper"
    ),
    pytest.param(f"Worker failed: ValueError({QUANTO!r})", QUANTO, SpanVia.REPR, id="repr-double"),
    pytest.param(f"load failed: ValueError({LINEAR!r})", LINEAR, SpanVia.REPR, id="repr-single"),
    pytest.param(
        json.dumps(
            {
                "success": False,
                "message": f"Failed to update weights: {LINEAR}.\n{ROLLBACK}",
            },
            separators=(",", ":"),
        ),
        LINEAR,
        SpanVia.WRAPPER,
        id="json-reply",
    ),
    pytest.param(
        str({"success": False, "message": f"Failed to update weights: {LINEAR}.\nRolling back."}),
        LINEAR,
        SpanVia.WRAPPER,
        id="dict-repr-reply",
    ),
    pytest.param(f"{COMFY}\nwhile validating text_encoder", COMFY, SpanVia.LINE, id="multi-line"),
    pytest.param(
        f'cannot load: RuntimeError("Worker failed: ValueError({QUANTO!r})")'.replace(
            "'enc.0'", "\\'enc.0\\'"
        ),
        QUANTO,
        SpanVia.REPR,
        id="repr-in-repr",
    ),
]


@pytest.mark.parametrize(("message", "inner", "via"), SHAPES)
def test_embedded_message_is_offered(message: str, inner: str, via: SpanVia) -> None:
    spans = message_spans(message)
    span = span_for(message, inner)
    assert span.embedded
    assert span.via is via
    # The message itself is last and the only one not embedded.
    assert spans[-1] == MessageSpan(message, 0, False, SpanVia.MESSAGE)
    assert [s.embedded for s in spans].count(False) == 1


def test_json_reply_innermost_first_without_the_sentence_period() -> None:
    message = json.dumps(
        {
            "success": False,
            "message": f"Failed to update weights: {LINEAR}.\nRolling back to original weights.",
        },
        separators=(",", ":"),
    )
    spans = message_spans(message)
    assert spans[0].text == LINEAR  # the period after "(2,)" ends the wrapper's sentence
    order = [s.text for s in spans]
    assert order.index(LINEAR) < order.index(LINEAR + ".")
    assert f"Failed to update weights: {LINEAR}.\nRolling back to original weights." in order
    assert "Rolling back to original weights." in order
    # Decoded text has no offset in the escaped message.
    assert span_for(message, LINEAR).offset is None


def test_wrapper_suffixes_are_ordered_innermost_first() -> None:
    message = f"a: b: {QUANTO}"
    order = texts(message)
    assert order.index(QUANTO) < order.index(f"b: {QUANTO}") < order.index(message)


def test_offsets_point_into_the_message() -> None:
    message = f"Worker failed: ValueError({QUANTO!r}) and then: {COMFY}"
    for span in message_spans(message):
        if span.offset is not None:
            assert message[span.offset : span.offset + len(span.text)] == span.text
    assert span_for(message, QUANTO).offset == message.index(QUANTO)


def test_a_colon_inside_a_quoted_message_is_not_a_wrapper_boundary() -> None:
    message = '{"message":"Failed to update weights: x y z w v.\\nRolling back."}'
    assert not any(t.startswith("x y z w v.\\n") for t in texts(message))


@pytest.mark.parametrize(
    "message",
    [
        "can't load model, it's broken, isn't it",
        "layer 'enc.0' and 'enc.1' failed",
        "key 'text_encoder': bad",
    ],
)
def test_apostrophes_and_short_names_are_not_messages(message: str) -> None:
    assert all(s.via is not SpanVia.REPR for s in message_spans(message))


@pytest.mark.parametrize(
    ("body", "decoded"),
    [
        (r"a\\b", "a\\b"),
        (r"it\'s", "it's"),
        (r"say \"hi\"", 'say "hi"'),
        (r"one\ntwo\tthree\r", "one\ntwo\tthree\r"),
        (r"\x41\u00e9\U0001F600", "Aé😀"),
        (r"\ud83d\ude00", "😀"),
        (r"lone \ud800 surrogate", "lone \ufffd surrogate"),
        (r"\101 octal", "A octal"),
        (r"unknown \q escape", "unknown \\q escape"),
        (r"a\/b", "a/b"),
        ("no escapes", "no escapes"),
    ],
)
def test_decode_string_literal(body: str, decoded: str) -> None:
    assert decode_string_literal(body) == decoded


def test_decoded_repr_recovers_the_original_message() -> None:
    original = "Quanto layer 'a\\b' has\ttabs and \"quotes\" and é"
    message = f"Worker failed: ValueError({original!r})"
    assert original in texts(message)
    assert span_for(message, original).offset is None


def test_no_duplicate_texts() -> None:
    message = f"x: {QUANTO}\n{QUANTO}\nValueError({QUANTO!r})"
    found = texts(message)
    assert len(found) == len(set(found))


def test_caps_on_count_and_size() -> None:
    many = ": ".join(f"part {k} with words" for k in range(2000))
    assert len(message_spans(many)) <= MAX_SPANS
    big = "{" + ",".join(f'"message":"{"word " * 2000}{k}"' for k in range(200)) + "}"
    spans = message_spans(big)
    assert len(spans) <= MAX_SPANS
    assert sum(len(s.text) for s in spans if s.embedded) <= MAX_TOTAL_CHARS


def test_a_huge_message_is_bounded() -> None:
    message = ("ValueError: " + "x" * 1000 + "\n") * 5000
    spans = message_spans(message)
    assert spans[-1].text == message
    assert len(spans) <= MAX_SPANS


def test_plain_message_gives_only_itself() -> None:
    assert message_spans(QUANTO) == [MessageSpan(QUANTO, 0, False, SpanVia.MESSAGE)]


def test_empty_message() -> None:
    assert message_spans("") == [MessageSpan("", 0, False, SpanVia.MESSAGE)]


def test_via_is_a_str_enum() -> None:
    assert isinstance(SpanVia.JSON, str)
    assert f"{SpanVia.JSON}" == "json"
    assert {v.value for v in SpanVia} == {"message", "wrapper", "repr", "json", "line", "entity"}


@settings(max_examples=examples(400), deadline=None)
@given(st.text(max_size=2000))
def test_message_spans_never_raises_and_offsets_hold(message: str) -> None:
    spans = message_spans(message)
    assert spans[-1].text == message and not spans[-1].embedded
    assert len(spans) <= MAX_SPANS
    for span in spans:
        if span.offset is not None:
            assert message[span.offset : span.offset + len(span.text)] == span.text


#: Messages the embedding property is about: 12+ characters, a space, no outer whitespace. Plain
#: st.text() hits that on about 7 of 300 inputs; words joined by spaces hit it almost always,
#: while each word may still hold any character (quotes, backslashes, controls, non-BMP).
_WORD = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=24)
EMBEDDABLE = st.lists(_WORD, min_size=2, max_size=8).map(" ".join)


def _embeddable(inner: str) -> bool:
    return len(inner) >= 12 and " " in inner and inner == inner.strip()


@settings(max_examples=examples(300), deadline=None)
@given(EMBEDDABLE)
def test_any_string_survives_repr_and_json_embedding(inner: str) -> None:
    # assume(), not return: if the strategy stopped producing such messages, Hypothesis's
    # filter_too_much health check fails the test instead of it passing on nothing.
    assume(_embeddable(inner))
    event("exercised")
    assert inner in texts(f"Worker failed: ValueError({inner!r})")
    assert inner in texts(json.dumps({"message": inner}))


def test_the_embedding_property_is_exercised_on_most_inputs() -> None:
    # The health check only fails below about one valid input in ten: this pins "most".
    drawn: list[bool] = []

    wanted = examples(200)

    @settings(max_examples=wanted, deadline=None, database=None, derandomize=True)
    @given(EMBEDDABLE)
    def draw(inner: str) -> None:
        drawn.append(_embeddable(inner))

    draw()
    assert len(drawn) >= wanted // 2 and sum(drawn) >= 0.5 * len(drawn)


def test_character_references_are_undone_in_one_more_candidate() -> None:
    spans = message_spans("Quanto layer &#x27;a.b&#x27; has incompatible scale F32 (3,)")
    entity = [s for s in spans if s.via is SpanVia.ENTITY]
    assert [(s.text, s.offset) for s in entity] == [
        ("Quanto layer 'a.b' has incompatible scale F32 (3,)", None)
    ]
    assert not [s for s in message_spans("a & b, no reference here") if s.via is SpanVia.ENTITY]


def test_message_spans_take_linear_work() -> None:
    assert_linear(lambda n: ("ValueError: " + "x" * 100 + "\n") * n, message_spans, 200)
