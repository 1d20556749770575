"""The prefix table: every rule's example is stripped by exactly that rule, and the log shapes
that only a rule of the table explains (journald's ``-o`` modes, RFC 5424 / RFC 3164 syslog)."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import errkb
from errkb.explain import Route, Thresholds, choose_route
from errkb.parse.prefixes import (
    RULES,
    WARM_AFTER,
    ByFirst,
    PrefixRule,
    by_first,
    compiled,
    first_chars,
    rule_for,
)
from errkb.parse.text import line_text, normalize
from errkb.parse.traceback import parse_log
from tests.tiers import examples


def test_rule_names_are_unique_identifiers() -> None:
    names = [rule.name for rule in RULES]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_example_is_stripped_by_exactly_its_rule(rule: PrefixRule) -> None:
    m = compiled().match(rule.example)
    assert m is not None, f"no rule strips {rule.example!r}"
    assert rule_for(m).name == rule.name, f"{rule_for(m).name} took {rule.name}'s example"
    assert rule.example[m.end() :] == rule.remainder
    # The real normaliser agrees: stripping the example gives what stripping the rest gives.
    assert normalize(rule.example).text == normalize(rule.remainder).text
    # The rule's own shape, alone, strips the same prefix (the example exercises the rule,
    # not a neighbour's branch of the alternation).
    alone = re.compile(rule.shape).match(rule.example)
    assert alone is not None and alone.end() == m.end()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_one_line_read_alone_is_cleaned_as_the_normaliser_cleans_it(rule: PrefixRule) -> None:
    # ``line_text`` (the record scan's rejects ask it where a line's text begins) strips what
    # ``normalize`` strips, for every rule's example and for its remainder indented.
    for line in (rule.example, rule.remainder, "    " + rule.remainder):
        assert line_text(line) == normalize(line).text, line


ASCII = frozenset(chr(c) for c in range(128))
DIGITS = frozenset(string.digits)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("abc", frozenset("a")),
        (r"\[?E", frozenset("[E")),
        (r"(?:x|yy)z", frozenset("xy")),
        (r"(?:x|)z", frozenset("xz")),  # an empty branch lets what follows begin the match
        (r"\d{1,3}", DIGITS),
        (r"\d{0,3}-", DIGITS | {"-"}),
        (r"[^a]", ASCII - {"a"}),
        (r"[a-c_]", frozenset("abc_")),
        (r"\S", ASCII - frozenset(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")),
        (r"(?=b)b", frozenset("b")),
        (r"(?<=x)\by", frozenset("y")),
        (r"(?P<g>q)r", frozenset("q")),
        (r"(?>a|b)c", frozenset("ab")),
        ("é|a", frozenset("a")),  # a non-ASCII first character is never told apart
        (r"(a)\1", frozenset("a")),
        (r"\1?(a)", None),  # a back reference first: any character
        (r"a?", None),  # may match empty
        (r"(?i)a", None),
        (r"(?i:a)", None),
    ],
)
def test_first_chars_reads_what_a_match_can_begin_with(
    shape: str, expected: frozenset[str] | None
) -> None:
    assert first_chars(shape) == expected


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_every_rule_example_begins_with_one_of_its_first_chars(rule: PrefixRule) -> None:
    first = first_chars(rule.shape)
    assert first is None or rule.example[0] in first


def test_by_first_leaves_out_only_rules_that_cannot_begin_there() -> None:
    table = ByFirst(RULES, compiled())
    assert table["V"] is not None and "K_location" in table["V"].groupindex
    assert "K_level" not in table["V"].groupindex
    assert table["é"] is compiled() and table[""] is compiled()
    # A character no rule begins with: no call at all.
    assert table["!"] is None
    # Every character of a subset shares one compiled alternation.
    assert table["["] is table["["]


# Lines made of the examples' prefixes, their pieces and stray characters, so that a rule's
# shape is tried at every kind of position (a prefix's start, its middle, after another one).
_PIECES = [rule.example[: len(rule.example) - len(rule.remainder)] for rule in RULES]
_FRAGMENTS = (
    st.sampled_from(_PIECES)
    | st.sampled_from(_PIECES).map(lambda p: p[1:])
    | st.text(alphabet=st.sampled_from([*"[](){}<>:-|E0123456789 \tMINFOWTaé=/."]), max_size=6)
)


def _same_match(line: str, pos: int, table: ByFirst | None = None) -> None:
    """The subset for the character at ``pos`` matches there exactly as the whole alternation."""
    end = min(len(line), pos + 64)
    want = compiled().match(line, pos, end)
    rules = (table if table is not None else by_first())[line[pos] if pos < end else ""]
    got = None if rules is None else rules.match(line, pos, end)
    if want is None:
        assert got is None, (line, pos)
        return
    assert got is not None, (line, pos, want)
    assert (got.lastgroup, got.span()) == (want.lastgroup, want.span())
    assert {k: v for k, v in got.groupdict().items() if v is not None} == {
        k: v for k, v in want.groupdict().items() if v is not None
    }


@pytest.mark.parametrize("piece", _PIECES)
def test_every_character_before_every_prefix_is_dispatched_as_the_whole_alternation(
    piece: str,
) -> None:
    # Each example's prefix with its first character replaced by, or put after, every ASCII
    # character: a rule left out of a character's subset that can begin there fails here.
    for code in range(128):
        for line in (chr(code) + piece[1:], chr(code) + piece):
            _same_match(line, 0)


@settings(max_examples=examples(400), deadline=None, derandomize=True)
@given(parts=st.lists(_FRAGMENTS, max_size=6))
def test_the_alternation_by_first_char_matches_as_the_whole_one(parts: list[str]) -> None:
    line = "".join(parts)
    for pos in range(len(line) + 1):
        _same_match(line, pos)


#: A table that built its subsets from its first look-up on (the shared one waits).
_WARM = ByFirst(RULES, compiled())


@pytest.mark.parametrize("piece", _PIECES)
def test_a_warm_table_dispatches_every_character_as_the_whole_alternation(piece: str) -> None:
    # The shared table answers its first look-ups by the whole alternation: this one never does.
    for code in range(128):
        for line in (chr(code) + piece[1:], chr(code) + piece):
            _same_match(line, 0, _WARM)
            _same_match(line, 1, _WARM)


def test_the_table_answers_by_the_whole_alternation_until_it_is_warm() -> None:
    table = ByFirst(RULES, compiled(), warm_after=3)
    assert [table["V"], table["["], table["V"]] == [compiled()] * 3
    # A short input read no rule's first characters, compiled no subset and kept nothing.
    assert (len(table), table._firsts, table._subsets) == (0, None, {})
    subset = table["V"]
    assert subset is not None and "K_level" not in subset.groupindex
    assert table["V"] is subset and dict(table) == {"V": subset}
    assert table["é"] is compiled()
    # The shared table waits as long; a paste of a few lines stays far below it.
    assert WARM_AFTER >= 1000 and by_first()._whole is compiled()


MESSAGE = (
    "ValueError: Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
    "got shape (2,)"
)
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/layers/linear.py", line 872, in load',
    "    raise ValueError(",
    MESSAGE,
]

# journalctl -o MODE for one line of python3[14047] on host "gpu-3", as systemd prints them.
JOURNALD = {
    "short": "Dec 01 06:02:08 gpu-3 python3[14047]: ",
    "short-precise": "Dec 01 06:02:08.123456 gpu-3 python3[14047]: ",
    "short-iso": "2026-12-01T06:02:08+0000 gpu-3 python3[14047]: ",
    "short-iso-precise": "2026-12-01T06:02:08.123456+00:00 gpu-3 python3[14047]: ",
    "short-full": "Tue 2026-12-01 06:02:08 UTC gpu-3 python3[14047]: ",
    "short-monotonic": "[ 5017.123456] gpu-3 python3[14047]: ",
    "short-unix": "1764568928.123456 gpu-3 python3[14047]: ",
    "with-unit": "Tue 2026-12-01 06:02:08 UTC gpu-3 sglang.service[14047]: ",
    "cat": "",
    "rfc3164": "<11>Dec  1 06:02:08 gpu-3 python3[14047]: ",
    "rfc5424": "<11>1 2026-12-01T06:02:08.123456Z gpu-3 python3 14047 - - ",
    "rfc5424-sd": '<11>1 2026-12-01T06:02:08Z gpu-3 python3 14047 ID7 [origin ip="10.0.0.3"] ',
}


@pytest.mark.parametrize("mode", sorted(JOURNALD))
def test_journald_and_syslog_lines_parse_to_the_traceback(mode: str) -> None:
    prefix = JOURNALD[mode]
    text = "\n".join(prefix + line for line in TRACEBACK) + "\n"
    log = normalize(text)
    assert [line.text for line in log] == TRACEBACK
    (event,) = parse_log(text)
    assert (event.exc_class, event.lines) == ("ValueError", (4,))
    assert event.message == MESSAGE.removeprefix("ValueError: ")
    assert event.frames[0].line == 872


def _journal_entries(mode: str) -> str:
    """TRACEBACK as journalctl -o verbose / export prints it: one entry per line, each with its
    fields (MESSAGE among them, where journald happens to put it)."""
    out = []
    for k, line in enumerate(TRACEBACK):
        fields = ["_HOSTNAME=gpu-3", "PRIORITY=6", "_TRANSPORT=stdout", "_COMM=python3"]
        fields.insert(k % len(fields), f"MESSAGE={line}")
        fields += ["SYSLOG_IDENTIFIER=sglang", "_PID=14047"]
        if mode == "verbose":
            out.append(f"Tue 2026-12-01 06:02:08.{k:06d} UTC [s=9ed1;i={k:x};b=e7cf;m=55dd]")
            out.extend("    " + f for f in fields)
        else:
            out.extend([f"__CURSOR=s=9ed1;i={k:x}", f"__REALTIME_TIMESTAMP=17961134264{k:05d}"])
            out.extend(fields)
            out.append("")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("mode", ["verbose", "export"])
def test_journal_entries_read_as_one_stream_of_messages(mode: str) -> None:
    # Each line of the traceback is its own entry, between the entry's other fields: the
    # MESSAGE fields of consecutive entries are the traceback, whole again.
    text = _journal_entries(mode)
    (event,) = parse_log(text)
    assert event.exc_class == "ValueError"
    assert event.message == MESSAGE.removeprefix("ValueError: ")
    assert event.frames[0].line == 872
    line = text.splitlines().index(next(x for x in text.splitlines() if "=" + MESSAGE in x))
    assert event.lines == (line + 1,)
    # A field that only looks like one (an indented source line) is left as it is.
    assert normalize("    MESSAGES=1").text == "    MESSAGES=1"


@pytest.mark.parametrize("mode", ["short-iso", "rfc5424", "short-monotonic"])
def test_journald_log_is_explained(kb: errkb.KnowledgeBase, mode: str) -> None:
    text = "\n".join(JOURNALD[mode] + line for line in TRACEBACK)
    (match,) = kb.explain(text).exact
    assert match.id == "129d60f3f6e5f4e0"
    assert match.capture_dict == {"tuple(loaded_weight.shape)": "(2,)"}
    assert match.lines == (4,)


def test_journald_shape_needs_host_and_pid() -> None:
    # A timestamp followed by ordinary words keeps the words: only "host ident[pid]: " is journald.
    (line,) = normalize("2026-12-01T06:02:08+0000 Worker failed: ValueError: x").lines
    assert line.text == "Worker failed: ValueError: x"


# --------------------------------------------------------------------------- every explain route
#: A known record's message (the bundled Comfy INT8 record) and one no record holds.
KNOWN = (
    "ValueError: Comfy INT8 layer 'blocks.3' has incompatible weight/scale shapes: "
    "(4096, 4096) and (4096, 2)"
)
UNKNOWN = "ValueError: widget 7 went missing from the tray"
ROUTE_FILLER = "2026-12-01 10:00:{s:02d} INFO step {n} loss=0.41 lr=2.0e-04 weights loaded\n"


def glued(rule: PrefixRule, message: str) -> list[str]:
    """``message`` (an exception line) behind ``rule``'s prefix: as its example prints it, and
    glued on without the prefix's trailing space where the rule's shape allows that
    (torchrun's ``[rank3]:ValueError: x``)."""
    tail = "ValueError: x"
    cut = len(rule.example) - (len(tail) if rule.example.endswith(tail) else len(rule.remainder))
    prefix = rule.example[:cut]
    lines = [prefix + message]
    tight = prefix.rstrip(" ")
    found = re.compile(rule.shape).match(tight + message)
    if tight != prefix and found is not None and found.end() == len(tight):
        lines.append(tight + message)
    return lines


def _route_log(lines: list[str]) -> bytes:
    parts = [ROUTE_FILLER.format(s=n % 60, n=n) for n in range(60)]
    for k, line in enumerate(lines):
        parts.insert(20 + 20 * k, line + "\n")
    return "".join(parts).encode()


@pytest.fixture(scope="module")
def route_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("routes") / "kb.sqlite3") as opened:
        yield opened


