# ruff: noqa
# fmt: off
"""One raise site per message form. tests/test_extract.py asserts these line numbers."""

import errors


def forms(prefix, x, name, d, width, count, items):
    if x == 1:
        raise ValueError("plain literal message")  # line 10
    if x == 2:
        raise ValueError("implicit " "concatenation " f"with {name}")  # line 12
    if x == 3:
        raise errors.ConfigError(f"layer {prefix!r} width {x:>8} spec {x:{width}}")  # line 14
    if x == 4:
        raise TypeError("expected {}, got {name!r}".format(x, name=name))  # line 16
    if x == 5:
        raise KeyError("missing %s (%(count)d%% done)" % {"count": count})  # line 18
    if x == 6:
        raise RuntimeError("count: " + str(count) + " items")  # line 20
    if x == 7:
        raise ValueError(f"literal {{braces}} and 100% of {d['k']}")  # line 22
    if x == 8:
        raise LookupError(message="keyword message for " + name)  # line 24
    if x == 9:
        raise OSError(f"debug {x=}") from None  # line 26
    if x == 10:
        raise ValueError(f"{name}")  # line 28: no literal text, skipped
    if x == 11:
        raise ValueError(name)  # line 30: not a literal, skipped
    if x == 12:
        raise ValueError  # line 32: no message, skipped
    if x == 13:
        raise make_thing("not an exception class")  # line 34: skipped
    if x == 14:
        raise ValueError("plain literal message")  # line 36: same id as line 10, dropped
    if x == 15:
        raise ValueError(f"{'-'.join(items)} is not {prefix}")  # line 38
    raise error("bad escape %s" % name)  # line 39
