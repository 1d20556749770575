r"""Benchmark logs: realistic noise with known errors planted at a known rate, and the truth.

A log is filler — sglang/vLLM/uvicorn/trainer lines, progress bars (some glued to the next line
by ``\r``), ANSI colours, and tracebacks of errors *no* record describes (a ``KeyError`` from
made-up code, a ``TimeoutError``) — with, about every ``1e6 / rate`` bytes, a rendered message of
a random corpus record in one of the shapes of shared/notes/LOGS.md: a plain traceback (3.10 to
3.12 styles, the real raise line as the frame's source), a ``raise ... from`` chain whose wrapper
embeds the message, an sglang ``Scheduler hit an exception`` record printed by every TP rank,
kubectl / docker compose / Ray / vLLM engine-core prefixes, an HTTP JSON reply, a repr inside a
``RuntimeError``, a bare ``Class: message`` line. ``<log>.truth.jsonl`` holds one row per line
where errkb should report a record: ``{"id", "captures", "line", "instance", "shape",
"overlaps"}``; ``<log>.json`` holds the counts, including everything left out and why.

Which records are planted (``plantable``): the template has a placeholder, at least
``PLANT_MIN_LITERAL`` characters of literal text and an anchor, is one line without control
characters, no two placeholders touch, it neither starts nor ends in whitespace (collectors strip
it), no other record has the same template, and no other record's pattern matches the template's
rendering with as much literal text (errkb could not pick the planted one over it by design).
Values are of the slot kind errkb infers for the placeholder (``errkb.records.slots``: what the
code prints there, from the template and the raise site's sourceCode; ``len(window_shape)`` an
integer, ``list(x)`` a list); a placeholder of unknown kind gets a value by its name (shapes
become tuples, counts ints, paths paths, ``!r`` strings are quoted). Values never contain the
template's own literal text. (Version 5 chose every value by name: 1 in 40 planted messages
printed a value its code cannot print, such as ``(2,)`` for a ``len()``, which errkb's typed
slots rightly refuse, and the run counted them as errkb's misses. Version 6 printed a value
used twice, ``{name}`` then ``{name!r}``, the first way both times.)

Collisions are handled with an *oracle*: each record's pattern, compiled as a sync compiles
it (``errkb.match.feed.compile_json``: the template made an end-anchored RE2 regex with typed
slots, the record's anchor as prefilter), run over the
planted message and over each value. A value that makes another record match, or is itself a
record's message, is re-rolled; a template that another, less specific record matches whatever
the values is kept, and that record is listed in ``overlaps`` (errkb may report it too: the run
counts it as a false hit and says why). Filler lines that any record's pattern matches are
replaced by plain ones (counted). The oracle does not reproduce errkb's message spans (wrapper
suffixes, decoded reprs and JSON strings), so a collision only a span reveals can remain: the
run reports it as "another record at planted line".
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from errkb.match.feed import compile_json
from errkb.records.patterns import compile_re2
from errkb.records.slots import SlotKind, sample
from errkb.records.template import Literal, Placeholder, Template, parse_template

#: Bump when generation changes: cached logs of another version are rebuilt.
LOGS_VERSION = 9
#: Planted records need this much literal text: less is a pattern that "explains" anything.
PLANT_MIN_LITERAL = 12
#: Bump when ``single_tracebacks``' output changes: cached latency sets are rebuilt.
SINGLES_VERSION = 2
#: Planted error instances per 10^6 bytes of log.
DEFAULT_RATE = 100
DEFAULT_MB = 50.0
MB = 1_000_000

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")
_CLASS = re.compile(r"^[A-Z][A-Za-z0-9_]{1,60}$")
#: Every error word errkb's narrowing pass keys on (errkb.parse.regions.KEYWORDS), in a class.
_KEYWORD_IN_CLASS = re.compile(
    r"Traceback|Error|error|ERROR|Exception|exception|EXCEPTION|Warning|WARNING|CRITICAL"
    r"|Critical|FATAL|Fatal|fatal|failed|Failed|FAILED|Exit|Interrupt|StopIteration|Assert|assert"
)
#: Log profiles: ``dense`` (one line in five carries an error word), ``sparse`` (filler with
#: almost no error words), ``keywordless`` (sparse, and planted classes renamed to hold none).
PROFILES = ("dense", "sparse", "keywordless")
_INT_HINTS = (
    "count", "num", "size", "len", "index", "idx", "lineno", "line", "port", "width", "height",
    "dim", "rank", "step", "max", "min", "limit", "offset", "pos", "bytes", "nbytes", "code",
    "level", "depth", "id", "year", "month", "day", "hour", "n_", "total", "expected", "got",
)  # fmt: skip
_WORDS = (
    "text_encoder", "layers.3.mlp", "enc.0", "bfloat16", "float8_e4m3fn", "cuda:1", "vae",
    "qwen2-7b-instruct", "llama-3.1-8b", "gate_up_proj", "kv_cache", "attention_mask",
    "scheduler", "tokenizer_config", "down_proj", "lm_head", "decoder.block.7", "alpha",
    "bucket-7", "worker_3", "shard_00012", "prefill", "fp8_e5m2", "blocks.11.attn.qkv",
    "ckpt-2300", "user_profile", "payload", "session_91", "nightly", "primary", "us-east-2",
)  # fmt: skip
_TYPES = ("NoneType", "list", "dict", "int", "str", "Tensor", "tuple", "bytes", "float")
_PATHS = (
    "/data/run-17/config.yaml", "/models/phi-4/model-00002-of-00004.safetensors",
    "/var/cache/app/k3x9/cache.json", "/srv/app/settings.toml", "/home/ci/work/out/report.xml",
)  # fmt: skip
_ERRORS = (
    "connection refused", "timed out after 30s", "CUDA out of memory", "invalid header",
    "permission denied", "broken pipe",
)  # fmt: skip
_WRAPPERS = (
    "Cannot configure checkpoint quantization for 'text_encoder': ",
    "Failed to load shard 3 of 8: ",
    "Request req-8121 aborted: ",
    "Worker 2 crashed while serving: ",
    "Pipeline stage 'decode' failed: ",
)  # fmt: skip
_REPR_WRAPPERS = ("Worker failed: ", "Task raised: ", "Remote call failed with ")


# ---------------------------------------------------------------------------- oracle
class Oracle:
    """Which records' patterns match a text: each record's anchor, then its RE2 regex.

    The same semantics as a record's pattern in errkb (``compile_record``), computed
    independently of the matcher that is being benchmarked (and optimised meanwhile).
    """

    def __init__(self, records: Sequence[dict[str, Any]]) -> None:
        import ahocorasick_rs

        self.regex: dict[str, str] = {}
        self.literal: dict[str, int] = {}
        #: Each record's slot kinds, one per placeholder (() for a hand-written pattern): what
        #: its code prints there, so a rendering puts a value of that kind in each slot.
        self.kinds: dict[str, tuple[SlotKind, ...]] = {}
        #: Records with no anchor (no literal the matcher selects them by, e.g. ``Vcs {op!r}
        #: on {lhs!r} and {rhs!r}.``: ``Vcs`` is too short, ``on`` and ``and`` too common):
        #: errkb never makes them candidates, so they are not planted.
        self.unanchored: set[str] = set()
        by_anchor: dict[str, list[str]] = {}
        for r in records:
            # Compiled as a sync compiles it: the slot kinds come from the template and the
            # raise site's sourceCode, and a value of another kind is no match, so the oracle
            # and errkb agree on what a rendering matches.
            spec = compile_json(r)
            self.regex[r["id"]] = spec.regex
            self.literal[r["id"]] = spec.literal_length
            self.kinds[r["id"]] = tuple(SlotKind(k) for k in spec.kinds)
            if spec.anchor:
                by_anchor.setdefault(spec.anchor, []).append(r["id"])
            else:
                self.unanchored.add(r["id"])
        self.anchors = list(by_anchor)
        self._targets = [by_anchor[a] for a in self.anchors]
        self._ac = ahocorasick_rs.AhoCorasick(self.anchors)
        self._compiled: dict[str, Any] = {}

    def search(self, text: str) -> set[str]:
        """Ids of the records whose pattern matches ``text``."""
        found: set[str] = set()
        seen: set[int] = set()
        for index, _s, _e in self._ac.find_matches_as_indexes(text, overlapping=True):
            if index in seen:
                continue
            seen.add(index)
            for rid in self._targets[index]:
                if rid not in found and self._re(rid).search(text) is not None:
                    found.add(rid)
        return found

    def _re(self, rid: str) -> Any:
        compiled = self._compiled.get(rid)
        if compiled is None:
            compiled = self._compiled[rid] = compile_re2(self.regex[rid])
        return compiled


# ---------------------------------------------------------------------------- rendering
@dataclass(frozen=True)
class Rendered:
    """A record's message rendered with values, and the captures errkb should report."""

    message: str
    captures: dict[str, str]


