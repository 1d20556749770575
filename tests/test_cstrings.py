r"""Messages inside quoted C strings (issue 49): ``errkb.parse.cstrings``.

strace's data syscalls are decoded and joined per process and descriptor, so a traceback that
Python wrote in pieces (``"ValueError"``, ``": "``, the message, ``"\n"``: real ``strace -f -s
1024 -tt`` lines below) reads as the traceback it is, on the line its first piece is on; a
debug dump's quoted string (printf, Go's ``%q``, Rust's ``{:?}``) is read as its lines.
Unterminated strings end at their line and a stream that never ends its line is cut.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import errkb
from errkb.parse.cstrings import MAX_PENDING, decode_c_string, unquote_lines
from errkb.parse.text import normalize
from tests.tiers import examples
from tests.workcount import assert_linear

QUANTO = "5c84e15f4be2c1a6"
MESSAGE = (
    "Quanto layer 'encoder.block.0.layer.0.SelfAttention.q' has incompatible scale F32 (4096,)"
)
# What strace -f -s 1024 -tt printed for `python3 -c 'raise ValueError(...)'` (pid 14970),
# with another process's writes interleaved.
STRACE = f"""\
14970 20:29:02.179178 write(2, "Traceback (most recent call last):\\n", 35) = 35
14970 20:29:02.179226 write(2, "", 0)   = 0
14971 20:29:02.179230 write(1, "step 12 loss 0.41\\n", 18) = 18
14970 20:29:02.179244 write(2, "  File \\"<string>\\", line 2, in <module>\\n", 39) = 39
14970 20:29:02.179262 write(2, "", 0)   = 0
14970 20:29:02.179277 write(2, "ValueError", 10) = 10
14971 20:29:02.179280 write(2, "warn", 4) = 4
14970 20:29:02.179293 write(2, ": ", 2) = 2
14970 20:29:02.179308 write(2, "{MESSAGE}", 89) = 89
14970 20:29:02.179324 write(2, "\\n", 1) = 1
14970 20:29:02.179500 +++ exited with 1 +++
"""


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("cstrings") / "kb.sqlite3") as opened:
        yield opened


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (r"plain", "plain"),
        (r"a\nb\tc\"d\\e", 'a\nb\tc"d\\e'),
        (r"\x1b[31mred\x1b[0m", "\x1b[31mred\x1b[0m"),
        (r"caf\303\251 \0end", "café \x00end"),  # strace's octal bytes: UTF-8
        (r"caf\xc3\xa9", "café"),
        (r"\u{1b}[1m Rust \u{e9}", "\x1b[1m Rust é"),  # Rust's {:?}
        (r"Go \u00e9 \U0001F600", "Go é \U0001f600"),  # Go's %q
        (r"\q unknown \e", "q unknown \x1b"),
        ("trailing \\", "trailing \\"),
    ],
)
def test_escapes_are_undone(body: str, text: str) -> None:
    assert decode_c_string(body) == text


def test_a_traceback_written_in_pieces_reads_as_the_traceback() -> None:
    lines = normalize(STRACE).lines
    texts = [(line.number, line.text) for line in lines]
    assert (1, "Traceback (most recent call last):") in texts
    assert (4, '  File "<string>", line 2, in <module>') in texts
    assert (6, f"ValueError: {MESSAGE}") in texts  # on the line of its first piece
    assert (3, "step 12 loss 0.41") in texts
    assert (7, "warn") in texts  # pid 14971's unfinished line, flushed at the end
    numbers = [n for n, _ in texts]
    assert numbers == sorted(numbers)


def test_strace_is_explained_exactly_on_the_line_the_exception_begins(
    kb: errkb.KnowledgeBase,
) -> None:
    [match] = kb.explain(STRACE).exact
    assert match.id == QUANTO and match.lines == (6,)
    assert match.capture_dict["scale_shape"] == "(4096,)"


def test_one_write_of_a_whole_message_and_a_writev() -> None:
    one = f'12345 10:00:00.123 write(2, "ValueError: {MESSAGE}\\n", 64) = 64\n'
    assert normalize(one).lines[0].text == f"ValueError: {MESSAGE}"
    vec = (
        '[pid  7] writev(2, [{iov_base="Value", iov_len=5}, '
        f'{{iov_base="Error: {MESSAGE}\\n", iov_len=90}}], 2) = 95\n'
    )
    assert normalize(vec).lines[0].text == f"ValueError: {MESSAGE}"


@pytest.mark.parametrize(
    "line",
    [
        f'panicked: Err(PyErr {{ message: "Traceback (most recent call last):\\n  File \\"x.py\\", '
        f'line 1, in <module>\\nValueError: {MESSAGE}\\n" }})',  # Rust {{:?}}
        f'stderr = "ValueError: {MESSAGE}\\n"',  # printf("%s = \"%s\"")
        f'level=error msg="worker failed" err="ValueError: {MESSAGE}\\nexit status 1"',  # Go %q
    ],
)
def test_a_debug_dump_s_string_is_read_as_its_lines(kb: errkb.KnowledgeBase, line: str) -> None:
    text = "2026-12-07 10:00:00 INFO starting\n" + line + "\n"
    lines = normalize(text).lines
    assert any(ln.number == 2 and ln.text == f"ValueError: {MESSAGE}" for ln in lines)
    [match] = kb.explain(text).exact
    assert match.id == QUANTO and match.lines == (2,)


@pytest.mark.parametrize(
    "text",
    [
        '{"message": "a\\nb"}\n',  # JSON: the container decoder's
        '  "message": "Failed: x.\\nRolling back."\n',  # a pretty-printed JSON member
        'open("/etc/passwd", O_RDONLY) = 3\n',  # no line break in the string
        "no quotes \\n here\n",
    ],
)
def test_what_is_not_a_quoted_dump_is_left_as_it_is(text: str) -> None:
    physical = text.split("\n")[:-1]
    assert unquote_lines(range(1, len(physical) + 1), physical) == ([1], physical)


def test_unterminated_strings_and_endless_streams_are_bounded() -> None:
    unterminated = 'write(2, "ValueError: x\\n  and no closing quote\n'
    assert [ln.text for ln in normalize(unterminated).lines] == [
        "ValueError: x",
        "  and no closing quote",
    ]
    endless = "".join(f'1 write(2, "{"x" * 1000}", 1000) = 1000\n' for _ in range(200))
    lines = normalize(endless).lines
    assert all(len(ln.text) <= MAX_PENDING + 1000 for ln in lines)
    assert sum(len(ln.text) for ln in lines) == 200 * 1000


def test_the_rewrite_is_linear_in_the_input() -> None:
    def build(n: int) -> str:  # escaped quotes, unterminated strings and line breaks
        return '1 write(2, "' + '\\"' * n + 'x", 1) = 1\n' + 'a "\\n' * n + "\n"

    assert_linear(build, normalize, 5_000)


@settings(max_examples=examples(400))
@given(st.text(alphabet='\\"nx0-7u{}\n ,()write', max_size=200))
def test_any_text_is_rewritten_without_error(text: str) -> None:
    physical = text.split("\n")
    numbers, lines = unquote_lines(range(1, len(physical) + 1), physical)
    assert len(numbers) == len(lines) and numbers == sorted(numbers)


def _strace_log(copies: int) -> str:
    out = []
    for k in range(copies):
        pid = 20000 + k
        out.append(
            f'{pid} 10:00:{k % 60:02d}.000001 write(1, "step {k} loss 0.41 lr 2e-4\\n", 24) = 24\n'
        )
        if k % 10 == 3:
            out.append(STRACE.replace("14970", str(pid)).replace("14971", str(pid + 1)))
    return "".join(out)


def test_every_route_reads_strace_the_same(
    kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from errkb.parse import regions

    data = _strace_log(300).encode()
    whole = kb.explain(data).to_dict()
    monkeypatch.setattr(regions, "NARROW_ABOVE", 4096)
    scanned = kb.explain(data).to_dict()
    kb.record_scan = False
    try:
        parsed = kb.explain(data).to_dict()
    finally:
        kb.record_scan = True
    assert whole["matches"] == scanned["matches"] == parsed["matches"]
    [match] = [m for m in whole["matches"] if m["confidence"] == "exact"]
    assert match["occurrences"] == 30
    firsts = [n for n, line in enumerate(data.decode().split("\n"), 1) if '"ValueError"' in line]
    assert sorted(set(match["lines"])) == firsts
