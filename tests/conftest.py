"""Shared fixtures: the bundled seed records, fresh knowledge bases, the example logs, and the
database targets (``db_target``: one SQLite file, and one fresh PostgreSQL database on the server
``$ERRKB_TEST_PG_URL`` names, both at the schema's head) that the storage, sync, history and fault
suites run against. ``pg_url`` is an empty schema instead, for the migrations' own tests.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The suite fails when a test leaves files in the source tree (see repo_guard).
from repo_guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401

import errkb
from errkb.records import upstream
from tests import tiers


# --- the two tiers ------------------------------------------------------------------------------
# `pytest` runs the default tier: every behaviour, with the fault, soak, hostile-input and benchmark
# suites represented by small cases (<= 90 s on a 2-core machine). `pytest --full` adds the tests
# marked `slow`: every SIGKILL point, every reader-during-sync round, the large hostile inputs and
# the CPU-ratio checks. Slow tests are deselected, not skipped, in the default tier: a skip would
# read as a gap, and `-m` still selects them explicitly (`pytest -m slow`).
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full", action="store_true", help="the full tier: include the tests marked slow"
    )


def pytest_configure(config: pytest.Config) -> None:
    # The tier decides how many examples each property test draws (tests/tiers.py), and is
    # known before any test module is imported. An explicit `-m` selection is a full-tier run.
    full = bool(config.getoption("--full") or config.getoption("-m"))
    os.environ[tiers.TIER_ENV] = "full" if full else "default"
    from hypothesis import settings

    # Properties without their own count draw Hypothesis's 100 in the full tier.
    settings.register_profile("errkb", max_examples=tiers.examples(100))
    settings.load_profile("errkb")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every Hypothesis test is a `property`: the full tier's CI run selects them again
    # (`-m "slow or property"`), with their whole example counts.
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)
    if config.getoption("--full") or config.getoption("-m"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "data" / "dataset"
EXAMPLES = ROOT / "data" / "examples"

QUANTO_ID = "5c84e15f4be2c1a6"
COMFY_ID = "b9825390f5c3ae68"
LINEAR_ID = "129d60f3f6e5f4e0"


def load_seed_envelopes() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(DATASET.glob("*.txt"))]


@pytest.fixture
def envelopes() -> list[dict[str, Any]]:
    return load_seed_envelopes()


@pytest.fixture
def seed_records(envelopes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["record"]["id"]: e["record"] for e in envelopes}


def make_record(base: dict[str, Any], message: str, file_path: str | None = None) -> dict[str, Any]:
    """A valid variant of a seed record with another message (id, slug, pattern recomputed)."""
    rec = copy.deepcopy(base)
    rec["errorMessage"] = message
    if file_path is not None:
        rec["filePath"] = file_path
    rec["messagePattern"] = upstream.message_pattern(message)
    rec["id"] = upstream.record_id(rec["repo"], rec["errorCode"], message, rec["filePath"])
    rec["slug"] = upstream.slug(rec["errorCode"], message)
    return rec


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never touch the developer's real data or cache directory, $ERRKB_DB or the real site."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.delenv("ERRKB_DB", raising=False)
    monkeypatch.delenv("ERRKB_CACHE_DIR", raising=False)
    # A sync without SOURCE must never reach the real site from a test: port 9 (discard) on
    # the loopback refuses the connection. Tests of the default unset it and block the resolver.
    monkeypatch.setenv("ERRKB_SOURCE", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(scope="session")
def _seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seeded") / "kb.sqlite3"
    errkb.open(path).close()
    return path


@pytest.fixture(scope="session")
def _empty_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("empty") / "empty.sqlite3"
    with errkb.open(path, bundled=False) as made:
        made.stats()  # migrated to head, no records
    return path


@pytest.fixture
def kb(tmp_path: Path, _seeded_template: Path) -> Iterator[errkb.KnowledgeBase]:
    """A knowledge base of the bundled records in a file of its own (a copy of one made once per
    session: migrating and ingesting cost ~0.1 s a test)."""
    path = tmp_path / "kb.sqlite3"
    shutil.copyfile(_seeded_template, path)
    with errkb.open(path) as opened:
        yield opened


@pytest.fixture
def seeded_db(tmp_path: Path, _seeded_template: Path) -> Path:
    """A knowledge-base file holding the bundled records, for tests that run errkb as a child
    process: a copy of one made once per session (a child creating it pays ~1 s of imports,
    migrations and ingest every time)."""
    path = tmp_path / "kb.sqlite3"
    shutil.copyfile(_seeded_template, path)
    return path


@pytest.fixture
def empty_kb(tmp_path: Path, _empty_template: Path) -> Iterator[errkb.KnowledgeBase]:
    """An empty knowledge base at the schema's head, in a file of its own (a copy)."""
    path = tmp_path / "empty.sqlite3"
    shutil.copyfile(_empty_template, path)
    with errkb.open(path, bundled=False) as opened:
        yield opened


