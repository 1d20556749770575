"""Compressed logs (issue 26): ``errkb.inputs.decompress_input``, as explain and triage read them.

Compression is told by content, not by name: a gzip stream named ``.log`` or piped in is read
as the log it holds, and a damaged or truncated stream is an error naming the input.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path
from types import ModuleType

import pytest

from errkb.errors import InputError
from errkb.inputs import compression_of, decompress_input
from tests.cli import QUANTO_LOG, run

CODECS: list[tuple[str, ModuleType]] = [("gzip", gzip), ("bzip2", bz2), ("xz", lzma)]
TEXT = QUANTO_LOG.read_bytes()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kb") / "kb.sqlite3"


@pytest.mark.parametrize(("kind", "codec"), CODECS)
def test_each_compression_is_told_by_content_and_read_back(kind: str, codec: ModuleType) -> None:
    packed = codec.compress(TEXT)
    assert compression_of(packed) == kind
    assert decompress_input(packed, "x.log") == TEXT
    # Concatenated members (``cat a.gz b.gz``, pigz, pbzip2) are one input.
    assert decompress_input(packed + codec.compress(b"tail\n"), "x") == TEXT + b"tail\n"


@pytest.mark.parametrize(("kind", "codec"), CODECS)
def test_truncated_or_damaged_stream_is_an_error_naming_the_input(
    kind: str, codec: ModuleType
) -> None:
    packed = codec.compress(TEXT)
    with pytest.raises(InputError, match=f"^ci/7.log: truncated {kind} data$"):
        decompress_input(packed[:-12], "ci/7.log")
    with pytest.raises(InputError, match=f"^ci/7.log: (damaged|truncated) {kind} data"):
        decompress_input(packed[:12] + b"\x00garbage" * 20, "ci/7.log")


@pytest.mark.parametrize(("kind", "codec"), CODECS)
def test_a_bomb_is_refused_past_the_cap(kind: str, codec: ModuleType) -> None:
    bomb = codec.compress(b"\0" * (2 << 20))
    assert len(bomb) < 1 << 16
    with pytest.raises(InputError, match="decompressed input larger than 1048576 bytes"):
        decompress_input(bomb, "bomb", limit=1 << 20)


def test_plain_text_is_returned_as_is_even_when_it_starts_like_bzip2() -> None:
    for text in (TEXT, b"", b"BZh9 is a bzip2 magic, but not here\n", b"\x1f"):
        assert compression_of(text) is None
        assert decompress_input(text, "x") is text


@pytest.mark.parametrize(("kind", "codec"), CODECS)
def test_explain_reads_a_compressed_log_and_standard_input(
    tmp_path: Path, db: Path, kind: str, codec: ModuleType
) -> None:
    packed = tmp_path / f"quanto.log.{kind}"
    packed.write_bytes(codec.compress(TEXT))
    plain = run(db, "explain", "--format", "json", str(QUANTO_LOG))
    named = run(db, "explain", "--format", "json", str(packed))
    piped = run(db, "explain", "--format", "json", input=packed.read_bytes())
    assert plain.exit_code == named.exit_code == piped.exit_code == 0
    assert plain.output == named.output == piped.output


def test_explain_names_a_truncated_gzip_log(tmp_path: Path, db: Path) -> None:
    broken = tmp_path / "cut.log.gz"
    broken.write_bytes(gzip.compress(TEXT)[:-30])
    result = run(db, "explain", str(broken))
    assert result.exit_code == 2
    assert f"{broken}: truncated gzip data" in result.output
