"""Hostile checkpoints for ``errkb check``: huge shapes, a million tensors, FIFOs, NUL bytes and
symlink loops in an index. Each ends in a clear error naming the file (and tensor), bounded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from errkb.checkpoint.safetensors import MAX_DIMS, MAX_TENSORS, read_header
from errkb.errors import CheckpointError
from tests.checkpoints import T, frame, write
from tests.hostile import run_errkb


def _check(tmp_path: Path, *paths: Path, memory: int = 1 << 30) -> str:
    out = run_errkb(
        ["--db", str(tmp_path / "kb.sqlite3"), "check", *map(str, paths)],
        memory=memory,
        timeout=90,
    )
    assert out.returncode == 2, out
    assert not out.crashed, out.stderr
    return out.stdout + out.stderr


def _tensor_file(path: Path, shape: object, offsets: object = (0, 1)) -> Path:
    header = json.dumps({"t": {"dtype": "U8", "shape": shape, "data_offsets": list(offsets)}})
    path.write_bytes(frame(header.encode(), b"\0"))
    return path


def test_shape_product_past_4300_digits_is_a_clear_error(tmp_path: Path) -> None:
    # 60 dimensions of 10**19: the product has over 1,100 digits; 230 of them, over 4,300.
    path = _tensor_file(tmp_path / "a.safetensors", [10**19] * 60)
    with pytest.raises(CheckpointError, match=r"tensor 't': shape .* has more elements than"):
        read_header(path)
    path = _tensor_file(tmp_path / "b.safetensors", [10**19] * 230)
    with pytest.raises(CheckpointError, match=f"230 dimensions, over {MAX_DIMS}"):
        read_header(path)


def test_two_hundred_thousand_dimensions_are_refused_fast(tmp_path: Path) -> None:
    path = _tensor_file(tmp_path / "a.safetensors", [7] * 200_000)
    text = _check(tmp_path, path)
    assert "200000 dimensions" in text


@pytest.mark.slow
def test_a_million_tensors_are_refused_within_memory(tmp_path: Path) -> None:
    entry = '"t%d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}'
    header = ("{" + ",".join(entry % i for i in range(1_000_000)) + "}").encode()
    path = tmp_path / "many.safetensors"
    path.write_bytes(frame(header))
    assert path.stat().st_size > 50_000_000
    text = _check(tmp_path, path, memory=1 << 30)
    assert f"more than {MAX_TENSORS} tensors" in text


def test_a_fifo_input_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    assert "a FIFO, not a regular file" in _check(tmp_path, fifo)


def test_a_fifo_named_by_an_index_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "shard-1.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": "shard-1.safetensors"}}))
    assert "a FIFO, not a regular file" in _check(tmp_path, index)


def test_an_index_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    os.mkfifo(index)
    assert "a FIFO, not a regular file" in _check(tmp_path, index)


def test_a_nul_byte_in_a_weight_map_name_is_an_error(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": "shard\u0000.safetensors"}}))
    assert "NUL byte" in _check(tmp_path, index)


def test_a_weight_map_symlink_loop_is_named(tmp_path: Path) -> None:
    loop = tmp_path / "shard-1.safetensors"
    loop.symlink_to(loop)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": "shard-1.safetensors"}}))
    assert "symlink loop" in _check(tmp_path, index)


def test_a_symlink_loop_input_is_not_called_missing(tmp_path: Path) -> None:
    loop = tmp_path / "loop.safetensors"
    loop.symlink_to(loop)
    text = _check(tmp_path, loop)
    assert "symlink loop" in text and "no such file" not in text


def test_a_valid_file_still_checks_clean(tmp_path: Path) -> None:
    path = write(tmp_path / "ok.safetensors", {"w": T("F16", (2, 3))})
    header = read_header(path)
    assert header.tensors["w"].shape == (2, 3)


def test_a_walk_inside_an_allowed_directory_never_reads_outside_it(
    tmp_path: Path, kb: object
) -> None:
    from errkb.checkpoint.inputs import OUTSIDE
    from errkb.kb import KnowledgeBase
    from errkb.serve import Service

    assert isinstance(kb, KnowledgeBase)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "config.json").write_text('{"quantization_config": {"quant_method": "fp8"}}')
    _tensor_file(secret / "model.safetensors", [2, 2])
    allowed = tmp_path / "allowed"
    model = allowed / "model"
    model.mkdir(parents=True)
    (model / "link.safetensors").symlink_to("/etc/passwd")
    (model / "config.json").symlink_to(secret / "config.json")
    (model / "component").symlink_to(secret)
    _tensor_file(model / "real.safetensors", [1])
    report = Service.create(kb, [allowed]).check_checkpoint(str(model))
    refused = {Path(e["path"]).name: e["message"] for e in report["errors"]}
    assert refused == {"link.safetensors": OUTSIDE, "config.json": OUTSIDE, "component": OUTSIDE}
    assert [Path(p).name for p in report["checked"]] == ["real.safetensors"]
    assert "header length" not in json.dumps(report)
