"""The least a fresh sync's required work costs, piece by piece (issue 20's 60 s).

``python -m bench.sync_floor DB TREE [--files 60] [--rounds 4]``: DB is a knowledge base a
fresh sync of the published tree TREE left (read only, never changed); each piece is timed
alone in this process (CPU, user + sys):

* ``check``: a worker's read, cross-check, validation, content hash and derive of one record
  (``read_repo`` + ``check_repo`` over ``--files`` random repository files of TREE, the
  minimum of ``--rounds`` rounds), then times the tree's record count;
* ``anchors``: Hyperscan compiling the record anchors' literals of DB in parts of
  ``anchordb.CHUNK_WORDS``, one after the other, as the sync does (the record maps are read
  first, not timed);
* ``sqlite``: SQLite writing DB's rows again into a new file with the fresh build's pragmas,
  by ``INSERT ... SELECT`` (no Python per row), the full-text fill by the build's own
  statement (``bulk_search_sql``), then the secondary indexes: a lower bound of the
  transaction's SQLite work.

Their sum over two cores is the least wall time a sync doing this work can take on this
machine, were every piece beside another all the time.
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import tempfile
from pathlib import Path


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def check_cost(tree: Path, files: int, rounds: int, seed: int = 2) -> tuple[float, int]:
    """(CPU seconds per record, records timed) of a worker's judgement of a record."""
    from errkb.records.reader import read_file
    from errkb.sync.repofile import check_repo, read_repo

    paths = sorted((tree / "data" / "repos").rglob("*.json"))
    chosen = random.Random(seed).sample(paths, min(files, len(paths)))
    jobs = []
    for path in chosen:
        items = list(read_file(path))
        jobs.append((path, str(items[0].obj["repo"]), [it.obj["id"] for it in items]))
    count = sum(len(ids) for _p, _r, ids in jobs)
    best = float("inf")
    for _ in range(rounds):
        started = _cpu()
        for path, repo, ids in jobs:
            part = read_repo(path, str(path), repo, ids, {}, max_bytes=1 << 34, max_values=1 << 40)
            check_repo(part, ids, None)
        best = min(best, _cpu() - started)
    return best / count, count


def anchors_cost(db: Path) -> tuple[float, int]:
    """(CPU seconds, literals) of compiling the record anchors' Hyperscan parts in turn."""
    import errkb
    from errkb.match.anchordb import _compiled_parts
    from errkb.match.recordanchors import record_maps

    with errkb.open(str(db), bundled=False) as kb, kb.store.snapshot() as view:
        _maps, words = record_maps(view.anchor_rows())
    literals = [w.encode("utf-8") for w in words]
    count = len(literals)
    started = _cpu()
    for _image in _compiled_parts(literals, list(range(count))):
        pass
    return _cpu() - started, count


#: The tables a sync writes, copied in this order (the search tables are filled after).
_COPIED = (
    "records",
    "record_tags",
    "record_solutions",
    "record_prevention_tips",
    "pattern_specs",
    "match_tokens",
    "record_history",
    "dataset_versions",
    "meta",
)


def sqlite_cost(db: Path) -> list[tuple[str, float]]:
    """CPU seconds of each step of writing ``db``'s rows again by SQLite alone."""
    from errkb.store.sqlite import _BUILD_PRAGMAS, _SEARCH_TRIGGER, bulk_search_sql

    source = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    objects = source.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    source.close()
    steps: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(dir=db.parent) as work:
        conn = sqlite3.connect(Path(work) / "floor.sqlite3", isolation_level=None)
        for pragma in _BUILD_PRAGMAS:
            conn.execute(pragma)
        for kind, name, sql in objects:
            if kind == "table" and not name.startswith("search_fts_"):  # shadow tables
                conn.execute(sql)
        conn.execute("ATTACH DATABASE ? AS old", (f"file:{db}?mode=ro",))
        conn.execute("BEGIN")

        def step(label: str, sql: str, *params: object) -> None:
            started = _cpu()
            conn.execute(sql, params)
            steps.append((label, _cpu() - started))

        tables = {name for kind, name, _sql in objects if kind == "table"}
        for table in _COPIED:
            cols = ", ".join(str(r[1]) for r in conn.execute(f"PRAGMA main.table_info({table})"))
            step(
                table,
                f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM old.{table} ORDER BY rowid",  # noqa: S608
            )
        step(
            "search_docs",
            "INSERT INTO main.search_docs (record_id) SELECT id FROM main.records ORDER BY id",
        )
        trigger = next(sql for kind, name, sql in objects if name == _SEARCH_TRIGGER)
        fill = bulk_search_sql(str(trigger))
        if fill is not None:
            step("full-text fill", fill, 0)
        for kind, name, sql in objects:
            if kind == "index":
                step(f"index {name}", sql)
        conn.execute("COMMIT")
        # A copy that lost rows would time less than the work: each copied table is checked.
        for name in (*_COPIED, "search_docs"):
            if name in tables:
                here, there = (
                    conn.execute(f"SELECT count(*) FROM {schema}.{name}").fetchone()[0]  # noqa: S608
                    for schema in ("main", "old")
                )
                if here != there:
                    raise RuntimeError(f"{name}: {here} rows copied of {there}")
        conn.close()
    return steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    with sqlite3.connect(f"file:{args.db}?mode=ro", uri=True) as conn:
        (records,) = conn.execute("SELECT count(*) FROM records").fetchone()
    per, timed = check_cost(args.tree, args.files, args.rounds)
    check = per * records
    print(f"check: {per * 1e6:.0f} us a record ({timed} timed) x {records} = {check:.1f} s")
    anchors, literals = anchors_cost(args.db)
    print(f"anchors: {literals} literals compiled in {anchors:.1f} s")
    steps = sqlite_cost(args.db)
    for label, seconds in steps:
        print(f"  sqlite {label}: {seconds:.1f} s")
    written = sum(seconds for _label, seconds in steps)
    print(f"sqlite: {written:.1f} s")
    total = check + anchors + written
    print(f"sum {total:.1f} s of CPU: at least {total / 2:.1f} s of wall time on two cores")


if __name__ == "__main__":
    main()
