"""The CLI under faults and hostile input, through the real entry point (issue 15).

Anything that is not a result exits 2 with one ``errkb: error: ...`` line; Ctrl-C exits 130
and a closed pipe 0, both quietly; colour follows ``TERM`` and ``NO_COLOR``; record text never
reaches a terminal with its control characters, while JSON stays exact and strictly valid.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from tests import zygote
from tests.cli import run as invoke
from tests.conftest import DATASET, EXAMPLES, QUANTO_ID, load_seed_envelopes, make_record

QUANTO_LOG = EXAMPLES / "quanto-incompatible-scale.log"
HINT = "(rerun with --debug or ERRKB_DEBUG=1 for the traceback)"


def env_for(db: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "ERRKB_DEBUG")}
    return {**env, "ERRKB_DB": str(db), **extra}


def errkb(db: Path, *args: str, stdout: IO[bytes] | None = None) -> zygote.Done:
    """``python -m errkb ARGS`` as a child process (forked warm: see tests/zygote.py)."""
    return zygote.run(args, env=env_for(db), stdout=None if stdout is None else stdout.fileno())


@pytest.fixture
def db(seeded_db: Path) -> Path:
    assert errkb(seeded_db, "stats").returncode == 0  # a usable knowledge base before the test
    return seeded_db


# --- unexpected errors ----------------------------------------------------------------------
def _boom(*_args: object, **_kw: object) -> None:
    raise RuntimeError("boom\nsecond line")


@pytest.mark.parametrize("debug", ["", "--debug", "ERRKB_DEBUG=1"])
def test_unexpected_crash_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: str
) -> None:
    monkeypatch.setattr("errkb.kb.KnowledgeBase.stats", _boom)
    if debug.startswith("ERRKB_DEBUG"):
        monkeypatch.setenv("ERRKB_DEBUG", "1")
    args = ["--db", str(tmp_path / "kb.sqlite3"), *([debug] if debug == "--debug" else [])]
    result = CliRunner().invoke(cli, [*args, "stats"])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2
    last = result.stderr.splitlines()[-1]
    assert last == f"errkb: error: unexpected RuntimeError: boom {HINT}"
    assert ("Traceback (most recent call last)" in result.stderr) is bool(debug)
    assert result.stdout == ""


def test_library_error_is_one_line_and_exit_2(db: Path) -> None:
    proc = errkb(db, "show", "no-such-record")
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr == b"errkb: error: no record with id or slug 'no-such-record'\n"


def test_usage_error_stays_click_s_exit_2(db: Path) -> None:
    proc = errkb(db, "stats", "--format", "sarif")  # stats has no SARIF renderer
    assert proc.returncode == 2 and b"Invalid value for '--format'" in proc.stderr


# --- signals and pipes ----------------------------------------------------------------------
def _blocked_reading_stdin(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    # x86-64 read(2) is syscall 0, aarch64's 63; the first argument is the fd (0 = stdin).
    return len(fields) > 1 and fields[0] in ("0", "63") and fields[1] == "0x0"


def _as_in_a_terminal() -> None:
    """A child's SIGINT as a foreground command's: a suite started in the background (``pytest
    &``) hands its children an ignored SIGINT, which they rightly keep ignoring."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_exits_130_quietly(db: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "errkb", "explain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(db),
        preexec_fn=_as_in_a_terminal,
    ) as proc:
        # Ready when it blocks reading standard input (after its imports), however loaded the
        # machine: the marker is the process's own state, never a sleep.
        deadline = time.monotonic() + 120
        while not _blocked_reading_stdin(proc.pid):
            assert time.monotonic() < deadline, "errkb explain never started reading stdin"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr == b"" and stdout == b""


