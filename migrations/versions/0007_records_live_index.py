"""a covering index of live records: (id, retired)

Every read of a record by id checks that it is live (``retired = FALSE``), and in SQLite
``retired`` sits after ``raw_json`` in each row: reading it walks the row's overflow pages
(the average row is larger than a 4 KiB page). With this index the check reads the index
alone: the look-up of an id, its liveness, the live ids in order (the anchor build's scan)
are index-only. 20,000 random spec rows at 150,000 records, a fresh process (the file in the
page cache): 1.25 s of CPU with the join on ``records`` before, 0.13 s with the index (0.12 s
without any join); the 6,283 spec rows of the dense bench log's first scan, read in id order,
0.18 -> 0.13 s. It leads with ``id``, so a ``retired = 0`` term cannot lure the planner onto a
scan of every record as the index dropped in 0003 did. Built at 150,000 records in 0.5 s.
PostgreSQL keeps a large ``raw_json`` out of line (TOAST), so there it only spares the visit
to the row (not measured); it is made on both backends so that one set of models describes
both schemas.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 15:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_records_live", "records", ["id", "retired"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_records_live", table_name="records")
