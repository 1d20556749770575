"""Run a hostile case in a child process under a memory limit and a timeout.

A hostile input's failure mode is often "use all the memory" or "never return", which would take
the test run down with it. So each case runs in a child process whose address space is capped
with ``RLIMIT_AS``, under a wall-clock timeout; the test then asserts the exit code and the
message. The child is forked from a pre-imported interpreter (``tests/zygote.py``): the cap
bounds what reading the input costs, not the imports, which every case would pay alike. A
``MemoryError`` or a kill by the limit shows up as a wrong exit code and a traceback on stderr,
never as a hung or swapping test machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tests import zygote

#: Address space of a child: the pre-imported interpreter maps about 75 MB before reading
#: anything, so most of the gigabyte is what the hostile input may take.
DEFAULT_MEMORY = 1 << 30


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


def _outcome(done: zygote.Done) -> Outcome:
    return Outcome(
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", **(extra or {})}


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
    return _outcome(
        zygote.run(args, memory=memory, timeout=timeout, stdin=stdin, env=_env(env), cwd=cwd)
    )


def run_python(
    code: str,
    *args: str,
    memory: int = DEFAULT_MEMORY,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Run Python ``code`` (``sys.argv[1:]`` = ``args``) bounded like ``run_errkb``."""
    return _outcome(zygote.run(args, code=code, memory=memory, timeout=timeout, env=_env(env)))
