"""Run a hostile case in a child process under a memory limit and a timeout.

A hostile input's failure mode is often "use all the memory" or "never return", which would take
the test run down with it. So each case runs in a fresh interpreter whose address space is
capped with ``RLIMIT_AS`` before errkb is imported, under a wall-clock timeout; the test then
asserts the exit code and the message. A ``MemoryError`` or a kill by the limit shows up as a
wrong exit code and a traceback on stderr, never as a hung or swapping test machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Address space of a child: errkb with SQLAlchemy, RE2 and the Aho-Corasick automaton
#: imported maps about 400 MB of virtual memory before reading anything.
DEFAULT_MEMORY = 1 << 30

_LAUNCH = """
import resource, runpy, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
mode, target = sys.argv[2], sys.argv[3]
sys.argv = [target, *sys.argv[4:]]
if mode == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<hostile>", "exec"), {"__name__": "__main__"})
"""


@dataclass(frozen=True)
class Outcome:
    """What a bounded child did."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def crashed(self) -> bool:
        """True when the child died of an unhandled exception (a traceback on stderr)."""
        return "Traceback (most recent call last)" in self.stderr


def _run(
    argv: Sequence[str],
    *,
    memory: int,
    timeout: float,
    stdin: bytes | int | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
) -> Outcome:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    command = [sys.executable, "-c", _LAUNCH, str(memory), *argv]
    if isinstance(stdin, bytes):
        done = subprocess.run(
            command, input=stdin, capture_output=True, timeout=timeout, env=full_env, cwd=cwd
        )
    else:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            capture_output=True,
            timeout=timeout,
            env=full_env,
            cwd=cwd,
        )
    return Outcome(
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def run_errkb(
    args: Sequence[str],
    *,
    memory: int = DEFAULT_MEMORY,
    timeout: float = 60,
    stdin: bytes | int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Outcome:
    """Run ``python -m errkb ARGS`` bounded by ``memory`` bytes and ``timeout`` seconds."""
    return _run(
        ["-m", "errkb", *args], memory=memory, timeout=timeout, stdin=stdin, env=env, cwd=cwd
    )


def run_python(
    code: str,
    *args: str,
    memory: int = DEFAULT_MEMORY,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Run Python ``code`` (``sys.argv[1:]`` = ``args``) bounded like ``run_errkb``."""
    return _run(["-c", code, *args], memory=memory, timeout=timeout, stdin=None, env=env, cwd=None)
