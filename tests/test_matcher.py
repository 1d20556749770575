"""The matchers (errkb.match.matcher): masked templates, lazy regexes, programs, candidates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import errkb
from errkb.match.matcher import masked_template
from errkb.records.patterns import PatternOrigin, PatternSpec
from errkb.records.slots import SlotKind
from errkb.records.template import Placeholder, parse_template
from tests.conftest import load_seed_envelopes

#: Pieces a template is made of, the ones the parse treats specially included.
PIECES = ["{name}", "{obj.attr!r}", "{0}", "{}", "{{", "}}", "{", "}", "%s", "%(k)d", "${x}"]
PIECES += ["{a:>4}", "{ }", '{"a": 1}', "{x!r", "text ", "'", '"', "(", ")", "é", "\n", "%%"]


@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_masked_template_is_the_parse_s_masked_text(pieces: list[str]) -> None:
    message = "".join(pieces)
    assert masked_template(message) == parse_template(message).masked(" ")
    assert masked_template(message, "\u2026") == parse_template(message).masked("\u2026")


def test_every_bundled_template_masks_as_the_parse_does() -> None:
    messages = [e["record"]["errorMessage"] for e in load_seed_envelopes()]
    assert messages
    for message in messages:
        assert masked_template(message) == parse_template(message).masked(" "), message


#: Templates for the lazy regex's rejects: fixed, literals around and between placeholders,
#: a word repeated, one that starts with a placeholder.
LAZY_TEMPLATES = [
    "call",
    "out of memory",
    "Quanto layer {name!r} has incompatible scale {dtype}",
    "{n} shards failed to load from {path}",
    "bad {a} and bad {b}",
    "{x} is not {y}",
    "bad {n:d} and bad {m:.3f}, bad {s!r}",
]
#: Text pieces a candidate text is made of: the templates' own words, values, separators.
TEXT_PIECES = ["call", "out of memory", "Quanto layer ", "'enc.0'", " has incompatible scale "]
TEXT_PIECES += ["F32", "3", " shards failed to load from ", "/m/x", "bad ", " and ", " is not "]
TEXT_PIECES += ["x", " ", ".", "bad 3", " and bad 1.250", ", bad 'q'", "-7"]


@given(st.sampled_from(LAZY_TEMPLATES), st.lists(st.sampled_from(TEXT_PIECES), max_size=8))
def test_the_lazy_regex_rejects_only_texts_the_regex_does_not_match(
    template: str, pieces: list[str]
) -> None:
    # Literals in order and a fixed message's whole text are rejects with no compile; the
    # answers stay those of the regex compiled up front, on any text.
    from errkb.match.matcher import lazy_regex, verify
    from errkb.records import upstream
    from errkb.records.patterns import compile_re2, compile_record

    spec = compile_record("r" * 16, template, upstream.message_pattern(template))
    lazy = lazy_regex(spec)
    assert lazy is not None
    text = "".join(pieces)
    assert verify(spec, lazy, text) == verify(spec, compile_re2(spec.regex), text)


def test_literals_out_of_order_or_a_fixed_message_s_other_text_compile_nothing() -> None:
    from errkb.match.matcher import LazyRegex, lazy_regex
    from errkb.records import upstream
    from errkb.records.patterns import compile_record

    def lazy(template: str) -> LazyRegex:
        found = lazy_regex(compile_record("r" * 16, template, upstream.message_pattern(template)))
        assert found is not None
        return found

    both = lazy("bad {a} and bad {b}")
    # Every literal is in the text, but not in the template's order.
    assert all(lit in " and bad x bad y" for lit in both._spec.literals)
    assert both.search(" and bad x bad y") is None
    assert both._compiled is None
    assert both.search("bad x and bad y") is not None
    fixed = lazy("out of memory")
    assert fixed.search("CUDA out of memory") is None  # holds it, is not it
    assert fixed._compiled is None
    assert fixed.search("out of memory") is not None


@given(
    st.sampled_from(LAZY_TEMPLATES),
    st.lists(st.sampled_from([*TEXT_PIECES, "é", "日本", "\n"]), max_size=8),
)
def test_a_program_answers_as_re2_compile(template: str, pieces: list[str]) -> None:
    # RE2's own program, searched directly, unanchored or from each place its leading literal
    # is: the same hits, starts and captures as the ``re``-like layer gives, on ASCII and
    # other texts, with the leading literal repeated before the match.
    from errkb.match.matcher import Program, regex_lead, verify
    from errkb.records import upstream
    from errkb.records.patterns import compile_re2, compile_record

    spec = compile_record("r" * 16, template, upstream.message_pattern(template))
    text = "".join(pieces)
    lead = regex_lead(spec)
    assert bool(lead) == (not template.startswith("{") and "{" in template)
    for program in (Program(spec.regex), Program(spec.regex, lead)):
        assert verify(spec, program, text) == verify(spec, compile_re2(spec.regex), text)
        for found_text in (text, "Quanto layer 'é' has incompatible scale 日本", "bad " + text):
            ours, theirs = program.search(found_text), compile_re2(spec.regex).search(found_text)
            assert (ours is None) == (theirs is None)
            if ours is not None and theirs is not None:
                assert (ours.start(), ours.end()) == (theirs.start(), theirs.end())
                for name in (f"c{i}" for i in range(len(spec.names))):
                    assert ours.group(name) == theirs.group(name)


#: Pieces of ASCII templates for the byte-by-byte programs: placeholders of every form next to
#: separators, quotes, brackets and backslashes (what the slot grammars stop at).
BYTE_TEMPLATE_PIECES = ["{}", "{x!r}", "{n:d}", "{v:,}", "{s:>8}", "{f:.2f}", "%s", "%d", "{p}"]
BYTE_TEMPLATE_PIECES += [" ", "'", '"', "(", ")", "[", "]", ", ", ": ", "\\", ".", " in ", "x"]
#: Values and junk for their texts: non-ASCII characters of 2, 3 and 4 bytes, and what the
#: grammars treat specially.
BYTE_TEXT_PIECES = ["é", "日本", "\U0001f600", "'é'", '"日"', "\\", "\\é", "(1, 2)", "[3]", "x.y"]
BYTE_TEXT_PIECES += ["<é>", "1.5", "-3", "1,000", "   7", "a b", "\n", ". end", "ü\n", "torch"]


@given(
    st.lists(st.sampled_from(BYTE_TEMPLATE_PIECES), min_size=1, max_size=6),
    st.lists(st.sampled_from(list(SlotKind)), max_size=6),
    st.lists(st.lists(st.sampled_from(BYTE_TEXT_PIECES), max_size=4), max_size=6),
    st.lists(st.sampled_from(BYTE_TEXT_PIECES), max_size=3),
)
def test_a_byte_safe_regex_answers_byte_by_byte_as_it_does_by_characters(
    pieces: list[str], kinds: list[SlotKind], values: list[list[str]], around: list[str]
) -> None:
    # A template's own regex, typed or not, on texts that put non-ASCII characters inside,
    # before and after every value: read as Latin-1 bytes, RE2 finds the same match, the
    # same captures, or none, wherever ``byte_safe`` says so.
    from dataclasses import replace

    from errkb.match.matcher import Program, byte_safe, regex_lead
    from errkb.records import upstream
    from errkb.records.patterns import compile_record, template_regex

    template_text = "".join(pieces)
    spec = compile_record("r" * 16, template_text, upstream.message_pattern(template_text))
    template = parse_template(template_text)
    if not template.placeholders:
        return
    kinds = (kinds * len(template.placeholders))[: len(template.placeholders)] or []
    spec = replace(spec, regex=template_regex(template, tuple(kinds)))
    if not byte_safe(spec):
        adjacent = any(
            isinstance(a, Placeholder) and isinstance(b, Placeholder)
            for a, b in zip(template.segments, template.segments[1:], strict=False)
        )
        assert adjacent or spec.origin is PatternOrigin.MESSAGE_PATTERN
        return
    rendered = template.render(
        {
            p.name: "".join(values[i % len(values)]) if values else "é"
            for i, p in enumerate(template.placeholders)
        }
    )
    lead = regex_lead(spec)
    for text in (rendered, "".join(around) + rendered, rendered + "".join(around)):
        for chars, by_bytes in (
            (Program(spec.regex), Program(spec.regex, latin1=True)),
            (Program(spec.regex, lead), Program(spec.regex, lead, latin1=True)),
        ):
            ours, theirs = by_bytes.search(text), chars.search(text)
            assert (ours is None) == (theirs is None), text
            if ours is not None and theirs is not None:
                assert (ours.start(), ours.end()) == (theirs.start(), theirs.end()), text
                for name in (f"c{i}" for i in range(len(spec.names))):
                    assert ours.group(name) == theirs.group(name), text


def test_only_a_template_s_own_ascii_regex_without_adjacent_slots_is_byte_safe() -> None:
    from errkb.match.matcher import byte_safe
    from errkb.records import upstream
    from errkb.records.patterns import compile_record

    def spec(template: str, pattern: str | None = None) -> PatternSpec:
        return compile_record("r" * 16, template, pattern or upstream.message_pattern(template))

    assert byte_safe(spec("bad {a} and bad {b}"))
    assert not byte_safe(spec("bad {a}{b}"))  # a character could split between them
    assert not byte_safe(spec("bad {a} in é"))
    assert not byte_safe(spec("call"))  # no placeholder: a fixed message compiles nothing
    assert not byte_safe(spec("bad {n}", r"bad (\d+)|worse"))  # a hand-written pattern


def test_the_leading_literal_is_searched_from_each_place_it_is() -> None:
    # "bad " is at 0, 7 and 20; the match begins at 7 (the first place an anchored search
    # matches from), as the unanchored search finds it.
    from errkb.match.matcher import Program, regex_lead
    from errkb.records import upstream
    from errkb.records.patterns import compile_record

    template = "bad {n:d} and bad {m:.3f}, bad {s!r}"
    spec = compile_record("r" * 16, template, upstream.message_pattern(template))
    assert regex_lead(spec) == "bad "
    text = "bad x; bad 3 and bad 1.250, bad 'q'"
    found = Program(spec.regex, regex_lead(spec)).search(text)
    assert found is not None
    assert (found.start(), found.group("c0"), found.group("c2")) == (7, "3", "'q'")
    assert Program(spec.regex, regex_lead(spec)).search("bad x; bad y") is None
    hand_written = compile_record("r" * 16, "bad {n}", r"bad (\d+)|worse")
    assert regex_lead(hand_written) == ""  # a messagePattern's top level is its own


def test_a_regex_re2_refuses_raises_its_error() -> None:
    import re2

    from errkb.match.matcher import Program

    with pytest.raises(re2.error):
        Program("(?P<c0>")


def test_a_candidate_whose_literals_the_message_lacks_is_not_read_once_anchors_are_loaded(
    empty_kb: errkb.KnowledgeBase,
    tmp_path: Path,
    seed_records: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three records the index offers for one message (the same words: they differ in
    # punctuation, which it does not index); the message holds the literals of one. Once
    # the record anchors are loaded (``prepare``), the other two rows are not read, and the
    # report is the one the index alone gives.
    from errkb.match import matcher
    from tests.conftest import QUANTO_ID, make_record

    base = seed_records[QUANTO_ID]
    templates = [
        "weight shape mismatch for {name} in layer {layer}",
        "weight shape mismatch for {name} (in layer {layer})",
        "weight shape mismatch for {name} in layer [{layer}]",
    ]
    records = [make_record(base, t, file_path=f"m{n}.py") for n, t in enumerate(templates)]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    empty_kb.ingest([tmp_path / "r.jsonl"])
    text = "ValueError: weight shape mismatch for q_proj in layer 7\n"
    read: list[str] = []
    real = matcher._load_specs

    def counted(view: Any, ids: Any) -> Any:
        read.extend(ids)
        return real(view, ids)

    monkeypatch.setattr(matcher, "_load_specs", counted)
    plain = empty_kb.explain(text).to_dict()
    assert set(read) >= {r["id"] for r in records}
    with errkb.open(empty_kb.path) as fresh:
        fresh.prepare()
        read.clear()
        prepared = fresh.explain(text).to_dict()
    assert read == [records[0]["id"]]
    assert prepared == plain
    assert [m["id"] for m in prepared["matches"]] == [records[0]["id"]]


def test_prepare_builds_the_id_table_the_literal_test_reads(kb: errkb.KnowledgeBase) -> None:
    # 117 ms at 500k records: paid after a sync by ``prepare``, not by the first request.
    kb.prepare()
    anchors = kb._engine._anchors
    assert anchors is not None and anchors._ids_built
