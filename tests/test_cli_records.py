"""``explain``, ``match``, ``show``, ``list`` and ``stats`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errkb.records import schema_validator
from tests.cli import QUANTO_LOG, run
from tests.conftest import COMFY_ID, EXAMPLES, LINEAR_ID, QUANTO_ID


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.sqlite3"


def test_explain_file_text(db: Path) -> None:
    result = run(db, "explain", str(QUANTO_LOG))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert QUANTO_ID in out and "quanto-layer-prefix-r-has-incompatible-scale-sc" in out
    assert "encoder.block.0.layer.0.SelfAttention.q" in out
    assert (
        "quanto_int8_config.py:168" in out and "https://github.com/sgl-project/sglang/blob/" in out
    )
    assert "How to fix" in out and "1. Reshape/save _scale" in out
    assert "\x1b[" not in out  # not a terminal: no colour


@pytest.mark.parametrize("how", ["stdin", "dash"])
def test_explain_reads_stdin(db: Path, how: str) -> None:
    args = ["explain"] if how == "stdin" else ["explain", "-"]
    result = run(db, *args, "--format", "json", input=QUANTO_LOG.read_bytes())
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [m["id"] for m in data["matches"]] == [QUANTO_ID]


def test_explain_json_contract(db: Path) -> None:
    result = run(db, "explain", "--format", "json", str(EXAMPLES / "comfy-int8-scale-shapes.log"))
    data = json.loads(result.stdout)
    # The bundled sample only: the additive knowledgeBase field says so.
    assert set(data) == {"errkb", "datasetVersion", "matches", "unmatched", "knowledgeBase"}
    assert data["knowledgeBase"] == {"records": 3, "bundledSample": True}
    (m,) = data["matches"]
    assert m["id"] == COMFY_ID and m["confidence"] == "exact"
    assert m["captures"] == {
        "prefix": "double_blocks.0.img_attn.qkv",
        "weight_shape": "(9216, 3072)",
        "scale_shape": "(1, 9216)",
    }
    assert m["diagnosis"]["expected"]
    assert m["record"]["id"] == COMFY_ID


def test_explain_markdown(db: Path) -> None:
    result = run(
        db, "explain", "--format", "markdown", str(EXAMPLES / "merged-column-scalar-scale.log")
    )
    assert result.exit_code == 0
    assert result.stdout.startswith("### ValueError: `expected-scalar-scale")
    assert "| `tuple(loaded_weight.shape)` | `(16384,)` |" in result.stdout
    assert "```python" in result.stdout


def test_explain_nothing_known_exits_1(db: Path) -> None:
    result = run(db, "explain", input="all good\nKeyError: 'x'\n")
    assert result.exit_code == 1
    assert "No known error found." in result.stdout
    assert "KeyError: 'x'" in result.stdout


def test_explain_unreadable_file_exits_2(db: Path, tmp_path: Path) -> None:
    result = run(db, "explain", str(tmp_path / "missing.log"))
    assert result.exit_code == 2
    assert "missing.log" in result.stderr


@pytest.mark.parametrize(
    "payload",
    [
        bytes(range(256)) * 64,
        b"\x00"
        * 10_000
        + b"ValueError: Expected scalar scale for fused-in-checkpoint merged-column "
        b"checkpoint load, got shape (2,)\n",
        b"\xff\xfe\xfd" * 1000 + b"\n" + b"x" * (10 * 1024 * 1024),
    ],
    ids=["binary", "nul-bytes", "10MB-line"],
)
def test_hostile_input_is_answered_without_a_crash(db: Path, payload: bytes) -> None:
    result = run(db, "explain", "--format", "json", input=payload)
    if payload.startswith(b"\x00\x01\x02"):  # binary: one line saying so (issue 49)
        assert result.exit_code == 2
        assert result.stderr.strip() == "errkb: error: -: binary data (NUL bytes), not a log"
        return
    assert result.exit_code in (0, 1)
    data = json.loads(result.stdout)
    if b"merged-column" in payload:
        assert [m["id"] for m in data["matches"]] == [LINEAR_ID]


def test_match_command(db: Path) -> None:
    msg = "Comfy INT8 layer 'a.b' has incompatible weight/scale shapes: (8, 4) and (8,)"
    result = run(db, "match", msg, "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["matches"][0]["captures"]["scale_shape"] == "(8,)"
    assert run(db, "match", "something else entirely").exit_code == 1


def test_show_list_stats(db: Path) -> None:
    shown = run(db, "show", LINEAR_ID)
    assert shown.exit_code == 0 and "Checked by a reference validator" in shown.stdout
    assert "never executed" in shown.stdout  # the dataset's code fields are shown as text
    by_slug = run(
        db, "show", "expected-scalar-scale-for-fused-in-checkpoint-merg", "--format", "json"
    )
    assert json.loads(by_slug.stdout)["id"] == LINEAR_ID
    missing = run(db, "show", "0000000000000000")
    assert missing.exit_code == 2 and "no record" in missing.stderr
    listed = run(db, "list", "--tag", "quanto")
    assert listed.stdout.split()[0] == QUANTO_ID and len(listed.stdout.splitlines()) == 1
    stats = json.loads(run(db, "stats", "--format", "json").stdout)
    assert stats["records"] == 3 and stats["repos"] == 1


def test_explain_several_files_keeps_each_files_line_numbers(db: Path) -> None:
    logs = [EXAMPLES / "comfy-int8-scale-shapes.log", EXAMPLES / "merged-column-scalar-scale.log"]
    result = run(db, "explain", "--format", "json", *map(str, logs))
    assert result.exit_code == 0
    matches = json.loads(result.stdout)["matches"]
    assert [(m["id"], m["source"], m["lines"]) for m in matches] == [
        (COMFY_ID, str(logs[0]), [12]),
        (LINEAR_ID, str(logs[1]), [24]),
    ]
    text = run(db, "explain", *map(str, logs)).stdout
    assert f"at line 12 of {logs[0]}" in text


def test_explain_several_files_answers_each_and_says_which_could_not_be_read(
    db: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.log"
    other.write_text("KeyError: 'x'\n")
    missing = tmp_path / "missing.log"
    names = [str(QUANTO_LOG), str(missing), str(other)]
    result = run(db, "explain", *names)
    assert result.exit_code == 2  # as check: an input could not be read; the others answered
    lines = result.stdout.splitlines()
    assert lines[0] == "Files:"
    assert lines[1].split() == [
        str(QUANTO_LOG), "quanto-layer-prefix-r-has-incompatible-scale-sc", "(2×)"
    ]  # fmt: skip
    assert lines[2].split()[0] == str(missing) and "cannot read" in lines[2]
    assert lines[3].split()[0] == str(other) and "no known error; 1 exception(s)" in lines[3]
    assert "How to fix" in result.stdout and "KeyError: 'x'" in result.stdout
    assert lines[-2].endswith("1 of 3 input(s) could not be read.")
    data = json.loads(run(db, "explain", "--format", "json", *names).stdout)
    schema_validator("explanation.schema.json").validate(data)
    assert [(f["source"], f["error"] is None) for f in data["files"]] == [
        (str(QUANTO_LOG), True), (str(missing), False), (str(other), True)
    ]  # fmt: skip
    assert [m["source"] for m in data["matches"]] == [str(QUANTO_LOG)]
    markdown = run(db, "explain", "--format", "markdown", *names).stdout
    assert markdown.startswith("| file | answer |") and f"| `{missing}` | **cannot read" in markdown
    page = run(db, "explain", "--format", "html", *names).stdout
    assert '<tr class="err">' in page and "cannot read" in page


def test_explain_several_readable_files_exit_as_one(db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.log"
    other.write_text("all good\n")
    assert run(db, "explain", str(QUANTO_LOG), str(other)).exit_code == 0
    assert run(db, "explain", str(other), str(other)).exit_code == 1
