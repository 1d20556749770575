"""errkb.serve.views: the compact view and full pages, their ceilings and their schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest

import errkb
from errkb.records import schema_validator
from errkb.serve import Service, schemas
from errkb.serve.views import COMPACT_BYTES, Detail, explanation_view, summary
from tests.conftest import EXAMPLES, QUANTO_ID

BASE = (EXAMPLES / "quanto-incompatible-scale.log").read_text()


def layers(n: int) -> str:
    """``n`` tracebacks of one record, each for another layer (other captures)."""
    return "\n".join(BASE.replace("encoder.block.0", f"encoder.block.{i}") for i in range(n))


def view_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schemas.bundled_schema(schemas.EXPLANATION_VIEW))


def test_compact_caps_occurrences_and_validates(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(layers(30))
    data = explanation_view(report).to_dict()
    schema_validator(schemas.EXPLANATION_COMPACT).validate(data)
    view_validator().validate(data)
    (match,) = [m for m in data["matches"] if m["id"] == QUANTO_ID]
    assert len(match["occurrences"]) == 20 and match["omittedOccurrences"] == 10
    assert match["occurrenceCount"] == sum(m.occurrences for m in report.matches)
    assert data["truncated"] is False and data["nextOffset"] is None


def test_full_pages_cover_every_match_under_the_ceiling(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(layers(12))
    assert len(report.matches) == 12
    one = len(json.dumps(report.matches[0].to_dict()))
    budget = 3 * one + 2_000  # room for about two matches beside the envelope
    seen: list[dict[str, Any]] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = explanation_view(report, Detail.FULL, offset=offset, max_bytes=budget).to_dict()
        assert len(json.dumps(page).encode()) <= budget
        view_validator().validate(page)
        schema_validator("explanation.schema.json").validate(page)
        assert page["truncated"] == (page["nextOffset"] is not None)
        seen += page["matches"]
        offset, pages = page["nextOffset"], pages + 1
    assert seen == [m.to_dict() for m in report.matches] and pages > 3


def test_compact_ceiling_and_next_offset(kb: errkb.KnowledgeBase) -> None:
    report = kb.explain(layers(3))
    small = explanation_view(report, max_bytes=500).to_dict()
    # Always at least one match per page, so paging always advances.
    assert len(small["matches"]) == 1
    assert explanation_view(report).to_dict()["truncated"] is False
    assert len(json.dumps(explanation_view(report).to_dict())) <= COMPACT_BYTES
    text = summary(small)
    assert QUANTO_ID in text and "Quote the record's solutions" in text


def test_service_checks_detail_and_offset(kb: errkb.KnowledgeBase) -> None:
    service = Service.create(kb)
    assert "detail" not in service.explain(BASE)  # no detail: the explain --format json object
    assert service.explain(BASE, "compact")["detail"] == "compact"
    with pytest.raises(errkb.ErrkbError, match="detail must be one of"):
        service.explain(BASE, "verbose")
    with pytest.raises(errkb.ErrkbError, match="offset"):
        service.explain(BASE, "full", -1)


def test_compact_view_keeps_a_records_possible_matches_apart_from_its_answers() -> None:
    from errkb.report import Confidence, ExceptionInfo, Match
    from errkb.serve.views import compact_matches

    def match(confidence: Confidence, value: str) -> Match:
        return Match(
            id="a" * 16,
            slug="s",
            confidence=confidence,
            score=0.9,
            captures=(("x", value),),
            occurrences=1,
            lines=(1,),
            exception=ExceptionInfo("ValueError", value),
            record={"errorMessage": "Expected {x}"},
        )

    entries = compact_matches([match(Confidence.EXACT, "1"), match(Confidence.POSSIBLE, "2")])
    assert [(e["confidence"], e["occurrenceCount"]) for e in entries] == [
        ("exact", 1),
        ("possible", 1),
    ]
