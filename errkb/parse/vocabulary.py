"""The log vocabulary: level words and error words, listed once for every part of the parser.

The prefix rules, the traceback parser and the region scan all derive their words from the
tuples at the top; ``tests/test_vocabulary.py`` checks every error word is a region keyword.
"""

from __future__ import annotations

__all__ = [
    "ERROR_LEVELS",
    "EXCEPTION_SUFFIXES",
    "KNOWN_EXCEPTION_CLASSES",
    "LEVEL_WORDS",
    "REGION_KEYWORDS",
    "REGION_PYTEST_E",
    "REGION_TRACEBACK",
    "is_exception_class",
    "level_alternation",
]

#: Log level words a logger prefix can carry, longest spelling first where they overlap.
LEVEL_WORDS: tuple[str, ...] = (
    "DEBUG",
    "INFO",
    "WARNING",
    "WARN",
    "ERROR",
    "CRITICAL",
    "FATAL",
    "TRACE",
    "NOTICE",
    "EXCEPTION",
)
#: Levels that make a log line an error report on its own (no traceback needed).
ERROR_LEVELS: frozenset[str] = frozenset({"ERROR", "CRITICAL", "FATAL", "EXCEPTION"})
#: Extra severities of cloud log exports ("ERROR 2025-04-04T06:24:51.49Z ").
CLOUD_SEVERITIES: tuple[str, ...] = ("DEFAULT", "ALERT", "EMERGENCY")
#: glog / torch's one-letter severities ("W0828 05:10:05.123456 ...").
GLOG_LEVELS: dict[str, str] = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}

#: A class name ending in one of these (after some stem) is an exception class on its own.
EXCEPTION_SUFFIXES: tuple[str, ...] = ("Error", "Exception", "Warning", "Exit", "Interrupt")
#: Builtin exception classes whose names carry no suffix (or are nothing but one).
KNOWN_EXCEPTION_CLASSES: frozenset[str] = frozenset(
    {
        "Exception", "BaseException", "ExceptionGroup", "BaseExceptionGroup",
        "KeyboardInterrupt", "StopIteration", "StopAsyncIteration", "GeneratorExit",
        "SystemExit",
    }
)  # fmt: skip

#: Words that, besides class suffixes and error levels, mark a line worth parsing in a large
#: log; kept short (every extra word adds windows).
_OTHER_ERROR_WORDS: tuple[str, ...] = (
    "error", "exception", "Critical", "Fatal", "fatal",
    "failed", "Failed", "FAILED", "Assert", "assert",
)  # fmt: skip


def is_exception_class(name: str) -> bool:
    """Tell whether a (possibly dotted) name looks like an exception class on its own.

    Its last part ends in Error/Exception/Warning/Exit/Interrupt after a stem, or is a known
    builtin; bare ``Error`` and ``Warning`` do not count.
    """
    last = name.rsplit(".", 1)[-1]
    if last in KNOWN_EXCEPTION_CLASSES:
        return True
    return any(last.endswith(s) and len(last) > len(s) for s in EXCEPTION_SUFFIXES)


def level_alternation(extra: tuple[str, ...] = ()) -> str:
    """The level words as a regex alternation (fixed words, no metacharacters)."""
    return "|".join((*LEVEL_WORDS, *extra))


def _region_keywords() -> tuple[bytes, ...]:
    words: list[str] = []

    def add(word: str) -> None:
        if word not in words:
            words.append(word)

    add("Traceback")  # first: the region scan treats index 0 as a traceback header
    for suffix in EXCEPTION_SUFFIXES:
        add(suffix)
    for level in ("ERROR", "EXCEPTION", "WARNING", "CRITICAL", "FATAL"):
        add(level)
    for name in sorted(KNOWN_EXCEPTION_CLASSES):
        # Only names that no suffix above already finds.
        if not any(s in name for s in EXCEPTION_SUFFIXES):
            add(name)
    for word in _OTHER_ERROR_WORDS:
        add(word)
    out = [w.encode() for w in words]
    out.append(b"\nE   ")  # last: pytest's exception lines (the hit starts at the newline)
    return tuple(out)


#: The words one Aho-Corasick pass looks for to find the lines worth parsing in a large log.
REGION_KEYWORDS: tuple[bytes, ...] = _region_keywords()
#: Index of the traceback header in ``REGION_KEYWORDS``.
REGION_TRACEBACK = 0
#: Index of pytest's ``E   `` line in ``REGION_KEYWORDS``.
REGION_PYTEST_E = len(REGION_KEYWORDS) - 1
