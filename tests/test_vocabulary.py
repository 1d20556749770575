"""The one vocabulary: every error word the parser knows is found by the large-input scan."""

from __future__ import annotations

from errkb.parse import regions, vocabulary
from errkb.parse.vocabulary import (
    ERROR_LEVELS,
    EXCEPTION_SUFFIXES,
    KNOWN_EXCEPTION_CLASSES,
    REGION_KEYWORDS,
    REGION_PYTEST_E,
    REGION_TRACEBACK,
    is_exception_class,
)


def _found(word: str) -> bool:
    return any(k.decode() in word for k in REGION_KEYWORDS if not k.startswith(b"\n"))


def test_every_error_word_is_a_region_keyword() -> None:
    # A word the parser treats as an error but the scan cannot find is lost only above 1 MiB.
    for word in (*ERROR_LEVELS, *KNOWN_EXCEPTION_CLASSES, *EXCEPTION_SUFFIXES):
        assert _found(word), word
    for suffix in EXCEPTION_SUFFIXES:
        assert _found("Some" + suffix)


def test_region_scan_uses_the_vocabulary() -> None:
    assert regions.KEYWORDS is vocabulary.REGION_KEYWORDS
    assert REGION_KEYWORDS[REGION_TRACEBACK] == b"Traceback"
    assert REGION_KEYWORDS[REGION_PYTEST_E] == b"\nE   "


def test_stop_async_iteration_is_found_in_a_large_log() -> None:
    noise = "INFO all good\n" * 90_000
    text = noise + "StopAsyncIteration: the stream ended early\n" + noise
    assert len(text) > regions.NARROW_ABOVE
    events = regions.parse_input(text)
    assert [(e.exc_class, e.lines) for e in events] == [("StopAsyncIteration", (90_001,))]


def test_exception_class_words() -> None:
    assert is_exception_class("torch._dynamo.exc.InternalTorchDynamoError")
    assert is_exception_class("KeyboardInterrupt")
    assert not is_exception_class("Error") and not is_exception_class("Warning")
