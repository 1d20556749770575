"""drop the index on records.retired

Nearly every record is live, so the index never narrows a query; worse, a ``retired = 0`` term
lured SQLite's planner onto it instead of the primary key, turning a look-up of a few ids into a
scan of every record (155 ms a query at 150,000 records).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 21:15:00
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("records", schema=None) as batch_op:
        batch_op.drop_index("ix_records_retired")


def downgrade() -> None:
    with op.batch_alter_table("records", schema=None) as batch_op:
        batch_op.create_index("ix_records_retired", ["retired"], unique=False)
