from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from errkb.errors import InputError
from errkb.records.reader import read_file, read_sources


def _ids(paths: list[Path]) -> list[str]:
    return [item.obj["id"] for item in read_sources(paths) if item.problem is None]


@pytest.fixture
def records(envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["record"] for e in envelopes]


def _write(path: Path, text: str, gz: bool) -> Path:
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    "shape", ["envelope", "bare", "array-of-records", "array-of-envelopes", "jsonl", "pretty"]
)
def test_every_shape_reads(
    tmp_path: Path,
    envelopes: list[dict[str, Any]],
    records: list[dict[str, Any]],
    shape: str,
    gz: bool,
) -> None:
    expected = [r["id"] for r in records]
    if shape == "envelope":
        paths = [_write(tmp_path / f"{i}.txt", json.dumps(e), gz) for i, e in enumerate(envelopes)]
    elif shape == "bare":
        paths = [_write(tmp_path / f"{i}.json", json.dumps(r), gz) for i, r in enumerate(records)]
    elif shape == "array-of-records":
        paths = [_write(tmp_path / "repo.json", json.dumps(records), gz)]
    elif shape == "array-of-envelopes":
        paths = [_write(tmp_path / "repo.json", json.dumps(envelopes), gz)]
    elif shape == "jsonl":
        paths = [
            _write(tmp_path / "all.jsonl", "\n".join(json.dumps(e) for e in envelopes) + "\n", gz)
        ]
    else:
        paths = [_write(tmp_path / "one.json", json.dumps(envelopes[0], indent=2), gz)]
        expected = expected[:1]
    assert _ids(paths) == expected


def test_directory_is_read_recursively_and_skips_published_metadata(
    tmp_path: Path, envelopes: list[dict[str, Any]]
) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.json").write_text(json.dumps(envelopes[0]))
    (tmp_path / "y.jsonl").write_text(json.dumps(envelopes[1]) + "\n")
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "notes.md").write_text("not a record")
    assert sorted(_ids([tmp_path])) == sorted(
        [envelopes[0]["record"]["id"], envelopes[1]["record"]["id"]]
    )


def test_jsonl_bad_lines_are_located_and_do_not_hide_others(
    tmp_path: Path, envelopes: list[dict[str, Any]]
) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps(envelopes[0]) + "\n{not json\n[1, 2]\n" + json.dumps(envelopes[1]) + "\n"
    )
    items = list(read_sources([path]))
    assert [i.location for i in items] == ["line 1", "line 2", "line 3", "line 4"]
    assert items[1].problem is not None and "invalid JSON" in items[1].problem.rule
    assert items[2].problem is not None and "got list" in items[2].problem.rule
    assert items[3].obj["id"] == envelopes[1]["record"]["id"]


def test_array_items_are_located_by_index(tmp_path: Path, records: list[dict[str, Any]]) -> None:
    path = tmp_path / "repo.json"
    path.write_text(json.dumps([records[0], "oops"]))
    items = list(read_sources([path]))
    assert [i.location for i in items] == ["index 0", "index 1"]
    assert items[1].problem is not None


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage", b"\x1f\x8b\x08truncated-gzip"])
def test_unreadable_files_become_problems(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    items = list(read_sources([path]))
    assert len(items) == 1 and items[0].problem is not None
    assert items[0].problem.source == str(path)


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        list(read_sources([tmp_path / "nope.json"]))


@pytest.mark.parametrize(
    ("text", "floatless"),
    [
        ('{"id": "a", "n": 1, "s": "1.5e3"}', True),
        ('{"id": "a", "n": 1.5}', False),
        ('{"id": "a", "n": 1e16}', False),
        ('{"id": "a", "n": NaN}', False),
        ('{"id": "a", "n": -Infinity}', False),
        ('[{"id": "a"}, {"id": "b", "n": 2.0}]', False),  # one flag for a whole document
        ('[{"id": "a"}, {"id": "b", "n": 2}]', True),
    ],
)
def test_items_say_whether_their_parse_read_a_float(
    tmp_path: Path, text: str, floatless: bool
) -> None:
    # ``records.content_hash`` may take orjson's road only for a floatless item: orjson writes
    # floats in another form than json (1e16 against 1e+16), which would change the hash.
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    items = list(read_file(path))
    assert items and all(it.problem is None for it in items)
    assert {it.floatless for it in items} == {floatless}
    lines = tmp_path / "r.jsonl"
    lines.write_text('{"id": "a", "n": 1}\n{"id": "b", "n": 0.5}\n', encoding="utf-8")
    assert [it.floatless for it in read_file(lines)] == [True, False]