def test_broken_pipe_exits_0_quietly(db: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "errkb", "export"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(db),
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first write: `export | head -0`
        stderr = proc.stderr.read()
        assert proc.wait(timeout=60) == 0
    assert stderr == b""


@pytest.mark.parametrize("command", [["export"], ["explain", str(QUANTO_LOG)]])
def test_full_disk_on_stdout_exits_2(db: Path, command: list[str]) -> None:
    if not Path("/dev/full").is_char_device():
        pytest.fail("/dev/full is missing: this machine cannot test a full disk")
    with open("/dev/full", "wb") as full:
        proc = errkb(db, *command, stdout=full)
    assert proc.returncode == 2
    assert (
        proc.stderr == b"errkb: error: cannot write to standard output: No space left on device\n"
    )


def test_closed_stdin_is_a_clear_error(db: Path) -> None:
    proc = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" -m errkb explain <&-'],
        capture_output=True,
        env=env_for(db),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr == b"errkb: error: standard input is closed\n"


def test_closed_stdout_is_a_clear_error(db: Path) -> None:
    proc = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" -m errkb stats >&-'],
        stderr=subprocess.PIPE,
        env=env_for(db),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr == b"errkb: error: standard output is closed\n"


# --- colour ---------------------------------------------------------------------------------
def _on_a_terminal(db: Path, env: dict[str, str]) -> bytes:
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "errkb", "explain", str(QUANTO_LOG)],
            stdout=slave,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
        return b"".join(chunks)
    finally:
        os.close(master)


@pytest.mark.parametrize(
    ("extra", "coloured"),
    [
        ({"TERM": "xterm"}, True),
        ({"TERM": "dumb"}, False),
        ({"TERM": "xterm", "NO_COLOR": "1"}, False),
        ({"TERM": "xterm", "NO_COLOR": ""}, True),  # only a non-empty NO_COLOR counts
    ],
)
def test_colour_follows_term_and_no_color(db: Path, extra: dict[str, str], coloured: bool) -> None:
    output = _on_a_terminal(db, env_for(db, **extra))
    assert b"quanto-layer-prefix-r-has-incompatible-scale-sc" in output
    assert (b"\x1b[" in output) is coloured


# --- hostile record text --------------------------------------------------------------------
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # "write this to the clipboard"
CLEAR = "\x1b[2J\x1b[H"
C1 = "\x9b31m"  # a C1 CSI, the 8-bit ESC [


def _hostile_record() -> dict[str, Any]:
    base = next(e["record"] for e in load_seed_envelopes() if e["record"]["id"] == QUANTO_ID)
    rec = make_record(base, f"Hostile layer failed {OSC52}badly", file_path="evil.py")
    rec["documentation"] = f"Docs {CLEAR}here{C1} and\u202eevil"
    rec["solutions"] = [f"Fix it {OSC52}"]
    rec["extraScore"] = float("nan")  # an unknown field: kept verbatim by ingest
    rec["extraLimit"] = float("inf")
    return rec


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    db = tmp_path / "hostile.sqlite3"
    rec = _hostile_record()
    source = tmp_path / "hostile.jsonl"
    # json.dumps writes NaN/Infinity literals, which Python's reader (and so ingest) accepts.
    source.write_text(json.dumps({"record": rec, "datasetVersion": "2026-09-01T00:00:00.000Z"}))
    result = invoke(db, "ingest", str(DATASET), str(source))
    assert result.exit_code == 0, result.stderr
    return db, rec


@pytest.mark.parametrize(
    "args",
    [
        ["show", "{id}"],
        ["show", "{id}", "--format", "markdown"],
        ["match", "Hostile layer failed {osc}badly"],
        ["match", "Hostile layer failed {osc}badly", "--format", "markdown"],
        ["match", "Hostile layer failed {osc}worse"],  # unmatched: the similar suggestions
    ],
)
def test_control_characters_never_reach_the_terminal(
    hostile: tuple[Path, dict[str, Any]], args: list[str]
) -> None:
    db, rec = hostile
    result = invoke(db, *(a.format(id=rec["id"], osc=OSC52) for a in args))
    assert result.exit_code in (0, 1), result.stderr
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in result.stdout
    assert "\\x1b]52;c;" in result.stdout  # escaped, visible


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_stays_exact_and_strict(hostile: tuple[Path, dict[str, Any]]) -> None:
    db, rec = hostile
    shown = _strict(invoke(db, "show", rec["id"], "--format", "json").stdout)
    assert shown["errorMessage"] == rec["errorMessage"]  # control characters kept exactly
    assert shown["documentation"] == rec["documentation"]
    assert shown["extraScore"] is None and shown["extraLimit"] is None
    matched = invoke(db, "match", f"Hostile layer failed {OSC52}badly", "--format", "json")
    data = _strict(matched.stdout)
    assert data["matches"][0]["record"]["extraScore"] is None


