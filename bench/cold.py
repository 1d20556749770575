"""``python -m bench.cold``: cold ``errkb explain <example>`` against ``import click``.

The cold-start figure alone, in seconds rather than the whole benchmark's minutes: the working
tree (and each ``--rev``, exported as ``bench.run`` exports one) explains
``data/examples/quanto-incompatible-scale.log`` against its own bundled knowledge base, built
beforehand, in a fresh process; the baseline is ``python -c 'import click'`` in the same run.
Everything is byte-compiled first (``PYTHONDONTWRITEBYTECODE`` is dropped), so the figure
measures imports, not compiles.

Two figures per command, each a median with its ratio to the baseline: wall time (hyperfine when
installed, as ``bench.run`` measures it, else the same runs' own clock) and CPU time (user +
system of the child, from ``wait4``), which a busy shared machine disturbs far less than wall
time. Runs are interleaved so that a change in the machine's load hits every command alike.
Targets (issue 11): the working tree within 2.5x ``import click``, and no slower than any
``--rev`` given. ``--db`` explains against that knowledge base instead (every target the same
one; explaining a paste reads it only, but copy one you care about): issue 46's figure is the
500,000-record one.

    python -m bench.cold                       # the working tree
    python -m bench.cold --rev 39cae5a --runs 20
    python -m bench.cold --rev 60ab691 --runs 30 --db /tmp/kb500.sqlite3
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from bench.run import PYTHON, REPO_ROOT, Target, child_env, export_rev, hyperfine

EXAMPLE = "data/examples/quanto-incompatible-scale.log"
CLICK = "import click"
LIMIT = 2.5  #: issue 11: cold explain with the bundled knowledge base <= 2.5x import click


def _env(target: Target) -> dict[str, str]:
    env = child_env()
    env.pop("PYTHONPATH", None)
    if target.pythonpath:
        env["PYTHONPATH"] = target.pythonpath
    return env


def _explain(target: Target, db: Path) -> str:
    example = Path(target.cwd or REPO_ROOT) / EXAMPLE
    return shlex.join([PYTHON, "-m", "errkb", "--db", str(db), "explain", str(example)])


#: A measured command: its shell line, environment and working directory. The directory
#: matters: ``python -m`` puts it first on sys.path, ahead of PYTHONPATH, so a revision runs
#: from its own export (as ``bench.run`` runs it), never from this checkout.
Command = tuple[str, dict[str, str], str]


def _shell_line(command: Command) -> str:
    """The command as one self-contained shell line (for hyperfine, which takes no cwd/env)."""
    line, env, cwd = command
    path = env.get("PYTHONPATH")
    return f"cd {shlex.quote(cwd)} && " + (
        f"env PYTHONPATH={shlex.quote(path)} {line}" if path else line
    )


def cpu_times(commands: dict[str, Command], runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median CPU seconds (user + system) and wall seconds of each command, runs interleaved.

    The wall medians stand in for hyperfine's where it is not installed (they include the
    shell's start-up, as hyperfine's do before its correction)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, env, cwd) in commands.items():
            started = time.perf_counter()
            proc = subprocess.Popen(  # noqa: S602 - our own fixed command line
                command, shell=True, env=env, stdout=subprocess.DEVNULL, cwd=cwd
            )
            _, status, usage = os.wait4(proc.pid, 0)
            walls[name].append(time.perf_counter() - started)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"{name}: {command} failed")
            times[name].append(usage.ru_utime + usage.ru_stime)
    median = statistics.median
    return {n: median(v) for n, v in times.items()}, {n: median(v) for n, v in walls.items()}


def measure(
    revs: list[str], runs: int, work: Path, db: Path | None = None
) -> dict[str, dict[str, float]]:
    """Wall and CPU medians (seconds) of import click, the working tree and each revision.

    Each target explains against its own bundled knowledge base, or every one against ``db``.
    """
    targets = {"working tree": Target()}
    for rev in revs:
        targets[f"commit {rev}"] = export_rev(rev, work / f"rev-{rev}")
    dirs = [sysconfig.get_paths()["purelib"], *(str(t.errkb_dir) for t in targets.values())]
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", "-j0", *dirs],
        env=child_env(),
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    commands: dict[str, Command] = {
        CLICK: (shlex.join([PYTHON, "-c", "import click"]), _env(Target()), str(REPO_ROOT))
    }
    for label, target in targets.items():
        kb = db or work / f"{label.replace(' ', '-')}.sqlite3"
        env = _env(target)
        # The bundled records are ingested by this first run, not by a measured one (with
        # ``db``: its first open under this target's code, whatever that does once, is here).
        subprocess.run(
            [PYTHON, "-m", "errkb", "--db", str(kb), "stats"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=target.cwd,
        )
        commands[label] = (_explain(target, kb), env, target.cwd or str(REPO_ROOT))
    wall: dict[str, float] = {}
    if shutil.which("hyperfine"):
        # hyperfine runs every command with one environment and directory: name both per line.
        lines = {name: _shell_line(command) for name, command in commands.items()}
        wall = hyperfine(lines, runs=runs, warmup=2, out=work)
    cpu, own_wall = cpu_times(commands, runs)
    wall = wall or own_wall  # hyperfine absent: our own wall clock of the same runs
    return {name: {"wall": wall[name], "cpu": cpu[name]} for name in commands}


def table(results: dict[str, dict[str, float]]) -> str:
    """A Markdown table: each command's medians and ratios to import click."""
    base = results[CLICK]
    rows = [
        "| command | wall median | x import click | CPU median | x import click |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        label = CLICK if name == CLICK else f"errkb explain <example>, {name}"
        rows.append(
            f"| {label} | {r['wall'] * 1e3:.0f} ms | {r['wall'] / base['wall']:.2f}x "
            f"| {r['cpu'] * 1e3:.0f} ms | {r['cpu'] / base['cpu']:.2f}x |"
        )
    return "\n".join(rows)


def verdicts(results: dict[str, dict[str, float]]) -> list[str]:
    """One line per target: the working tree against import click, and against each revision."""
    tree, click = results["working tree"], results[CLICK]
    lines = [
        f"{'PASS' if tree['cpu'] / click['cpu'] <= LIMIT else 'MISS'}: working tree "
        f"{tree['cpu'] / click['cpu']:.2f}x import click (CPU; target <= {LIMIT}x)"
    ]
    for name, r in results.items():
        if name.startswith("commit "):
            ratio = tree["cpu"] / r["cpu"]
            lines.append(
                f"{'PASS' if ratio <= 1.0 else 'MISS'}: working tree {ratio:.2f}x {name} (CPU)"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold", description=__doc__)
    parser.add_argument("--rev", action="append", default=[], help="also measure this commit")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--db", type=Path, help="explain against this knowledge base, every target")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="errkb-cold-"))
    try:
        results = measure(args.rev, args.runs, work, args.db)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    for line in verdicts(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
