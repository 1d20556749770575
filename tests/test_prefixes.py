"""The prefix table: every rule's example is stripped by exactly that rule, and the log shapes
that only a rule of the table explains (journald's ``-o`` modes, RFC 5424 / RFC 3164 syslog)."""

from __future__ import annotations

import re

import pytest

import errkb
from errkb.parse.prefixes import RULES, PrefixRule, compiled, rule_for
from errkb.parse.text import normalize
from errkb.parse.traceback import parse_log


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
