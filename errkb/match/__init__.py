"""Matching: record templates, RE2 pattern compilation, the candidate index, and deciding."""

#: Inputs at least this large (characters or bytes) load the anchor table (``errkb.match.scan``):
#: their distinct messages outnumber what the one-off load costs. Smaller ones ask the index in
#: SQLite. Here, not in ``scan``: a small paste's explain asks it, and importing ``scan`` (with
#: ``anchordb``) for the constant cost a cold explain 8 ms of its ~140.
SCAN_ABOVE = 1 << 18
