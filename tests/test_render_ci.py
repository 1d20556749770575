"""CI's formats (``errkb.render.ci``): annotations and SARIF for explain, annotations and a PR
comment for triage, and the exit codes a CI gate reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import errkb
from errkb.render import OutputFormat, RenderOptions, render
from errkb.render.ci import UNKNOWN_RULE, cause, verdict
from errkb.report.triage import TriageReport
from errkb.triage import triage
from tests.cli import QUANTO_LOG, run
from tests.conftest import QUANTO_ID
from tests.test_reallogs import DRCI
from tests.test_render_answers import ranks_by_layers

UNKNOWN = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x32)\n"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kb.sqlite3"


def _commands(text: str) -> list[tuple[str, dict[str, str], str]]:
    """Each workflow command as (level, properties, message), escapes undone."""
    out = []
    for line in text.splitlines():
        assert line.startswith("::"), line
        head, message = line[2:].split("::", 1)
        level, _, props = head.partition(" ")
        pairs = dict(p.split("=", 1) for p in props.split(",") if p)
        undo = {k: v.replace("%3A", ":").replace("%2C", ",") for k, v in pairs.items()}
        out.append((level, undo, message.replace("%0A", "\n").replace("%25", "%")))
    return out


def test_explain_github_annotates_the_log_line_with_cause_and_fix(db: Path, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(ranks_by_layers() + UNKNOWN)
    result = run(db, "explain", "--format", "github", str(log))
    assert result.exit_code == 0
    commands = _commands(result.stdout)
    level, props, message = commands[0]
    assert level == "error" and props["file"] == str(log) and props["line"] == "4"
    assert (
        props["title"].startswith("errkb: ValueError quanto-layer-prefix")
        and "25×" in props["title"]
    )
    lines = message.splitlines()
    assert lines[0].startswith("ValueError: Quanto layer 'encoder.block.0")
    assert lines[1].startswith("Cause: The per-row scale tensor")
    assert lines[2].startswith("Fix: Reshape/save _scale")
    assert lines[3].startswith("https://github.com/sgl-project/sglang/blob/")
    warning = commands[1]
    assert warning[0] == "warning" and warning[1]["line"] == "101"
    assert warning[2].startswith("RuntimeError: mat1 and mat2")
    assert commands[-1][0] == "notice" and commands[-1][2].startswith("1 known error(s)")
    # Standard input has no file: an annotation without file= (shown on the job).
    stdin = _commands(run(db, "explain", "--format", "github", input=log.read_text()).stdout)
    assert "file" not in stdin[0][1]


def test_explain_sarif_has_a_rule_per_record_and_a_result_per_match(
    db: Path, tmp_path: Path
) -> None:
    log = tmp_path / "job.log"
    log.write_text(ranks_by_layers() + UNKNOWN)
    sarif = json.loads(run(db, "explain", "--format", "sarif", str(log)).stdout)
    (run_,) = sarif["runs"]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [QUANTO_ID, UNKNOWN_RULE]
    assert rules[0]["helpUri"].startswith("https://github.com/") and "help" in rules[0]
    results = run_["results"]
    assert len(results) == 6 and [r["level"] for r in results] == ["error"] * 5 + ["warning"]
    lines = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results]
    assert lines == [4, 8, 12, 16, 20, 101]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {
        f"file://{log}"
    }
    assert run_["invocations"][0]["executionSuccessful"] is True


def test_an_unreadable_input_is_said_in_every_ci_format(db: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.log")
    github = run(db, "explain", "--format", "github", str(QUANTO_LOG), missing)
    assert github.exit_code == 2
    assert any(
        p.get("file") == missing and p["title"] == "errkb: cannot read"
        for _, p, _ in _commands(github.stdout)
    )
    sarif = json.loads(run(db, "explain", "--format", "sarif", str(QUANTO_LOG), missing).stdout)
    invocation = sarif["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "No such file" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_the_cause_is_the_first_sentence_of_the_documentation() -> None:
    assert cause({"documentation": "One thing.  Then\nanother. More."}) == "One thing."
    assert cause({"documentation": None}) is None


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    """Three jobs' logs: one known error, one unknown, one binary (unreadable), one empty."""
    root = tmp_path / "jobs"
    root.mkdir()
    (root / "a.log").write_text(QUANTO_LOG.read_text())
    (root / "b.log").write_text("noise\n" + UNKNOWN)
    (root / "c.log").write_bytes(b"\x00\x01\x02" * 100)
    (root / "d.log").write_text("")
    return root


