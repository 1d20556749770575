"""Database errors end as one clear StoreError line naming the database, never a traceback."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import errkb
from errkb.errors import StoreError, StoreLockedError, StoreReadOnlyError, UsageError
from errkb.match.feed import FEED
from errkb.store import open_store, resolve_db_path
from errkb.store.sqlite import SqliteStore, busy_timeout_ms
from tests import zygote
from tests.conftest import DATASET, EXAMPLES, QUANTO_ID, make_record

ROOT = Path(__file__).resolve().parent.parent

# Holds the write lock (BEGIN IMMEDIATE) until its stdin closes.
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("LOCKED", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


def _errkb(
    db: Path | str, *args: str, cwd: Path = ROOT, **env: str
) -> subprocess.CompletedProcess[str]:
    """``errkb --db DB ARGS`` as a child process (forked warm: see tests/zygote.py)."""
    done = zygote.run(["--db", str(db), *args], env={**os.environ, **env}, cwd=str(cwd))
    return subprocess.CompletedProcess(
        args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@pytest.fixture
def seeded(seeded_db: Path) -> Path:
    return seeded_db


@pytest.fixture
def held(seeded: Path) -> Iterator[Path]:
    """The seeded database, its write lock held by a second process."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(seeded)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
    try:
        yield seeded
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_ingest_under_a_held_write_lock_exits_2_with_one_line(held: Path) -> None:
    proc = _errkb(held, "ingest", str(DATASET), ERRKB_BUSY_TIMEOUT_MS="200")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"errkb: error: database {held} is locked by another writer")
    assert "waited 200 ms" in lines[0]
    assert "Traceback" not in proc.stderr


#: Every command, run under a held write lock: the writers (with input that changes the store)
#: must exit 2 with one line; every other command reads, and a WAL reader is not blocked.
#: ``{kb}`` is the database, ``{new}`` a record file holding one record the store lacks.
UNDER_LOCK: dict[str, tuple[tuple[str, ...], bool]] = {
    "ingest": (("ingest", "{new}"), True),
    "sync": (("sync", "{new}", "--partial"), True),
    "rollback": (("rollback", "1"), True),
    "explain": (("explain", str(EXAMPLES / "quanto-incompatible-scale.log")), False),
    "match": (("match", "no such message anywhere"), False),
    "show": (("show", QUANTO_ID), False),
    "list": (("list",), False),
    "stats": (("stats",), False),
    "versions": (("versions",), False),
    "history": (("history", QUANTO_ID), False),
    "search": (("search", "incompatible scale"), False),
    "export": (("export",), False),
    "check": (("check", str(EXAMPLES / "checkpoints")), False),
    "lint": (("lint", str(DATASET)), False),
    "extract": (("extract", "--repo", "me/errkb", str(ROOT / "errkb" / "errors.py")), False),
    "triage": (("triage", "-j", "1", str(EXAMPLES / "quanto-incompatible-scale.log")), False),
    # Reads one snapshot and writes only the files beside the database, never the database.
    "maint": (("maint", "compact"), False),
}
#: Long-running servers, read-only by design (tests/test_cli_serve.py, tests/test_serve_http.py).
SERVERS = {"mcp", "serve"}


def test_the_lock_table_names_every_command() -> None:
    from errkb.cli import COMMAND_MODULES

    every = {name for names in COMMAND_MODULES.values() for name in names}
    assert set(UNDER_LOCK) | SERVERS == every


