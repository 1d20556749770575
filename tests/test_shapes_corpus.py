"""The shapes corpus (tests/data/shapes): logs made by real renderers, every expectation asserted.

``make_corpus.py`` beside the data ran rich, typer, loguru, structlog, python-json-logger,
logging, systemd-journald/journalctl, nbclient/nbconvert, sentry-sdk, pytest, multiprocessing and
concurrent.futures on the three seed records' real messages and their near-miss siblings (and
encoded docker json-file, RFC 5424 syslog, email and HTML faithfully); ``VERSIONS.txt`` records
the tools. ``expectations.json`` gives, per file, the exact matches errkb must report (record id,
captures, occurrences and the sorted distinct lines where the message begins) or ``negative``.

Issue 10 was the gap between what errkb read and these shapes; every file is read now. A file
added that errkb cannot read yet goes in KNOWN_GAPS with the class of miss and runs as a strict
xfail, so fixing it turns into an XPASS failure that forces its entry out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import errkb

SHAPES = Path(__file__).parent / "data" / "shapes"
EXPECTATIONS: dict[str, Any] = json.loads((SHAPES / "expectations.json").read_text())
NOT_DATA = {"make_corpus.py", "expectations.json", "VERSIONS.txt"}

# Issue 10's gaps are closed: a file errkb cannot read yet is listed here with its class of
# miss (wrap, prefix, indentation, quoting, container, markup) and runs as a strict xfail.
KNOWN_GAPS: dict[str, str] = {}


def _cases() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=pytest.mark.xfail(strict=True, reason=f"issue 10: {KNOWN_GAPS[name]}"),
        )
        if name in KNOWN_GAPS
        else name
        for name in sorted(EXPECTATIONS)
    ]


def _read(name: str) -> bytes:
    """A corpus file as ``errkb explain`` reads it: compressed ones decompressed by content."""
    from errkb.inputs import decompress_input

    return decompress_input((SHAPES / name).read_bytes(), name)


@pytest.fixture(scope="module")
def shapes_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("shapes") / "kb.sqlite3") as kb:
        yield kb


def test_shapes_corpus_size_and_coverage() -> None:
    files = sorted(p.name for p in SHAPES.iterdir() if p.name not in NOT_DATA)
    assert files == sorted(EXPECTATIONS)
    assert len(files) >= 60
    negatives = [f for f, e in EXPECTATIONS.items() if e.get("negative")]
    assert all(not EXPECTATIONS[f]["matches"] for f in negatives)
    ids = {m["id"] for e in EXPECTATIONS.values() for m in e["matches"]}
    assert ids == {"5c84e15f4be2c1a6", "b9825390f5c3ae68", "129d60f3f6e5f4e0"}
    # Every shape family (the file name up to its first '_') has a near-miss negative.
    families = {f.split("_")[0] for f in files}
    assert families == {f.split("_")[0] for f in negatives}
    assert sum(p.stat().st_size for p in SHAPES.iterdir()) < 2_000_000
    assert set(KNOWN_GAPS) <= set(EXPECTATIONS)


@pytest.mark.parametrize("name", _cases())
def test_shapes_log(shapes_kb: errkb.KnowledgeBase, name: str) -> None:
    expected = EXPECTATIONS[name]["matches"]
    report = shapes_kb.explain(_read(name))
    got = [
        {
            "id": m.id,
            "captures": m.capture_dict,
            "occurrences": m.occurrences,
            "lines": sorted(set(m.lines)),
        }
        for m in report.exact
    ]
    assert got == expected, name


def shapes_figures(kb: errkb.KnowledgeBase) -> dict[str, float]:
    """Precision, recall and capture accuracy of exact matches over the whole shapes corpus."""
    tp = fp = fn = captures_ok = 0
    for name, exp in EXPECTATIONS.items():
        report = kb.explain(_read(name))
        want = {m["id"]: m["captures"] for m in exp["matches"]}
        got = {m.id: m.capture_dict for m in report.exact}
        tp += len(got.keys() & want.keys())
        fp += len(got.keys() - want.keys())
        fn += len(want.keys() - got.keys())
        captures_ok += sum(1 for i in got.keys() & want.keys() if got[i] == want[i])
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "capture_accuracy": captures_ok / tp if tp else 1.0,
    }


def test_shapes_figures(shapes_kb: errkb.KnowledgeBase) -> None:
    figures = shapes_figures(shapes_kb)
    print(f"shapes corpus: {json.dumps(figures)}")
    assert figures == {"precision": 1.0, "recall": 1.0, "capture_accuracy": 1.0}


Q, C, M = "5c84e15f4be2c1a6", "b9825390f5c3ae68", "129d60f3f6e5f4e0"


def _message(rid: str, captures: dict[str, str]) -> str:
    if rid == Q:
        return (
            f"Quanto layer {captures['prefix']!r} has incompatible scale "
            f"{captures['scale_slice.get_dtype()']} {captures['scale_shape']}"
        )
    if rid == C:
        return (
            f"Comfy INT8 layer {captures['prefix']!r} has incompatible weight/scale shapes: "
            f"{captures['weight_shape']} and {captures['scale_shape']}"
        )
    return (
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got "
        f"shape {captures['tuple(loaded_weight.shape)']}"
    )


def _siblings(rid: str, message: str, captures: dict[str, str]) -> list[str]:
    """The seed record's known siblings (CHECKS.md) and its message quoted with placeholders."""
    if rid == Q:
        return [
            f"Quanto layer {captures['prefix']!r} has incompatible scale dtype F64",
            "Quanto layer '<prefix>' has incompatible scale <scale dtype> <scale shape>",
            message + " and more",
        ]
    if rid == C:
        return [
            message.replace("Comfy INT8 layer", "Comfy W4A4 layer"),
            message.replace("Comfy INT8 layer", "Comfy NVFP4 layer"),
            "Comfy INT8 layer '<prefix>' has incompatible weight/scale shapes: <weight shape> "
            "and <scale shape>",
        ]
    return [
        message.replace(
            "merged-column checkpoint load,", "QKV checkpoint load when loaded_shard_id is None,"
        ),
        message.replace(captures["tuple(loaded_weight.shape)"], "{tuple(loaded_weight.shape)}"),
    ]