def require_extra(module: str, extra: str = "mcp") -> None:
    """Skip this test module when the optional extra is not installed, unless CI requires it.

    ``.ci/run`` installs ``errkb[mcp]`` and sets ``ERRKB_REQUIRE_EXTRAS=1``: there a missing
    extra fails the run instead of skipping tests silently.
    """
    import importlib.util
    import os

    try:
        # Found, not imported: collection must not pay for Dask's or the SDK's imports in
        # every worker (a dotted name imports its parents, which its tests import anyway).
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"No module named {module!r}")
    except ImportError as exc:
        if os.environ.get("ERRKB_REQUIRE_EXTRAS") == "1":
            raise RuntimeError(
                f"ERRKB_REQUIRE_EXTRAS=1 but {module} is missing: pip install -e '.[test,{extra}]'"
            ) from exc
        pytest.skip(
            f"the errkb[{extra}] extra is not installed ({module})", allow_module_level=True
        )


#: The merged-column message as sglang prints it (the linear record explains it exactly).
LINEAR_MESSAGE = (
    "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape (2,)"
)


PG_URL_ENV = "ERRKB_TEST_PG_URL"
BACKENDS = ["sqlite", "postgres"]


def pg_server_url() -> str:
    """The test server's URL; skip without one (a laptop), but fail in CI, which must run them."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(
            f"CI is set but ${PG_URL_ENV} is not: the PostgreSQL tests must run in CI "
            "(.ci/run sources .ci/postgres.sh, which starts a server and sets it)"
        )
    pytest.skip(f"PostgreSQL tests need a server: set ${PG_URL_ENV} (see .ci/postgres.sh)")


def _admin(url: str) -> Any:
    import psycopg

    from errkb.store.postgres import conninfo

    return psycopg.connect(conninfo(url), autocommit=True)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A URL naming a fresh, empty schema on the test server (dropped afterwards)."""
    base = pg_server_url()
    schema = f"errkb_t_{uuid.uuid4().hex[:12]}"
    with _admin(base) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    # application_name lets a test find (and cut) its own connections; search_path comes last.
    yield f"{base}{sep}application_name={schema}&options=-csearch_path%3D{schema}"
    with _admin(base) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _database_url(base: str, name: str) -> str:
    """``base`` naming the database ``name`` on the same server (its query options kept)."""
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


@pytest.fixture(scope="session")
def _pg_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The name of a database at the schema's head with no records, made once per test process
    (each xdist worker its own) and cloned for every test that wants one (``pg_db_url``):
    ``CREATE DATABASE ... TEMPLATE`` copies it in ~15 ms, where Alembic's upgrade of a fresh
    schema cost ~0.1 s of this process's CPU and more of the server's."""
    base = pg_server_url()
    name = f"errkb_tpl_{uuid.uuid4().hex[:12]}"
    with _admin(base) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        with pytest.MonkeyPatch.context() as env:
            # Session fixtures come before _isolated_env: keep the store's local directory
            # out of the developer's data directory.
            env.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("pg-template")))
            with errkb.open(_database_url(base, name), bundled=False) as made:
                made.stats()  # migrated to head, no records
        with _admin(base) as conn:
            # A template must have no sessions (the store's closing thread may still hold one);
            # from now on nothing may connect to it by mistake.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            conn.execute(f"ALTER DATABASE {name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
        yield name
    finally:
        with _admin(base) as conn:
            conn.execute(f"ALTER DATABASE {name} WITH IS_TEMPLATE false")
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class _Admin:
    """One administrative connection per test process, opened again if a test cut it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: Any = None

    def execute(self, sql: str) -> None:
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = _admin(self.url)
        self.conn.execute(sql)


