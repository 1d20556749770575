"""``Diagnostics``: what a command writes on standard error beside its report."""

from __future__ import annotations

from dataclasses import dataclass

#: Problems listed on standard error beside a report; the rest are counted ("... and N more")
#: and are all in the reject report or the JSON output.
MAX_SHOWN_PROBLEMS = 20


@dataclass(frozen=True)
class Diagnostics:
    """What a command writes on standard error beside its report (rendered, so escaped, as text)."""

    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    limit: int | None = None  #: at most this many problems shown
    before: tuple[str, ...] = ()  #: lines before the problems (``sync --verbose``)
    after: tuple[str, ...] = ()  #: lines after them (where the rejects were written)

    exit_code = 0
