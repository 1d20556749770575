from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.parse import regions
from errkb.parse.traceback import parse_log

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


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_narrowed_parse_finds_what_a_whole_parse_finds(seed: int) -> None:
    text, wanted = _big_log(seed)
    assert len(text) > regions.NARROW_ABOVE
    whole = parse_log(text)
    narrowed = regions.parse_input(text)
    assert _summary(narrowed) == _summary(whole)
    assert regions.parse_input(text.encode()) == narrowed
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