@pytest.fixture(scope="session")
def _pg_admin() -> Iterator[_Admin]:
    admin = _Admin(pg_server_url())
    yield admin
    if admin.conn is not None:
        admin.conn.close()


@pytest.fixture(scope="session")
def _pg_stores() -> Iterator[weakref.WeakSet[Any]]:
    """Every ``PostgresStore`` this test process opens, so a test's database is dropped only
    after the stores on it are closed.

    A store a test left open keeps a pool whose background workers reconnect to keep
    ``min_size`` connections; once its database is dropped they fail over and over and log
    "error connecting in 'errkb'", and a later test in the same process that asserts on the
    pool's warnings (``test_closing_reads_never_hand_out_a_connection_in_a_transaction``)
    caught one in CI.
    """
    from errkb.store.postgres import PostgresStore

    stores: weakref.WeakSet[Any] = weakref.WeakSet()
    original = PostgresStore.__init__

    def tracked(self: PostgresStore, url: str) -> None:
        original(self, url)
        stores.add(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PostgresStore, "__init__", tracked)
        yield stores


@pytest.fixture
def pg_db_url(
    _pg_template: str, _pg_admin: _Admin, _pg_stores: weakref.WeakSet[Any]
) -> Iterator[str]:
    """A URL naming a database of its own at the schema's head, no records (a clone of the
    session's template; dropped afterwards, whatever connections the test left open)."""
    base = pg_server_url()
    name = f"errkb_t_{uuid.uuid4().hex[:12]}"
    _pg_admin.execute(f"CREATE DATABASE {name} TEMPLATE {_pg_template}")
    sep = "&" if "?" in base else "?"
    # application_name lets a test find (and cut) its own connections.
    url = f"{_database_url(base, name)}{sep}application_name={name}"
    yield url
    for store in list(_pg_stores):
        if urllib.parse.urlsplit(store.url).path == "/" + name:
            store.close()  # its pool stops before its database goes
    _pg_admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=BACKENDS)
def db_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each backend at the schema's head, no records: an SQLite file path,
    or a PostgreSQL URL.

    Each is a copy of one made once per session (Alembic's upgrade costs ~70 ms an SQLite file,
    more on PostgreSQL); the migrations' own tests start from no file or an empty schema
    (``pg_url``).
    """
    if request.param == "sqlite":
        path = tmp_path / "kb.sqlite3"
        shutil.copyfile(request.getfixturevalue("_empty_template"), path)
        return str(path)
    url: str = request.getfixturevalue("pg_db_url")
    return url


def is_pg(target: str | os.PathLike[str]) -> bool:
    return os.fspath(target).startswith("postgresql")


def query(store: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run a test's read-only SQL (SQLite spelling) on either backend."""
    from errkb.store.postgres import PostgresStore

    if isinstance(store, PostgresStore):
        sql = sql.replace("?", "%s").replace("retired = 0", "NOT retired")
        with store._snapshot_conn() as view:
            return [tuple(r) for r in view.rows(sql, params)]
    return list(store.reader().execute(sql, params).fetchall())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def errkb_listening(
    port: int, *args: str, env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m errkb ARGS`` as a subprocess, yielded once it accepts connections on ``port``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "errkb", *args],
        env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, f"errkb {' '.join(args)} did not start"
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # reaps it and closes the pipe


def index_rows(records: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str, int]]:
    """(token, record id, rank) rows: each record's rarest words across (id, message) records."""
    from errkb.match.index import rank_words, template_tokens
    from errkb.records.template import parse_template

    return rank_words(
        (rid, dict.fromkeys(template_tokens(parse_template(m)))) for rid, m in records
    )
