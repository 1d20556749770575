from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.parse import regions
from errkb.parse.traceback import parse_log
from tests.workcount import assert_linear

QUANTO = "ValueError: Quanto layer 'enc.{i}' has incompatible scale F32 ({i},)"


def _big_log(seed: int, lines: int = 40_000) -> tuple[str, list[int]]:
    rng = random.Random(seed)
    out: list[str] = []
    wanted: list[int] = []
    while len(out) < lines:
        r = rng.random()
        if r < 0.003:
            out += [
                "[2026-08-28 05:10:05 TP0] Scheduler hit an exception: "
                "Traceback (most recent call last):",
                '  File "/usr/lib/python3/dist-packages/sglang/x.py", line 3, in f',
                "    g()",
                '  File "/usr/lib/python3/dist-packages/sglang/srt/layers/q.py", line 168, in g',
                "    raise ValueError(",
                QUANTO.format(i=len(out)),
            ]
            wanted.append(len(out))
        elif r < 0.006:
            out += ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
                    "KeyError: 'k'", ""]  # fmt: skip
        else:
            out.append(f"[2026-08-28 05:10:05 TP0] INFO decode batch {rng.randint(0, 10**6)} tok/s")
    return "\n".join(out) + "\n", wanted


def _summary(events: list) -> list[tuple[str | None, str, tuple[int, ...], int]]:
    return sorted((e.exc_class, e.message, e.lines, len(e.frames)) for e in events)


@pytest.fixture
def narrow_above() -> int:
    """Narrowing from 64 KiB: the same code path as past 1 MiB, on a log a sixteenth the size
    (the whole parse it is compared with cost ~2 s of CPU a case at full size)."""
    return 1 << 16


@pytest.mark.slow
def test_narrowed_parse_finds_what_a_whole_parse_finds_past_the_real_threshold() -> None:
    text, _wanted = _big_log(5)
    assert len(text) > regions.NARROW_ABOVE
    assert _summary(regions.parse_input(text)) == _summary(parse_log(text))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_narrowed_parse_finds_what_a_whole_parse_finds(seed: int, narrow_above: int) -> None:
    text, wanted = _big_log(seed, lines=4_000)
    assert len(text) > narrow_above
    whole = parse_log(text)
    narrowed = regions.parse_input(text, narrow_above)
    assert _summary(narrowed) == _summary(whole)
    assert regions.parse_input(text.encode(), narrow_above) == narrowed
    quanto_lines = sorted(e.lines[0] for e in narrowed if "Quanto" in e.message)
    assert quanto_lines == wanted  # the 1-based number of each block's last line


def test_windows_cover_each_hit_with_its_line_number() -> None:
    data = b"".join(b"info %d\n" % i for i in range(1000)) + b"ValueError: boom\n" + b"ok\n" * 1000
    ((first, chunk),) = regions.error_regions(data)
    lines = chunk.decode().splitlines()
    hit = lines.index("ValueError: boom")
    assert first + hit == 1001
    assert len(lines) <= regions.BEFORE + regions.AFTER + 1


def test_small_input_is_parsed_whole() -> None:
    text = "nothing here\nQuanto layer 'a' has incompatible scale F32 (3,)\n"
    assert regions.parse_input(text) == parse_log(text)


