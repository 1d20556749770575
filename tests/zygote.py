"""Run ``python -m errkb ...`` (or a script) as a fresh child process without paying its imports.

Most of the fault and hostile-input suites must run errkb as a real process: a memory limit, a
timeout, exit codes, what reaches the file descriptors. A new interpreter pays about 0.6 s of CPU
importing the command line, SQLAlchemy, Alembic and jsonschema before it reads anything, and those
suites start about a hundred of them (measured: 115 s of the default tier's 277 s of CPU went to
child processes). So each test process keeps one *zygote*: an interpreter that has imported errkb
and nothing else has run in, and forks one child per case. The child is a real process with its
own PID, file descriptors, environment, working directory and ``RLIMIT_AS``; it runs errkb's
``__main__`` exactly as ``python -m errkb`` does, and its exit status (or the signal that killed
it) is what the test sees. What it does not re-run is the imports: a test of import-time
behaviour (Ctrl-C while importing, cold start) must start a real interpreter instead.

The zygote forks only from its own single thread (never from the test process, which may hold
threads and locks), and exits when the test process closes its socket or dies.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_SERVER = r"""
import json, os, resource, runpy, select, signal, socket, sys, traceback

# Every errkb module (what a command may import) and what a first open imports: importing runs
# no errkb code beyond module bodies, so the child starts as a fresh interpreter would, warm.
import importlib, pkgutil
import errkb
for _info in pkgutil.walk_packages(errkb.__path__, "errkb."):
    if _info.name == "errkb.__main__" or _info.name.startswith(("errkb.serve", "errkb.triage.d")):
        continue  # __main__ runs the CLI; the servers and Dask: their tests start real processes
    importlib.import_module(_info.name)
import alembic.command, alembic.config, alembic.script, alembic.runtime.migration  # noqa: E401
import sqlalchemy.dialects.sqlite, sqlalchemy.orm  # noqa: E401
import jsonschema, jsonschema_specifications, rfc3339_validator, rfc3986_validator  # noqa: E401

sock = socket.socket(fileno=int(sys.argv[1]))


def child(request, fds):
    given = dict(zip(request["fds"], fds))
    stdin_fd = given.get("stdin") or os.open(request["stdin"] or os.devnull, os.O_RDONLY)
    out = given.get("stdout") or os.open(request["stdout"], os.O_WRONLY | os.O_TRUNC)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_TRUNC)
    os.dup2(stdin_fd, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in {stdin_fd, out, err, sock.fileno(), *fds} - {0, 1, 2}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    if request["cwd"]:
        os.chdir(request["cwd"])
    limit = request["memory"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 0
    try:
        if request["mode"] == "-m":
            sys.argv = [request["target"], *request["args"]]
            runpy.run_module(request["target"], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *request["args"]]
            exec(compile(request["target"], "<hostile>", "exec"), {"__name__": "__main__"})
    except SystemExit as done:
        if done.code is None:
            code = 0
        elif isinstance(done.code, int):
            code = done.code
        else:
            print(done.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 120
    os._exit(code & 0xFF)


while True:
    try:
        message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 2)
    except OSError:
        break
    if not message:
        break
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            child(request, fds)
        finally:
            os._exit(121)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([pidfd], [], [], request["timeout"])
    timed_out = not ready
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    os.close(pidfd)
    sock.send(json.dumps({
        "timeout": timed_out,
        "returncode": os.waitstatus_to_exitcode(status),
        "cpu": usage.ru_utime + usage.ru_stime,
    }).encode())
"""


@dataclass(frozen=True)
class Done:
    """What a child did: its exit code (negative: the signal that ended it) and its output."""

    returncode: int
    stdout: bytes
    stderr: bytes


class _Zygote:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()
        self.sock = ours
        self.pid = os.getpid()

    def run(
        self,
        mode: str,
        target: str,
        args: Sequence[str],
        *,
        memory: int,
        timeout: float,
        stdin: bytes | int | None,
        stdout: int | None,
        env: Mapping[str, str],
        cwd: str | None,
    ) -> Done:
        with tempfile.TemporaryDirectory(prefix="errkb-zygote-") as scratch:
            out, err, given = (os.path.join(scratch, n) for n in ("out", "err", "in"))
            for name in (out, err):
                open(name, "wb").close()
            fds: dict[str, int] = {}
            stdin_path: str | None = None
            if isinstance(stdin, bytes):
                with open(given, "wb") as f:
                    f.write(stdin)
                stdin_path = given
            elif isinstance(stdin, int) and stdin >= 0:
                fds["stdin"] = stdin
            if stdout is not None:
                fds["stdout"] = stdout
            request = {
                "mode": mode,
                "target": target,
                "args": list(args),
                "memory": memory,
                "timeout": timeout,
                "stdin": stdin_path,
                "fds": list(fds),
                "stdout": out,
                "stderr": err,
                "env": dict(env),
                "cwd": cwd,
            }
            socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds.values()))
            reply = json.loads(self.sock.recv(1 << 16))
            CHILD_CPU[0] += float(reply["cpu"])
            with open(out, "rb") as f:
                stdout = f.read()
            with open(err, "rb") as f:
                stderr = f.read()
        if reply["timeout"]:
            raise subprocess.TimeoutExpired([target, *args], timeout, stdout, stderr)
        return Done(int(reply["returncode"]), stdout, stderr)

    def close(self) -> None:
        self.sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_zygote: _Zygote | None = None

#: CPU seconds (user + system) of every child this process's zygote ran, for measuring the
#: suite: the zygote reaps them, so they never reach this process's RUSAGE_CHILDREN.
CHILD_CPU = [0.0]


def _shared() -> _Zygote:
    global _zygote
    if _zygote is None or _zygote.pid != os.getpid() or _zygote.process.poll() is not None:
        _zygote = _Zygote()
        atexit.register(_zygote.close)
    return _zygote


def run(
    args: Sequence[str],
    *,
    memory: int = 1 << 40,
    timeout: float = 120,
    stdin: bytes | int | None = None,
    stdout: int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    code: str | None = None,
) -> Done:
    """Run ``python -m errkb ARGS`` (or ``python -c CODE ARGS``) in a forked, pre-imported child.

    ``stdin``: bytes to read, or a file descriptor (default: ``/dev/null``); ``stdout``: a file
    descriptor to write to (default: captured). ``env`` is the child's whole environment
    (default: this process's); ``memory`` its ``RLIMIT_AS``; past ``timeout`` seconds it is
    killed and ``TimeoutExpired`` raised.
    """
    mode, target = ("-c", code) if code is not None else ("-m", "errkb")
    return _shared().run(
        mode,
        target,
        args,
        memory=memory,
        timeout=timeout,
        stdin=stdin,
        stdout=stdout,
        env=dict(os.environ if env is None else env),
        cwd=cwd,
    )
