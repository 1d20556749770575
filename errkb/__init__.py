"""errkb: an error-knowledge database and matcher for the ErrLookup dataset."""

from __future__ import annotations

__version__ = "0.1.0"