@pytest.mark.slow
def test_a_200_mb_log_is_explained_within_bounded_memory(tmp_path: Path) -> None:
    """Run in a fresh process so its peak RSS is the explain's own."""
    script = f"""
import json, resource, sys
import errkb
kb = errkb.open({str(tmp_path / "kb.sqlite3")!r})
line = b"[2026-08-28 05:10:05 TP0] INFO decode batch 12345 tokens/s 1234.5 gpu 0 cache 0.5\\n"
err = (b"ValueError: Expected scalar scale for fused-in-checkpoint merged-column "
       b"checkpoint load, got shape (2,)\\n")
chunk = line * 2000 + err
data = chunk * (200_000_000 // len(chunk))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = kb.explain(data)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"n": len(data) // len(chunk), "occ": report.exact[0].occurrences,
                  "extra_kib": after - before}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    result = json.loads(proc.stdout)
    assert result["occ"] == result["n"]
    # The input is held once; parsing adds only its small error regions.
    assert result["extra_kib"] < 200 * 1024


def _keywordless_log(prefix: str = "") -> tuple[bytes, int]:
    """A log over the narrowing threshold with one traceback whose class has no error word."""
    filler = b"".join(b"%sINFO step %d loss 0.5\n" % (prefix.encode(), i) for i in range(60_000))
    traceback = (
        f"{prefix}Traceback (most recent call last):\n"
        f'{prefix}  File "/app/solve.py", line 12, in <module>\n'
        f"{prefix}    invert(m)\n"
        f'{prefix}  File "/app/linalg.py", line 40, in invert\n'
        f"{prefix}    raise CannotInvert(f'matrix {{name}} is singular')\n"
        f"{prefix}linalg.CannotInvert: matrix 'A' is singular\n"
    ).encode()
    # The next keyword line is far more than TRACEBACK_REACH lines away.
    data = filler + traceback + filler + b"ERROR: done\n"
    return data, filler.count(b"\n") + 6


@pytest.mark.parametrize("prefix", ["", "solver-1  | "])
def test_a_keywordless_exception_far_from_any_keyword_keeps_its_message(prefix: str) -> None:
    data, line = _keywordless_log(prefix)
    assert len(data) > regions.NARROW_ABOVE
    events = [e for e in regions.parse_input(data) if e.exc_class and "CannotInvert" in e.exc_class]
    assert [(e.message, e.lines[0]) for e in events] == [("matrix 'A' is singular", line)]
    assert len(events[0].frames) == 2


_HOSTILE = {
    # One line of error words: each hit's line start was searched back to the line's start.
    "error-words": "b'Error ' * (N // 6)",
    # Consecutive headers: the rest of the hit list was copied for every header.
    "headers": "b'Traceback (most recent call last):\\n' * (N // 35)",
    # "During handling" chains.
    "chains": "(b'Traceback (most recent call last):\\n  File \"a.py\", line 1, in f\\n    g()\\n'"
    " b\"KeyError: 'k'\\n\\nDuring handling of the above exception, another exception"
    ' occurred:\\n\\n") * (N // 130)',
    # A keyword on every line.
    "value-lines": "b'ValueError: x\\n' * (N // 14)",
}


#: The same shapes built in this process (the work-counting test).
_BUILD = {
    "error-words": lambda n: b"Error " * (n // 6),
    "headers": lambda n: b"Traceback (most recent call last):\n" * (n // 35),
    "chains": lambda n: (
        (
            b'Traceback (most recent call last):\n  File "a.py", line 1, in f\n    g()\n'
            b"KeyError: 'k'\n\nDuring handling of the above exception, another exception"
            b" occurred:\n\n"
        )
        * (n // 130)
    ),
    "value-lines": lambda n: b"ValueError: x\n" * (n // 14),
}


def _time_regions(shape: str, size: int, memory_cap: int) -> tuple[float, int]:
    """CPU seconds ``error_regions`` takes over ``size`` bytes of ``shape``, and the bytes its
    peak RSS grew by, in a process whose address space is capped."""
    script = f"""
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({memory_cap}, {memory_cap}))
from errkb.parse import regions
N = {size}
data = {_HOSTILE[shape]}
regions._keywords()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
for _ in regions.error_regions(data):
    pass
seconds = time.process_time() - start
print(seconds, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seconds, grown = proc.stdout.split()
    return float(seconds), int(grown)


@pytest.mark.parametrize("shape", sorted(_HOSTILE))
def test_error_regions_take_linear_work(shape: str) -> None:
    regions._keywords()  # the vocabulary's one-time build is not the scan's work
    assert_linear(_BUILD[shape], lambda data: list(regions.error_regions(data)), 1 << 16)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(_HOSTILE))