def test_export_writes_strict_json_lines(hostile: tuple[Path, dict[str, Any]]) -> None:
    db, rec = hostile
    result = invoke(db, "export")
    assert result.exit_code == 0
    lines = [_strict(line) for line in result.stdout.splitlines()]
    (exported,) = [env["record"] for env in lines if env["record"]["id"] == rec["id"]]
    assert exported["extraScore"] is None and exported["documentation"] == rec["documentation"]


#: Stops inside the import of click (a readiness marker on stdout, then a blocking read).
_STOPS_IN_IMPORT = r"""
import os, sys
class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            sys.meta_path.remove(self)
            os.write(1, b"ready\n")
            os.read(0, 1)
        return None
sys.meta_path.insert(0, Hook())
sys.argv = ["errkb", "--version"]
from errkb._entry import main
main()
"""


def _interrupted_when_ready(
    argv: list[str], *, env: dict[str, str] | None = None, ignored: bool = False
) -> tuple[int, bytes, bytes]:
    """Start ``python ARGV``, send SIGINT once it prints ``ready``, then let it go on (one byte
    on its stdin); its exit code, stdout and stderr. ``ignored``: started with SIGINT ignored,
    as a shell's background job is; else as a foreground command is."""
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=(
            (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else _as_in_a_terminal
        ),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(b"go", timeout=60)
    finally:
        proc.kill()
    return proc.returncode, out, err


def test_ctrl_c_while_the_command_line_imports_exits_130_quietly() -> None:
    # The child stops inside the import of click (a readiness marker on stdout, then a blocking
    # read), the parent sends SIGINT then: the interrupt lands mid-import, every time.
    code, _out, err = _interrupted_when_ready(["-c", _STOPS_IN_IMPORT])
    assert code == 130, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err


def test_an_ignored_sigint_stays_ignored_while_importing() -> None:
    # Started as a shell's background job (SIGINT ignored): Ctrl-C in the terminal is not for
    # it, during its imports as after them; it goes on and prints its version.
    code, out, err = _interrupted_when_ready(["-c", _STOPS_IN_IMPORT], ignored=True)
    assert code == 0, err
    assert b"errkb" in out


def test_ctrl_c_just_after_a_sync_commits_exits_130_saying_what_was_applied(
    tmp_path: Path,
) -> None:
    # The child stops right after the commit (its progress callback at APPLY done writes a
    # readiness marker, then blocks reading stdin); the parent sends SIGINT then, every time.
    from tests.published import build_tree
    from tests.published import make_record as published_record

    version = "2026-09-01T00:00:00.000Z"
    tree = build_tree(
        tmp_path / "tree", [published_record(n, "org/repo") for n in range(3)], version
    )
    child = r"""
import os, sys, contextlib
import errkb.cli.sync as cli_sync
from errkb.sync import Stage

def stop(progress):
    if progress.stage is Stage.APPLY and progress.done == progress.total:
        os.write(1, b"ready\n")
        os.read(0, 1)

cli_sync._progress = lambda enabled: contextlib.nullcontext(stop)
from errkb.cli import main
main(["sync", "--quiet", sys.argv[1]])
"""
    code, _out, err = _interrupted_when_ready(
        ["-c", child, str(tree)], env=env_for(tmp_path / "kb.sqlite3")
    )
    assert code == 130, err
    text = err.decode()
    assert f"interrupted after the sync was applied: datasetVersion {version} is in place" in text
    assert "added 3," in text and "Traceback" not in text
    assert errkb(tmp_path / "kb.sqlite3", "versions").stdout.count(version.encode()) == 1
