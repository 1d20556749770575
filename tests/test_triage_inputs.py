"""Compressed logs (issues 26, 49): ``errkb.inputs.decompress_input``, as explain and triage use it.

Compression is told by content, not by name: a gzip or zstd stream named ``.log`` or piped in
is read as the log it holds, layers nested up to ``MAX_NESTING`` deep are undone, and a damaged
or truncated stream, a bomb, or what errkb cannot read is an error naming the input.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path
from types import ModuleType

import pytest
import zstandard

from errkb.errors import InputError, UnreadableInputError
from errkb.inputs import MAX_NESTING, compression_of, decompress_input
from tests.cli import QUANTO_LOG, run

CODECS: list[tuple[str, ModuleType]] = [
    ("gzip", gzip),
    ("bzip2", bz2),
    ("xz", lzma),
    ("zstd", zstandard),
]
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


def test_zstd_frames_without_a_stated_size_and_skippable_frames_are_read() -> None:
    streamed = zstandard.ZstdCompressor().compressobj()  # as a pipe writes it: no content size
    packed = streamed.compress(TEXT) + streamed.flush()
    assert zstandard.frame_content_size(packed) == -1
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"meta"
    assert compression_of(skippable + packed) == "zstd"
    assert decompress_input(skippable + packed, "x.zst") == TEXT
    # Frames in small pieces: each fed to the decoder a kilobyte at a time.
    many = b"".join(zstandard.compress(TEXT[i : i + 100]) for i in range(0, len(TEXT), 100))
    assert decompress_input(many, "x.zst") == TEXT


def test_a_zstd_frame_asking_for_a_huge_window_is_refused() -> None:
    params = zstandard.ZstdCompressionParameters(window_log=30, enable_ldm=True)
    packed = zstandard.ZstdCompressor(compression_params=params).compressobj()
    data = packed.compress(TEXT) + packed.flush()
    with pytest.raises(InputError, match=r"^big.zst: damaged zstd data: .*"):
        decompress_input(data, "big.zst")


@pytest.mark.parametrize(
    ("layers", "codecs"),
    [
        ("gzip inside gzip", [gzip, gzip]),
        ("zstd inside gzip", [zstandard, gzip]),
        ("xz inside zstd inside bzip2", [lzma, zstandard, bz2]),
    ],
)
def test_nested_compression_is_undone(layers: str, codecs: list[ModuleType]) -> None:
    packed = TEXT
    for codec in codecs:
        packed = codec.compress(packed)
    assert decompress_input(packed, "x") == TEXT
    # A layer's damage names the layers around it.
    inner = codecs[0].compress(TEXT)[:-12]
    for codec in codecs[1:]:
        inner = codec.compress(inner)
    with pytest.raises(InputError, match=f"^x: truncated {codecs[0].__name__}|^x: truncated"):
        decompress_input(inner, "x")


def test_more_layers_than_the_cap_are_refused_in_one_line() -> None:
    packed = TEXT
    for _ in range(MAX_NESTING + 1):
        packed = gzip.compress(packed)
    with pytest.raises(UnreadableInputError) as caught:
        decompress_input(packed, "deep.gz")
    assert str(caught.value) == (
        f"deep.gz: gzip data nested more than {MAX_NESTING} layers deep "
        "(gzip inside gzip inside gzip inside gzip); not read"
    )


@pytest.mark.parametrize("outer", [gzip, zstandard])
def test_a_nested_bomb_is_refused_at_the_cap(outer: ModuleType) -> None:
    bomb = outer.compress(zstandard.compress(b"\0" * (8 << 20), 19))
    assert len(bomb) < 1 << 12
    with pytest.raises(InputError, match="decompressed input larger than 1048576 bytes"):
        decompress_input(bomb, "bomb", limit=1 << 20)


def test_explain_names_what_it_cannot_read_in_one_line(tmp_path: Path, db: Path) -> None:
    import zipfile

    archive = tmp_path / "ci.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("quanto.log", TEXT)
    result = run(db, "explain", str(archive))
    assert result.exit_code == 2
    assert result.output.strip() == f"errkb: error: {archive}: a zip archive, not a log"
    assert "No known error found" not in result.output
    # Inside a compression layer too, and from standard input.
    piped = run(db, "explain", input=gzip.compress(bytes(range(256)) * 64))
    assert piped.exit_code == 2
    assert (
        piped.output.strip()
        == "errkb: error: -: binary data (NUL bytes) inside gzip data, not a log"
    )


def test_explain_reads_a_gzip_inside_a_gzip_as_the_plain_log(tmp_path: Path, db: Path) -> None:
    packed = tmp_path / "quanto.log.zst.gz"
    packed.write_bytes(gzip.compress(zstandard.compress(TEXT)))
    plain = run(db, "explain", "--format", "json", str(QUANTO_LOG))
    nested = run(db, "explain", "--format", "json", str(packed))
    assert plain.exit_code == nested.exit_code == 0
    assert plain.output == nested.output
