from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.match.decide import same_file
from errkb.report import Confidence
from tests.conftest import COMFY_ID, EXAMPLES, LINEAR_ID, QUANTO_ID

EXPECTED = {
    "quanto-incompatible-scale.log": (
        QUANTO_ID,
        {
            "prefix": "encoder.block.0.layer.0.SelfAttention.q",
            "scale_slice.get_dtype()": "F32",
            "scale_shape": "(4096,)",
        },
    ),
    "comfy-int8-scale-shapes.log": (
        COMFY_ID,
        {
            "prefix": "double_blocks.0.img_attn.qkv",
            "weight_shape": "(9216, 3072)",
            "scale_shape": "(1, 9216)",
        },
    ),
    "merged-column-scalar-scale.log": (LINEAR_ID, {"tuple(loaded_weight.shape)": "(16384,)"}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_examples_are_explained_with_full_captures(kb: errkb.KnowledgeBase, name: str) -> None:
    rid, captures = EXPECTED[name]
    report = kb.explain((EXAMPLES / name).read_text())
    assert [m.id for m in report.exact] == [rid]
    match = report.exact[0]
    assert match.capture_dict == captures
    assert match.record["id"] == rid
    assert match.score >= 0.9  # class and frame agree
    assert report.explained


def test_cause_and_wrapper_are_one_match_with_both_lines(kb: errkb.KnowledgeBase) -> None:
    text = (EXAMPLES / "quanto-incompatible-scale.log").read_text()
    (match,) = kb.explain(text).exact
    lines = text.splitlines()
    assert match.occurrences == 2
    assert all("has incompatible scale" in lines[n - 1] for n in match.lines)
    assert match.root_cause
    assert match.exception.cls == "ValueError"


def test_bytes_input_and_report_json_contract(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain((EXAMPLES / "comfy-int8-scale-shapes.log").read_bytes())
    data = report.to_dict()
    assert data["errkb"] == errkb.__version__
    assert data["datasetVersion"] == "2026-08-28T06:17:29.519Z"
    (m,) = data["matches"]
    assert m["confidence"] == "exact" and m["occurrences"] == 1
    assert list(m["captures"]) == ["prefix", "weight_shape", "scale_shape"]
    assert m["exception"]["class"] == "ValueError"
    assert m["record"]["githubUrl"].startswith("https://github.com/sgl-project/sglang/blob/")
    json.dumps(data)  # serialisable as is
    from errkb.records import schema_validator

    schema_validator("explanation.schema.json").validate(data)


def test_match_message_for_bots(kb: errkb.KnowledgeBase) -> None:
    report = kb.match_message(
        "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, "
        "got shape (2,)"
    )
    assert [m.id for m in report.exact] == [LINEAR_ID]
    assert report.exact[0].capture_dict == {"tuple(loaded_weight.shape)": "(2,)"}


def test_near_miss_gets_similar_suggestion_not_exact(kb: errkb.KnowledgeBase) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ValueError: Expected scalar scale for fused-in-checkpoint QKV checkpoint load when "
        "loaded_shard_id is None, got shape (3,)\n"
    )
    report = kb.explain(text)
    assert report.exact == ()
    assert not report.explained
    assert [m.id for m in report.matches if m.confidence is Confidence.SIMILAR] == [LINEAR_ID]
    assert report.unmatched[0].cls == "ValueError"


def test_unknown_exception_is_listed_unmatched(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain("KeyError: 'nothing we know about at all'\n")
    assert report.exact == ()
    assert [(u.cls, u.line) for u in report.unmatched] == [("KeyError", 1)]


@pytest.mark.parametrize(
    ("frame", "record", "same"),
    [
        (
            "/usr/lib/python3/site-packages/sglang/srt/layers/linear.py",
            "python/sglang/srt/layers/linear.py",
            True,
        ),
        (
            "/sgl-workspace/sglang/python/sglang/srt/layers/linear.py",
            "python/sglang/srt/layers/linear.py",
            True,
        ),
        ("python/sglang/srt/layers/linear.py", "python/sglang/srt/layers/linear.py", True),
        ("/x/vllm/model_executor/layers/linear.py", "python/sglang/srt/layers/linear.py", False),
        ("linear.py", "python/sglang/srt/layers/linear.py", False),
    ],
)
def test_same_file(frame: str, record: str, same: bool) -> None:
    assert same_file(frame, record) is same


def test_explain_from_many_threads(kb: errkb.KnowledgeBase) -> None:
    texts = [(EXAMPLES / n).read_text() for n in sorted(EXPECTED)]
    expected = [EXPECTED[n][0] for n in sorted(EXPECTED)]
    errors: list[BaseException] = []
    results: list[list[str]] = []

    def work() -> None:
        try:
            for _ in range(10):
                results.append([kb.explain(t).exact[0].id for t in texts])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [expected] * 80


def test_new_records_are_picked_up_without_restart(
    kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    from tests.conftest import make_record

    message = "Quanto layer 'q' is frobnicated beyond repair"
    assert kb.match_message(message).exact == ()
    other = errkb.open(kb.path)  # another handle, as another process would have
    rec = make_record(
        seed_records[QUANTO_ID], "Quanto layer {prefix!r} is frobnicated beyond repair"
    )
    (tmp_path / "new.json").write_text(json.dumps(rec))
    other.ingest([tmp_path / "new.json"])
    other.close()
    assert [m.id for m in kb.match_message(message).exact] == [rec["id"]]


def test_kb_sync_applies_a_source_and_explains_its_records(
    kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    from tests.conftest import make_record

    rec = make_record(seed_records[QUANTO_ID], "Quanto layer {prefix!r} lost its scale")
    (tmp_path / "more.jsonl").write_text(json.dumps(rec) + "\n")
    report = kb.sync(tmp_path / "more.jsonl")
    assert report.to_dict()["added"] == 1
    assert [m.id for m in kb.match_message("Quanto layer 'z' lost its scale").exact] == [rec["id"]]


def test_fixed_message_matches_only_a_whole_message(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    from tests.conftest import make_record

    rec = make_record(seed_records[QUANTO_ID], "quantizer registry frozen", file_path="x/y.py")
    (tmp_path / "r.json").write_text(json.dumps(rec))
    empty_kb.ingest([tmp_path / "r.json"])
    assert [m.id for m in empty_kb.match_message("quantizer registry frozen").exact] == [rec["id"]]
    rest = empty_kb.match_message("the quantizer registry frozen at start").matches
    assert [m.confidence.value for m in rest] == ["similar"]


def test_a_one_word_fixed_message_alone_is_only_possible(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    # A fixed one-word message (``function``) is generic: the word alone is no answer.
    from tests.conftest import make_record

    rec = make_record(seed_records[QUANTO_ID], "function", file_path="x/y.py")
    (tmp_path / "r.json").write_text(json.dumps(rec))
    empty_kb.ingest([tmp_path / "r.json"])
    report = empty_kb.match_message("function")
    assert report.exact == ()
    assert [(m.id, m.confidence.value) for m in report.matches] == [(rec["id"], "possible")]
    assert report.matches[0].decision is not None
    assert report.matches[0].decision.rule.value == "generic-without-class"
    assert report.exit_code == 1


def test_a_weaker_pattern_overlapping_a_stronger_one_is_only_an_alternative(
    empty_kb: errkb.KnowledgeBase, tmp_path: Path, seed_records: dict[str, Any]
) -> None:
    from tests.conftest import make_record

    base = seed_records[QUANTO_ID]
    strong = make_record(base, "Unicode direction character U+%x in identifier", file_path="a.py")
    weak = make_record(base, "{msg} Unicode direction character {arg!r:.100}.", file_path="b.py")
    wrapper = make_record(base, "Failed to update model weights from disk: {e}.", file_path="c.py")
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in (strong, weak, wrapper)))
    empty_kb.ingest([tmp_path / "r.jsonl"])
    report = empty_kb.explain(
        '{"success":false,"message":"Failed to update model weights from disk: Unicode direction'
        ' character U+48226 in identifier.\\nRolling back to original weights."}\n'
    )
    ids = [m.id for m in report.exact]
    # the cause and its wrapper are nested: both stand; the weak pattern only overlaps
    assert sorted(ids) == sorted([strong["id"], wrapper["id"]])
    assert weak["id"] in {a.id for m in report.exact for a in m.alternatives}


def test_repr_capture_stays_tight_when_the_message_ran_on(kb: errkb.KnowledgeBase) -> None:
    # The parser took the progress bar after the exception as a continuation line; the
    # capture must still come from the decoded repr, not run on to the wrapper's `")`.
    text = (
        "Traceback (most recent call last):\n"
        '  File "w.py", line 3, in run\n'
        "RuntimeError: Worker failed: ValueError(\"Comfy INT8 layer 'blk.0' has incompatible "
        'weight/scale shapes: (8, 4) and (1, 8)")\n'
        "Loading safetensors checkpoint shards: 100% Completed | 8/8 [00:08<00:00,  1.95s/it]\n"
    )
    (match,) = kb.explain(text).exact
    assert match.id == COMFY_ID
    assert match.capture_dict["scale_shape"] == "(1, 8)"


def test_a_report_reads_its_matches_records_in_one_batch(
    kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every example log together: one match per record, each record read once, all of them
    # in one ``raw_records`` call rather than one query per match.
    from errkb.store.sqlite import SqliteView

    alone: list[str] = []
    batches: list[list[str]] = []
    real_one, real_many = SqliteView.raw_record, SqliteView.raw_records

    def one(self: SqliteView, rid: str) -> Any:
        alone.append(rid)
        return real_one(self, rid)

    def many(self: SqliteView, rids: Any) -> Any:
        batches.append(list(rids))
        return real_many(self, rids)

    text = "\n".join((EXAMPLES / n).read_text() for n in sorted(EXPECTED))
    before = kb.explain(text).to_dict()
    monkeypatch.setattr(SqliteView, "raw_record", one)
    monkeypatch.setattr(SqliteView, "raw_records", many)
    with errkb.open(kb.path) as fresh:
        report = fresh.explain(text)
    assert report.to_dict() == before
    ids = sorted({m.id for m in report.exact})
    assert len(ids) == len({EXPECTED[n][0] for n in EXPECTED}) > 1
    assert alone == [] and len(batches) == 1 and set(ids) <= set(batches[0])


def test_a_pytest_short_summary_is_a_copy_not_one_more_exception(kb: errkb.KnowledgeBase) -> None:
    log = (
        "    def test_t():\n"
        ">       raise ValueError('Expected sc' + 'ale for a thing nobody documented, got 3')\n"
        "E       ValueError: Expected scale for a thing nobody documented, got 3\n"
        "\n"
        "test_x.py:2: ValueError\n"
        "=========================== short test summary info ============================\n"
        "FAILED test_x.py::test_t - ValueError: Expected sc...\n"
    )
    (entry,) = kb.explain(log).unmatched
    assert (entry.cls, entry.lines, entry.occurrences) == ("ValueError", (3, 7), 2)
    assert entry.message == "Expected scale for a thing nobody documented, got 3"
