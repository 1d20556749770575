"""``python -m errkb``: the same as the ``errkb`` command."""

from errkb.cli import main

main()