def _kind(ph: Placeholder) -> str:
    raw, name = ph.raw, ph.name.lower()
    if raw.startswith("%"):
        conv = raw[-1]
        if conv in "dixXou":
            return "int"
        if conv in "fFeEgG":
            return "float"
    spec = raw[raw.find(":") + 1 : -1] if ":" in raw and raw.startswith("{") else ""
    if spec[-1:] in ("d", "n", "x", "X", "b", "o"):  # "n": a locale-aware number
        return "int"
    if spec[-1:] in ("f", "e", "g", "%"):
        return "float"
    if "shape" in name:
        return "shape"
    if name.startswith("len(") or any(h in name for h in _INT_HINTS):
        return "int"
    if "type(" in name or name.endswith(("__name__", "cls", "type", "klass")):
        return "type"
    if any(h in name for h in ("path", "file", "dir", "filename")):
        return "path"
    if any(h in name for h in ("url", "uri")):
        return "url"
    if name in ("e", "exc", "err", "error", "ex", "reason", "msg", "message"):
        return "error"
    return "word"


def _value(kind: str, rng: random.Random) -> str:
    if kind == "int":
        return str(rng.choice((rng.randrange(2, 64), rng.randrange(100, 70000))))
    if kind == "float":
        return f"{rng.random() * 100:.3f}"
    if kind == "shape":
        dims = rng.choice(((rng.choice((2, 3, 16384, 3072)),), (3072, rng.choice((1, 120, 15360)))))
        return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
    if kind == "type":
        return rng.choice(_TYPES)
    if kind == "path":
        return rng.choice(_PATHS)
    if kind == "url":
        return f"https://hub.example.com/models/{rng.choice(_WORDS)}"
    if kind == "error":
        return rng.choice(_ERRORS)
    word = rng.choice(_WORDS)
    return word if rng.random() < 0.6 else f"{word}_{rng.randrange(1, 99)}"


