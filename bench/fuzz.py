"""Fuzzing errkb's untrusted-input paths with Hypothesis: explain input, record JSON, safetensors.

Each target feeds generated input to the library the way the CLI does and allows exactly one
kind of failure, :class:`errkb.ErrkbError`; anything else (an ``IndexError``, a
``RecursionError``, a ``UnicodeEncodeError``) is a crash. Every example also runs under a
deadline, so a pathological slowdown fails too.

* ``explain``: bytes made of log fragments (tracebacks, chained exceptions, keyword runs,
  escapes, seed messages) mixed with arbitrary bytes, through ``KnowledgeBase.explain``.
* ``records``: JSON Lines built from a seed record with fields replaced by arbitrary JSON
  values, lone surrogates, duplicate keys, deep nesting, or plain garbage, through the reader,
  ``check_record`` / ``check_envelope`` and, for the valid ones, everything ingest computes.
* ``safetensors``: headers built from tensor entries with arbitrary dtypes, shapes and offsets,
  or arbitrary bytes, through ``parse_header``.

``tests/test_hostile_fuzz.py`` runs ~100 examples of each in CI; the longer run is
``python -m bench.fuzz --examples 20000`` (prints the examples run and the crashes found).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.checkpoint.safetensors import DTYPE_BITS, parse_header
from errkb.errors import ErrkbError
from errkb.records import (
    Record,
    check_envelope,
    check_record,
    content_hash,
    upstream,
)
from errkb.records.patterns import compile_re2, compile_record
from errkb.records.reader import read_file

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT / "data" / "dataset").glob("*.txt"))

# --------------------------------------------------------------------------- strategies
_FRAGMENTS = [
    "Traceback (most recent call last):\n",
    '  File "/app/x.py", line 3, in f\n',
    "    raise ValueError(x)\n",
    "ValueError: ",
    "RuntimeError: ",
    "\nDuring handling of the above exception, another exception occurred:\n\n",
    "\nThe above exception was the direct cause of the following exception:\n\n",
    "Error ",
    "ERROR ",
    "error: ",
    "\x1b[31m",
    "\x1b]52;c;aGk=\x07",
    "\r",
    "\n",
    "\t",
    "{",
    "}",
    "'",
    '"',
    "(1, 3072)",
    "[rank0]: ",
    "2026-01-01 00:00:00,000 ERROR ",
    "  ^^^^^^\n",
    "Exception ignored in: <function f at 0x7f>\n",
]


def _seed_records() -> list[dict[str, Any]]:
    out = []
    for path in SEEDS:
        doc = json.loads(path.read_text(encoding="utf-8"))
        out.append(doc.get("record", doc))
    return out


_SEEDS = _seed_records()
_MESSAGES = [r["errorMessage"] for r in _SEEDS]

explain_inputs = st.one_of(
    st.binary(max_size=2048),
    st.lists(
        st.one_of(
            st.sampled_from(_FRAGMENTS),
            st.sampled_from(_MESSAGES),
            st.text(max_size=40),
            st.binary(max_size=20).map(lambda b: b.decode("latin-1")),
        ),
        max_size=60,
    ).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass")),
)

_NASTY_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\ud800", "\udfff", "x\udc80y", "\n", "a\n", "", " ", "{v}", "{!r}", "\0"]),
    st.text(alphabet="{}()[]\\.*+?|^$!r", max_size=60),
)
_JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        _NASTY_TEXT,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_NASTY_TEXT, children, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def record_lines(draw: st.DrawFn) -> str:
    """One JSON Lines line: a seed record with fields broken, or garbage."""
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "envelope", "garbage", "deep"]))
    if kind == "garbage":
        return draw(st.text(max_size=200)).replace("\n", " ")
    if kind == "deep":
        depth = draw(st.integers(min_value=1, max_value=5000))
        return '{"x": ' + "[" * depth + "]" * depth + "}"
    record = dict(draw(st.sampled_from(_SEEDS)))
    fields = draw(st.lists(st.sampled_from([*record, "extra"]), max_size=4, unique=True))
    for name in fields:
        record[name] = draw(_JSON_VALUES)
    if draw(st.booleans()) and isinstance(record.get("errorMessage"), str):
        # Keep it valid where the mutation allows, so deeper code runs too.
        message = record["errorMessage"]
        # A template that does not parse is for check_record to find, not for the generator.
        with contextlib.suppress(Exception):
            record["messagePattern"] = upstream.message_pattern(message)
    obj: Any = record
    if kind == "envelope":
        obj = {"record": record, "datasetVersion": draw(st.one_of(_NASTY_TEXT, _JSON_VALUES))}
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()) and text.endswith("}"):
        text = text[:-1] + ', "severity": "error"}'  # a duplicate key, probably
    return text.replace("\n", "\\n")


_DTYPES = st.sampled_from([*DTYPE_BITS, "F128", "", "u8"])


@st.composite
def safetensors_headers(draw: st.DrawFn) -> tuple[bytes, int]:
    """A header (bytes) and a data-buffer length."""
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        return draw(st.binary(max_size=300)), draw(st.integers(min_value=0, max_value=1 << 20))
    header: dict[str, Any] = {}
    offset = 0
    for i in range(draw(st.integers(min_value=0, max_value=6))):
        shape = draw(
            st.one_of(
                st.lists(st.integers(min_value=0, max_value=8), max_size=4),
                st.lists(st.integers(min_value=-3, max_value=2**70), max_size=70),
                _JSON_VALUES,
            )
        )
        size = draw(st.integers(min_value=0, max_value=64))
        offsets = draw(st.one_of(st.just([offset, offset + size]), _JSON_VALUES))
        entry: Any = {"dtype": draw(_DTYPES), "shape": shape, "data_offsets": offsets}
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            entry = draw(_JSON_VALUES)
        header[draw(st.one_of(st.just(f"t{i}"), _NASTY_TEXT))] = entry
        offset += size
    if draw(st.booleans()):
        header["__metadata__"] = draw(
            st.one_of(st.dictionaries(_NASTY_TEXT, _NASTY_TEXT, max_size=3), _JSON_VALUES)
        )
    raw = json.dumps(header, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    buffer_len = draw(st.one_of(st.just(offset), st.integers(min_value=0, max_value=1 << 20)))
    return raw, buffer_len


# --------------------------------------------------------------------------- targets
class _Workspace:
    """A temporary knowledge base (seeded with the bundled records) and scratch directory."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="errkb-fuzz-")
        self.dir = Path(self._tmp.name)
        self.kb = errkb.open(self.dir / "kb.sqlite3")

    def close(self) -> None:
        self.kb.close()
        self._tmp.cleanup()


