"""The service core without a transport: preparing each store state off the request path."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.match import scan
from errkb.serve import Service
from tests.conftest import EXAMPLES, QUANTO_ID, make_record

TEXT = (EXAMPLES / "quanto-incompatible-scale.log").read_text()


def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def exact_ids(report: dict[str, Any]) -> list[str]:
    return [m["id"] for m in report["matches"] if m["confidence"] == "exact"]


def test_preparing_builds_each_states_table_on_its_own_thread(
    kb: errkb.KnowledgeBase,
    tmp_path: Path,
    seed_records: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builders: list[str] = []
    real = scan.load_table

    def counting(*args: Any, **kwargs: Any) -> scan.AnchorTable:
        builders.append(threading.current_thread().name)
        return real(*args, **kwargs)

    real_body = scan.table_body

    def counting_body(*args: Any, **kwargs: Any) -> str:
        builders.append(threading.current_thread().name)
        return real_body(*args, **kwargs)

    monkeypatch.setattr(scan, "load_table", counting)
    # A write's ``build_anchor_files`` stores the table from its body, no ``AnchorTable``.
    monkeypatch.setattr(scan, "table_body", counting_body)
    service = Service.create(kb)
    with service.preparing(interval=0.01):
        assert kb.prepare_ahead
        wait_for(lambda: kb._engine._table is not None)
        for _ in range(3):
            assert exact_ids(service.explain(TEXT)) == [QUANTO_ID]
        first = kb._engine._table
        # A write (a sync in another process does the same) moves the store to a new state:
        # the watcher notices and builds that state's table; requests meanwhile still answer.
        added = make_record(seed_records[QUANTO_ID], "Zanzibar tensor {name!r} is sideways")
        path = tmp_path / "new.json"
        path.write_text(json.dumps({"record": added, "datasetVersion": "2026-12-01T00:00:00Z"}))
        # The write builds its state's files after its commit, on its own thread here.
        writer = threading.Thread(
            target=lambda: errkb.open(kb.path).ingest([path]), name="errkb-writer"
        )
        writer.start()
        writer.join()
        message = service.match("Zanzibar tensor 'w.0' is sideways")
        assert exact_ids(message) == [added["id"]]
        wait_for(lambda: kb._engine._table is not None and kb._engine._table is not first)
        assert exact_ids(service.explain(TEXT)) == [QUANTO_ID]
    assert not kb.prepare_ahead
    # Two states, two loads on the watcher's thread and the writer's build: no request built
    # a table.
    assert sorted(builders) == ["errkb-prepare", "errkb-prepare", "errkb-writer"]


def test_a_small_input_does_not_wait_for_another_threads_build(kb: errkb.KnowledgeBase) -> None:
    kb.explain(TEXT)  # a long-running process: from the second report on, the table is wanted
    results: list[list[str]] = []
    with kb._engine._build_lock:  # another thread is building the table
        worker = threading.Thread(
            target=lambda: results.append(exact_ids(kb.explain(TEXT).to_dict()))
        )
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive(), "a small explain waited for the build"
    assert results == [[QUANTO_ID]]
    assert kb._engine._table is None  # it answered from the database's index
    assert exact_ids(kb.explain(TEXT).to_dict()) == [QUANTO_ID]
    assert kb._engine._table is not None  # and builds it itself once nobody else is


def test_bundled_schemas_write_references_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from errkb.serve import schemas

    explanation = schemas.bundled_schema(schemas.EXPLANATION)
    record = explanation["properties"]["matches"]["items"]["properties"]["record"]
    assert "$ref" not in record and "$id" not in record and "messagePattern" in record["required"]
    # Callers get their own copy: changing one does not change the next.
    record["required"].clear()
    assert schemas.bundled_schema(schemas.EXPLANATION) != explanation

    def fake(files: dict[str, dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
        return lambda name: json.loads(json.dumps(files[name]))

    schemas._bundled.cache_clear()
    try:
        monkeypatch.setattr(schemas, "_load", fake({"a.schema.json": {"$ref": "#/$defs/x"}}))
        with pytest.raises(ValueError, match="not a shipped schema file"):
            schemas.bundled_schema("a.schema.json")
        schemas._bundled.cache_clear()
        loop = {
            "a.schema.json": {"$ref": "b.schema.json"},
            "b.schema.json": {"$ref": "a.schema.json"},
        }
        monkeypatch.setattr(schemas, "_load", fake(loop))
        with pytest.raises(ValueError, match="refers back to itself"):
            schemas.bundled_schema("a.schema.json")
    finally:
        schemas._bundled.cache_clear()
