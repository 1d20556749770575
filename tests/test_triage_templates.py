"""Masking and template mining of unknown messages (errkb.triage.templates): small, in-process."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from errkb.triage.templates import (
    MAX_MESSAGE_TOKENS,
    Signature,
    align,
    cluster_id,
    masked,
    mine,
    slot_values,
)
from tests.hostile import Outcome, run_errkb, run_python
from tests.workcount import assert_linear, cpu_ratio


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("layer 'enc 0' has no scale", "layer <*> has no scale"),
        ("at <Foo object at 0x7f3a12> now", "at <*> now"),
        ("got {'a': 1, 'b': {'c': 2}} back", "got <*> back"),
        ("shape (4096, 1) vs (2,) vs () vs ['q', (3, 4)]", "shape <*> vs <*> vs <*> vs <*>"),
        ("call f(a, b) failed (got x)", "call f(a, b) failed (got x)"),
        ("open /data/run-17/config.yaml or C:\\x\\y.json", "open <*> or <*>"),
        ("id 0x7f3a, 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b, "
         "123e4567-e89b-12d3-a456-426614174000", "id <*>, <*>, <*>"),
        ("to 10.0.0.2:8786 and host.example.com:443 via https://x.org/a/b",
         "to <*> and <*> via <*>"),
        ("dtype torch.bfloat16 not float32", "dtype <*> not <*>"),
        ("took 12ms, 3.5GiB, -4.2e-05", "took <*>, <*>, <*>"),
        ("found '['a b', 3]' here", "found <*> here"),  # the quotes around a value are its own
        ("fp16 and layer2 stay words", "fp16 and layer2 stay words"),
    ],
)  # fmt: skip
def test_masking_cuts_out_every_kind_of_value(message: str, expected: str) -> None:
    assert masked(message) == expected


def _clusters(messages: list[tuple[str, str]]) -> dict[str, str]:
    sigs = [(Signature.of(cls, msg), msg) for cls, msg in messages]
    found = mine(sigs)
    return {msg: found[sig, msg].template for sig, msg in sigs}


def test_a_value_of_several_bare_words_merges_across_lengths() -> None:
    reasons = ["connection reset by peer", "timed out", "broken pipe on socket 3", "refused"]
    got = _clusters([("OSError", f"failed to reach the metadata server: {r}") for r in reasons])
    assert set(got.values()) == {"failed to reach the metadata server: <*>"}


def test_a_bare_word_slot_merges_and_its_values_are_read_back() -> None:
    msgs = [("ValueError", f"unknown device {d} for tensor 'w{k}'") for k, d in
            enumerate(("cpu", "mps", "xpu"))]  # fmt: skip
    sigs = [(Signature.of(c, m), m) for c, m in msgs]
    found = mine(sigs)
    (cluster,) = {found[s, m] for s, m in sigs}
    assert cluster.template == "unknown device <*> for tensor <*>"
    assert slot_values(msgs[1][1], cluster) == ("mps", "'w1'")


def test_templates_seen_with_varying_values_keep_their_constant_words() -> None:
    # Each template is seen with two different values: its words held while values changed.
    got = _clusters(
        [("RuntimeError", f"TaskGroup {n!r} has already been entered") for n in ("a", "b")]
        + [("RuntimeError", f"TaskGroup {n!r} has not been entered") for n in ("c", "d")]
    )
    assert set(got.values()) == {
        "TaskGroup <*> has already been entered",
        "TaskGroup <*> has not been entered",
    }


def test_a_short_template_does_not_swallow_a_long_sentence() -> None:
    got = _clusters(
        [("TypeError", f"Cannot subclass {n!r}") for n in ("a", "b")]
        + [
            (
                "TypeError",
                "Cannot subclass an instance of NewType. Perhaps you were looking for: "
                "`ProUserId = NewType(ProUserId, UserId)`",
            )
        ]
    )
    assert len(set(got.values())) == 2


def test_classes_are_never_merged_and_ids_are_stable_and_order_free() -> None:
    rng = random.Random(5)
    msgs = [(cls, f"bad value {rng.randrange(999)} in {w}") for cls in ("KeyError", "ValueError")
            for w in ("alpha", "beta", "gamma", "delta")]  # fmt: skip
    sigs = [(Signature.of(c, m), m) for c, m in msgs]
    first = mine(sigs)
    again = mine(list(reversed(sigs)))
    assert {s: c.id for s, c in first.items()} == {s: c.id for s, c in again.items()}
    ids = {c.cls: c for c in first.values()}
    assert set(ids) == {"KeyError", "ValueError"}
    for c in ids.values():
        assert c.template == "bad value <*> in <*>"
        assert c.id == cluster_id(c.cls, c.template)


def test_a_quoted_value_repeated_while_others_change_is_the_templates_text() -> None:
    got = _clusters(
        [
            ("AttributeError", f"module {m!r} has no attribute {a!r}")
            for m in ("sqlite3", "os")
            for a in ("x", "y", "z")
        ]
        # 'dict' is masked in other templates too: a value many templates print stays masked.
        + [("AttributeError", f"module 'dict' has no attribute {a!r}") for a in ("p", "q", "r")]
        + [("TypeError", "'dict' object is not callable"), ("KeyError", "key 'dict' missing")]
    )
    assert got["module 'sqlite3' has no attribute 'x'"] == "module 'sqlite3' has no attribute <*>"
    assert got["module 'os' has no attribute 'z'"] == "module 'os' has no attribute <*>"
    assert got["module 'dict' has no attribute 'q'"] == "module <*> has no attribute <*>"


def test_a_token_holding_a_value_merges_with_a_value_that_swallowed_its_text() -> None:
    # A URL's pattern takes ``.__spec__`` in; an address's leaves it outside.
    got = _clusters(
        [("ValueError", f"{v}.__spec__ is not set") for v in ("10.0.0.1:80", "10.0.0.2:81")]
        + [("ValueError", f"https://{h}.org/m.__spec__ is not set") for h in ("a", "b")]
    )
    assert set(got.values()) == {"<*> is not set"}


def test_a_word_other_templates_quote_as_a_value_may_vary_where_it_stands_bare() -> None:
    elsewhere = [
        ("TypeError", f"{t!r} object is not callable") for t in ("dict", "NoneType", "x")
    ] + [("KeyError", f"no key {t!r} in {n}") for t in ("dict", "NoneType") for n in (1, 2)]
    elsewhere += [("OSError", f"bad {t!r} here") for t in ("dict", "NoneType")]
    items = [
        ("TypeError", f"Item in {p} must be str, not {t}")
        for p, t in (("/a/b", "dict"), ("/c/d", "dict"), ("/e/f", "NoneType"), ("/g/h", "NoneType"))
    ]
    got = _clusters(elsewhere + items)
    assert {got[m] for _, m in items} == {"Item in <*> must be str, not <*>"}
    # Without the other templates, each type name held while the path changed: two templates.
    alone = _clusters(items)
    assert len({alone[m] for _, m in items}) == 2


def test_a_message_joins_its_sibling_before_a_more_general_template() -> None:
    general = [
        ("AttributeError", f"{a} has no attribute {n!r}")
        for a, n in (("10.0.0.1:80", "p"), ("<A object at 0x1f>", "q"), ("h.org:81", "r"))
    ]
    siblings = [
        ("AttributeError", f"module 'mymod' has no attribute {n}") for n in ("lo", "mi", "fa")
    ]
    got = _clusters(general + siblings)
    assert {got[m] for _, m in siblings} == {"module 'mymod' has no attribute <*>"}
    assert {got[m] for _, m in general} == {"<*> has no attribute <*>"}


def test_a_count_repeated_in_three_messages_stays_a_value() -> None:
    tests = [("test_a", "1/1"), ("test_b", "1/1"), ("test_c", "1/1"), ("test_d", "3/4")]
    got = _clusters([("RuntimeError", f"{t} {n} failed!") for t, n in tests])
    assert len(set(got.values())) == 1


def test_a_constant_found_by_repetition_is_never_taken_into_a_wildcard() -> None:
    general = [
        ("AttributeError", f"module {m!r} has no attribute {a!r}")
        for m, a in (("u", "p"), ("v", "q"), ("w", "r"))
    ]
    numpy_like = [
        ("AttributeError", f"module {m!r} has no attribute {a}")
        for m in ("np.core.a", "np.core.b")
        for a in ("lo", "mi", "fa")
    ]
    got = _clusters(general + numpy_like)
    assert {got[m] for _, m in numpy_like} == {
        "module 'np.core.a' has no attribute <*>",
        "module 'np.core.b' has no attribute <*>",
    }
    assert {got[m] for _, m in general} == {"module <*> has no attribute <*>"}


def test_different_text_glued_after_a_value_keeps_two_templates_apart() -> None:
    spec = [("ValueError", f"{v}.__spec__ is None") for v in ("0xa1", "0xb2")]
    loader = [("ValueError", f"{v}.__loader__ is None") for v in ("0xc3", "0xd4")]
    got = _clusters(spec + loader)
    assert set(got.values()) == {"<*>.__spec__ is None", "<*>.__loader__ is None"}


# ------------------------------------------------------------ hostile lines (issue 50, row 1)
def _numbers(n: int) -> str:
    return "bad values " + " ".join(str(k % 10) for k in range(n))


def test_a_line_of_thousands_of_numbers_is_mined_in_linear_work() -> None:
    def run(message: str) -> None:
        sig = Signature.of("ValueError", message)
        (cluster,) = set(mine([(sig, message)]).values())
        slot_values(message, cluster)

    assert_linear(_numbers, run, 300)
    message = _numbers(8_000)
    sig = Signature.of("ValueError", message)
    assert len(sig.masked) == MAX_MESSAGE_TOKENS
    (cluster,) = set(mine([(sig, message)]).values())
    values = slot_values(message, cluster)
    # The rest of the line past the cap is the last value, whole.
    assert values[-1] == " ".join(str(k % 10) for k in range(MAX_MESSAGE_TOKENS - 3, 8_000))
    assert len(values) == MAX_MESSAGE_TOKENS - 2


def test_align_is_linear_past_its_table_cap() -> None:
    def run(n: int) -> None:
        a = ["x"] * 3 + [f"a{k}" for k in range(n)] + ["y"]
        b = ["x"] * 3 + [f"b{k}" for k in range(n)] + ["y"]
        steps = align(a, b)
        assert steps[3] == (False, list(range(3, n + 3)), list(range(3, n + 3)))
        assert steps[-1] == (True, [n + 3], [n + 3])

    assert_linear(lambda n: n, run, 1_000)
    # Below the cap, the table's alignment: the longest common subsequence.
    assert align(["a", "b", "c", "d"], ["a", "c", "d", "e"]) == [
        (True, [0], [0]),
        (False, [1], []),
        (True, [2], [1]),
        (True, [3], [2]),
        (False, [], [3]),
    ]


#: Lines that made the masking regex backtrack exponentially or scan far from every start.
_HOSTILE_MASKING: dict[str, Callable[[int], str]] = {
    "nested tuples": lambda n: "(" + "(1, 2), " * n,
    "nested lists": lambda n: "[" + "['a', 1], " * n,
    "quoted items": lambda n: "(" + "'x'," * n,
    "dashes": lambda n: "-a" * n,
    "dict items": lambda n: "{" + "{a}" * n,
    "unclosed reprs": lambda n: "<a:" * n,
}


def test_masking_hostile_lines_never_backtracks_without_bound() -> None:
    # "(" and 40 "(1, 2), " took 2**40 steps before each item was an atomic group: run in a
    # bounded child so a regression fails instead of hanging the run.
    out = run_python(
        "import sys\n"
        "from errkb.triage.templates import tokens\n"
        "for line in sys.argv[1:]:\n"
        "    tokens(line)\n"
        "print('done')\n",
        *(shape(40) for shape in _HOSTILE_MASKING.values()),
        timeout=60,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "done"), out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(_HOSTILE_MASKING))
def test_masking_cpu_is_linear_in_the_line(shape: str) -> None:
    build = _HOSTILE_MASKING[shape]
    assert cpu_ratio(lambda n: build(n)[:n], masked, 16_000, 8) < 8 * 3


def _triage_one_line(tmp_path: Path, db: Path, line: str, memory: int) -> Outcome:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "one.log").write_text(
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        f"ValueError: {line}\n"
    )
    shutil.copyfile(db, tmp_path / "kb.sqlite3")
    return run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "triage", "--format", "json", str(logs)],
        memory=memory,
        timeout=120,
    )


def test_triage_of_a_line_of_8000_numbers_stays_small(
    tmp_path: Path, _seeded_template: Path
) -> None:
    # 2.36 GB of RSS before (the alignment's table of 8,000 by 8,000 Python ints).
    out = _triage_one_line(tmp_path, _seeded_template, _numbers(8_000), 512 << 20)
    assert out.returncode == 1 and not out.crashed, out.stderr
    (group,) = json.loads(out.stdout)["unknown"]
    assert group["template"].startswith("bad values <*> <*>")


@pytest.mark.slow
def test_triage_of_a_line_of_a_million_characters_stays_small(
    tmp_path: Path, _seeded_template: Path
) -> None:
    # 16,000 numbers a line was an unexpected MemoryError at 8 GB; a 1 MiB line is the most
    # the traceback parser reads of a message.
    out = _triage_one_line(tmp_path, _seeded_template, _numbers(500_000)[: 1 << 20], 512 << 20)
    assert out.returncode == 1 and not out.crashed, out.stderr
    assert len(json.loads(out.stdout)["unknown"]) == 1
