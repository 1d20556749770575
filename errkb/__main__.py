"""``python -m errkb``: the same as the ``errkb`` command."""

from errkb._entry import main

main()
