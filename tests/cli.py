"""Running the ``errkb`` CLI in-process from tests, as the per-family ``test_cli_*`` files do."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from errkb.cli import cli
from tests.conftest import EXAMPLES

QUANTO_LOG = EXAMPLES / "quanto-incompatible-scale.log"


def run(db: Path, *args: str, input: bytes | str | None = None) -> Result:
    """``errkb --db DB ARGS`` through click (faster than a subprocess)."""
    result = CliRunner().invoke(cli, ["--db", str(db), *args], input=input)
    # An unexpected crash must not pass as a handled error with exit 1 or 2.
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result
