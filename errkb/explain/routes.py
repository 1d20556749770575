"""Route choice: one function over the input's size and shape, one frozen value of sizes.

``choose_route`` reads only the input's first bytes and its size (plus, for a large input that
holds JSON lines, whether it decodes within ``containers.MAX_DOCUMENT_CHARS``): it is the one
place that says which route reads an input. A route that cannot read what it was given (the
scan past its shape-line bound, a store that cannot feed it) hands it to ``REGIONS``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["DEFAULT_THRESHOLDS", "Route", "Scannable", "Thresholds", "choose_route"]


class Route(enum.StrEnum):
    """How one input is read."""

    PASTE = "paste"  #: parsed whole, reported whole
    SCAN = "scan"  #: the record scan over the whole buffer
    REGIONS = "regions"  #: parsed region by region around its error words


@dataclass(frozen=True)
class Thresholds:
    """The sizes (bytes, or characters of a ``str``) that choose an input's route.

    ``scan_from``: plain text or JSON lines of at least this size are scanned. ``paste_upto``:
    an input of at most this size is parsed whole and reported whole (no ``Limits``); a larger
    one is narrowed to its error words' regions when not scanned, and its report kept within
    ``Limits``. ``release_from``: a scan of at least this size gives the C heap's free memory
    back after it (``anchordb.release_heap``).
    """

    scan_from: int = 1 << 18
    paste_upto: int = 1 << 20
    release_from: int = 8 << 20

    def __post_init__(self) -> None:
        for name in ("scan_from", "paste_upto", "release_from"):
            if getattr(self, name) < 0:
                raise ValueError(f"Thresholds.{name} must be at least 0")


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Scannable:
    """An input the scan reads: its bytes, and whether its JSON object lines are decoded."""

    data: bytes
    json_lines: bool


def choose_route(data: str | bytes, thresholds: Thresholds) -> tuple[Route, Scannable | None]:
    """The route that reads ``data``, and for ``SCAN`` the bytes it reads.

    ``SCAN`` for plain text (JSON lines in it decoded as the container path would, unless the
    input is too large to decode as a document: then it is all plain text) of at least
    ``scan_from``; else ``PASTE`` up to ``paste_upto``; else ``REGIONS``. Not scanned: UTF-16
    or NUL-ridden bytes, an input that begins as a JSON document or markup, or holds YAML's
    folded scalars.
    """
    size = len(data)
    if size >= thresholds.scan_from:
        scannable = _scannable(data)
        if scannable is not None:
            return Route.SCAN, scannable
    return (Route.PASTE if size <= thresholds.paste_upto else Route.REGIONS), None


def _scannable(data: str | bytes) -> Scannable | None:
    from errkb.parse.sniff import has_yaml_fold, looks_like_container, starts_like_container
    from errkb.parse.text import needs_decoding

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if needs_decoding(raw) or starts_like_container(raw):
        return None
    if not looks_like_container(raw):
        return Scannable(raw, False)
    if has_yaml_fold(raw):
        return None  # YAML's folded scalars: the container path rejoins them
    from errkb.parse.containers import MAX_DOCUMENT_CHARS

    # A decode never makes more characters than bytes, so only a larger input is decoded to
    # count them.
    if len(raw) <= MAX_DOCUMENT_CHARS or raw.isascii():
        return Scannable(raw, len(raw) <= MAX_DOCUMENT_CHARS)
    return Scannable(raw, len(raw.decode("utf-8", "replace")) <= MAX_DOCUMENT_CHARS)
