from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errkb.match.matcher import Matcher
from errkb.records.patterns import PatternOrigin, compile_re2, compile_record, unquote
from tests.conftest import COMFY_ID, LINEAR_ID, QUANTO_ID
from tests.tiers import examples
from tests.workcount import assert_linear


def _spec(rec: dict[str, Any]) -> Any:
    return compile_record(
        rec["id"],
        rec["errorMessage"],
        rec["messagePattern"],
        error_class=rec["errorClass"],
        file_path=rec["filePath"],
    )


def test_hostile_pattern_runs_in_linear_time() -> None:
    spec = compile_record(
        "x" * 16, "{a} and {b} are incompatible", "(.+?) and (.+?) are incompatible"
    )
    matcher = Matcher([spec])
    line = "a and " * (100_000 // 6)
    assert matcher.verify(0, line) is None
    # RE2 is linear by construction; what could break that is Python-side retrying.
    assert_linear(lambda n: "a and " * n, lambda text: matcher.verify(0, text), 2_000)
    hit = matcher.verify(0, "x and y are incompatible")
    assert hit is not None and hit.captures == (("a", "x"), ("b", "y"))


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("Value (.+?) is bad(?=!)", "does not compile under RE2"),
        ("Value (.+?) is bad \\u0041", "does not compile under RE2"),
        ("Totally different text (.+?)", "does not match its own errorMessage"),
        ("Value (.+?) is (.+?) bad", "capture group(s)"),
        ("Value (.+? is bad", "unbalanced"),
    ],
)
def test_unusable_message_pattern_falls_back_to_the_template(pattern: str, reason: str) -> None:
    spec = compile_record("f" * 16, "Value {v!r} is bad", pattern)
    assert spec.origin is PatternOrigin.FALLBACK
    assert spec.reason is not None and reason in spec.reason
    hit = Matcher([spec]).find("ValueError: Value 'q' is bad")
    assert [h.captures for h in hit] == [(("v", "q"),)]


def test_hand_written_pattern_that_agrees_is_used() -> None:
    spec = compile_record("e" * 16, "port {port} busy", r"port (\d+) busy")
    assert spec.origin is PatternOrigin.MESSAGE_PATTERN and spec.reason is None
    matcher = Matcher([spec])
    assert matcher.find("port 8080 busy")[0].captures == (("port", "8080"),)
    assert matcher.find("port http busy") == []


def test_trailing_capture_takes_the_whole_value(seed_records: dict[str, Any]) -> None:
    matcher = Matcher([_spec(r) for r in seed_records.values()])
    hits = matcher.find("Quanto layer 'enc.0' has incompatible scale F32 (1, 3072)")
    assert [h.spec.record_id for h in hits] == [QUANTO_ID]
    assert dict(hits[0].captures) == {
        "prefix": "enc.0",
        "scale_slice.get_dtype()": "F32",
        "scale_shape": "(1, 3072)",
    }


@pytest.mark.parametrize(
    "message",
    [
        "Comfy W4A4 layer 'x' has incompatible weight/scale shapes: (1, 2) and (3,)",
        "Comfy NVFP4 layer 'x' has incompatible weight/scale shapes: (1, 2) and (3,)",
        "MXFP8 layer 'x' has incompatible weight/scale metadata: a and b",
        "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when loaded_shard_id "
        "is None, got shape (2,)",
        "Quanto layer 'x' needs a 2D I8 weight, got I8 (3,)",
    ],
)
def test_sibling_messages_do_not_match_seed_records(
    seed_records: dict[str, Any], message: str
) -> None:
    matcher = Matcher([_spec(r) for r in seed_records.values()])
    assert matcher.find(message) == []


_value = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
    min_size=1,
    max_size=30,
)
_shape = st.lists(st.integers(0, 70000), max_size=4).map(
    lambda xs: "(" + ", ".join(map(str, xs)) + ("," if len(xs) == 1 else "") + ")"
)
_dtype = st.sampled_from(["F32", "BF16", "F16", "I32", "F8_E4M3", "I8"])


@settings(max_examples=examples(200), deadline=None)
@given(prefix=_value, dtype=_dtype, shape=_shape, weight=_shape)
def test_rendering_seed_templates_and_matching_recovers_the_values(
    prefix: str, dtype: str, shape: str, weight: str
) -> None:
    from errkb.records.template import parse_template
    from tests.conftest import load_seed_envelopes

    records = {e["record"]["id"]: e["record"] for e in load_seed_envelopes()}
    matcher = Matcher([_spec(r) for r in records.values()])
    cases = {
        QUANTO_ID: {"prefix": prefix, "scale_slice.get_dtype()": dtype, "scale_shape": shape},
        COMFY_ID: {"prefix": prefix, "weight_shape": weight, "scale_shape": shape},
        LINEAR_ID: {"tuple(loaded_weight.shape)": shape},
    }
    for rid, values in cases.items():
        message = parse_template(records[rid]["errorMessage"]).render(values)
        hits = [h for h in matcher.find(message) if h.spec.record_id == rid]
        assert len(hits) == 1, message
        assert dict(hits[0].captures) == values