_DTYPES = ("torch.bfloat16", "float8_e4m3fn", "F32", "torch.float16", "int8", "BF16")


def _formatted(ph: Placeholder, number: float) -> str | None:
    """``number`` printed through the placeholder's own format spec, None if it takes none."""
    try:
        if ph.raw.startswith("%"):
            return str(ph.raw % number)
        return format(number, ph.spec) if ph.spec else None
    except (TypeError, ValueError):
        return None


def _typed_value(kind: SlotKind, ph: Placeholder, rng: random.Random) -> str | None:
    """A value of a slot kind errkb inferred, as the code would print it; None: by name."""
    if kind is SlotKind.INT:
        n = rng.choice((rng.randrange(2, 64), rng.randrange(100, 70000)))
        return _formatted(ph, n) or str(n)
    if kind is SlotKind.FLOAT:
        x = rng.random() * 100
        return _formatted(ph, x) or f"{x:.3f}"
    if kind is SlotKind.SHAPE:
        return _value("shape", rng)
    if kind is SlotKind.TUPLE:
        return repr((rng.randrange(1, 9), rng.choice(_WORDS)))
    if kind is SlotKind.LIST:
        return repr(rng.sample(_WORDS, rng.randrange(1, 4)))
    if kind is SlotKind.DTYPE:
        return rng.choice(_DTYPES)
    if kind is SlotKind.IDENT:
        return rng.choice(_TYPES)
    return None  # REPR and GENERIC: a value chosen by the placeholder's name (quoted if a repr)


def render(
    template: Template, rng: random.Random | None, kinds: Sequence[SlotKind] = ()
) -> Rendered | None:
    """Render with plausible values (``rng``) or neutral ones (None); None if none fit.

    ``kinds`` (one per placeholder, errkb's inferred slot kinds) say what the code prints in a
    slot: ``len(window_shape)`` is an integer though its name says "shape", ``list(x)`` a list.
    A placeholder of unknown kind gets a value chosen by its name.
    """
    captures: dict[str, str] = {}
    values: dict[str, str] = {}  # each placeholder's value, before it is printed
    textual: dict[str, bool] = {}  # the value is text a repr quotes (a word, a path ...)
    printed: list[str] = []  # each occurrence as it prints: {x!r} quoted, {x} as it is
    literals = [t for t in template.literals if t]
    for i, ph in enumerate(template.placeholders):
        slot = kinds[i] if i < len(kinds) else SlotKind.GENERIC
        typed = slot not in (SlotKind.GENERIC, SlotKind.REPR)
        if ph.name not in values:
            kind = "word" if slot is SlotKind.REPR else _kind(ph)
            for _ in range(8):
                if rng is None:
                    value = sample(slot, i) if typed else f"Zq{i}x"
                else:
                    value = _typed_value(slot, ph, rng) or _value(kind, rng)
                # A value holding the template's own text would make the captures ambiguous.
                if not any(lit in value for lit in literals):
                    break
            else:
                return None
            values[ph.name] = value
            textual[ph.name] = not typed and kind in ("word", "path", "url", "error")
        # repr(x) prints what {x!r} does: a str value is quoted either way. The same value
        # printed twice, once plainly and once as a repr, is quoted only there.
        is_repr = ph.is_repr or ph.name.startswith("repr(") or slot is SlotKind.REPR
        value = values[ph.name]
        shown = repr(value) if is_repr and textual[ph.name] else value
        printed.append(shown)
        # What errkb captures, from the first occurrence: a ``!r`` group is unquoted, but a
        # plain group's value is the text printed there, quotes and all (``{repr(x) if x
        # else 'unset'}`` is the quoted text; so is a slot errkb knows prints a repr).
        captures.setdefault(ph.name, value if ph.is_repr else shown)
    occurrences = iter(printed)
    message = "".join(
        s.text if isinstance(s, Literal) else next(occurrences) for s in template.segments
    )
    return Rendered(message, captures)


