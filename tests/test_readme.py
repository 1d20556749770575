"""The README's command examples are run, and their shown output compared (as sqlite-utils does).

Every ``$ errkb ...`` line in a ```sh or ```text block of README.md is run from the repository
root against a fresh knowledge base (seeded from the bundled dataset, no colour), and the lines
after it, up to the next ``$`` line or the end of the block, must match its standard output.

Elision rule, explicit and small: in an expected line, ``…`` stands for any text within that line
(``0132848…/quanto_int8_config.py`` matches the full URL). A line whose text starts with ``…``
(after indentation) stands for any number of whole lines, zero included; what follows the
``…`` on it is a comment for the reader. Nothing else is loose: trailing whitespace aside,
every other line must be equal, and no output may follow the last expected line.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ELLIPSIS = "…"


@dataclass(frozen=True)
class Example:
    line: int  #: README line of the ``$`` command
    argv: tuple[str, ...]
    expected: tuple[str, ...]


def examples(text: str) -> list[Example]:
    found: list[Example] = []
    lines = text.splitlines()
    fence: str | None = None
    current: tuple[int, list[str], list[str]] | None = None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if fence is None:
                fence = line[3:].strip()
                continue
            fence = None
        elif fence in ("sh", "text") and line.startswith("$ errkb "):
            if current is not None:
                found.append(Example(current[0], tuple(current[1]), tuple(current[2])))
            current = (number, shlex.split(line[2:])[1:], [])
            continue
        elif fence in ("sh", "text") and current is not None:
            current[2].append(line)
            continue
        if current is not None:
            found.append(Example(current[0], tuple(current[1]), tuple(current[2])))
            current = None
    return found


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.rstrip().split(ELLIPSIS)))


def matches(expected: list[str] | tuple[str, ...], actual: list[str]) -> bool:
    """Whether ``actual`` lines match ``expected`` under the elision rule (see module doc)."""
    if not expected:
        return not actual
    head, rest = expected[0], list(expected[1:])
    if head.strip().startswith(ELLIPSIS):
        return any(matches(rest, actual[skip:]) for skip in range(len(actual) + 1))
    return (
        bool(actual)
        and _line_pattern(head).fullmatch(actual[0].rstrip()) is not None
        and matches(rest, actual[1:])
    )


EXAMPLES = examples(README.read_text(encoding="utf-8"))


def test_the_readme_has_examples() -> None:
    commands = {e.argv[0] for e in EXAMPLES}
    assert {"explain", "lint", "check"} <= commands


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"line{e.line}" for e in EXAMPLES])
def test_readme_example_output(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "kb.sqlite3"), *example.argv])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    actual = result.stdout.splitlines()
    assert matches(example.expected, actual), (
        f"README.md line {example.line}: `errkb {' '.join(example.argv)}` printed:\n"
        + result.stdout
    )


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a", "b", "c"], False),  # nothing may follow unless elided
        (["a", "…"], ["a", "b", "c"], True),
        (["a", "  … (comment)", "z"], ["a", "z"], True),
        (["a", "  … (comment)", "z"], ["a", "b", "c", "z"], True),
        (["x…z"], ["x and then z"], True),
        (["x…z"], ["x and then y"], False),
        (["a.c"], ["abc"], False),  # only … is a wildcard
    ],
)
def test_the_elision_rule(expected: list[str], actual: list[str], ok: bool) -> None:
    assert matches(expected, actual) is ok


def library_example(text: str) -> str:
    """The ```python block under "## Using the library"."""
    section = text.split("\n## Using the library\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("online", [True, False], ids=["online", "offline"])
def test_the_library_example_runs(tmp_path: Path, online: bool) -> None:
    import os
    import shutil
    import subprocess
    import sys

    from published import build_tree, seed_records

    import errkb
    from tests.conftest import EXAMPLES, LINEAR_ID, QUANTO_ID

    code = library_example(README.read_text("utf-8"))
    # Every errkb name the example uses is the public API's, and typed in __all__.
    used = set(re.findall(r"\berrkb\.(\w+)", code))
    assert used and used <= set(errkb.__all__), used - set(errkb.__all__)
    shutil.copy(EXAMPLES / "quanto-incompatible-scale.log", tmp_path / "trace.txt")
    shutil.copy(
        EXAMPLES / "checkpoints" / "quanto-text-encoder.safetensors",
        tmp_path / "model.safetensors",
    )
    # A datasetVersion newer than the bundled one, yet not in the future (which sync refuses).
    newer = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat(timespec="milliseconds")
    site = build_tree(tmp_path / "site", seed_records(), newer.replace("+00:00", "Z"))
    (tmp_path / "example.py").write_text(code, "utf-8")
    env = {
        **os.environ,
        "ERRKB_DB": str(tmp_path / "kb.sqlite3"),
        # Offline: nothing listens on port 9 of this machine; the example must go on.
        "ERRKB_SOURCE": str(site) if online else "https://127.0.0.1:9/errkb",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{QUANTO_ID} {{") and "'prefix':" in lines[0]
    assert f"'id': '{LINEAR_ID}'" in lines[1] and "'confidence': 'exact'" in lines[1]
    assert lines[2].startswith(f"{QUANTO_ID} 0.9 Quanto layer")  # the best search result
    if online:
        # The source publishes a newer datasetVersion of the same records: synced, unchanged.
        assert lines[-2].startswith("added 0, updated 0, unchanged 3, retired 0, rejected 0 in ")
    else:
        assert lines[-2].startswith("no update check: ") and "127.0.0.1" in lines[-2]
    assert lines[-1] == "1"  # the checkpoint has the quanto finding


def command_lines(text: str) -> list[tuple[int, tuple[str, ...]]]:
    """Every ``errkb ...`` command in a ```sh block that shows no output (no ``$`` prompt).

    These need what a test cannot have (ErrLookup's site, a mirror, a cron table), so they are
    not run; each must still parse against the command line as it is: a known command and
    known options with valid values, so a renamed option cannot linger in the README.
    """
    found: list[tuple[int, tuple[str, ...]]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence != "sh" or line.startswith("$ "):
            continue
        code = line.split(" # ", 1)[0]
        for part in re.split(r";|&&", code):
            words = shlex.split(part)
            if "errkb" in words:
                found.append((number, tuple(words[words.index("errkb") + 1 :])))
    return found


COMMAND_LINES = command_lines(README.read_text(encoding="utf-8"))


def test_the_readme_has_command_lines() -> None:
    commands = {argv[0] for _, argv in COMMAND_LINES}
    assert {"sync", "versions", "history", "rollback", "explain"} <= commands


@pytest.mark.parametrize(
    ("line", "argv"), COMMAND_LINES, ids=[f"line{n}" for n, _ in COMMAND_LINES]
)
def test_readme_command_line_parses(line: int, argv: tuple[str, ...]) -> None:
    import click

    with click.Context(cli, info_name="errkb") as ctx:
        command = cli.get_command(ctx, argv[0])
        assert command is not None, f"README.md line {line}: no command {argv[0]!r}"
        try:
            command.make_context(argv[0], list(argv[1:]), parent=ctx).close()
        except click.UsageError as exc:
            pytest.fail(f"README.md line {line}: `errkb {' '.join(argv)}`: {exc.format_message()}")


def test_the_readme_test_command_installs_what_ci_installs() -> None:
    def extras(text: str) -> set[str]:
        (found,) = re.findall(r"pip install (?:--quiet )?-e '\.\[([a-z,]+)\]'", text)
        return set(found.split(","))

    ci = extras((ROOT / ".ci" / "run").read_text())
    assert extras(README.read_text("utf-8")) == ci
    assert "dask" in ci  # mypy checks errkb/triage/dask.py against dask's own types
