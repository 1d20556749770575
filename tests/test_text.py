"""Normalisation: prefixes, colours, carriage returns and decoding, with original line numbers."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from errkb.parse import text as text_mod
from errkb.parse.text import LogLine, NormalizedLog, decode_input, normalize
from tests.tiers import examples
from tests.workcount import assert_linear, cpu_ratio

ESC = "\x1b"


def one(line: str) -> LogLine:
    log = normalize(line)
    assert len(log) == 1, log.lines
    return log.lines[0]


# (raw line, cleaned text, stream identity, level, starts a log record)
PREFIXES = [
    pytest.param(
        "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "Scheduler hit an exception: Traceback (most recent call last):",
        "TP0",
        None,
        True,
        id="sglang-tp",
    ),
    pytest.param(
        "[2026-08-28 05:10:05 DP1 TP3 EP2] Load weight begin.",
        "Load weight begin.",
        "DP1 TP3 EP2",
        None,
        True,
        id="sglang-dp-tp-ep",
    ),
    pytest.param(
        "[2026-08-28 05:10:05] Received sigquit from a child process.",
        "Received sigquit from a child process.",
        "",
        None,
        True,
        id="sglang-no-rank",
    ),
    pytest.param(
        "[08-28 05:10:05] Rank 0 scheduler is dead.",
        "Rank 0 scheduler is dead.",
        "",
        None,
        True,
        id="sglang-diffusion",
    ),
    pytest.param("[01:38:57] Load weight end.", "Load weight end.", "", None, True, id="time-only"),
    pytest.param(
        f"{ESC}[91mERROR{ESC}[0;0m 08-28 05:10:06 [gpu_worker.py: 447] Worker 0 failed: x",
        "Worker 0 failed: x",
        "",
        "ERROR",
        True,
        id="diffusion-default-format",
    ),
    pytest.param(
        "[pod/sglang-0/server] ValueError: x",
        "ValueError: x",
        "pod/sglang-0/server",
        None,
        False,
        id="kubectl",
    ),
    pytest.param(
        "[pod/qwen-0/server] 2026-08-28T05:10:05.12Z [2026-08-28 05:10:05 TP1] Scheduler hit",
        "Scheduler hit",
        "pod/qwen-0/server TP1",
        None,
        True,
        id="kubectl+rfc3339+sglang",
    ),
    pytest.param(
        'diffusion-1  |   File "x.py", line 3, in f',
        '  File "x.py", line 3, in f',
        "diffusion-1",
        None,
        False,
        id="docker-compose",
    ),
    pytest.param(
        '(RayWorkerWrapper pid=1234)   File "a.py", line 2, in h',
        '  File "a.py", line 2, in h',
        "RayWorkerWrapper pid=1234",
        None,
        False,
        id="ray",
    ),
    pytest.param(
        "(WorkerDict pid=77, ip=10.0.0.2) ValueError: x",
        "ValueError: x",
        "WorkerDict pid=77, ip=10.0.0.2",
        None,
        False,
        id="ray-with-ip",
    ),
    pytest.param(
        '(EngineCore_DP0 pid=14675) ERROR 02-07 03:59:09 [core.py:946]   File "x", line 1',
        '  File "x", line 1',
        "EngineCore_DP0 pid=14675",
        "ERROR",
        True,
        id="vllm",
    ),
    pytest.param("[rank1]: ValueError: y", "ValueError: y", "rank1", None, False, id="torchrun"),
    pytest.param(
        'ERROR 2025-04-04T06:24:51.493646621Z   File "z", line 9, in q',
        '  File "z", line 9, in q',
        "",
        None,
        False,
        id="cloud-logger",
    ),
    pytest.param(
        "2026-08-28T05:10:05.123456789Z Traceback (most recent call last):",
        "Traceback (most recent call last):",
        "",
        None,
        False,
        id="rfc3339-nanos",
    ),
    pytest.param(
        "2026-08-28T05:10:05.123+02:00 boom", "boom", "", None, False, id="rfc3339-offset"
    ),
    pytest.param(
        "2026-08-28 05:10:05,123 ERROR boom", "boom", "", "ERROR", True, id="asctime-level"
    ),
    pytest.param(
        "2025-04-03 12:05:56,595 - __main__ - INFO -     ssl_sock = wrap(",
        "    ssl_sock = wrap(",
        "",
        "INFO",
        True,
        id="python-logging-dash",
    ),
    pytest.param(
        "Aug 28 05:10:05 gpu-3 python3[4321]: ValueError: x",
        "ValueError: x",
        "python3[4321]",
        None,
        False,
        id="syslog",
    ),
    pytest.param("ERROR:root:Something bad", "Something bad", "", "ERROR", True, id="basicConfig"),
    pytest.param(
        "INFO:     Started server process [1234]",
        "Started server process [1234]",
        "",
        "INFO",
        True,
        id="uvicorn-padding",
    ),
    pytest.param(
        "2026-08-28 05:10:05.123 | ERROR    | mod:func:12 - msg",
        "msg",
        "",
        "ERROR",
        True,
        id="loguru",
    ),
    pytest.param(
        "W0828 05:10:05.123456 1234 torch/x.cpp:12] warn", "warn", "", "WARNING", True, id="glog"
    ),
    pytest.param(
        "[rank0]:[W828 05:09:56.402211 5512 ProcessGroupNCCL.cpp:1496] leak",
        "leak",
        "rank0",
        "WARNING",
        True,
        id="torchrun+c10d",
    ),
    pytest.param(
        "E       ValueError: Quanto layer",
        "ValueError: Quanto layer",
        "",
        None,
        False,
        id="pytest-E",
    ),
    pytest.param("[gpu=0] Load weight begin", "Load weight begin", "gpu=0", None, False, id="tag"),
]


@pytest.mark.parametrize(("raw", "text", "stream", "level", "header"), PREFIXES)
def test_prefix_shapes_are_stripped(
    raw: str, text: str, stream: str, level: str | None, header: bool
) -> None:
    line = one(raw)
    assert line.text == text
    assert line.stream == stream
    assert line.level == level
    assert line.header is header


@pytest.mark.parametrize(
    "text",
    [
        '  File "/x/y.py", line 3, in f',
        "    raise ValueError(",
        "                ^^^^^^^^^^",
        "ValueError: Quanto layer 'enc.0' has incompatible scale F32 (3072,)",
        "sglang.multimodal_gen.runtime.x.ComponentCheckpointUnsupportedError: Cannot configure",
        "KeyError: 'x'",
        "Traceback (most recent call last):",
        "The above exception was the direct cause of the following exception:",
        "  + Exception Group Traceback (most recent call last):",
        "  | ValueError: a",
        "Error: not a level word, and not a prefix",
        "arr[m] = x[mask]  # brackets that look like colour remnants",
        '{"success":false,"message":"Failed to update weights: x"}',
        'python/sglang/srt/layers/linear.py:870:    "merged-column checkpoint load, got shape "',
    ],
)
def test_traceback_and_message_lines_are_kept_verbatim(text: str) -> None:
    assert one(text).text == text


def test_prefix_strips_exactly_one_separator_space_so_indentation_survives() -> None:
    log = normalize('[rank0]:   File "a.py", line 2, in h\n[rank0]:     x = 1\n')
    assert [ln.text for ln in log] == ['  File "a.py", line 2, in h', "    x = 1"]


def test_stacked_prefixes_are_all_stripped() -> None:
    raw = "[pod/p/c] 2026-08-28T05:10:05.1Z [2026-08-28 05:10:05 TP0] ERROR: ValueError: x"
    line = one(raw)
    assert line.text == "ValueError: x"
    assert line.stream == "pod/p/c TP0"
    assert line.level == "ERROR"


def test_a_record_rank_covers_its_unprefixed_continuation_lines() -> None:
    log = normalize(
        "[2026-08-28 05:10:05 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "ValueError: boom\n"
        "[2026-08-28 05:10:06] Received sigquit from a child process.\n"
        "Killed\n"
    )
    assert [ln.stream for ln in log] == ["TP1", "TP1", "TP1", "", ""]
    assert [ln.header for ln in log] == [True, False, False, True, False]


def test_ray_deduplication_suffix_is_removed() -> None:
    line = one("(RayWorkerWrapper pid=1235) ValueError: x (2,) [repeated 3x across cluster]")
    assert line.text == "ValueError: x (2,)"


def test_transport_prefixes_are_not_inherited() -> None:
    # Ray prefixes every forwarded line; an unprefixed line is the driver's own output.
    log = normalize("(RayWorkerWrapper pid=9) x\ndriver line\n(RayWorkerWrapper pid=9) y\n")
    assert [ln.stream for ln in log] == ["RayWorkerWrapper pid=9", "", "RayWorkerWrapper pid=9"]


def test_ranks_are_tracked_per_transport_stream() -> None:
    log = normalize(
        "[pod/a/c] [2026-08-28 05:10:05 TP0] header a\n"
        "[pod/b/c] [2026-08-28 05:10:05 TP1] header b\n"
        '[pod/a/c]   File "a.py", line 1\n'
        '[pod/b/c]   File "b.py", line 1\n'
    )
    assert [ln.stream for ln in log] == ["pod/a/c TP0", "pod/b/c TP1", "pod/a/c TP0", "pod/b/c TP1"]


def test_relayed_logger_lines_count_both_record_headers() -> None:
    log = normalize(
        "2026-08-28 05:09:55,595 - relay - INFO - [2026-08-28 05:09:55] hit\n"
        '2026-08-28 05:09:55,595 - relay - INFO -   File "x.py", line 1\n'
        "[2026-08-28 05:09:55] ERROR: one record, two parts\n"
    )
    assert [ln.record_prefixes for ln in log] == [2, 1, 1]


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (f"{ESC}[1;31mValueError{ESC}[0m: {ESC}[35mx{ESC}[0m", "ValueError: x"),
        ("[1;36m[08-28 05:10:02][0m Loading", "Loading"),
        ("^[[31mValueError^[[0m: x", "ValueError: x"),
        ("\u241b[31mValueError\u241b[0m: x", "ValueError: x"),
        (f"{ESC}]8;;https://example.com{ESC}\\link{ESC}]8;;{ESC}\\ text", "link text"),
        (f"{ESC}(B{ESC}[mplain", "plain"),
        ("bell\x07 and\x00 nul", "bell and nul"),
    ],
    ids=["csi", "remnants", "caret-escape", "symbol-esc", "osc-hyperlink", "charset", "controls"],
)
def test_colour_codes_and_controls_are_removed(raw: str, text: str) -> None:
    assert one(raw).text == text


def test_line_numbers_are_original_with_crlf_blank_lines_and_no_final_newline() -> None:
    log = normalize("a\r\n\r\n[2026-08-28 05:10:05] b\r\nc")
    assert [(ln.number, ln.text) for ln in log] == [(1, "a"), (2, ""), (3, "b"), (4, "c")]


BAR = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:00<00:00,  1.41it/s]"
TQDM = "Loading:  50%|█████     | 1/2 [00:01<00:01,  1.20it/s]"


@pytest.mark.parametrize(
    ("raw", "texts"),
    [
        (f"\r{BAR}\r[2026-08-28 05:10:05 TP0] Scheduler hit", ["Scheduler hit"]),
        (f"\r{TQDM}[2026-08-28 05:10:05 TP0] glued after the bar", ["glued after the bar"]),
        (f"\r{TQDM}\r{TQDM}\r{TQDM}", [TQDM]),
        ("Traceback (most recent call last):\r", ["Traceback (most recent call last):"]),
        ("ValueError: x\rother writer", ["ValueError: x", "other writer"]),
        ("\r   \r", [""]),
    ],
    ids=["bar-then-cr", "bar-glued", "bars-only", "trailing-cr", "overwritten-text", "blank"],
)
def test_carriage_return_segments(raw: str, texts: list[str]) -> None:
    log = normalize(f"first\n{raw}\nlast\n")
    assert [ln.text for ln in log][1:-1] == texts
    assert {ln.number for ln in log.lines[1:-1]} == {2}
    assert log.lines[-1].number == 3


def test_pytest_e_lines_keep_relative_indentation() -> None:
    log = normalize("E       ValueError: first\nE         indented more\nE       back\n")
    assert [ln.text for ln in log] == ["ValueError: first", "  indented more", "back"]
    assert all(ln.pytest_error for ln in log)


def test_a_level_word_inside_a_message_is_not_a_prefix_after_text() -> None:
    assert one("Traceback says ERROR: no").text == "Traceback says ERROR: no"


def test_streams_groups_lines_in_order() -> None:
    log = normalize("[rank0]: a\n[rank1]: b\n[rank0]: c\n")
    assert {k: [ln.text for ln in v] for k, v in log.streams().items()} == {
        "rank0": ["a", "c"],
        "rank1": ["b"],
    }
    assert log.text == "a\nb\nc"


def test_normalized_log_is_frozen() -> None:
    log = normalize("x")
    assert isinstance(log, NormalizedLog)
    with pytest.raises(AttributeError):
        log.lines = ()  # type: ignore[misc]


# --- decoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"ValueError: caf\xc3\xa9", "ValueError: café"),
        (b"bad \xff\xfe bytes", "bad \ufffd\ufffd bytes"),
        (b"nul\x00 bytes", "nul bytes"),
        (b"\xef\xbb\xbfwith bom", "with bom"),
        ("utf16 bom".encode("utf-16"), "utf16 bom"),
        (
            "PowerShell > without a BOM, ASCII only".encode("utf-16-le"),
            "PowerShell > without a BOM, ASCII only",
        ),
        (b"", ""),
    ],
    ids=["utf8", "invalid", "nul", "utf8-bom", "utf16-bom", "utf16le-no-bom", "empty"],
)
def test_decode_input(data: bytes, text: str) -> None:
    assert decode_input(data) == text


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from([b"", b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"]), st.binary(max_size=12))
def test_utf8_input_decodes_as_the_utf_8_sig_codec_does(head: bytes, tail: bytes) -> None:
    # A leading BOM is dropped by hand (the codec's module is not imported for it). Under 16
    # bytes, an input is never taken for UTF-16 without a BOM.
    data = head + tail
    assume(not data.startswith((b"\xff\xfe", b"\xfe\xff")))
    assert decode_input(data) == data.decode("utf-8-sig", "replace").replace("\x00", "")


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=4096))
def test_decode_input_never_raises(data: bytes) -> None:
    text = decode_input(data)
    assert "\x00" not in text
    normalize(text)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=2000))
def test_normalize_never_raises_and_keeps_numbering(text: str) -> None:
    log = normalize(text)
    numbers = [ln.number for ln in log]
    assert numbers == sorted(numbers)
    lf = text.replace("\r\n", "\n")
    # With no line feed at all, CRs end lines (old Mac line ends).
    expected = lf.split("\n") if "\n" in lf or "\r" not in lf else lf.split("\r")
    if expected and expected[-1] == "":
        expected.pop()
    assert set(numbers) <= set(range(1, len(expected) + 1))


# --- size --------------------------------------------------------------------------------------


def test_a_10mb_line_is_kept_and_cleaned() -> None:
    body = "x" * 10_000_000
    log = normalize(f"[2026-08-28 05:10:05 TP0] {body}\nnext\n")
    assert log.lines[0].text == body
    assert log.lines[0].stream == "TP0"
    assert log.lines[1].number == 2


@pytest.mark.parametrize(
    "line",
    [
        # A tenth of a megabyte each: a superlinear start would still take minutes here, and
        # test_pathological_line_starts_take_linear_work below counts the work at two sizes.
        "[" * 100_000,
        "(" + "x pid=1, " * 20_000 + ")",
        "2026-08-28 " * 20_000,
        "ERROR " * 30_000,
        "svc " * 30_000 + "| x",
        "\r".join(["50% 1/2 ["] * 10_000),
    ],
    ids=["brackets", "ray-like", "dates", "levels", "compose-like", "progress-like"],
)
def test_pathological_line_starts_are_cheap(line: str) -> None:
    log = normalize(line)
    assert log.lines[0].number == 1


_PATHOLOGICAL = {
    "brackets": lambda n: "[" * n,
    "ray-like": lambda n: "(" + "x pid=1, " * n + ")",
    "dates": lambda n: "2026-08-28 " * n,
    "levels": lambda n: "ERROR " * n,
    "compose-like": lambda n: "svc " * n + "| x",
    "progress-like": lambda n: "\r".join(["50% 1/2 ["] * n),
    "long line": lambda n: f"[2026-08-28 05:10:05 TP0] {'x' * n}\nnext\n",
}


@pytest.mark.parametrize("shape", sorted(_PATHOLOGICAL))
def test_pathological_line_starts_take_linear_work(shape: str) -> None:
    assert_linear(_PATHOLOGICAL[shape], normalize, 2_000)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(_PATHOLOGICAL))
def test_pathological_line_starts_take_linear_cpu(shape: str) -> None:
    # What line counting cannot see: a backtracking regex inside one C call.
    assert cpu_ratio(_PATHOLOGICAL[shape], normalize, 50_000, 8) < 8 * 3


def _many_lines(copies: int) -> str:
    return _CHUNK * copies


_CHUNK = (
    "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/layers/linear.py", line 872, in f\n'
    "    raise ValueError(\n"
    f"{ESC}[31mValueError{ESC}[0m: boom\n"
    "(RayWorkerWrapper pid=1) [rank0]: 2026-08-28T05:10:05Z x\n"
)


def test_many_lines_normalise_in_linear_work() -> None:
    assert_linear(_many_lines, normalize, 100)


def test_many_lines_normalise() -> None:
    chunk = (
        "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/layers/linear.py", line 872, in f\n'
        "    raise ValueError(\n"
        f"{ESC}[31mValueError{ESC}[0m: boom\n"
        "(RayWorkerWrapper pid=1) [rank0]: 2026-08-28T05:10:05Z x\n"
    )
    assert chunk == _CHUNK
    log = normalize(chunk * 10_000)
    assert len(log) == 50_000
    assert log.lines[-1].number == 50_000


_OLD_REMNANT_RE = re.compile(r"(?:\^\[)?\[\d{1,3}(?:;\d{1,3}){0,15}m|\(B\[m")
_CLEANING_ALPHABET = st.sampled_from(
    ["\x1b", "\u241b", "[", "]", "^", "(", "B", "m", "0", "1", ";", "3", "6", "\x07", "\\",
     "\x00", "\x08", "\x7f", "\x1f", "\t", "\n", "\r", "a", " ", "é", "█", "\ud800"]
)  # fmt: skip


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_CLEANING_ALPHABET, max_size=60).map("".join))
def test_the_fast_cleaners_remove_what_the_plain_patterns_remove(raw: str) -> None:
    # normalize skips to escape characters with str.find, tests for controls on the encoding,
    # and spells the remnant pattern as literal-first branches: each must equal the plain sub.
    assert text_mod._strip_ansi(raw) == text_mod._ANSI_RE.sub("", raw)
    assert text_mod._ANSI_REMNANT_RE.sub("", raw) == _OLD_REMNANT_RE.sub("", raw)
    assert text_mod._has_controls(raw) == (text_mod._ctrl_re().search(raw) is not None)


@pytest.mark.parametrize(
    ("name", "spaces", "stripped"),
    [("a" * 64, 32, True), ("a" * 64, 33, False), ("a" * 65, 1, False), ("api-1", 2, True)],
)
def test_compose_prefix_at_its_longest(name: str, spaces: int, stripped: bool) -> None:
    # The " |" substring test that spares the regex call must see every prefix the regex takes.
    line = f"{name}{' ' * spaces}| ValueError: boom"
    [cleaned] = normalize(line).lines
    assert (cleaned.text == "ValueError: boom") is stripped
    assert (cleaned.stream == name) is stripped


def test_a_log_line_is_an_immutable_value() -> None:
    from errkb.parse.text import _line

    line = normalize("[2026-08-28 05:10:05] ERROR: boom  ").lines[0]
    assert line == LogLine(1, "boom", "", "ERROR", 1, False, 2)
    assert _line((1, "boom", "", "ERROR", 1, False, 2)) == line
    assert line.header and line._replace(record_prefixes=0).header is False
    with pytest.raises(AttributeError):
        line.text = "other"  # type: ignore[misc]


# --- one escape rule for every route (issue 49) ----------------------------------------------
OSC8 = "\x1b]8;;file:///srv/app/load.py\x1b\\load.py\x1b]8;;\x1b\\"
ESCAPED = [
    ("\x1b[1;31mValueError\x1b[0m: x", "ValueError: x"),  # CSI
    (f"error in {OSC8}: x", "error in load.py: x"),  # OSC 8 hyperlink, ST-ended
    ("\x1b]9;4;1;50\x07ValueError: x", "ValueError: x"),  # OSC 9;4 progress, BEL-ended
    ("\x1bP1$r0m\x1b\\ValueError: x", "ValueError: x"),  # DCS
    ("\x1b_bk;t=1733050000000\x07ValueError: x", "ValueError: x"),  # APC (Buildkite)
    ("\u241b[31mValueError\u241b[0m: x", "ValueError: x"),  # ESC shown as U+241B
    ("no escape here: x", "no escape here: x"),
]


@pytest.mark.parametrize(("raw", "clean"), ESCAPED)
def test_strip_escapes_is_the_rule_normalize_applies(raw: str, clean: str) -> None:
    assert text_mod.strip_escapes(raw) == clean
    assert normalize(raw).lines[0].text == clean


def test_every_explain_route_strips_the_same_escapes(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unknown exception line outside every window is read straight from its line by the
    # record scan: with only CSI stripped there, OSC 8 and OSC 9;4 stayed in its message.
    from dataclasses import replace

    import errkb
    from errkb.explain import Thresholds
    from errkb.parse import regions

    monkeypatch.setattr(regions, "NARROW_ABOVE", 4096)
    filler = "".join(f"2026-12-01 10:00:00 INFO step {n} loss=0.41\n" for n in range(200))
    lines = [
        f"\x1b]9;4;1;{n}\x07KeyError: 'grapefruit {n}' in {OSC8} \x1b]9;4;0\x07" for n in range(3)
    ]
    data = (filler + "\n".join(lines) + "\n" + filler).encode()
    scan = Thresholds(scan_from=4097, paste_upto=4096)
    with errkb.open(tmp_path_factory.mktemp("escapes") / "kb.sqlite3", thresholds=scan) as kb:
        scanned = kb.explain(data).to_dict()
        assert kb._engine._anchors is not None  # the scan read it
        parsed = kb.explain(data, thresholds=replace(scan, scan_from=1 << 62)).to_dict()
    assert scanned == parsed
    messages = {u["message"] for u in scanned["unmatched"]}
    assert "'grapefruit 1' in load.py" in messages, messages
