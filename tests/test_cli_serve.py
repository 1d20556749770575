"""``errkb mcp`` and ``errkb serve`` without the errkb[mcp] extra: how to install it, exit 2."""

from __future__ import annotations

import http.client
import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import errkb
from errkb.cli import cli
from tests.conftest import require_extra


@pytest.mark.parametrize("command", [["mcp"], ["mcp", "--http", "127.0.0.1:8765"], ["serve"]])
@pytest.mark.parametrize("missing", ["mcp", "uvicorn"])
def test_without_the_extra_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], missing: str
) -> None:
    db = tmp_path / "kb.sqlite3"
    errkb.open(db).close()
    for name in [m for m in sys.modules if m == missing or m.startswith(missing + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    result = CliRunner().invoke(cli, ["--db", str(db), *command])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "pip install 'errkb[mcp]'" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("value", ["nohostport", "127.0.0.1:", ":8000", "h:99999", "h:x"])
def test_mcp_http_address_is_checked(tmp_path: Path, value: str) -> None:
    db = tmp_path / "kb.sqlite3"
    errkb.open(db).close()
    result = CliRunner().invoke(cli, ["--db", str(db), "mcp", "--http", value])
    assert result.exit_code == 2 and "HOST:PORT" in result.stderr


# ---------------------------------------------------------------- the server as a service
# These run `errkb serve` as a real process. Each waits for the readiness marker, the
# "listening on" line on stderr, never for a clock.


class Served:
    """``errkb serve`` (or ``mcp --http``) as a process, ready once it printed its URL."""

    def __init__(self, db: Path, *args: str) -> None:
        import subprocess

        from tests.conftest import ROOT

        env = {**os.environ, "ERRKB_DB": str(db), "PYTHONPATH": str(ROOT)}
        env.pop("ERRKB_SERVE_TOKEN", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "errkb", *args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stderr is not None
        self.lines: list[str] = []
        while True:
            line = self.proc.stderr.readline().decode()
            if not line:
                raise AssertionError(f"errkb never became ready: {''.join(self.lines)}")
            self.lines.append(line)
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip()
                break

    def stop(self, sig: int) -> tuple[int, str]:
        self.proc.send_signal(sig)
        assert self.proc.stderr is not None
        rest = self.proc.stderr.read().decode()
        self.proc.stderr.close()
        return self.proc.wait(timeout=60), "".join(self.lines) + rest


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return "?"


def _port() -> int:
    from tests.conftest import free_port

    return free_port()


@pytest.fixture
def served_db(tmp_path: Path) -> Path:
    db = tmp_path / "kb.sqlite3"
    errkb.open(db).close()
    return db


@pytest.mark.parametrize(
    "sig",
    [
        signal.SIGTERM,  # the default tier's case; each is a server process of a few seconds
        pytest.param(signal.SIGHUP, marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, marks=pytest.mark.slow),
    ],
)
def test_a_signal_stops_serve_gracefully_and_finishes_the_request_in_flight(
    served_db: Path, sig: int
) -> None:
    """SIGTERM/SIGHUP/SIGINT: exit 0 (not death by the signal), the in-flight answer whole."""
    require_extra("mcp")
    from tests.conftest import EXAMPLES

    served = Served(served_db, "serve", "--port", str(_port()), "--workers", "1")
    text = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes() * 400  # ~0.5 MiB
    conn = http.client.HTTPConnection(served.url.removeprefix("http://"), timeout=60)
    conn.request("POST", "/v1/explain", body=text, headers={"Content-Type": "text/plain"})
    # Signal once the request is in the server's hands: a worker is running (state R) on it.
    while not any(_state(pid) == "R" for pid in _children(served.proc.pid)):
        assert served.proc.poll() is None
        time.sleep(0.005)  # polling the worker's state, an observable condition
    code, log = served.stop(sig)
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    assert response.status == 200 and body["matches"], body
    assert code == 0, log
    assert "Traceback" not in log
    assert '"POST /v1/explain HTTP/1.1" 200' in log  # the access log


@pytest.mark.slow
def test_listening_line_access_log_quiet_and_busy_port(served_db: Path) -> None:
    port = _port()
    served = Served(served_db, "serve", "--port", str(port), "--quiet")
    assert served.url == f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(served.url + "/healthz", timeout=30) as resp:
        assert resp.status == 200
    busy = CliRunner().invoke(cli, ["--db", str(served_db), "serve", "--port", str(port)])
    assert busy.exit_code == 2
    assert busy.stderr.strip().splitlines() == [
        f"errkb: error: port {port} on 127.0.0.1 is already in use"
    ]
    code, log = served.stop(signal.SIGTERM)
    assert code == 0 and "GET /healthz" not in log  # --quiet: no access log


@pytest.mark.slow
def test_binding_beyond_loopback_without_a_token_warns(served_db: Path) -> None:
    served = Served(served_db, "serve", "--host", "0.0.0.0", "--port", str(_port()))  # noqa: S104
    code, log = served.stop(signal.SIGTERM)
    assert "WARNING: 0.0.0.0 is reachable from other machines and no token is set" in log
    assert code == 0
    with_token = Served(
        served_db,
        "serve",
        "--host",
        "0.0.0.0",  # noqa: S104
        "--port",
        str(_port()),
        "--token",
        "t",
    )
    assert "WARNING" not in "".join(with_token.lines)
    assert with_token.stop(signal.SIGTERM)[0] == 0


def test_a_connection_that_sends_no_request_is_closed() -> None:
    """The header-read deadline: a silent connection does not stay open (issue 27, item 9)."""
    require_extra("uvicorn")
    import socket
    import threading

    from starlette.applications import Starlette

    from errkb.serve.guard import Policy
    from errkb.serve.runner import ServeOptions, serve

    port = _port()
    options = ServeOptions(port=port, quiet=True, header_seconds=0.2, graceful_seconds=1)
    thread = threading.Thread(
        target=serve, args=(Starlette(), options, Policy.for_bind("127.0.0.1")), daemon=True
    )
    thread.start()
    for _ in range(600):
        try:
            silent = socket.create_connection(("127.0.0.1", port), timeout=30)
            break
        except OSError:
            thread.join(0.05)  # the server is not accepting yet
    else:
        raise AssertionError("the server did not start")
    with silent:
        silent.sendall(b"GET / HTTP/1.1\r\nHost: 127")  # headers never completed
        assert silent.recv(1024) == b""  # closed by the server, not by our timeout


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("127.0.0.1", 70000, "port 70000 is out of range"),
        ("no.such.host.invalid", 8000, "cannot bind 'no.such.host.invalid'"),
        ("256.1.1.1", 8000, "cannot bind '256.1.1.1'"),
    ],
)
def test_a_bad_address_is_a_named_error(host: str, port: int, expected: str) -> None:
    """Not "unexpected ValueError: Port out of range" (issue 27, item 5): a BindError, exit 2."""
    require_extra("uvicorn")
    from errkb.serve.runner import BindError, bind

    with pytest.raises(BindError, match=expected) as raised:
        bind(host, port)
    assert raised.value.exit_code == 2
