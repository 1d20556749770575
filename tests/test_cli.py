"""CLI tests: exit codes, output formats, stdin, and errors, as a user meets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from errkb.cli import cli
from tests.conftest import COMFY_ID, DATASET, EXAMPLES, LINEAR_ID, QUANTO_ID

QUANTO_LOG = EXAMPLES / "quanto-incompatible-scale.log"


def run(db: Path, *args: str, input: bytes | str | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--db", str(db), *args], input=input)
    # An unexpected crash must not pass as a handled error with exit 1 or 2.
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


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


def test_bad_option_exits_2(db: Path) -> None:
    result = run(db, "explain", "--format", "yaml")
    assert result.exit_code == 2
    assert "yaml" in result.stderr


def test_broken_database_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"garbage" * 1000)
    result = run(bad, "explain", str(QUANTO_LOG))
    assert result.exit_code == 2
    assert result.stderr.startswith("errkb: error:") and str(bad) in result.stderr


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


def test_ingest_and_export(db: Path, tmp_path: Path) -> None:
    result = run(db, "ingest", str(DATASET))
    assert (
        result.exit_code == 0
        and result.stdout.strip() == "added 0, updated 0, unchanged 3, rejected 0"
    )
    out = tmp_path / "export.jsonl"
    assert run(db, "export", "--output", str(out)).exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["record"]["id"] == LINEAR_ID
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0].replace('"severity":"error"', '"severity":"fatal"') + "\n")
    rejected = run(db, "ingest", str(bad))
    assert rejected.exit_code == 1
    assert "line 1" in rejected.stderr and "$.record.severity" in rejected.stderr


def test_every_command_has_help() -> None:
    # Commands register lazily, so cli.commands depends on what earlier tests imported: ask the
    # group, which knows every family's commands whatever has been imported.
    from errkb.cli import COMMAND_MODULES

    expected = sorted(name for names in COMMAND_MODULES.values() for name in names)
    with click.Context(cli) as ctx:
        names = cli.list_commands(ctx)
        assert names == expected and len(names) >= 14
        for name in names:
            command = cli.get_command(ctx, name)
            assert command is not None and command.help, name
            result = CliRunner().invoke(cli, [name, "--help"])
            assert result.exit_code == 0, name
            assert result.stdout.startswith(f"Usage: cli {name} "), name


def test_entry_point_runs_as_a_user_would(tmp_path: Path) -> None:
    env = {**os.environ, "ERRKB_DB": str(tmp_path / "ep.sqlite3"), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "errkb", "explain", str(QUANTO_LOG)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert QUANTO_ID in proc.stdout


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
