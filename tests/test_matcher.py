"""The matchers' helpers (errkb.match.matcher): the masked templates similar ranks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from errkb.match.matcher import masked_template
from errkb.records.template import parse_template
from tests.conftest import load_seed_envelopes

#: Pieces a template is made of, the ones the parse treats specially included.
PIECES = ["{name}", "{obj.attr!r}", "{0}", "{}", "{{", "}}", "{", "}", "%s", "%(k)d", "${x}"]
PIECES += ["{a:>4}", "{ }", '{"a": 1}', "{x!r", "text ", "'", '"', "(", ")", "é", "\n", "%%"]


@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_masked_template_is_the_parse_s_masked_text(pieces: list[str]) -> None:
    message = "".join(pieces)
    assert masked_template(message) == parse_template(message).masked(" ")
    assert masked_template(message, "\u2026") == parse_template(message).masked("\u2026")


def test_every_bundled_template_masks_as_the_parse_does() -> None:
    messages = [e["record"]["errorMessage"] for e in load_seed_envelopes()]
    assert messages
    for message in messages:
        assert masked_template(message) == parse_template(message).masked(" "), message
