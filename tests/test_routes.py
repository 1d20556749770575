"""Route choice (errkb.explain.routes): one function over an input's size and shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errkb.explain import DEFAULT_THRESHOLDS, Route, Thresholds, choose_route
from errkb.explain.routes import cold_paste
from tests.conftest import EXAMPLES

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


def test_a_process_with_its_record_anchors_unloaded_parses_what_costs_less_whole() -> None:
    # Loading the anchors costs about their stored size over ``cold_ratio`` bytes of parse: an
    # input under that (and under paste_upto) is a paste in a cold process.
    data = PLAIN * 5  # 140 bytes: scanned when the anchors are loaded
    sizes = Thresholds(scan_from=100, paste_upto=200, cold_ratio=10)
    assert choose_route(data, sizes)[0] is Route.SCAN
    assert choose_route(data, sizes, unloaded=lambda: 10 * len(data))[0] is Route.PASTE
    assert choose_route(data, sizes, unloaded=lambda: 10 * len(data) - 1)[0] is Route.SCAN
    # Never past paste_upto, never with the rule off, never below scan_from's own paste.
    assert choose_route(PLAIN * 8, sizes, unloaded=lambda: 1 << 30)[0] is Route.SCAN
    off = Thresholds(scan_from=100, paste_upto=200, cold_ratio=0)
    assert choose_route(data, off, unloaded=lambda: 1 << 30)[0] is Route.SCAN
    assert not cold_paste(50, sizes, lambda: 1 << 30)


def test_a_cold_explain_of_a_scannable_input_is_a_paste_with_the_scan_s_report(
    tmp_path: Path,
) -> None:
    import errkb
    from errkb.match import recordscan
    from errkb.match.recordanchors import record_anchordb_path

    example = (EXAMPLES / "quanto-incompatible-scale.log").read_bytes()
    data = b"2026-12-01 INFO step loaded\n" * 40 + example + b"KeyError: 'gone'\n"
    sizes = Thresholds(scan_from=1000, paste_upto=1 << 20, cold_ratio=1)
    db = tmp_path / "kb.sqlite3"
    with errkb.open(db, thresholds=Thresholds(cold_ratio=0)) as kb:
        scanned = kb.explain(data, thresholds=Thresholds(scan_from=1000, cold_ratio=0))
    # The bundled knowledge base's anchors are small: the input is smaller still.
    assert 1000 <= len(data) <= record_anchordb_path(db).stat().st_size
    calls: list[int] = []
    real = recordscan.record_scan

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recordscan, "record_scan", counted)
        with errkb.open(db, thresholds=sizes) as cold:
            pasted = cold.explain(data)  # its record anchors unloaded: parsed whole
            assert calls == []
            cold.prepare()  # a warm process: the anchors loaded, the same input scanned
            warm = cold.explain(data)
            assert calls == [1]
    assert pasted.to_dict() == scanned.to_dict() == warm.to_dict()
    assert [m.id for m in pasted.exact]
