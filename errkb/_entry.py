"""The ``errkb`` script's entry point: Ctrl-C while the command line is still importing.

Until ``errkb.cli`` is imported, SIGINT exits 130 with nothing printed, as it does once a
command runs. The collector is held off meanwhile: what the imports make lives until the
process exits, so a collection then would free nothing (``errkb.cli.main`` freezes it). This
module imports nothing but ``gc`` and ``signal``.
"""

from __future__ import annotations

import gc
import signal
import sys
from types import FrameType
from typing import NoReturn


def _quiet(_signum: int, _frame: FrameType | None) -> NoReturn:
    raise SystemExit(130)


def main() -> NoReturn:
    """Import the command line with a quiet SIGINT, then run it (its own Ctrl-C handling)."""
    previous = None
    # A SIGINT the parent ignores (a background job of a shell) stays ignored.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            previous = signal.signal(signal.SIGINT, _quiet)
        except ValueError:  # not the main thread: leave signals alone
            previous = None
    collecting = gc.isenabled()
    gc.disable()
    try:
        from errkb.cli import main as cli_main
    finally:
        if collecting:
            gc.enable()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    cli_main()
    sys.exit(0)  # pragma: no cover - cli_main always exits