def plantable_reason(record: dict[str, Any], template: Template, duplicated: bool) -> str | None:
    """Why a record is not planted (None: it is). See the module docstring."""
    message = record["errorMessage"]
    if not template.placeholders:
        return "no placeholder"
    if template.literal_length < PLANT_MIN_LITERAL:
        return f"under {PLANT_MIN_LITERAL} characters of literal text"
    if _CONTROL.search(message):
        return "multi-line or control characters"
    if any(p.raw.startswith("$") for p in template.placeholders):
        return "JavaScript placeholder"
    segs = template.segments
    if any(
        isinstance(a, Placeholder) and isinstance(b, Placeholder)
        for a, b in itertools.pairwise(segs)
    ):
        return "two placeholders touch"
    if (isinstance(segs[0], Literal) and segs[0].text[:1].isspace()) or (
        isinstance(segs[-1], Literal) and segs[-1].text[-1:].isspace()
    ):
        return "starts or ends in whitespace"
    if duplicated:
        return "another record has the same template"
    return None


# ---------------------------------------------------------------------------- log writing
class Clock:
    """Log timestamps that only move forward."""

    def __init__(self, rng: random.Random) -> None:
        self.now = datetime(2026, 8, 28, 5, 0, 0)  # naive: logs print local time
        self.rng = rng

    def tick(self) -> datetime:
        self.now += timedelta(milliseconds=self.rng.randrange(1, 900))
        return self.now

    def sglang(self, rank: str = "") -> str:
        return f"[{self.tick():%Y-%m-%d %H:%M:%S}{rank}]"

    def vllm(self) -> str:
        return f"{self.tick():%m-%d %H:%M:%S}"

    def rfc3339(self) -> str:
        t = self.tick()
        return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}{self.rng.randrange(100, 999)}Z"


_OUTER_FRAMES = (
    ("/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", 2874,
     "run_scheduler_process", "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)"),
    ("/app/service/main.py", 88, "main", "run(config)"),
    ("/app/service/pipeline.py", 214, "run", "result = stage.execute(batch)"),
    ("/usr/lib/python3.11/concurrent/futures/thread.py", 58, "run",
     "result = self.fn(*self.args, **self.kwargs)"),
    ("/srv/worker/tasks.py", 131, "handle", "return self._dispatch(request)"),
    ("/usr/local/lib/python3.12/site-packages/click/core.py", 1443, "invoke",
     "return ctx.invoke(self.callback, **ctx.params)"),
)  # fmt: skip


@dataclass
class Instance:
    """One planted error: its lines and which of them errkb should report."""

    lines: list[str]
    truth: list[int]  #: indexes into ``lines``
    shape: str


