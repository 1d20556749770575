"""Containers (errkb.parse.containers): views of JSON, JSON Lines and markup, with line maps.

Unit tests per decoder (documents, JSON Lines, strings in strings, per-stream reassembly,
structured exceptions, frames, string lists, markup and entities), then property tests: any
seed message JSON-, HTML- or XML-escaped, once or twice, is found with exact captures, and the
near-miss siblings never are.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb
from errkb.parse.containers import (
    decode_containers,
    looks_like_container,
    unescape_markup,
)
from errkb.parse.regions import parse_input
from tests.tiers import examples

QUANTO = "Quanto layer 'enc.0.q' has incompatible scale F32 (4096,)"
QUANTO_ID = "5c84e15f4be2c1a6"
QUANTO_CAPTURES = {"prefix": "enc.0.q", "scale_slice.get_dtype()": "F32", "scale_shape": "(4096,)"}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("containers") / "kb.sqlite3") as opened:
        yield opened


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "container"),
    [
        ('{"a": "b"}', True),
        ('  \n[{"a": 1}]', True),
        ("[1, 2]", True),
        ("<html><body>x</body></html>", True),
        ('INFO start\n{"log": "x\\n"}\n', True),
        ("[2026-08-28 05:10:05] INFO start", False),
        ("[rank0]: Traceback (most recent call last):", False),
        ("{prefix} is not a JSON document", False),
        ("ValueError: boom\n", False),
    ],
)
def test_containers_are_told_from_plain_text_by_their_start(text: str, container: bool) -> None:
    assert looks_like_container(text) is container
    assert looks_like_container(text.encode()) is container


def test_plain_text_yields_no_views() -> None:
    assert decode_containers("ValueError: boom\n") is None
    assert decode_containers("<frozen importlib._bootstrap>\nValueError: boom\n") is None
    # A line that starts like JSON but is not a document stays text.
    assert decode_containers('{"a": 1} and then words\n') is None


# --- JSON --------------------------------------------------------------------------------


def test_every_string_value_is_a_view_whatever_its_key_with_its_line() -> None:
    doc = {"zz_unusual": {"deeper": [{"why": f"ValueError: {QUANTO}"}]}, "n": 3, "ok": True}
    text = json.dumps(doc, indent=2)
    decoded = decode_containers(text)
    assert decoded is not None and decoded.plain is None
    (view,) = decoded.views
    assert view.text == f"ValueError: {QUANTO}"
    assert view.lines == (text.splitlines().index(f'        "why": {json.dumps(view.text)}') + 1,)
    (event,) = parse_input(text)
    assert (event.exc_class, event.message, event.lines) == ("ValueError", QUANTO, view.lines)


def test_json_lines_between_text_lines_keep_the_text_and_its_line_numbers() -> None:
    text = (
        "starting\n"
        + json.dumps({"detail": "Worker failed: " + QUANTO})
        + "\nValueError: boom\n"
        + json.dumps({"x": "y"})
        + "\n"
    )
    decoded = decode_containers(text)
    assert decoded is not None and decoded.plain is not None
    assert decoded.plain.split("\n")[:4] == ["starting", "", "ValueError: boom", ""]
    events = parse_input(text)
    assert [(e.lines, e.message) for e in events] == [
        ((2,), "Worker failed: " + QUANTO),
        ((3,), "boom"),
    ]


def test_a_string_holding_json_is_decoded_in_turn() -> None:
    inner = json.dumps({"error": {"message": f"ValueError: {QUANTO}"}})
    text = "\n" + json.dumps({"body": json.dumps({"reply": inner})}) + "\n"
    events = parse_input(text)
    assert [(e.exc_class, e.message, e.lines) for e in events] == [("ValueError", QUANTO, (2,))]


def test_duplicate_keys_keep_every_value_and_the_line_map() -> None:
    text = '{\n "m": "first value here",\n "m": "ValueError: ' + QUANTO + '"\n}\n'
    events = parse_input(text)
    assert [(e.message, e.lines) for e in events] == [("first value here", (2,)), (QUANTO, (3,))]


def test_output_split_one_object_per_line_is_reassembled_per_stream() -> None:
    lines = [
        ("stderr", "Traceback (most recent call last):\n"),
        ("stdout", "progress 1/2\n"),
        ("stderr", '  File "/x/quanto_int8_config.py", line 168, in inspect\n'),
        ("stderr", "    raise ValueError(\n"),
        ("stdout", "progress 2/2\n"),
        ("stderr", "ValueError: " + QUANTO[:20]),  # a long line split without a newline
        ("stderr", QUANTO[20:] + "\n"),
    ]
    text = "".join(
        json.dumps({"log": log, "stream": stream, "time": f"2026-12-01T06:02:08.{i:06d}Z"}) + "\n"
        for i, (stream, log) in enumerate(lines)
    )
    decoded = decode_containers(text)
    assert decoded is not None
    streams = {v.origin: v for v in decoded.views}
    assert set(streams) == {"stream stderr", "stream stdout"}
    assert streams["stream stderr"].text.splitlines()[-1] == "ValueError: " + QUANTO
    assert streams["stream stderr"].lines == (1, 3, 4, 6)
    (event,) = [e for e in parse_input(text) if e.exc_class]
    assert (event.message, event.lines) == (QUANTO, (6,))
    assert [f.input_line for f in event.frames] == [3]


def test_structured_exceptions_are_found_by_shape_not_key_names() -> None:
    doc = {
        "events": [
            {"whatever": "ValueError", "said": QUANTO, "frames": []},
            {"kind": "mod.WrapperError", "text": f"Cannot load: {QUANTO}", "n": 1},
            {"name": "not a class", "text": "x y z words"},
        ]
    }
    text = json.dumps(doc, indent=1)
    decoded = decode_containers(text)
    assert decoded is not None
    assert [(s.exc_class, s.message) for s in decoded.structured] == [
        ("ValueError", QUANTO),
        ("mod.WrapperError", f"Cannot load: {QUANTO}"),
    ]
    wanted = text.splitlines().index(f'   "said": {json.dumps(QUANTO)},') + 1
    assert decoded.structured[0].line == wanted
    # The class and message are consumed: no view repeats them.
    assert [v.text for v in decoded.views] == ["not a class", "x y z words"]


def test_frames_are_never_occurrences(kb: errkb.KnowledgeBase) -> None:
    """Sentry's source context and locals hold the message's text; only the value counts."""
    frame = {
        "filename": "quanto_int8_config.py",
        "abs_path": "/x/quanto_int8_config.py",
        "lineno": 168,
        "pre_context": ["    if bad:", f"        msg = {QUANTO!r}"],
        "context_line": '        raise ValueError(f"Quanto layer {prefix!r} has ...")',
        "post_context": [f"# ValueError: {QUANTO}"],
        "vars": {"msg": repr(QUANTO)},
    }
    event = {
        "exception": {
            "values": [{"stacktrace": {"frames": [frame]}, "type": "ValueError", "value": QUANTO}]
        }
    }
    text = json.dumps(event, indent=2)
    report = kb.explain(text)
    (match,) = report.exact
    assert match.id == QUANTO_ID and match.capture_dict == QUANTO_CAPTURES
    value_line = text.splitlines().index(f'        "value": {json.dumps(QUANTO)}') + 1
    assert (match.occurrences, match.lines) == (1, (value_line,))


def test_a_notebook_traceback_list_is_one_text_with_ansi_removed() -> None:
    nb = {
        "outputs": [
            {
                "ename": "ValueError",
                "evalue": QUANTO,
                "output_type": "error",
                "traceback": [
                    "\x1b[31m-----\x1b[39m",
                    "\x1b[31mValueError\x1b[39m     Traceback (most recent call last)",
                    "\x1b[36mCell In[2], line 2\x1b[39m\n\x1b[32m----> 2\x1b[39m load()",
                    f"\x1b[31mValueError\x1b[39m: {QUANTO}",
                ],
            }
        ]
    }
    text = json.dumps(nb, indent=1)
    rows = text.splitlines()
    events = [e for e in parse_input(text) if e.exc_class]
    assert [(e.message, e.lines) for e in events] == [
        (QUANTO, (rows.index(f'   "evalue": {json.dumps(QUANTO)},') + 1,)),
        (QUANTO, (next(i for i, r in enumerate(rows, 1) if "\\u001b[39m: Quanto" in r),)),
    ]


def test_malformed_or_hostile_json_is_total() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_input(deep) == []
    assert parse_input('{"a": "unterminated\n') == []
    assert decode_containers('{"a": "b"') is None


# --- markup ------------------------------------------------------------------------------


def test_entities_are_undone_also_when_escaped_twice() -> None:
    once = html.escape(QUANTO, quote=True)
    assert "&#x27;" in once
    assert unescape_markup(once) == QUANTO
    assert unescape_markup(html.escape(once)) == QUANTO
    assert unescape_markup("a &amp;&amp; b &#39;x&#39; &#x41;") == "a && b 'x' A"


def test_html_tags_are_dropped_and_lines_kept() -> None:
    page = (
        "<html><head><style>p { color: red }</style></head>\n<body>\n<pre><code>"
        '<span class="ansi-red-fg">ValueError</span>: '
        + html.escape(QUANTO)
        + "\n</code></pre>\n<script>var s = 'ValueError: x y';</script></body></html>\n"
    )
    events = parse_input(page)
    assert [(e.exc_class, e.message, e.lines) for e in events] == [("ValueError", QUANTO, (3,))]


def test_xml_attributes_and_text_are_read_with_entities_undone() -> None:
    escaped = html.escape(f"ValueError: {QUANTO}", quote=True)
    xml = (
        '<?xml version="1.0"?>\n<testsuite>\n  <testcase name="t">\n'
        f'    <failure message="{escaped}">E   {escaped}\n'
        "line two &#10;still line four</failure>\n  </testcase>\n</testsuite>\n"
    )
    decoded = decode_containers(xml)
    assert decoded is not None
    markup, attribute = decoded.views
    assert attribute.text == f"ValueError: {QUANTO}" and attribute.lines == (4,)
    assert markup.text.count("\n") == xml.count("\n") + 1
    assert markup.line(6) == 5  # after the &#10;, the input's line 5 still
    events = parse_input(xml)
    assert {(e.message, e.lines) for e in events if e.exc_class} == {(QUANTO, (4,))}
    assert len([e for e in events if e.exc_class]) == 2  # the attribute and the text


# --- properties --------------------------------------------------------------------------

POSITIVES: list[tuple[str, str, dict[str, str]]] = [
    (QUANTO, QUANTO_ID, QUANTO_CAPTURES),
    (
        "Comfy INT8 layer 'double_blocks.7.img_attn.qkv' has incompatible weight/scale "
        "shapes: (9216, 3072) and (1, 9216)",
        "b9825390f5c3ae68",
        {
            "prefix": "double_blocks.7.img_attn.qkv",
            "weight_shape": "(9216, 3072)",
            "scale_shape": "(1, 9216)",
        },
    ),
    (
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
        "got shape (35840, 1)",
        "129d60f3f6e5f4e0",
        {"tuple(loaded_weight.shape)": "(35840, 1)"},
    ),
]
SIBLINGS = [
    "Comfy W4A4 layer 'double_blocks.7.img_attn.qkv' has incompatible weight/scale shapes: "
    "(9216, 1536) and (1, 9216)",
    "Comfy NVFP4 layer 'single_blocks.4.linear2' has incompatible weight/scale shapes: "
    "(3072, 7680) and (3072,)",
    "Expected scalar scale for fused-in-checkpoint QKV checkpoint load when loaded_shard_id "
    "is None, got shape (3,)",
    "Quanto auxiliary scale 'encoder.block.9.layer.1.DenseReluDense.wi_1.input_scale' must be "
    "a float scalar",
    "Comfy layer 'double_blocks.3.img_mlp.2' is missing checkpoint tensors: "
    "['double_blocks.3.img_mlp.2.weight_scale']",
]


def _json(text: str, key: str, twice: bool, pretty: bool) -> str:
    doc: object = {key: text, "level": "error"}
    if twice:
        doc = {"wrapper": json.dumps(doc)}
    return json.dumps(doc, indent=2 if pretty else None)


def _markup(text: str, twice: bool, xml: bool) -> str:
    body = html.escape(text, quote=True)
    if twice:
        body = html.escape(body, quote=True)
    if xml:
        return f'<?xml version="1.0"?>\n<testcase>\n<failure message="{body}">{body}</failure>\n'
    return f"<html><body>\n<pre><code>{body}\n</code></pre></body></html>\n"


_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
_SHAPES = st.sampled_from(["json", "jsonl", "html", "xml"])


def _wrap(message: str, shape: str, key: str, twice: bool, classed: bool) -> str:
    # Page text is read like plain text, where a message is found on its exception line; a
    # JSON value or an XML attribute is a candidate message on its own.
    classed = classed or shape == "html"
    text = f"ValueError: {message}" if classed else message
    if shape in ("json", "jsonl"):
        return _json(text, key, twice, pretty=shape == "json")
    return _markup(text, twice, xml=shape == "xml")


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(POSITIVES),
    shape=_SHAPES,
    key=_KEYS,
    twice=st.booleans(),
    classed=st.booleans(),
)
def test_escaped_positives_match_with_exact_captures(
    kb: errkb.KnowledgeBase,
    case: tuple[str, str, dict[str, str]],
    shape: str,
    key: str,
    twice: bool,
    classed: bool,
) -> None:
    message, rid, captures = case
    report = kb.explain(_wrap(message, shape, key, twice, classed))
    assert [(m.id, m.capture_dict) for m in report.exact] == [(rid, captures)]


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    message=st.sampled_from(SIBLINGS),
    shape=_SHAPES,
    key=_KEYS,
    twice=st.booleans(),
    classed=st.booleans(),
)
def test_escaped_near_miss_siblings_never_match(
    kb: errkb.KnowledgeBase, message: str, shape: str, key: str, twice: bool, classed: bool
) -> None:
    report = kb.explain(_wrap(message, shape, key, twice, classed))
    assert report.exact == ()


def test_shapes_corpus_container_files_decode_without_plain_leftovers() -> None:
    """The corpus's JSON files are read entirely as containers (nothing left as text)."""
    shapes = Path(__file__).parent / "data" / "shapes"
    for name in ("sentry_event_merged.json", "jupyter_nbclient_quanto.ipynb"):
        decoded = decode_containers((shapes / name).read_text())
        assert decoded is not None and decoded.plain is None, name