def _sibling_cases() -> list[tuple[str, str, str]]:
    """(file, record, sibling text) for each positive file whose message appears verbatim."""
    cases = []
    for name, exp in sorted(EXPECTATIONS.items()):
        text = (SHAPES / name).read_text(encoding="utf-8", errors="replace")
        for m in exp["matches"]:
            message = _message(m["id"], m["captures"])
            if message in text:
                cases.extend(
                    (name, m["id"], sibling)
                    for sibling in _siblings(m["id"], message, m["captures"])
                )
    return cases


SIBLING_CASES = _sibling_cases()


def _assert_refused(kb: errkb.KnowledgeBase, name: str, rid: str, sibling: str) -> None:
    text = (SHAPES / name).read_text(encoding="utf-8", errors="replace")
    message = next(
        _message(m["id"], m["captures"]) for m in EXPECTATIONS[name]["matches"] if m["id"] == rid
    )
    report = kb.explain(text.replace(message, sibling))
    assert rid not in {m.id for m in report.exact}, (name, sibling)


def test_sibling_cases_cover_every_shape_family() -> None:
    families = {name.split("_")[0] for name, _r, _s in SIBLING_CASES}
    assert len(SIBLING_CASES) >= 60
    assert {"journald", "jsonlogger", "jupyter", "sentry", "loguru", "docker"} <= families


def test_a_seed_sibling_never_matches_in_one_shape(shapes_kb: errkb.KnowledgeBase) -> None:
    name, rid, sibling = next(c for c in SIBLING_CASES if c[0].startswith("journald"))
    _assert_refused(shapes_kb, name, rid, sibling)


@pytest.mark.slow
def test_seed_siblings_never_match_through_every_shape(shapes_kb: errkb.KnowledgeBase) -> None:
    for name, rid, sibling in SIBLING_CASES:
        _assert_refused(shapes_kb, name, rid, sibling)


#: Issue 49's shapes: real strace output, a real zstd archive, a real email package message.
ISSUE_49 = [
    name for name in sorted(EXPECTATIONS) if name.startswith(("strace_", "zstd_", "email_qp_"))
]


@pytest.mark.parametrize("name", ISSUE_49)
def test_issue_49_shapes_read_the_same_on_every_route(
    shapes_kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # Whole (a paste), then as a large input: the record scan and the region parse.
    from errkb.parse import regions

    data = _read(name)
    whole = shapes_kb.explain(data).to_dict()
    monkeypatch.setattr(regions, "NARROW_ABOVE", 256)
    scanned = shapes_kb.explain(data).to_dict()
    shapes_kb.record_scan = False
    try:
        parsed = shapes_kb.explain(data).to_dict()
    finally:
        shapes_kb.record_scan = True
    assert whole == scanned == parsed
    assert len(ISSUE_49) == 5