@dataclass
class Planter:
    """Renders records into log shapes, with the oracle guarding against collisions."""

    records: Sequence[dict[str, Any]]
    oracle: Oracle
    rng: random.Random
    clock: Clock
    plantable: list[dict[str, Any]] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)
    stats: Counter[str] = field(default_factory=Counter)
    _overlaps: dict[str, list[str] | None] = field(default_factory=dict)
    _templates: dict[str, Template] = field(default_factory=dict)
    #: Rename exception classes so they hold no error word (``ValueError`` -> ``ValueSnag``):
    #: the narrowing pass must find such tracebacks by their shape, not by a keyword.
    keywordless: bool = False

    def __post_init__(self) -> None:
        counts = Counter(r["errorMessage"] for r in self.records)
        for r in self.records:
            template = parse_template(r["errorMessage"])
            reason = plantable_reason(r, template, counts[r["errorMessage"]] > 1)
            if reason is None and r["id"] in self.oracle.unanchored:
                # The module docstring's rule, checked since version 9: version 8 planted a
                # variant whose one long word became ``Vcs``, and counted errkb's miss of it.
                reason = "no anchor"
            if reason is None:
                self._templates[r["id"]] = template
                self.plantable.append(r)
            else:
                self.excluded[reason] += 1

    def inherent_overlaps(self, record: dict[str, Any]) -> list[str] | None:
        """Records matching the template whatever the values; None if one would win or tie."""
        rid = record["id"]
        if rid not in self._overlaps:
            bland = render(self._templates[rid], None, self.oracle.kinds[rid])
            others = self.oracle.search(bland.message) - {rid} if bland else set()
            mine = self.oracle.literal[rid]
            if any(self.oracle.literal[o] >= mine for o in others):
                self._overlaps[rid] = None
                self.excluded["another record's pattern matches it with as much literal text"] += 1
            else:
                self._overlaps[rid] = sorted(others)
        return self._overlaps[rid]

    def render_clean(self, record: dict[str, Any]) -> Rendered | None:
        """Values that make no other record match (beyond the template's inherent overlaps)."""
        overlaps = self.inherent_overlaps(record)
        if overlaps is None:
            return None
        for _ in range(8):
            rendered = render(
                self._templates[record["id"]], self.rng, self.oracle.kinds[record["id"]]
            )
            if rendered is None:
                break
            if any(self.oracle.search(v) for v in rendered.captures.values()):
                # A value that is itself a known message (a quoted "invalid header") would be
                # found by errkb inside the message: ground truth would be ambiguous.
                self.stats["values re-rolled (a value is a known message)"] += 1
                continue
            found = self.oracle.search(rendered.message)
            if record["id"] not in found:
                # errkb's own pattern would not match what the code prints: keep it, it is a
                # miss errkb should own up to (and the run shows it).
                self.stats["planted pattern misses its own rendering"] += 1
            if not (found - {record["id"]} - set(overlaps)):
                return rendered
            self.stats["values re-rolled (another record matched)"] += 1
        self.stats["records skipped (no clean values)"] += 1
        return None

    # ---- shapes
    def exc_class(self, record: dict[str, Any]) -> str:
        cls = record.get("errorClass") or ""
        cls = cls if _CLASS.match(cls) else "RuntimeError"
        return _KEYWORD_IN_CLASS.sub("Snag", cls) if self.keywordless else cls

    def raise_frame(self, record: dict[str, Any], py: str = "3.12") -> list[str]:
        """The innermost frame: the record's own file, line and raise statement."""
        repo, path = record["repo"], record["filePath"]
        if repo == "python/cpython":
            full = f"/usr/lib/python{py}/{path}"
        elif repo.startswith("pypi/"):
            pkg = repo[5:]
            base = f"/usr/local/lib/python{py}/site-packages"
            full = f"{base}/{path}" if path == f"{pkg}.py" else f"{base}/{pkg}/{path}"
        elif path.startswith("python/sglang/"):
            full = "/sgl-workspace/sglang/" + path
        else:
            full = f"/srv/{repo.split('/')[1]}/{path}"
        line = record.get("lineNumber") or 1
        source = "raise " + self.exc_class(record) + "(msg)"
        code, start = record.get("sourceCode"), record.get("sourceCodeStart")
        if code and start and 0 <= line - start < len(code.split("\n")):
            source = code.split("\n")[line - start].strip() or source
        out = [f'  File "{full}", line {line}, in {self._function(record)}', f"    {source}"]
        if py >= "3.11" and self.rng.random() < 0.5:
            out.append("    " + "^" * min(60, max(1, len(source))))
        return out

    def _function(self, record: dict[str, Any]) -> str:
        code = record.get("sourceCode") or ""
        names = re.findall(r"def ([A-Za-z_]\w*)\(", code)
        return names[-1] if names else "<module>"

    def traceback(self, record: dict[str, Any], last: str, *, py: str | None = None) -> list[str]:
        py = py or self.rng.choice(("3.10", "3.11", "3.12"))
        lines = ["Traceback (most recent call last):"]
        for path, n, func, src in self.rng.sample(_OUTER_FRAMES, self.rng.randrange(1, 4)):
            lines += [f'  File "{path}", line {n}, in {func}', f"    {src}"]
        lines += self.raise_frame(record, py)
        lines.append(last)
        return lines

    def instance(self, record: dict[str, Any], shape: str) -> tuple[Instance, Rendered] | None:
        rendered = self.render_clean(record)
        if rendered is None:
            return None
        msg = rendered.message
        cls = self.exc_class(record)
        last = f"{cls}: {msg}"
        rng, clock = self.rng, self.clock
        if shape == "json" and (msg.endswith(".") or '"' in msg or "\\" in msg):
            shape = "plain"  # the reply appends ".\n...": a message ending in "." is ambiguous
        if shape == "bare" and not re.fullmatch(r"[A-Z]\w+(?:Error|Exception|Warning)", cls):
            # A bare line is recognised by its class name; a lone "Error: ..." is anybody's.
            shape = "plain"
        wrapper = ""
        if shape in ("chained", "repr"):
            phrases = _WRAPPERS if shape == "chained" else _REPR_WRAPPERS
            prefix = rng.choice(phrases)
            inner = f"{cls}({msg!r})" if shape == "repr" else msg
            wrapper = prefix + inner
            extra = self.oracle.search(wrapper) - self.oracle.search(msg)
            if extra:
                self.stats["wrapper made another record match: plain shape instead"] += 1
                shape = "plain"
        if shape == "plain":
            lines = self.traceback(record, last)
            return Instance(lines, [len(lines) - 1], shape), rendered
        if shape == "bare":
            lines = [f"{clock.sglang()} Processing request req-{rng.randrange(10**5)}", last]
            return Instance(lines, [1], shape), rendered
        if shape == "chained":
            cause = self.traceback(record, last, py="3.11")
            sep = ["", "The above exception was the direct cause of the following exception:", ""]
            outer = [
                "Traceback (most recent call last):",
                '  File "/app/service/loader.py", line 77, in load_component',
                '    raise RuntimeError(f"{prefix}{exc}") from exc',
                f"RuntimeError: {wrapper}",
            ]
            lines = cause + sep + outer
            return Instance(lines, [len(cause) - 1, len(lines) - 1], shape), rendered
        if shape == "repr":
            lines = [
                "Traceback (most recent call last):",
                '  File "/srv/convert/batch_validate.py", line 52, in main',
                "    results = [f.result() for f in futures]",
                '  File "/srv/convert/batch_validate.py", line 39, in _run',
                '    raise RuntimeError(f"Worker failed: {exc!r}") from None',
                f"RuntimeError: {wrapper}",
            ]
            return Instance(lines, [len(lines) - 1], shape), rendered
        if shape == "json":
            body = json.dumps(msg, ensure_ascii=False)[1:-1]
            lines = [
                "$ curl -s -X POST http://127.0.0.1:30000/update_weights_from_disk \\",
                "    -H 'Content-Type: application/json' -d '{\"model_path\": \"/models/m\"}'",
                '{"success":false,"message":"Failed to update weights: '
                + body
                + '.\\nRolling back to original weights."}',
            ]
            return Instance(lines, [2], shape), rendered
        if shape == "sglang":
            tp = rng.choice((1, 1, 2, 4))
            lines, truth = [], []
            if rng.random() < 0.3:
                # A tqdm bar glued to the record's first line by \r (LOGS.md).
                bar = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]"
                lines.append(bar + "\r" + f"{clock.sglang()} Load weight end.")
            tb = self.traceback(record, last)
            for rank in range(tp):
                # Every rank prints its own copy of the same traceback.
                tag = f" TP{rank}" if tp > 1 else ""
                lines.append(f"{clock.sglang(tag)} Scheduler hit an exception: {tb[0]}")
                lines += tb[1:]
                truth.append(len(lines) - 1)
                lines.append("")
            lines += [
                f"{clock.sglang()} Received sigquit from a child process. It usually means the "
                "child failed.",
                "Killed",
            ]
            return Instance(lines, truth, shape), rendered
        tb = self.traceback(record, last)
        if shape == "kubectl":
            pod = f"[pod/{rng.choice(_WORDS).replace('.', '-').replace('_', '-')}-0/server]"
            lines = [f"{pod} {clock.rfc3339()} {line}" for line in tb]
        elif shape == "compose":
            lines = [f"api-1  | {line}" for line in tb]
        elif shape == "ray":
            pid = rng.randrange(1000, 99999)
            lines = [f"(RayWorkerWrapper pid={pid}) {line}" for line in tb]
        elif shape == "vllm":
            pid = rng.randrange(1000, 99999)
            head = f"(EngineCore_DP0 pid={pid}) ERROR {clock.vllm()} [core.py:946] "
            lines = [head + "EngineCore encountered a fatal error."] + [head + t for t in tb]
        else:
            raise ValueError(f"unknown shape {shape!r}")
        return Instance(lines, [len(lines) - 1], shape), rendered


