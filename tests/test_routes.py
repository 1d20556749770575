"""Route choice (errkb.explain.routes): one function over an input's size and shape."""

from __future__ import annotations

import json

import pytest

from errkb.explain import DEFAULT_THRESHOLDS, Route, Thresholds, choose_route

SIZES = Thresholds(scan_from=100, paste_upto=200)
PLAIN = b"2026-12-01 INFO step loaded\n"


@pytest.mark.parametrize(
    ("data", "route"),
    [
        (PLAIN * 3, Route.PASTE),  # under scan_from
        (PLAIN * 5, Route.SCAN),  # from scan_from on, below paste_upto too
        ((PLAIN * 5).decode(), Route.SCAN),  # a str reads as its bytes
        (json.dumps({"detail": "x" * 300}).encode(), Route.REGIONS),  # a JSON document
        ("\ufeff".encode("utf-16-le") + "x\n".encode("utf-16-le") * 100, Route.REGIONS),
        (b"<html><body>" + PLAIN * 10 + b"</body></html>", Route.REGIONS),
        (b"<html>" + PLAIN * 3, Route.PASTE),  # markup under scan_from: a paste
    ],
)
def test_the_route_follows_size_and_shape(data: str | bytes, route: Route) -> None:
    chosen, scannable = choose_route(data, SIZES)
    assert chosen is route
    assert (scannable is not None) == (route is Route.SCAN)


def test_json_lines_in_a_plain_log_are_decoded_by_the_scan() -> None:
    data = PLAIN * 5 + json.dumps({"level": "error", "msg": "ValueError: x"}).encode() + b"\n"
    route, scannable = choose_route(data, SIZES)
    assert route is Route.SCAN and scannable is not None and scannable.json_lines
    assert scannable.data == data
    route, plain = choose_route(PLAIN * 5, SIZES)
    assert plain is not None and not plain.json_lines


def test_the_defaults_and_their_bounds() -> None:
    assert DEFAULT_THRESHOLDS.scan_from == 256 * 1024
    assert DEFAULT_THRESHOLDS.paste_upto == 1024 * 1024
    with pytest.raises(ValueError, match="scan_from"):
        Thresholds(scan_from=-1)


def test_the_parse_room_narrows_where_a_paste_ends_by_default() -> None:
    from errkb.parse.regions import NARROW_ABOVE

    # parse_input's own default (a caller with no Thresholds) is a paste's bound.
    assert DEFAULT_THRESHOLDS.paste_upto == NARROW_ABOVE
