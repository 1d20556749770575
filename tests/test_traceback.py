"""The log parser: every traceback flavour, single-line errors, streams, and the labelled corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errkb.parse.events import ChainLink, EventKind, LogEvent
from errkb.parse.spans import message_spans
from errkb.parse.text import decode_input
from errkb.parse.traceback import exception_line, is_exception_class, parse_log
from tests.tiers import examples
from tests.workcount import assert_linear

CORPUS = Path(__file__).parent / "data" / "corpus"
DATASET = Path(__file__).resolve().parent.parent / "data" / "dataset"
EXPECTATIONS: dict[str, dict[str, Any]] = json.loads((CORPUS / "expectations.json").read_text())

SHAPES = {
    "ansi", "ansi-remnants", "bare", "chain-cause", "chain-context", "cloud-logger", "crlf",
    "docker-compose", "docker-rfc3339", "exception-group", "grep", "ipython", "json-reply",
    "kubectl-prefix", "log-line", "loguru", "markdown", "multi-line-message", "pytest-line",
    "pytest-long", "pytest-short", "python-logging", "ray", "repr", "sglang-diffusion",
    "sglang-llm", "sglang-llm-ranks", "stacked-prefixes", "syslog", "torchrun", "tqdm-cr",
    "traceback-py311", "traceback-py313", "vllm",
}  # fmt: skip


def brief(events: list[LogEvent]) -> list[tuple[str, str | None, int]]:
    return [(e.kind.value, e.short_class, e.lines[0]) for e in events]


# --- CPython tracebacks --------------------------------------------------------------------

SGL = "/usr/local/lib/python3.10/dist-packages/sglang"
PY310 = "\n".join(
    [
        "Traceback (most recent call last):",
        f'  File "{SGL}/srt/models/llama.py", line 641, in load_weights',
        "    weight_loader(param, loaded_weight)",
        f'  File "{SGL}/srt/layers/linear.py", line 872, in weight_loader_v2',
        "    raise ValueError(",
        "ValueError: Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
        "got shape (2,)",
        "",
    ]
)


def test_plain_traceback_frames_and_message() -> None:
    [event] = parse_log(PY310)
    assert event.kind is EventKind.TRACEBACK
    assert event.exc_class == "ValueError"
    assert event.message.endswith("got shape (2,)")
    assert event.lines == (6,)
    assert [
        (f.path.rsplit("/", 1)[-1], f.line, f.function, f.source, f.input_line)
        for f in event.frames
    ] == [
        ("llama.py", 641, "load_weights", "weight_loader(param, loaded_weight)", 2),
        ("linear.py", 872, "weight_loader_v2", "raise ValueError(", 4),
    ]
    assert event.chain_id is not None and event.is_root_cause and event.link is ChainLink.NONE


def test_caret_lines_and_313_elisions_are_not_source() -> None:
    text = """\
Traceback (most recent call last):
  File "a.py", line 3, in <module>
    engine = load(path)
             ^^^^^^^^^^
  File "b.py", line 9, in load
    weight_loader(param, loaded_weight, shard_id)
    ~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "c.py", line 872, in weight_loader_v2
    raise ValueError(
    ...<3 lines>...
    )
ValueError: boom
"""
    [event] = parse_log(text)
    assert [f.source for f in event.frames] == [
        "engine = load(path)",
        "weight_loader(param, loaded_weight, shard_id)",
        "raise ValueError(",
    ]
    assert event.message == "boom"


def test_dotted_class_and_class_without_message() -> None:
    text = """\
Traceback (most recent call last):
  File "x.py", line 1, in f
sglang.multimodal_gen.runtime.x.ComponentCheckpointUnsupportedError: Cannot configure it

Traceback (most recent call last):
  File "parameter.py", line 409, in _load_into_shard_id
    assert param_data.shape == loaded_weight.shape
AssertionError
more text that is no part of an empty message
"""
    first, second = parse_log(text)
    assert first.exc_class == "sglang.multimodal_gen.runtime.x.ComponentCheckpointUnsupportedError"
    assert first.short_class == "ComponentCheckpointUnsupportedError"
    assert (second.exc_class, second.message, second.lines) == ("AssertionError", "", (8,))


def test_local_class_and_ray_cause_class_names() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "__main__.test.<locals>.LocalError: boom\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "ray.exceptions.RayTaskError(ValueError): ray::W.load() (pid=1, ip=10.0.0.2)\n"
    )
    assert [e.exc_class for e in parse_log(text)] == [
        "__main__.test.<locals>.LocalError",
        "ray.exceptions.RayTaskError(ValueError)",
    ]


def test_multi_line_message_ends_at_blank_line_new_record_or_prompt() -> None:
    text = """\
