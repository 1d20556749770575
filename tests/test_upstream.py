from __future__ import annotations

from typing import Any

from errkb.records import upstream


def test_seed_ids_slugs_and_patterns_follow_upstream(
    seed_records: dict[str, dict[str, Any]],
) -> None:
    assert len(seed_records) == 3
    for rid, rec in seed_records.items():
        assert (
            upstream.record_id(rec["repo"], rec["errorCode"], rec["errorMessage"], rec["filePath"])
            == rid
        )
        assert upstream.slug(rec["errorCode"], rec["errorMessage"]) == rec["slug"]
        assert upstream.message_pattern(rec["errorMessage"]) == rec["messagePattern"]


def test_error_code_takes_precedence() -> None:
    a = upstream.record_id("o/r", "E42", "message one", "f.py")
    b = upstream.record_id("o/r", "E42", "message two", "f.py")
    assert a == b
    assert upstream.slug("E42_Bad Thing", "ignored") == "e42-bad-thing"


def test_short_literal_falls_back_to_escaped_message() -> None:
    assert upstream.message_pattern("{a}: {b}") == r"\{a\}: \{b\}"
    assert upstream.message_pattern("value (x) is {v}") == r"value \(x\) is (.+?)"