SHAPES: dict[str, int] = {
    "plain": 24, "sglang": 18, "chained": 12, "kubectl": 8, "compose": 5, "vllm": 8, "ray": 5,
    "repr": 9, "json": 6, "bare": 5,
}  # fmt: skip


# ---------------------------------------------------------------------------- filler
def filler_block(rng: random.Random, clock: Clock, sparse: bool = False) -> list[str]:
    """A few lines of noise: no record's error is in them (the generator checks).

    ``sparse``: warnings, error lines and ANSI-coloured errors left out, one unknown traceback
    in ~300 blocks.
    """
    kind = rng.choices(
        ("sglang", "access", "vllm", "train", "progress", "tqdm", "warn", "tb", "error", "ansi"),
        weights=(30, 14, 14, 12, 4, 3, 0, 0.25, 0, 0)
        if sparse
        else (30, 14, 14, 12, 4, 3, 5, 3, 2, 3),
    )[0]
    if kind == "sglang":
        rank = rng.choice(("", " TP0", " TP1", " DP0 TP0"))
        if rng.random() < 0.5:
            return [
                f"{clock.sglang(rank)} Prefill batch. #new-seq: {rng.randrange(1, 9)}, "
                f"#new-token: {rng.randrange(16, 8192)}, #cached-token: {rng.randrange(0, 4096)}, "
                f"token usage: {rng.random():.2f}, #running-req: {rng.randrange(0, 64)}, "
                f"#queue-req: {rng.randrange(0, 8)}"
            ]
        return [
            f"{clock.sglang(rank)} Decode batch. #running-req: {rng.randrange(1, 64)}, "
            f"#token: {rng.randrange(100, 90000)}, token usage: {rng.random():.2f}, cuda graph: "
            f"{rng.choice(('True', 'False'))}, gen throughput (token/s): "
            f"{rng.random() * 3000:.2f}, #queue-req: {rng.randrange(0, 8)}"
        ]
    if kind == "access":
        path = rng.choice(("/v1/chat/completions", "/generate", "/health", "/v1/models"))
        return [
            f"{clock.sglang()} INFO:     10.0.{rng.randrange(256)}.{rng.randrange(256)}:"
            f'{rng.randrange(30000, 65000)} - "POST {path} HTTP/1.1" '
            + rng.choice(("200 OK", "200 OK", "404 Not Found"))
        ]
    if kind == "vllm":
        return [
            f"INFO {clock.vllm()} [metrics.py:455] Avg prompt throughput: "
            f"{rng.random() * 900:.1f} tokens/s, Avg generation throughput: "
            f"{rng.random() * 300:.1f} tokens/s, Running: {rng.randrange(0, 32)} reqs, "
            f"Swapped: 0 reqs, Pending: {rng.randrange(0, 5)} reqs, GPU KV cache usage: "
            f"{rng.random() * 100:.1f}%, CPU KV cache usage: 0.0%."
        ]
    if kind == "train":
        t = clock.tick()
        return [
            f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} - INFO - trainer - step "
            f"{rng.randrange(1, 50000)}/50000 loss={rng.random() * 4:.4f} "
            f"lr={rng.random() * 3e-4:.2e} grad_norm={rng.random():.3f}"
        ]
    if kind == "progress":
        done = rng.randrange(0, 9)
        return [
            f"Loading safetensors checkpoint shards: {done * 100 // 8:3d}% Completed | "
            f"{done}/8 [00:{done:02d}<00:{8 - done:02d},  1.{rng.randrange(10, 99)}s/it]"
        ]
    if kind == "tqdm":
        total = rng.randrange(100, 5000)
        parts = []
        for i in range(rng.randrange(2, 6)):
            n = total * (i + 1) // 6
            bar = f"{'#' * (i + 1):<10}"
            parts.append(f"{n * 100 // total:3d}%|{bar}| {n}/{total} [00:0{i}<01:10, 13.7it/s]")
        return ["\r".join(parts) + "\r" + f"{clock.sglang()} Capture cuda graph end."]
    if kind == "warn":
        return [
            f"WARNING {clock.vllm()} [tokenizer.py:{rng.randrange(50, 400)}] Using a slow "
            f"tokenizer. This might cause a significant slowdown. Consider using a fast tokenizer "
            "instead."
        ]
    if kind == "error":
        return [
            f"{clock.sglang()} ERROR: request req-{rng.randrange(10**6)} cancelled by the "
            "client after "
            f"{rng.randrange(1, 600)} s"
        ]
    if kind == "ansi":
        return [
            f"\x1b[32mINFO\x1b[0m {clock.vllm()} [gpu_worker.py: {rng.randrange(100, 500)}] "
            f"Memory profiling takes {rng.random() * 9:.2f} seconds"
        ]
    # A traceback no record explains: made-up code, a KeyError or a timeout.
    last = rng.choice(
        (
            f"KeyError: 'req-{rng.randrange(10**6)}'",
            f"TimeoutError: Timed out waiting for batch {rng.randrange(999)} after "
            f"{rng.randrange(5, 120)}.0s",
            "ConnectionResetError: [Errno 104] Connection reset by peer",
            f"KeyError: 'session_{rng.randrange(10**4)}'",
        )
    )
    return [
        f"{clock.sglang()} Exception in callback handler",
        "Traceback (most recent call last):",
        '  File "/app/service/handlers.py", line 412, in handle',
        "    result = await self._dispatch(req)",
        '  File "/app/service/handlers.py", line 388, in _dispatch',
        "    return self.routes[req.route](req)",
        last,
    ]