def test_error_regions_takes_linear_time_and_bounded_memory(shape: str) -> None:
    small, _ = _time_regions(shape, 1 << 20, 1 << 30)
    # Eight times the input: a linear pass takes about eight times as long; a quadratic one
    # (what these shapes cost before) sixty-four. The bound is generous for a shared machine;
    # 8 MiB under a 1 GiB address-space cap (the interpreter and the input need ~100 MB).
    large, grown = _time_regions(shape, 8 << 20, 1 << 30)
    assert large < max(small, 0.05) * 24, (small, large)
    # Memory: the regions (slices of the input) and the windows in reach, not a Python object
    # per hit or per hit line (the keyword pass once held 50 million tuples for 300 MB).
    assert grown < 2 * (8 << 20), grown


def _numbers(events: list) -> list[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    return sorted(
        (
            e.message,
            e.lines,
            tuple(f.input_line for f in e.frames),
            tuple(m.number for m in e.message_lines),
        )
        for e in events
    )


def test_a_narrowed_parse_numbers_every_line_as_the_input_does(narrow_above: int) -> None:
    # A wrapped message's printed lines are what explain rejoins and reports: inside a region
    # they must carry the input's numbers too, not the region's (they did not, before regions
    # were parsed with a line map).
    text, _wanted = _big_log(4, lines=4_000)
    lines = text.split("\n")
    at = len(lines) // 2
    lines[at:at] = ["ValueError: Quanto layer 'enc.7' has incompatible", "scale F32 (7,)"]
    text = "\n".join(lines)
    assert len(text) > narrow_above
    whole = _numbers(parse_log(text))
    narrowed = _numbers(regions.parse_input(text.encode(), narrow_above))
    assert narrowed == whole
    wrapped = [n for n in narrowed if n[0].startswith("Quanto layer 'enc.7'")]
    assert wrapped and wrapped[0][3] == (at + 1, at + 2)


def _timestamped_traceback(cls: str, message: str, first: int) -> list[str]:
    """A traceback as GitHub Actions prints it: a timestamp of one shape, other digits per line."""
    frames = [
        f'  File "/opt/conda/lib/python3.10/site-packages/requests/adapters.py", line {n}, in send'
        for n in range(700, 708)
    ]
    body = [
        "Traceback (most recent call last):",
        *(line for frame in frames for line in (frame, "    return self.send(request)")),
        f"{cls}: {message}",
    ]
    return [f"2024-07-08T16:59:07.{first + k:07d}Z {line}" for k, line in enumerate(body)]


def test_a_traceback_behind_a_timestamp_per_line_ends_at_its_exception_line() -> None:
    lines = _timestamped_traceback("requests.exceptions.ReadTimeout", "Read timed out.", 1265835)
    data = "\n".join(lines).encode() + b"\n"
    start, number = regions.exception_line(data, 0, 1)
    assert number == 18 and data[start:].startswith(b"2024-07-08T16:59:07.1265852Z requests.")


def test_a_narrowed_parse_finds_an_exception_behind_a_timestamp_per_line(
    narrow_above: int,
) -> None:
    # Its class ends in no error word: the window around the header must reach its line.
    filler = [f"2024-07-08T16:59:{n % 60:02d}.{n:07d}Z step {n} ok" for n in range(2000)]
    tb = _timestamped_traceback("requests.exceptions.ReadTimeout", "Read timed out.", 4000000)
    text = "\n".join(filler[:1000] + tb + filler[1000:]) + "\n"
    assert len(text) > narrow_above
    found = [
        e
        for e in regions.parse_input(text, narrow_above)
        if e.exc_class == "requests.exceptions.ReadTimeout"
    ]
    assert [(e.message, e.lines[0]) for e in found] == [("Read timed out.", 1018)]