#: Each route forced on a few kilobytes (``errkb.explain.choose_route``).
ROUTES = {
    Route.PASTE: Thresholds(scan_from=1 << 62, paste_upto=1 << 62),
    Route.SCAN: Thresholds(scan_from=1024, paste_upto=1024),
    Route.REGIONS: Thresholds(scan_from=1 << 62, paste_upto=1024),
}


def _routes(kb: errkb.KnowledgeBase, data: bytes) -> dict[Route, dict[str, Any]]:
    """The report of ``data`` by each route: the whole parse, the scan, the region parse."""
    out = {}
    for route, sizes in ROUTES.items():
        assert choose_route(data, sizes)[0] is route
        out[route] = kb.explain(data, thresholds=sizes).to_dict()
    return out


@pytest.mark.parametrize("case", ["known", "unknown", "both"])
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_an_exception_line_behind_each_prefix_is_one_report_on_every_route(
    route_kb: errkb.KnowledgeBase, rule: PrefixRule, case: str
) -> None:
    # The scan reads an exception line outside its windows by the parse room's one reader
    # (the prefix table, then the parser's shapes): ``ERROR:root:ValueError: x`` (logging's
    # default format) or ``[rank3]:ValueError: x`` is the same unmatched entry everywhere.
    messages = {"known": [KNOWN], "unknown": [UNKNOWN], "both": [KNOWN, UNKNOWN]}[case]
    data = _route_log([line for message in messages for line in glued(rule, message)])
    assert len(data) > 1024
    reports = _routes(route_kb, data)
    assert reports[Route.SCAN] == reports[Route.PASTE]
    assert reports[Route.REGIONS] == reports[Route.PASTE]
    found = {(u["class"], u["message"]) for u in reports[Route.PASTE]["unmatched"]}
    exact = {m["id"] for m in reports[Route.PASTE]["matches"] if m["confidence"] == "exact"}
    assert (("ValueError", UNKNOWN.removeprefix("ValueError: ")) in found) == (case != "known")
    assert bool(exact) == (case != "unknown")