def test_the_pr_comment_leads_with_the_verdict_and_folds_the_detail(
    db: Path, jobs: Path, tmp_path: Path
) -> None:
    result = run(db, "triage", "-q", "--format", "markdown", str(jobs))
    assert result.exit_code == 1  # an unknown error and an unreadable log: the finding wins
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "### ❌ errkb triage: 1 unknown error(s) in 1 log(s), 1 known, 1 unreadable, 1 empty "
        "(4 log(s) triaged)"
    )
    text = result.stdout
    assert "<details open><summary><b>Unknown errors (1)</b></summary>" in text
    assert "<details><summary>Known errors (1)</summary>" in text
    assert f"[`{QUANTO_ID}`](https://github.com/" in text and "Reshape/save _scale" in text
    assert "<details><summary>Logs not read (1)</summary>" in text and "binary data" in text
    # Against a baseline holding both: nothing new, but a log unreadable: exit 3, said so.
    base = tmp_path / "base.json"
    base.write_text(run(db, "triage", "-q", "--format", "json", str(jobs)).stdout)
    again = run(db, "triage", "-q", "--format", "markdown", "--baseline", str(base), str(jobs))
    assert again.exit_code == 3
    assert again.stdout.splitlines()[0] == (
        "### ⚠️ errkb triage: No new error, 2 known, 1 unreadable, 1 empty (4 log(s) triaged)"
    )


def test_the_verdict_counts_new_errors_and_their_logs(db: Path, jobs: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    old = json.loads(run(db, "triage", "-q", "--format", "json", str(jobs)).stdout)
    old["unknown"], old["known"] = [], []
    base.write_text(json.dumps(old))
    report = triage([str(jobs)], db=db, jobs=1, baseline=str(base))
    assert verdict(report) == (
        "2 new error(s) in 2 log(s), 0 known, 1 unreadable, 1 empty (4 log(s) triaged)"
    )
    assert report.exit_code == 1


def test_triage_github_opens_with_the_verdict_then_annotates_each_group(
    db: Path, jobs: Path
) -> None:
    result = run(db, "triage", "-q", "--format", "github", str(jobs))
    commands = _commands(result.stdout)
    assert commands[0][0] == "error" and commands[0][2].startswith("1 unknown error(s) in 1 log(s)")
    unknown = commands[1]
    assert unknown[0] == "error" and unknown[1]["file"].endswith("b.log")
    assert unknown[1]["line"] == "2" and unknown[2].startswith("RuntimeError: mat1 and mat2")
    known = commands[2]
    assert known[0] == "notice" and known[1]["file"].endswith("a.log") and known[1]["line"] == "11"
    assert "Fix: Reshape/save _scale" in known[2]
    assert commands[3][0] == "warning" and commands[3][1]["title"] == "errkb: cannot read"


def test_the_comment_of_an_empty_run_is_a_clean_verdict() -> None:
    report = TriageReport("0", None, 0, 0, (), (), ())
    text = render(report, OutputFormat.MARKDOWN, RenderOptions())
    assert text.startswith("### ✅ errkb triage: No unknown error, 0 known (0 log(s) triaged)")
    assert report.exit_code == 0


@pytest.mark.skipif(DRCI is None, reason="shared/reallogs/drci is not beside the repository")
def test_a_real_failing_jobs_log_is_annotated_on_its_line(db: Path) -> None:
    assert DRCI is not None
    log = DRCI / "clean" / "cuda_oom_class.txt"
    expected = next(
        json.loads(line)
        for line in (DRCI / "expected.jsonl").read_text().splitlines()
        if line.startswith('{"file": "cuda_oom_class.txt"')
    )
    result = run(db, "explain", "--format", "github", str(log))
    assert result.exit_code == 1  # nothing known (the seed records are not pytorch's)
    (warning, _summary) = _commands(result.stdout)
    assert warning[1]["line"] == str(expected["python_exceptions"][0]["line"])
    assert warning[2].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    comment = run(db, "triage", "-q", "--format", "markdown", str(log))
    assert comment.stdout.startswith("### ❌ errkb triage: 1 unknown error(s) in 1 log(s), 0 known")
    with errkb.open(db) as kb:
        assert not kb.explain(log.read_bytes()).explained
