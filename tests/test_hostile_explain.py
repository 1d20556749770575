"""Hostile inputs to explain: work that grows faster than the input, and a checkpoint that stops it.

Linear time is shown by counting work (span listings, characters handed to the matcher, parser
continuation looks) at two sizes, never by a wall clock; the full-size attacks run in a bounded
child (``tests/hostile.py``) in the slow tier. On main ``36de0c8`` 300 consecutive
``ValueError: x`` lines cost 23,314 span listings (78 per line) and 74,898 of them 146 s of CPU.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import errkb
from errkb.match import decide, matcher
from errkb.parse import traceback
from tests.hostile import run_errkb


def _same(n: int) -> str:
    return "ValueError: x\n" * n


def _distinct(n: int) -> str:
    return "".join(f"ValueError: x{i}\n" for i in range(n))


def _html(n: int) -> str:
    return "ValueError: &lt;div class=&quot;x&quot;&gt; &amp; more\n" * n


def _wrapped(n: int) -> str:
    # Exception lines each followed by full-width continuation lines: every event offers the
    # most lines a rejoin may use, none of which begins an event of its own.
    body = "word " * 15 + "\n"
    return ("ValueError: " + "x" * 70 + "\n" + body * 7) * (n // 8)


@dataclass
class _Work:
    spans: int = 0
    chars: int = 0
    looks: int = 0


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Work]:
    counted = _Work()
    real_spans = decide.message_spans  # type: ignore[attr-defined]
    real_find = matcher.IndexedMatcher.find
    real_cont = traceback._StreamParser._continuation

    def spans(text: str) -> list[object]:
        counted.spans += 1
        return real_spans(text)  # type: ignore[return-value]

    def find(self: matcher.IndexedMatcher, text: str, among: object = None) -> list[matcher.Hit]:
        counted.chars += len(text)
        return real_find(self, text, among)  # type: ignore[arg-type]

    def cont(self: traceback._StreamParser, j: int, *args: object, **kwargs: object) -> int:
        end: int = real_cont(self, j, *args, **kwargs)  # type: ignore[arg-type]
        counted.looks += end - j + 1
        return end

    monkeypatch.setattr(decide, "message_spans", spans)
    monkeypatch.setattr(matcher.IndexedMatcher, "find", find)
    monkeypatch.setattr(traceback._StreamParser, "_continuation", cont)
    yield counted


@pytest.mark.parametrize("make", [_same, _distinct, _html, _wrapped])
def test_explain_work_grows_linearly_with_a_small_constant(
    kb: errkb.KnowledgeBase, work: _Work, make: Callable[[int], str]
) -> None:
    per_line: list[tuple[float, float, float]] = []
    for n in (200, 2000):
        work.spans = work.chars = work.looks = 0
        text = make(n)
        kb.explain(text)
        per_line.append((work.spans / n, work.chars / len(text), work.looks / n))
    (spans_s, chars_s, looks_s), (spans_l, chars_l, looks_l) = per_line
    # A small constant: about one span listing and one parser look per line, and the matcher
    # reads each input character a few times (spans of a line, a rejoin's joins).
    assert spans_l <= 4, per_line
    assert looks_l <= 3, per_line
    assert chars_l <= 40, per_line
    # Linear: ten times the input is at most ten times the work (plus slack for fixed costs).
    assert spans_l <= spans_s * 1.2 + 0.1 and chars_l <= chars_s * 1.2 + 1, per_line
    assert looks_l <= looks_s * 1.2 + 0.1, per_line


def test_the_rejoin_still_rejoins_a_wrapped_message_before_another_event(
    kb: errkb.KnowledgeBase,
) -> None:
    # The cut at the next event's line keeps a real wrap: the first line's continuation is
    # rejoined, the exception line after it is an event of its own.
    from tests.conftest import LINEAR_MESSAGE

    head, tail = LINEAR_MESSAGE[:60], LINEAR_MESSAGE[60:]
    text = f"ValueError: {head.rstrip()}\n{tail.lstrip()}\nValueError: unrelated\n"
    report = kb.explain(text)
    assert [m.exception.message for m in report.exact] == [LINEAR_MESSAGE], report.to_dict()


class Stop(Exception):
    """What the test's checkpoint raises."""


def test_decide_checks_its_checkpoint_while_deciding(kb: errkb.KnowledgeBase) -> None:
    calls = 0

    def checkpoint() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Stop("stop")

    from errkb.parse.regions import parse_input

    events = parse_input(_distinct(1000))
    with kb.store.snapshot() as view, pytest.raises(Stop):
        found = matcher.IndexedMatcher(view, matcher.SpecCache(), None)
        decide.decide(events, found, view.raw_record, checkpoint=checkpoint)
    assert calls == 3


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("74,898 consecutive lines (1,048,572 bytes)", _same(74_898)),
        ("30k distinct lines", _distinct(30_000)),
        ("1 MiB of HTML exception lines", _html((1 << 20) // 56)),
        ("110k distinct lines (2 MiB, regions)", _distinct(110_000)),
    ],
)
def test_attack_inputs_finish_bounded(tmp_path: object, name: str, data: str) -> None:
    # On main these took 146 s, 81-98 s and 700 MB, 52 s and over 200 s of CPU.
    out = run_errkb(["explain", "-"], stdin=data.encode(), timeout=120, memory=1 << 30)
    assert out.returncode in (0, 1), (name, out.returncode, out.stderr[-2000:])
    assert not out.crashed


def test_a_lone_surrogate_escape_is_replaced_and_the_rest_explained(tmp_path: Path) -> None:
    line = b'{"msg": "ValueError: x \\ud800"}\n'
    log = tmp_path / "s.jsonl"
    log.write_bytes(line + b"ValueError: another one\n")
    out = run_errkb(["--db", str(tmp_path / "kb.sqlite3"), "explain", "--format", "json", str(log)])
    assert out.returncode == 1, out  # explained, nothing known: not exit 2
    unmatched = json.loads(out.stdout)["unmatched"]
    assert [u["message"] for u in unmatched] == ["x \ufffd", "another one"]


def test_a_lone_surrogate_in_a_str_is_replaced(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain("ValueError: x \ud800\n")
    assert [u.message for u in report.unmatched] == ["x \ufffd"]
    json.dumps(report.to_dict()).encode("utf-8")