Traceback (most recent call last):
  File "x.py", line 1, in f
ValueError: line one
line two
  indented three

not part of it
Traceback (most recent call last):
  File "x.py", line 1, in f
ValueError: only this
[2026-08-28 05:10:05] Received sigquit from a child process.
Traceback (most recent call last):
  File "x.py", line 1, in f
ValueError: up to the prompt
$ python again.py
"""
    a, b, c = parse_log(text)
    # "line two" at the margin may be the next output as well as the message's: not the message's
    # (issue 26), only offered, with the lines after it, for a record's pattern to rejoin.
    assert (a.message, a.lines) == ("line one", (3,))
    assert [m.text for m in a.message_lines] == ["line one", "line two", "  indented three"]
    assert (b.message, b.lines) == ("only this", (10,))
    assert c.message == "up to the prompt"


def test_truncated_traceback_gives_no_event() -> None:
    text = """\
[2026-08-28 05:10:05] Scheduler hit an exception: Traceback (most recent call last):
  File "x.py", line 1, in f
    raise ValueError(
[2026-08-28 05:10:06] Received sigquit from a child process.
"""
    assert parse_log(text) == []


def test_indented_traceback_in_a_markdown_code_block() -> None:
    text = """\
Steps to reproduce:

    Traceback (most recent call last):
      File "x.py", line 1, in f
        raise ValueError("x")
    ValueError: indented by four
"""
    [event] = parse_log(text)
    assert (event.exc_class, event.message, event.lines) == ("ValueError", "indented by four", (6,))
    assert event.frames[0].source == 'raise ValueError("x")'


# --- chains and groups ---------------------------------------------------------------------

CHAIN = """\
Traceback (most recent call last):
  File "q.py", line 168, in inspect
    raise ValueError(
ValueError: inner

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "t.py", line 184, in configure
    raise Wrapped(
pkg.Wrapped: outer: inner

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "m.py", line 9, in main
    cleanup()
RuntimeError: cleanup failed
"""


def test_chain_links_positions_and_one_chain_id() -> None:
    events = parse_log(CHAIN)
    assert [(e.short_class, e.chain_position, e.link) for e in events] == [
        ("ValueError", 0, ChainLink.NONE),
        ("Wrapped", 1, ChainLink.CAUSE),
        ("RuntimeError", 2, ChainLink.CONTEXT),
    ]
    assert len({e.chain_id for e in events}) == 1
    assert [e.is_root_cause for e in events] == [True, False, False]


def test_every_member_carries_the_one_typed_chain() -> None:
    events = parse_log(CHAIN)
    chain = events[0].chain
    assert chain is not None and all(e.chain == chain for e in events)
    assert [(m.exc_class, m.link, m.line) for m in chain.members] == [
        (e.exc_class, e.link, e.lines[0]) for e in events
    ]
    assert chain.root.exc_class == "ValueError" and chain.last.exc_class == "RuntimeError"
    assert chain.frames == tuple(f for e in events for f in e.frames)
    # Outside any chain (a logger line) there is no chain value.
    (log_line,) = parse_log("ERROR something broke\n")
    assert log_line.chain is None


def test_separate_tracebacks_are_separate_chains() -> None:
    events = parse_log(PY310 + "\nsome log line\n" + PY310)
    assert [e.chain_id for e in events] == [1, 2]
    assert all(e.is_root_cause for e in events)


def test_a_cause_without_traceback_starts_the_chain() -> None:
    text = """\
KeyError: 'never raised'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "x.py", line 1, in f
ValueError: raised from it
"""
    events = parse_log(text)
    assert [(e.kind, e.short_class, e.chain_position, e.link) for e in events] == [
        (EventKind.TRACEBACK, "KeyError", 0, ChainLink.NONE),
        (EventKind.TRACEBACK, "ValueError", 1, ChainLink.CAUSE),
    ]


GROUP = """\
  + Exception Group Traceback (most recent call last):
  |   File "<stdin>", line 1, in <module>
  | ExceptionGroup: many (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | Exception Group Traceback (most recent call last):
    |   File "<stdin>", line 3, in <module>
    | ExceptionGroup: inner (1 sub-exception)
    +-+---------------- 1 ----------------
      | Traceback (most recent call last):
      |   File "x.py", line 2, in f
      | ValueError: deep
      +------------------------------------
    +---------------- 2 ----------------
    | TypeError: never raised
    | second line
    +------------------------------------
"""


def test_exception_group_members_nested_and_unraised() -> None:
    events = parse_log(GROUP)
    assert [(e.short_class, e.message, e.lines, e.chain_position, e.link) for e in events] == [
        ("ExceptionGroup", "many (2 sub-exceptions)", (3,), 0, ChainLink.NONE),
        ("ExceptionGroup", "inner (1 sub-exception)", (7,), 1, ChainLink.GROUP),
        ("ValueError", "deep", (11,), 2, ChainLink.GROUP),
        ("TypeError", "never raised\nsecond line", (14, 15), 3, ChainLink.GROUP),
    ]
    assert len({e.chain_id for e in events}) == 1
    assert events[2].frames[0].path == "x.py"
    chain = events[0].chain
    assert chain is not None
    assert [m.link for m in chain.members] == [ChainLink.NONE] + [ChainLink.GROUP] * 3


def test_a_group_inside_a_chain_takes_the_chain_link() -> None:
    text = (
        PY310 + "\nDuring handling of the above exception, another exception occurred:\n\n" + GROUP
    )
    events = parse_log(text)
    assert [e.link for e in events[:2]] == [ChainLink.NONE, ChainLink.CONTEXT]
    assert len({e.chain_id for e in events}) == 1


def test_margin_lines_without_separators_are_no_group() -> None:
    text = "  | a table cell |\n  | another |\n" * 3
    assert parse_log(text) == []


# --- pytest ----------------------------------------------------------------------------------

PYTEST_SHORT = """\
_________________________________ test_load _________________________________
tests/test_x.py:12: in test_load
    load()
src/pkg/mod.py:168: in load
    raise ValueError(
E   ValueError: first line
E     second line

The above exception was the direct cause of the following exception:

tests/test_x.py:14: in test_load
    raise RuntimeError("wrapped") from e
E   RuntimeError: wrapped
=========================== short test summary info ============================
FAILED tests/test_x.py::test_load - RuntimeError: wrapped
"""


def test_pytest_short_frames_e_lines_chain_and_summary() -> None:
    first, second, summary = parse_log(PYTEST_SHORT)
    assert (first.exc_class, first.message, first.lines) == (
        "ValueError",
        "first line\n  second line",
        (6, 7),
    )
    assert [(f.path, f.line, f.function, f.source) for f in first.frames] == [
        ("tests/test_x.py", 12, "test_load", "load()"),
        ("src/pkg/mod.py", 168, "load", "raise ValueError("),
    ]
    assert (second.exc_class, second.link, second.chain_position) == (
        "RuntimeError",
        ChainLink.CAUSE,
        1,
    )
    assert second.chain_id == first.chain_id
    assert (summary.kind, summary.exc_class, summary.message) == (
        EventKind.LOG,
        "RuntimeError",
        "wrapped",
    )


PYTEST_LONG_CUT = """\
___________________________________ test_t ____________________________________

    def test_t():
>       raise ValueError("Expected scalar scale for fused-in-checkpoint QKV checkpoint load")
E       ValueError: Expected scalar scale for fused-in-checkpoint QKV checkpoint load

test_x.py:2: ValueError
=========================== short test summary info ============================
FAILED test_x.py::test_t - ValueError: Expected scalar scale for fused-in-checkp...
ERROR test_y.py::test_u - KeyError: 'weight'
FAILED test_x.py::test_v - ValueError: Expected something else entirely
"""


def test_a_short_summary_line_is_a_copy_of_the_traceback_it_abbreviates() -> None:
    tb, copy, orphan, other = parse_log(PYTEST_LONG_CUT)
    assert (tb.exc_class, tb.lines) == ("ValueError", (5,))
    # Line 9 cuts the message with "...": it is the same exception, whole, printed again.
    assert (copy.exc_class, copy.message, copy.lines) == ("ValueError", tb.message, (9,))
    # A summary with no traceback above it, or of another message, is the only word of it.
    assert (orphan.exc_class, orphan.message, orphan.lines) == ("KeyError", "'weight'", (10,))
    assert (other.kind, other.message, other.lines) == (
        EventKind.LOG, "Expected something else entirely", (11,)
    )  # fmt: skip


def test_a_qualified_class_in_the_summary_is_the_class_printed_above() -> None:
    text = (
        "E   torch._dynamo.exc.Unsupported: call_function in skip_files\n"
        "\n"
        "FAILED t.py::x - Unsupported: call_function in skip_f...\n"
    )
    tb, copy = parse_log(text)
    assert (copy.exc_class, copy.message) == (tb.exc_class, tb.message)


def test_folding_short_summaries_stays_linear() -> None:
    def build(n: int) -> str:
        blocks = [
            f"E   ValueError: failure number {k} of the run\n\ntest_x.py:{k}: ValueError\n"
            for k in range(n)
        ]
        summary = "".join(
            f"FAILED test_x.py::t{k} - ValueError: failure number {k} o...\n" for k in range(n)
        )
        return "".join(blocks) + "=== short test summary info ===\n" + summary

    events = parse_log(build(50))
    assert len(events) == 100 and events[50].message == "failure number 0 of the run"
    assert_linear(build, parse_log, 200)


def test_pytest_long_takes_the_class_and_frame_from_the_location_line() -> None:
    text = """\
    def test_x():
>       assert scale.shape == (3072, 1)
E       assert (3072,) == (3072, 1)
E         Right contains one more item: 1

tests/test_x.py:7: AssertionError
"""
    [event] = parse_log(text)
    assert event.exc_class == "AssertionError"
    assert event.message.startswith("assert (3072,) == (3072, 1)")
    assert [(f.path, f.line, f.source) for f in event.frames] == [
        ("tests/test_x.py", 7, "assert scale.shape == (3072, 1)")
    ]


def test_pytest_source_listing_is_not_an_event() -> None:
    text = """\
    def check():
        raise ValueError(
            f"Quanto layer {prefix!r} has incompatible scale "
        )
        ValueError: looks like an error but is indented source
"""
    assert parse_log(text) == []


# --- IPython -----------------------------------------------------------------------------------


def test_ipython8_frames_and_context_lines() -> None:
    text = """\
---------------------------------------------------------------------------
ValueError                                Traceback (most recent call last)
Cell In[3], line 2
      1 path = "x"
----> 2 inspect(path)

File /usr/lib/python3.11/site-packages/pkg/mod.py:168, in inspect(file_path, mapper)
    165 if bad:
--> 168     raise ValueError(
    169         f"Quanto layer {prefix!r} has incompatible scale "
    170     )

ValueError: the real message
"""
    [event] = parse_log(text)
    assert (event.exc_class, event.message, event.lines) == (
        "ValueError",
        "the real message",
        (13,),
    )
    assert [(f.path, f.line, f.function, f.source) for f in event.frames] == [
        ("Cell In[3]", 2, None, "inspect(path)"),
        ("/usr/lib/python3.11/site-packages/pkg/mod.py", 168, "inspect", "raise ValueError("),
    ]


def test_ipython7_legacy_frames() -> None:
    text = """\
ValueError                                Traceback (most recent call last)
<ipython-input-5-8d1f2c3b9a7e> in <module>
----> 2 markers = inspect(["x"])

/opt/conda/lib/python3.10/site-packages/pkg/utils.py in inspect(paths, mapper)
--> 306                 f"shapes: {weight_shape} and {scale_shape}"

ValueError: legacy
"""
    [event] = parse_log(text)
    assert [(f.path, f.line, f.function) for f in event.frames] == [
        ("<ipython-input-5-8d1f2c3b9a7e>", 2, "<module>"),
        ("/opt/conda/lib/python3.10/site-packages/pkg/utils.py", 306, "inspect"),
    ]


# --- single lines -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ValueError: bare one", [("bare", "ValueError", 1)]),
        ("pkg.mod.QuantError: dotted", [("bare", "QuantError", 1)]),
        ("KeyboardInterrupt: x", [("bare", "KeyboardInterrupt", 1)]),
        ("Exception: plain", [("bare", "Exception", 1)]),
        ("Error: a CLI's wording, not a class", []),
        ("Warning: neither", []),
        ("Note: not an exception", []),
        ("   ValueError: indented, so source or listing", []),
        ("/x/y.py:168: UserWarning: deprecated", [("bare", "UserWarning", 1)]),
        ("[2026-08-28 05:10:05] ERROR: something failed", [("log", None, 1)]),
        ("ERROR 02-07 03:59:09 [core.py:946] ValueError: in a log", [("log", "ValueError", 1)]),
        (
            "INFO 02-07 03:59:09 [core.py:946] ValueError: info is no error",
            [("bare", "ValueError", 1)],
        ),
        ('{"success":false,"message":"Failed to update weights: x"}', [("log", None, 1)]),
        ('  "message": "Failed to update weights: x",', [("log", None, 1)]),
        ('python/x.py:12:    return {"message": "grep of source"}', []),
        ('python/x.py:306:    f"Comfy INT8 layer {prefix!r} has incompatible"', []),
        ("FAILED tests/t.py::test_a - ValueError: summary", [("log", "ValueError", 1)]),
    ],
)
def test_single_line_events(text: str, expected: list[tuple[str, str | None, int]]) -> None:
    assert brief(parse_log(text)) == expected


def test_code_fences_source_is_silent_but_fenced_tracebacks_parse() -> None:
    text = """\
```python
SomeError: annotations = "not output"
raise ValueError("source")
```
```
Traceback (most recent call last):
  File "x.py", line 1, in f
ValueError: fenced output
```
```python
Traceback (most recent call last):
  File "x.py", line 1, in f
ValueError: pasted in a python fence
```
"""
    assert brief(parse_log(text)) == [
        ("traceback", "ValueError", 8),
        ("traceback", "ValueError", 13),
    ]
    assert parse_log(text)[1].message == "pasted in a python fence"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ValueError", True),
        ("a.b.ComponentCheckpointUnsupportedError", True),
        ("SystemExit", True),
        ("StopIteration", True),
        ("Error", False),
        ("Exception", True),
        ("Warning", False),
        ("Killed", False),
    ],
)
def test_is_exception_class(name: str, expected: bool) -> None:
    assert is_exception_class(name) is expected


# --- streams ---------------------------------------------------------------------------------


def test_interleaved_ranks_are_reassembled() -> None:
    a = PY310.replace("(2,)", "(3,)").splitlines()
    b = PY310.splitlines()
    text = "\n".join(f"[rank0]: {x}\n[rank1]: {y}" for x, y in zip(a, b, strict=True))
    events = parse_log(text)
    assert [(e.stream, e.message[-4:], e.lines) for e in events] == [
        ("rank0", "(3,)", (11,)),
        ("rank1", "(2,)", (12,)),
    ]
    assert [len(e.frames) for e in events] == [2, 2]


def test_reversed_cloud_export_is_read_bottom_up() -> None:
    lines = PY310.splitlines()[::-1]
    text = "\n".join(f"ERROR 2025-04-04T06:24:51.{9 - k}Z {x}" for k, x in enumerate(lines))
    [event] = parse_log(text)
    assert event.exc_class == "ValueError"
    assert event.lines == (1,)
    assert [f.line for f in event.frames] == [641, 872]


# --- robustness ------------------------------------------------------------------------------

FRAGMENTS = [
    "Traceback (most recent call last):",
    '  File "x.py", line 3, in f',
    "    raise ValueError(",
    "    ^^^^^^",
    "ValueError: x",
    "AssertionError",
    "",
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
    "  + Exception Group Traceback (most recent call last):",
    "  | ValueError: a",
    "  +-+---------------- 1 ----------------",
    "    | KeyError: b",
    "    +------------------------------------",
    "E   ValueError: y",
    "tests/t.py:3: in f",
    "t.py:3: ValueError",
    "> x()",
    "ValueError                                Traceback (most recent call last)",
    "Cell In[3], line 2",
    "----> 2 f()",
    "```python",
    "```",
    "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '[rank1]:   File "y.py", line 4, in g',
    "ERROR 2025-04-04T06:24:51.493646621Z ValueError: z",
    '{"message":"Failed: \\u00e9\\n"}',
    "\x1b[31m\r\x00",
]


@settings(max_examples=examples(400), deadline=None)
@given(st.text(max_size=3000))
def test_parse_log_never_raises_on_arbitrary_text(text: str) -> None:
    for event in parse_log(text):
        assert event.lines and all(n >= 1 for n in event.lines)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60))
def test_parse_log_never_raises_on_traceback_fragments(parts: list[str]) -> None:
    text = "\n".join(parts)
    total = len(text.split("\n"))
    for event in parse_log(text):
        assert all(1 <= n <= total for n in event.lines)
        assert all(1 <= f.input_line <= total for f in event.frames)


def _long_line(n: int) -> str:
    return 'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: ' + "x" * n


def test_a_10mb_line_parses() -> None:
    [event] = parse_log(_long_line(10_000_000))
    assert len(event.message) == 10_000_000


def test_a_long_line_parses_in_linear_work() -> None:
    assert_linear(_long_line, parse_log, 100_000)


def test_a_50k_line_log_parses() -> None:
    text = (CORPUS / "sglang_llm_tp4_every_rank.log").read_text() * 350
    assert len(text.splitlines()) > 50_000
    assert len(parse_log(text)) == 4 * 350


def test_a_log_parses_in_linear_work() -> None:
    log = (CORPUS / "sglang_llm_tp4_every_rank.log").read_text()
    assert_linear(lambda n: log * n, parse_log, 3)


@pytest.mark.parametrize(
    "line",
    [
        "  | not a group",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "E   ValueError: x",
        "ValueError: x",
        "tests/t.py:3: in f",
        "    | ValueError: x",
    ],
)
def test_repeated_lines_parse_in_linear_work(line: str) -> None:
    assert_linear(lambda n: "\n".join([line] * n), parse_log, 500)


# --- the labelled corpus -------------------------------------------------------------------


def _templates() -> dict[str, str]:
    out = {}
    for path in DATASET.glob("*.txt"):
        record = json.loads(path.read_text())["record"]
        out[record["id"]] = record["errorMessage"]
    return out


TEMPLATES = _templates()
_FIELD = re.compile(r"\{([^{}]+)\}")


def _render(template: str, captures: dict[str, str]) -> str:
    def field(m: re.Match[str]) -> str:
        expr = m.group(1)
        if expr.endswith("!r"):
            return repr(captures[expr[:-2]])
        return captures[expr]

    return _FIELD.sub(field, template)


def _template_regex(template: str) -> re.Pattern[str]:
    parts = _FIELD.split(template)
    return re.compile("".join(re.escape(p) if k % 2 == 0 else "(.+)" for k, p in enumerate(parts)))


def _occurrence_lines(events: list[LogEvent], message: str) -> set[int]:
    return {e.lines[0] for e in events if any(s.text == message for s in message_spans(e.message))}


def test_corpus_is_large_and_labelled() -> None:
    logs = sorted(p.name for p in CORPUS.glob("*.log"))
    assert set(logs) == set(EXPECTATIONS)
    assert len(logs) >= 40
    negatives = [n for n, e in EXPECTATIONS.items() if not e["matches"]]
    assert len(negatives) >= 15
    assert {e["shape"] for e in EXPECTATIONS.values()} == SHAPES
    covered = {m["id"] for e in EXPECTATIONS.values() for m in e["matches"]}
    assert covered == set(TEMPLATES)
    for name, e in EXPECTATIONS.items():
        assert e["note"], name
        for m in e["matches"]:
            fields = {f[:-2] if f.endswith("!r") else f for f in _FIELD.findall(TEMPLATES[m["id"]])}
            assert set(m["captures"]) == fields, name
            if "lines" in m:
                assert m["occurrences"] == len(m["lines"]), name


POSITIVES = [
    pytest.param(name, m, id=f"{name}:{m['id']}")
    for name, e in EXPECTATIONS.items()
    for m in e["matches"]
]


@pytest.mark.parametrize(("name", "match"), POSITIVES)
def test_corpus_positive_occurrences_are_events(name: str, match: dict[str, Any]) -> None:
    events = parse_log(decode_input((CORPUS / name).read_bytes()))
    message = _render(TEMPLATES[match["id"]], match["captures"])
    lines = _occurrence_lines(events, message)
    assert lines, f"{message!r} not found in any event of {name}"
    if "lines" in match:
        assert sorted(lines) == match["lines"]


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTATIONS.items() if not e["matches"]))
def test_corpus_negatives_have_no_event_matching_a_record(name: str) -> None:
    events = parse_log(decode_input((CORPUS / name).read_bytes()))
    regexes = [_template_regex(t) for t in TEMPLATES.values()]
    for event in events:
        for span in message_spans(event.message):
            assert not any(rx.fullmatch(span.text) for rx in regexes), (name, span.text)


def test_corpus_positive_files_match_only_what_is_labelled() -> None:
    regexes = {rid: _template_regex(t) for rid, t in TEMPLATES.items()}
    for name, e in EXPECTATIONS.items():
        events = parse_log(decode_input((CORPUS / name).read_bytes()))
        labelled = {m["id"] for m in e["matches"]}
        hit = {
            rid
            for event in events
            for span in message_spans(event.message)
            for rid, rx in regexes.items()
            if rx.fullmatch(span.text)
        }
        assert hit == labelled, name


# Per-file parser expectations: (kind, short class, first line, chain position, link, stream).
PARSES = {
    "diffusion_quanto_text_encoder_worker_crash.log": [
        ("traceback", "ValueError", 14, 0, "none", ""),
        ("traceback", "ComponentCheckpointUnsupportedError", 53, 1, "cause", ""),
        ("traceback", "EOFError", 72, 0, "none", ""),
    ],
    "cloud_logging_reversed_chain.log": [
        ("traceback", "ComponentCheckpointUnsupportedError", 1, 1, "cause", ""),
        ("traceback", "ValueError", 40, 0, "none", ""),
    ],
    "kubectl_stacked_prefixes_tp2.log": [
        ("traceback", "ValueError", 28, 0, "none", "pod/qwen-72b-fp8-0/server TP1"),
        ("traceback", "ValueError", 55, 0, "none", "pod/qwen-72b-fp8-0/server TP0"),
    ],
    "ray_workerdict_two_actors.log": [
        ("traceback", "ValueError", 69, 0, "none", "WorkerDict pid=77, ip=10.0.0.2 TP0"),
        ("traceback", "ValueError", 71, 0, "none", "WorkerDict pid=81, ip=10.0.0.3 TP0"),
    ],
    "diffusion_comfy_int8_logger_every_line_crlf.log": [
        ("log", None, 3, 0, "none", ""),
        ("traceback", "ValueError", 22, 0, "none", ""),
    ],
    "exception_group_taskgroup.log": [
        ("traceback", "ExceptionGroup", 9, 0, "none", ""),
        ("traceback", "ValueError", 16, 1, "group", ""),
        ("traceback", "ValueError", 23, 2, "group", ""),
    ],
    "chain_during_handling_rollback.log": [
        ("traceback", "ValueError", 14, 0, "none", ""),
        ("traceback", "ValueError", 28, 1, "context", ""),
    ],
    "ray_task_error_driver.log": [
        ("traceback", "RayTaskError(ValueError)", 11, 0, "none", ""),
        ("bare", "ValueError", 21, 0, "none", ""),
    ],
    "loguru_exception.log": [
        ("log", None, 2, 0, "none", ""),
        ("traceback", "ValueError", 14, 0, "none", ""),
    ],
    "neg_grep_source_templates.log": [],
    "neg_markdown_source_fences.log": [],
    "neg_successful_startup.log": [],
    "python_logging_relay_every_line.log": [
        ("traceback", "ValueError", 36, 0, "none", ""),
        ("log", None, 38, 0, "none", ""),
    ],
}


@pytest.mark.parametrize("name", sorted(PARSES))
def test_corpus_parses(name: str) -> None:
    events = parse_log(decode_input((CORPUS / name).read_bytes()))
    got = [
        (e.kind.value, e.short_class, e.lines[0], e.chain_position, e.link.value, e.stream)
        for e in events
    ]
    assert got == PARSES[name]


def test_corpus_frames_keep_paths_lines_and_sources() -> None:
    events = parse_log((CORPUS / "sglang_llm_single_gpu_py310.log").read_text())
    [event] = events
    last = event.frames[-1]
    assert last.path == "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/linear.py"
    assert (last.line, last.function, last.source) == (872, "weight_loader_v2", "raise ValueError(")
    assert len(event.frames) == 12
    text = (CORPUS / "sglang_llm_single_gpu_py310.log").read_text().splitlines()
    assert all(text[f.input_line - 1].lstrip().startswith("File ") for f in event.frames)


def test_a_decoded_view_reports_the_original_line_numbers() -> None:
    # A decoding layer (JSON strings, a container's per-line objects) hands the parser a view of
    # the input and where each of its lines came from; events point into the original.
    view = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in f',
            "ValueError: from inside a container",
        ]
    )
    (event,) = parse_log(view, line_map=[10, 12, 14])
    assert event.lines == (14,)
    assert event.frames[0].input_line == 12
    with pytest.raises(ValueError, match="line_map has 2 lines"):
        parse_log(view, line_map=[1, 2])


def test_evolve_is_replace_without_the_cost() -> None:
    import dataclasses

    from errkb.parse.events import evolve

    text = (
        "Traceback (most recent call last):\n"
        '  File "a.py", line 1, in f\n'
        "    g()\n"
        "KeyError: 'x'\n"
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in h\n'
        "RuntimeError: boom\n"
    )
    events = parse_log(text)
    assert len(events) == 2 and events[0].chain is not None
    for event in events:
        changes = {"lines": (7, 8), "chain_id": 9, "origin": "$.a:1", "repeats": 2}
        moved = evolve(event, **changes)
        assert moved == dataclasses.replace(event, **changes)
        assert moved.chain is event.chain and moved.frames == event.frames
        assert event.lines != (7, 8)  # the original is untouched
    with pytest.raises(TypeError, match="no field"):
        evolve(events[0], line=3)


# Issue 26: an unmatched exception's message is what it printed, not the noise after it.
_NOISE_AFTER = """\
Traceback (most recent call last):
  File "x.py", line 1, in <module>
ValueError: bad value 42
Got exit code 1
+ cleanup_workspace
"""


def test_noise_after_a_plain_traceback_is_not_its_message() -> None:
    (event,) = parse_log(_NOISE_AFTER)
    assert (event.exc_class, event.message, event.lines) == ("ValueError", "bad value 42", (3,))


def test_noise_after_a_timestamp_prefixed_traceback_is_not_its_message() -> None:
    stamped = "".join(
        f"2026-07-31T08:26:29.17{n:05d}Z {line}\n"
        for n, line in enumerate(_NOISE_AFTER.splitlines())
    )
    (event,) = parse_log(stamped)
    assert (event.message, event.lines) == ("bad value 42", (3,))


def test_indented_lines_after_the_exception_line_stay_in_its_message() -> None:
    text = _NOISE_AFTER.replace("Got exit", "  expected (3, 4)\n    note: see docs\nGot exit")
    (event,) = parse_log(text)
    assert event.message == "bad value 42\n  expected (3, 4)\n    note: see docs"
    assert event.lines == (3, 4, 5)


def test_a_line_after_a_cut_message_is_parsed_on_its_own() -> None:
    text = _NOISE_AFTER.replace("Got exit code 1", "RuntimeError: next failure")
    first, second = parse_log(text)
    assert (first.message, second.exc_class, second.message) == (
        "bad value 42",
        "RuntimeError",
        "next failure",
    )


def test_real_ci_syntax_error_message_ends_at_its_line() -> None:
    # pytorch CI (tests/data is not needed: the lines as the runner printed them).
    text = (
        "2026-07-31T08:26:29.1785001Z Traceback (most recent call last):\n"
        '2026-07-31T08:26:29.1785863Z   File "/opt/x/common_methods_invocations.py", line 15375\n'
        "2026-07-31T08:26:29.1786648Z     >>>>>>> 597be33c510 (Add more cases in test_ops.py)\n"
        "2026-07-31T08:26:29.1786963Z               ^\n"
        "2026-07-31T08:26:29.1787192Z SyntaxError: invalid decimal literal\n"
        "2026-07-31T08:26:29.1787468Z Got exit code 1\n"
        "2026-07-31T08:26:29.1787967Z No stepcurrent file found. Either pytest didn't get to run\n"
    )
    events = [e for e in parse_log(text) if e.exc_class == "SyntaxError"]
    assert [(e.kind, e.message) for e in events] == [
        (EventKind.TRACEBACK, "invalid decimal literal")
    ]


def test_djangos_copy_and_paste_traceback_ends_in_its_exception_type_and_value() -> None:
    from errkb.parse.traceback import parse_log

    text = (
        "Request Method: GET\n"
        "Python Version: 3.11.7\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/venv/django/core/handlers/exception.py", line 55, in inner\n'
        "    response = get_response(request)\n"
        '  File "/usr/lib/python3.11/optparse.py", line 708, in _check_callback\n'
        "    raise OptionError(MESSAGE)\n"
        "\n"
        "Exception Type: OptionError at /run/r10/\n"
        "Exception Value: callback not callable: 'us-east-2'\n"
    )
    (event,) = parse_log(text)
    assert (event.exc_class, event.message, event.lines) == (
        "OptionError",
        "callback not callable: 'us-east-2'",
        (11,),
    )
    assert [f.path for f in event.frames][-1] == "/usr/lib/python3.11/optparse.py"
    # Without the traceback above it, an "Exception Type:" row is no exception.
    assert parse_log("Exception Type: OptionError at /run/r10/\nException Value: x\n") == []


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: bad value",
        "ERROR:root:ValueError: boom",
        "[rank3]:ValueError: x",
        "2026-12-01 12:00:01 ERROR x - OSError: disk full",
        "\x1b[31mKeyError: 'k'\x1b[0m",
        "app.py:12: UserWarning: careful",
        "FAILED tests/test_x.py::test_y - AssertionError: no",
        "CannotInvert: singular",
        "worker died ValueError: x",
        "    ValueError: indented",
        "just words",
    ],
)
def test_one_line_read_alone_is_what_the_parser_reads(line: str) -> None:
    # ``exception_line`` is the one reader of an exception line outside a parse (the record
    # scan's unmatched lines): the class and message the parser finds on that line alone.
    events = [e for e in parse_log(line) if e.exc_class is not None]
    expected = (events[0].exc_class, events[0].message) if events else None
    assert exception_line(line) == expected