@pytest.mark.parametrize(
    ("quoted", "plain"),
    [
        ("'enc.0'", "enc.0"),
        ('"it\'s"', "it's"),
        ("'a\\nb'", "a\nb"),
        ("'\\x41\\u00e9'", "Aé"),
        ("unquoted", "unquoted"),
        ("'", "'"),
    ],
)
def test_unquote(quoted: str, plain: str) -> None:
    assert unquote(quoted) == plain


@given(st.text(alphabet=st.sampled_from("ab .^$|?*+()[]{}\\-\n/:'\"é"), max_size=30))
@settings(max_examples=300, deadline=None)
def test_an_escaped_text_matches_itself_and_nothing_else(text: str) -> None:
    from errkb.records.patterns import re2_escape

    regex = compile_re2(f"(?s)^(?:{re2_escape(text)})$")
    assert regex.search(text)
    assert not regex.search(text + "a") and not regex.search("a" + text)
    for meta in ".^$|?*+()[]{}\\":  # each metacharacter stands for itself only
        assert re2_escape(meta) == "\\" + meta


@pytest.mark.parametrize(
    "template",
    [
        "Quanto layer {name!r} has incompatible scale {dtype} ({shape})",
        "{count} shards failed to load from {path}",
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got {x}",
        "{what} is not a valid literal only line",
    ],
)
def test_a_lazily_compiled_regex_answers_as_the_compiled_one(template: str) -> None:
    from errkb.match.matcher import LazyRegex, verify
    from errkb.records import upstream

    spec = compile_record("r" * 16, template, upstream.message_pattern(template))
    assert spec.literals  # the template's own regex: its literals are known
    eager = compile_re2(spec.regex)
    texts = [
        "Quanto layer 'enc.0' has incompatible scale F32 ((2,))",
        "Quanto layer 'enc.0' has compatible scale F32 ((2,))",
        "3 shards failed to load from /models/x",
        "3 shards failed to load",
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got (4,)",
        "x is not a valid literal only line",
        "x is not a valid literal",
        "",
    ]
    lazy = LazyRegex(spec)
    for text in texts:
        assert verify(spec, lazy, text) == verify(spec, eager, text), text
    assert any(verify(spec, eager, t) for t in texts)


def test_a_lazy_regex_is_not_compiled_for_a_text_missing_a_literal() -> None:
    from errkb.match.matcher import LazyRegex
    from errkb.records import upstream

    template = "Quanto layer {name!r} has incompatible scale {dtype}"
    lazy = LazyRegex(compile_record("r" * 16, template, upstream.message_pattern(template)))
    assert lazy.search("Quanto layer 'a' has compatible scale F32") is None
    assert lazy._compiled is None
    assert lazy.search("Quanto layer 'a' has incompatible scale F32") is not None
    assert lazy._compiled is not None


def test_a_hand_written_pattern_is_not_checked_by_literals() -> None:
    # A messagePattern of its own may match text without the template's literals (a class,
    # an alternation): its spec claims no literals, so it is always compiled and searched.
    spec = compile_record("r" * 16, "Bad value {x}", r"(?:Bad|Wrong) value (.+?)")
    assert spec.origin is PatternOrigin.MESSAGE_PATTERN
    assert spec.literals == ()


def test_a_hand_written_pattern_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import re2

    compiled: list[str] = []
    real = re2.compile

    def counting(regex: str, options: Any = None) -> Any:
        compiled.append(regex)
        return real(regex, options)

    monkeypatch.setattr(re2, "compile", counting)
    compile_re2.cache_clear()
    spec = compile_record("h" * 16, "bad value {x} here", r"bad value (\d+) here")
    assert spec.origin is PatternOrigin.MESSAGE_PATTERN
    regex = compile_re2(spec.regex)  # what the matcher compiles once the record is a candidate
    assert compiled == [spec.regex]  # checked (compiles, agrees) and matched with one program
    assert regex.search("bad value 42 here") is not None
    # A refused regex is refused every time, not remembered as a success.
    for _ in range(2):
        with pytest.raises(Exception):  # noqa: B017 - re2 raises its own error type
            compile_re2("(unclosed")


_DEF_PIECES = (
    "def", " ", "\n", "\t", "\r", "\xa0", "async", "async\n", "f", "(", "x", "def f(",
    "  def g (", "undef h(", "_a1",
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_DEF_PIECES), max_size=14).map("".join))
def test_functions_are_those_of_the_multiline_def_regex(source: str) -> None:
    """``_functions`` (a literal search, then the line's lead) names what the one
    ``^\\s*(?:async\\s+)?def\\s+NAME\\s*\\(`` multiline regex names, in the same order."""
    import re

    from errkb.records.patterns import _functions

    regex = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.MULTILINE)
    assert _functions(source) == tuple(dict.fromkeys(regex.findall(source)))