# --- large JSON Lines ----------------------------------------------------------------------

_CAUSE = (
    "Traceback (most recent call last):\n"
    '  File "/srv/sglang/quanto_int8_config.py", line 168, in inspect\n'
    "    raise ValueError(\n"
    f"ValueError: {QUANTO}\n"
)


def _structlog_lines(size: int) -> tuple[str, list[int]]:
    """A structlog JSON-lines log of about ``size`` characters: request lines, and every 200th
    line an error record with its traceback as text; also the lines of those records."""
    lines: list[str] = []
    errors: list[int] = []
    total = 0
    while total < size:
        k = len(lines) + 1
        record: dict[str, object] = {
            "event": f"request handled path=/api/v1/items/{k} status=200",
            "level": "info",
            "timestamp": f"2026-12-01T08:23:{k % 60:02d}.{k:06d}Z",
            "worker": k % 8,
        }
        if k % 200 == 0:
            record.update(event="checkpoint load failed", level="error", exception=_CAUSE)
            errors.append(k)
        lines.append(json.dumps(record))
        total += len(lines[-1]) + 1
    return "\n".join(lines) + "\n", errors


def test_a_one_line_value_without_an_error_word_is_a_candidate_until_narrowed() -> None:
    small = '{"detail": "Quanto layer \'a\' has incompatible scale F32 (1,)", "n": 1}\n'
    (event,) = parse_input(small)
    assert (event.exc_class, event.message, event.lines) == (
        None,
        "Quanto layer 'a' has incompatible scale F32 (1,)",
        (1,),
    )
    # In a large input such a line is narrowed away (as a plain-text line would be); the
    # exceptions on lines with an error word are all still found, at their lines. (Narrowing
    # from 64 KiB here: the same path as past 1 MiB, on a twentieth of the input.)
    text, errors = _structlog_lines(3 << 16)
    big = small + text
    found = [e for e in parse_input(big, 1 << 16) if e.exc_class == "ValueError"]
    assert [e.lines[0] for e in found] == [k + 1 for k in errors]
    assert all(e.message == QUANTO for e in found)
    assert not [e for e in parse_input(big, 1 << 16) if e.lines == (1,)]