def explain_one(ws: _Workspace, data: bytes) -> None:
    """Explain ``data``; only ErrkbError may escape."""
    try:
        report = ws.kb.explain(data)
        json.dumps(report.to_dict(), allow_nan=False)
    except ErrkbError:
        pass


def records_one(ws: _Workspace, lines: list[str]) -> None:
    """Read ``lines`` as a JSON Lines file and validate each item; only ErrkbError may escape."""
    path = ws.dir / "records.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    try:
        for item in read_file(path):
            if item.problem is not None:
                continue
            checked = check_record(item.obj, source=item.source, path_prefix=item.path_prefix)
            if item.envelope is not None:
                check_envelope(item.envelope, source=item.source, location=item.location)
            if checked.ok:
                # What ingest and explain compute from a valid record.
                record = Record.from_json(item.obj)
                content_hash(item.obj)
                spec = compile_record(record.id, record.error_message, record.message_pattern)
                compile_re2(spec.regex)
    except ErrkbError:
        pass


def safetensors_one(ws: _Workspace, case: tuple[bytes, int]) -> None:
    """Parse one header; only CheckpointError (an ErrkbError) may escape."""
    header, buffer_len = case
    with contextlib.suppress(ErrkbError):
        parse_header(ws.dir / "fuzz.safetensors", header, buffer_len)


@dataclass(frozen=True)
class Target:
    """One fuzz target: its name, input strategy and the function under test."""

    name: str
    strategy: st.SearchStrategy[Any]
    run: Callable[[_Workspace, Any], None]


TARGETS = (
    Target("explain", explain_inputs, explain_one),
    Target("records", st.lists(record_lines(), min_size=1, max_size=5), records_one),
    Target("safetensors", safetensors_headers(), safetensors_one),
)


@dataclass
class Outcome:
    """What fuzzing one target did."""

    name: str
    examples: int = 0
    crash: str | None = None  #: the (shrunk) failure, if one was found
    seconds: float = 0.0


def fuzz(target: Target, examples: int, deadline_ms: int = 5000) -> Outcome:
    """Run ``examples`` examples of ``target``; a failure is shrunk and reported, not raised."""
    ws = _Workspace()
    outcome = Outcome(target.name)
    started = time.perf_counter()

    @settings(
        max_examples=examples,
        deadline=dt.timedelta(milliseconds=deadline_ms),
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(target.strategy)
    def check(value: Any) -> None:
        outcome.examples += 1
        target.run(ws, value)

    try:
        check()
    except Exception as exc:  # the report is the point: any failure, shrunk
        outcome.crash = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        ws.close()
    outcome.seconds = time.perf_counter() - started
    return outcome


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.fuzz [--examples N] [--target NAME]``: exit 1 if anything crashed."""
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("--examples", type=int, default=20_000, help="examples per target")
    parser.add_argument("--target", choices=[t.name for t in TARGETS], action="append")
    args = parser.parse_args(argv)
    crashed = False
    for target in TARGETS:
        if args.target and target.name not in args.target:
            continue
        outcome = fuzz(target, args.examples)
        status = "no crash" if outcome.crash is None else f"CRASH {outcome.crash}"
        print(f"{outcome.name}: {outcome.examples} examples in {outcome.seconds:.0f} s: {status}")
        crashed = crashed or outcome.crash is not None
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