@pytest.fixture
def changed(seeded: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The database with two versions (so rollback 1 changes it) and a file of one new record."""
    base = json.loads(next(DATASET.glob("*.txt")).read_text())["record"]
    files = []
    for n in (1, 2):
        path = tmp_path / f"new{n}.jsonl"
        path.write_text(json.dumps(make_record(base, f"A message no record had: {n} {{x}}")) + "\n")
        files.append(path)
    with errkb.open(seeded) as kb:
        kb.ingest([files[0]])
    return seeded, files[1]


@pytest.mark.parametrize("name", sorted(UNDER_LOCK))
def test_every_command_under_a_held_write_lock(
    name: str, changed: tuple[Path, Path], held: Path
) -> None:
    db, new = changed
    assert db == held  # the lock is taken after the second version was written
    argv, writes = UNDER_LOCK[name]
    proc = _errkb(db, *(a.format(new=new) for a in argv), ERRKB_BUSY_TIMEOUT_MS="200")
    assert "Traceback" not in proc.stderr, proc.stderr
    if writes:
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"errkb: error: database {db} is locked by another writer")
    else:
        assert proc.returncode in (0, 1), proc.stderr
        assert "locked" not in proc.stderr


def test_reads_still_work_under_a_held_write_lock(held: Path) -> None:
    # WAL: a reader is not blocked by a writer.
    proc = _errkb(held, "stats", ERRKB_BUSY_TIMEOUT_MS="200")
    assert proc.returncode == 0, proc.stderr


def test_library_write_under_a_held_lock_raises_store_locked(
    held: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERRKB_BUSY_TIMEOUT_MS", "100")
    store = SqliteStore(held)
    with pytest.raises(StoreLockedError, match="locked by another writer"):
        store.reindex(FEED)
    store.close()


def test_busy_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERRKB_BUSY_TIMEOUT_MS", "250")
    assert busy_timeout_ms() == 250
    monkeypatch.setenv("ERRKB_BUSY_TIMEOUT_MS", "soon")
    with pytest.raises(StoreError, match="ERRKB_BUSY_TIMEOUT_MS='soon'"):
        busy_timeout_ms()
    monkeypatch.delenv("ERRKB_BUSY_TIMEOUT_MS")
    assert busy_timeout_ms() == 10_000


def test_read_only_translation_from_a_real_error(tmp_path: Path) -> None:
    # Opened read-only by SQLite itself (works as root too): the real error, translated.
    db = tmp_path / "ro.sqlite3"
    errkb.open(db, bundled=False).close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')")
    from errkb.store.sqlite import translate

    conn.close()
    error = translate(caught.value, db, "writing", 100)
    assert isinstance(error, StoreReadOnlyError)
    assert str(error) == f"database {db} is read-only: cannot write to it (writing)"


@pytest.mark.parametrize("how", ["drop", "empty"])
def test_database_without_its_schema_revision(seeded: Path, how: str) -> None:
    with sqlite3.connect(seeded) as conn:
        conn.execute(
            "DROP TABLE alembic_version" if how == "drop" else "DELETE FROM alembic_version"
        )
    with pytest.raises(StoreError, match="has tables but no schema revision"):
        errkb.open(seeded)
    proc = _errkb(seeded, "stats")
    assert proc.returncode == 2 and "no schema revision" in proc.stderr
    assert "already exists" not in proc.stderr and "Traceback" not in proc.stderr


def test_match_tokens_dropped(seeded: Path) -> None:
    with sqlite3.connect(seeded) as conn:
        conn.execute("DROP TABLE match_tokens")
    proc = _errkb(seeded, "match", "Expected scalar scale, got shape (2,)")
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"errkb: error: database {seeded} is damaged: no such table")


def test_dev_null_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is not a regular file"):
        errkb.open("/dev/null")
    proc = _errkb(Path("/dev/null"), "stats")
    assert proc.returncode == 2 and "not a regular file" in proc.stderr


@pytest.mark.parametrize(
    "target", ["file:kb.sqlite3", "file:///tmp/kb.sqlite3?mode=ro", "sqlite:///kb.sqlite3?mode=ro"]
)
def test_uri_forms_the_two_readers_would_disagree_on_are_refused(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError):
        resolve_db_path(target)
    # The text itself, run where a relative file would land (Path() would fold "///" to "/").
    proc = _errkb(target, "stats", cwd=tmp_path)
    assert proc.returncode == 2 and "errkb: error:" in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing was created


def test_a_file_name_holding_url_syntax_is_one_file(tmp_path: Path) -> None:
    # A plain path (no "://") is a file name, whatever it holds: both readers open that file.
    db = tmp_path / "sqlite:" / "kb.sqlite3?mode=ro#x"
    with errkb.open(db) as kb:
        assert kb.explain(EXAMPLES.joinpath("quanto-incompatible-scale.log").read_text()).matches
    assert sorted(p.name for p in db.parent.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        db.name
    ]


def test_disk_full_is_a_clear_store_error(tmp_path: Path) -> None:
    open_store(tmp_path / "kb.sqlite3").ensure_schema()
    with sqlite3.connect(tmp_path / "kb.sqlite3") as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]

    class Tiny(SqliteStore):
        # SQLite's own cap on the file size: the real SQLITE_FULL a full disk gives.
        WRITE_PRAGMAS = (*SqliteStore.WRITE_PRAGMAS, f"PRAGMA max_page_count = {pages}")

    store = Tiny(tmp_path / "kb.sqlite3")
    from errkb.ingest import ingest_paths

    with pytest.raises(StoreError, match="disk full while writing; nothing was changed"):
        ingest_paths(store, [DATASET])
    store.close()
    assert open_store(tmp_path / "kb.sqlite3").is_empty()


def test_not_a_database(tmp_path: Path) -> None:
    db = tmp_path / "junk.sqlite3"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not an errkb database"):
        errkb.open(db)


@pytest.mark.parametrize(
    "command",
    [["stats"], ["explain", str(EXAMPLES / "quanto-incompatible-scale.log")], ["sync", "/x"]],
)
def test_a_malformed_postgresql_url_is_a_usage_error_naming_the_option(
    command: list[str],
) -> None:
    url = "postgresql://reader:s3cret@[::1"
    with pytest.raises(UsageError, match=r"--db .* not a valid PostgreSQL URL"):
        open_store(url)
    proc = _errkb(url, *command)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("errkb: error: --db (or ERRKB_DB) 'postgresql://***@[::1'")
    assert "s3cret" not in proc.stderr and "unexpected" not in proc.stderr
