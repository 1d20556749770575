"""Route choice: one function over the input's size and shape, one frozen value of sizes.

A route that cannot read its input hands it to ``REGIONS``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
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

    ``scan_from``: plain text or JSON lines this large are scanned. ``paste_upto``: up to this an
    input is parsed and reported whole. ``release_from``: a scan this large returns the C heap's
    free memory. ``cold_ratio``: a process whose record anchors are not loaded yet parses an
    input whole, not scanned, while it is at most the anchors' stored size over this (and
    ``paste_upto``): the whole parse costs less than loading them (0: always scan).
    ``segment``: a larger scanned input is read one segment of about this size at a time, so
    the scan's per-line arrays are a segment's (0: whole).
    """

    scan_from: int = 1 << 18
    paste_upto: int = 1 << 20
    release_from: int = 8 << 20
    cold_ratio: int = 64
    segment: int = 8 << 20

    def __post_init__(self) -> None:
        for name in ("scan_from", "paste_upto", "release_from", "cold_ratio", "segment"):
            if getattr(self, name) < 0:
                raise ValueError(f"Thresholds.{name} must be at least 0")


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Scannable:
    """An input the scan reads: its bytes, and whether its JSON object lines are decoded."""

    data: bytes
    json_lines: bool


def choose_route(
    data: str | bytes, thresholds: Thresholds, unloaded: Callable[[], int] | None = None
) -> tuple[Route, Scannable | None]:
    """The route that reads ``data``, and for ``SCAN`` the bytes it reads.

    ``SCAN``: plain text (JSON lines decoded) of at least ``scan_from``; else ``PASTE`` up to
    ``paste_upto``; else ``REGIONS``. UTF-16, NUL-ridden, JSON document, markup and YAML-fold
    inputs are never scanned. ``unloaded``: the stored bytes of record anchors a scan would
    load first (0: loaded), asked only of an input that could be scanned; an input
    ``cold_paste`` names is a ``PASTE``.
    """
    size = len(data)
    if unloaded is not None and cold_paste(size, thresholds, unloaded):
        return Route.PASTE, None
    if size >= thresholds.scan_from:
        scannable = _scannable(data)
        if scannable is not None:
            return Route.SCAN, scannable
    return (Route.PASTE if size <= thresholds.paste_upto else Route.REGIONS), None


def cold_paste(size: int, thresholds: Thresholds, unloaded: Callable[[], int]) -> bool:
    """Whether an input of ``size`` that could be scanned is parsed whole instead.

    So while ``unloaded()`` bytes of record anchors are still to load (a one-shot
    ``errkb explain``) and parsing the input whole costs less than loading them (the ratio:
    BENCHMARKS.md, "A cold explain's route"); both routes give one report.
    """
    ratio = thresholds.cold_ratio
    if not ratio or not thresholds.scan_from <= size <= thresholds.paste_upto:
        return False
    return size <= unloaded() // ratio


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

    # A decode never makes more characters than bytes: only a larger input is decoded to count.
    if len(raw) <= MAX_DOCUMENT_CHARS or raw.isascii():
        return Scannable(raw, len(raw) <= MAX_DOCUMENT_CHARS)
    return Scannable(raw, len(raw.decode("utf-8", "replace")) <= MAX_DOCUMENT_CHARS)
