"""``errkb.triage.dask``: the same work as a Dask bag on a ``LocalCluster`` of 2 worker processes,
reduced to byte-identical JSON (issue 26). The reduce's order-independence, which makes that
possible, has its fast case in ``tests/test_triage.py``; this module is ``slow`` (a cluster
starts in seconds) and needs the ``errkb[dask]`` extra.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import errkb
from errkb.render import OutputFormat, render
from errkb.triage import triage
from tests.conftest import require_extra
from tests.test_triage import make_fixture

require_extra("distributed", "dask")


@pytest.mark.slow
def test_a_local_cluster_gives_the_local_runs_json(tmp_path: Path) -> None:
    from errkb.triage.dask import triage_dask

    make_fixture(tmp_path, logs=20)
    db = tmp_path / "kb.sqlite3"
    errkb.open(db).close()
    paths = [str(tmp_path / "good"), str(tmp_path / "bad")]
    local = triage(paths, db=db, jobs=1, limit=1 << 20)
    on_dask = triage_dask(paths, address="local", db=db, limit=1 << 20, workers=2)
    assert render(on_dask, OutputFormat.JSON) == render(local, OutputFormat.JSON)
    assert on_dask.rows == local.rows
    assert local.known and local.unknown and local.errors