def _filler_hits(oracle: Oracle, line: str) -> bool:
    """Does any record's pattern match this line, or what follows one of its ': '?"""
    texts = [line]
    pos = line.find(": ")
    while pos >= 0 and len(texts) < 4:
        texts.append(line[pos + 2 :])
        pos = line.find(": ", pos + 2)
    return any(oracle.search(t) for t in texts)


# ---------------------------------------------------------------------------- the log
@dataclass(frozen=True)
class GeneratedLog:
    """A generated log: its path, the ground-truth file beside it, and the counts."""

    path: Path
    truth_path: Path
    meta: dict[str, Any]

    def truth(self) -> list[dict[str, Any]]:
        with self.truth_path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]


def _choose(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def plant_stream(planter: Planter) -> Iterator[tuple[dict[str, Any], Instance, Rendered]]:
    """Planted instances, one record after another (a shuffled pass over plantable records)."""
    rng = planter.rng
    while True:
        order = list(planter.plantable)
        rng.shuffle(order)
        for record in order:
            made = planter.instance(record, _choose(rng, SHAPES))
            if made is not None:
                yield record, *made


def log_path(
    directory: Path, size_mb: float, seed: int, rate: float, profile: str = "dense"
) -> Path:
    """Where the log of these parameters lives (beside its corpus)."""
    suffix = "" if profile == "dense" else f"-{profile}"
    return directory / f"log-{size_mb:g}mb-s{seed}-r{rate:g}{suffix}.log"


def generate_log(
    records: Sequence[dict[str, Any]],
    path: Path,
    *,
    size_mb: float = DEFAULT_MB,
    seed: int = 6,
    rate: float = DEFAULT_RATE,
    oracle: Oracle | None = None,
    key: dict[str, Any] | None = None,
    profile: str = "dense",
) -> GeneratedLog:
    """Write the log at ``path`` (truth and counts beside it); reuse it if ``key`` matches."""
    if profile not in PROFILES:
        raise ValueError(f"unknown log profile {profile!r} (one of {', '.join(PROFILES)})")
    truth_path = path.with_suffix(".truth.jsonl")
    meta_path = path.with_suffix(".json")
    key = {**(key or {}), "version": LOGS_VERSION, "mb": size_mb, "seed": seed, "rate": rate}
    if profile != "dense":
        key["profile"] = profile
    if meta_path.exists() and path.exists() and truth_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("key") == key:
            return GeneratedLog(path, truth_path, meta)
    rng = random.Random(seed)
    clock = Clock(rng)
    planter = Planter(
        records, oracle or Oracle(records), rng, clock, keywordless=profile == "keywordless"
    )
    target = int(size_mb * MB)
    gap = MB / rate  # bytes of filler between planted instances, on average
    stream = plant_stream(planter)
    written = 0
    line_no = 0
    shapes: Counter[str] = Counter()
    instances = 0
    replaced = 0
    truth_rows = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        path.open("w", encoding="utf-8", newline="\n") as out,
        truth_path.open("w", encoding="utf-8") as truth_out,
    ):
        next_plant = rng.expovariate(1 / gap)
        while written < target:
            if written >= next_plant:
                record, inst, rendered = next(stream)
                overlaps = planter.inherent_overlaps(record) or []
                for i in inst.truth:
                    row = {
                        "id": record["id"],
                        "captures": rendered.captures,
                        "line": line_no + i + 1,
                        "instance": instances,
                        "shape": inst.shape,
                        "overlaps": overlaps,
                    }
                    truth_out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    truth_rows += 1
                lines = inst.lines
                shapes[inst.shape] += 1
                instances += 1
                next_plant = written + rng.expovariate(1 / gap)
            else:
                lines = filler_block(rng, clock, sparse=profile != "dense")
                for i, line in enumerate(lines):
                    if _filler_hits(planter.oracle, line):
                        lines[i] = f"{clock.sglang()} Heartbeat ok."
                        replaced += 1
            text = "\n".join(lines) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))
            line_no += len(lines)
    meta = {
        "key": key,
        "bytes": written,
        "lines": line_no,
        "instances": instances,
        "truthRows": truth_rows,
        "shapes": dict(sorted(shapes.items())),
        "plantable": len(planter.plantable),
        "notPlanted": dict(planter.excluded.most_common()),
        "stats": dict(planter.stats),
        "fillerLinesReplaced": replaced,
    }
    meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return GeneratedLog(path, truth_path, meta)