def _parse_seconds(text: str) -> float:
    start = time.process_time()
    parse_input(text)
    return time.process_time() - start


@pytest.mark.slow
def test_large_json_lines_take_linear_time() -> None:
    # Four times the input takes about four times as long (per MB within a generous factor on a
    # shared machine): decoding walks only the lines worth it, never a whole parse per value.
    small, _ = _structlog_lines(2 << 20)
    large, _ = _structlog_lines(8 << 20)
    # The least of a few runs on both sides: one run beside a busy neighbour (xdist's other
    # worker, an install) read 1.7x its usual time, and a single slow run is no nonlinearity.
    per_mb_small = min(_parse_seconds(small) for _ in range(3)) / 2
    per_mb_large = min(_parse_seconds(large) for _ in range(2)) / 8
    assert per_mb_large < max(per_mb_small, 0.01) * 3, (per_mb_small, per_mb_large)
    # And within a small factor of the same records as plain text (one line each, the
    # traceback under its record): JSON costs a decode, not a parse per value (which was 25x).
    records = [json.loads(line) for line in large.splitlines()]
    plain = "".join(
        f"{r['timestamp']} [{r['level']}] {r['event']}\n{r.get('exception', '')}" for r in records
    )
    as_text = min(_parse_seconds(plain) for _ in range(3))
    as_json = min(_parse_seconds(large) for _ in range(3))
    # Quiet, this ratio reads 6.8x at this tree and 9.6x at the last stop's (2026-12-02, one
    # process alone); beside the full tier's other worker it read 11.7x, the text side being
    # the cheaper one to disturb. 16x still fails the parse per value (25x) it guards against.
    assert as_json < max(as_text, 0.01) * 16, (as_text, as_json)