def single_tracebacks(
    records: Sequence[dict[str, Any]], count: int, *, seed: int, oracle: Oracle | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``count`` single-error logs (plain or sglang traceback), each with its expected record.

    Each expected record is ``{"id": record_id, "captures": {...}}``: the captures have their
    own key, since a placeholder may be named ``id`` (version 1 merged them into one dict, and
    such a placeholder overwrote the record id).
    """
    rng = random.Random(seed + 1)
    planter = Planter(records, oracle or Oracle(records), rng, Clock(rng))
    out: list[tuple[str, dict[str, Any]]] = []
    stream = plant_stream(planter)
    while len(out) < count:
        record, inst, rendered = next(stream)
        if inst.shape not in ("plain", "sglang", "chained", "kubectl", "vllm"):
            continue
        out.append(
            ("\n".join(inst.lines) + "\n", {"id": record["id"], "captures": rendered.captures})
        )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    from bench.corpus import DEFAULT_OUT, DEFAULT_RECORDS, DEFAULT_SEED, build_corpus

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--mb", type=float, default=DEFAULT_MB)
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    corpus = build_corpus(args.out, records=args.records, seed=args.seed, quick=args.quick)
    log = generate_log(
        corpus.records(),
        log_path(corpus.directory, args.mb, args.seed, args.rate),
        size_mb=args.mb,
        seed=args.seed,
        rate=args.rate,
        key={"corpus": corpus.directory.name},
    )
    print(log.path)
    print(json.dumps(log.meta, indent=2))


if __name__ == "__main__":
    main()