# -- YAML double-quoted scalars folded over lines (PyYAML) ---------------------------------------


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    st.text(alphabet="abc XYZ01'\"\\()[]<>{}:,.-_/ \u00e9\u4e2d\t\n\x1b\x85", min_size=30),
    st.sampled_from([20, 40, 80]),
    st.sampled_from(['"', None]),
    st.booleans(),
)
def test_a_folded_double_quoted_scalar_decodes_as_pyyaml_loads_it(
    value: str, width: int, style: str | None, unicode: bool
) -> None:
    import yaml

    doc = yaml.safe_dump(
        [{"job": "load", "error": value}], width=width, default_style=style, allow_unicode=unicode
    )
    decoded = decode_containers(doc)
    if "\\\n" not in doc:  # not folded with a backslash: left as text
        return
    assert decoded is not None, doc
    assert value in [v.text for v in decoded.views if v.origin.startswith("yaml:")], doc


def test_a_folded_scalar_maps_each_line_to_where_its_text_is(kb: errkb.KnowledgeBase) -> None:
    doc = (
        'error: "Traceback (most recent call last):\\n  File \\"/a.py\\", line 3, in f\\n\\\n'
        "  \\    f()\\nValueError:\\\n"
        "  \\ Quanto layer 'enc.0.q' has incompatible scale F32 (4096,)\\n\"\n"
        "status: failed\n"
    )
    assert looks_like_container(doc)
    decoded = decode_containers(doc)
    assert decoded is not None
    (view,) = decoded.views
    assert view.text.splitlines()[-1] == f"ValueError: {QUANTO}"
    assert view.line(4) == 2  # "ValueError:" is on input line 2, its message on line 3
    assert decoded.plain is not None and decoded.plain.splitlines()[3] == "status: failed"
    (match,) = kb.explain(doc).exact
    assert (match.id, match.lines) == (QUANTO_ID, (2,))


def test_a_shell_continuation_is_no_yaml_fold() -> None:
    text = 'curl -X POST \\\n  -H "Content-Type: application/json" \\\n  "http://x"\n'
    assert not looks_like_container(text)
    assert not looks_like_container(text.encode())
