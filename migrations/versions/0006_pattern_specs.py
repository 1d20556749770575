"""pattern specs: each record's compiled matcher as narrow columns, and its index words

``pattern_specs`` holds, for each record, what ``errkb.records.patterns.compile_record`` makes of
it (the ``PatternSpec``: regex, capture names, repr flags, slot kinds, anchor, ...; tuples as
JSON text) and the words the match index ranks (``words``). The caller computes them as it
validates (a sync's worker processes), the store writes them beside the record in the same
transaction, and explain reads the rows of its candidate records instead of compiling them:
at 500k records building a spec was 4.8 ms of the slowest explains. The match index is rebuilt
from ``words`` alone, with no template parsed in the transaction.

Upgrading leaves the table empty and marks the match index stale (meta ``match_index``): the
next writable open derives every record's row and rebuilds the index (``Store.reindex``);
until then, or on a read-only copy, explain compiles the records it lacks rows for.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pattern_specs",
        sa.Column("record_id", sa.String(length=16), nullable=False),
        sa.Column("regex", sa.Text(), nullable=False),
        sa.Column("names", sa.Text(), nullable=False),
        sa.Column("repr_groups", sa.Text(), nullable=False),
        sa.Column("kinds", sa.Text(), nullable=False),
        sa.Column("anchor", sa.Text(), nullable=False),
        sa.Column("literal_length", sa.Integer(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error_class", sa.String(), nullable=True),
        sa.Column("file_path", sa.Text(), nullable=False),
        sa.Column("line_number", sa.Integer(), nullable=True),
        sa.Column("functions", sa.Text(), nullable=False),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("literals", sa.Text(), nullable=False),
        sa.Column("words", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["record_id"], ["records.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("record_id"),
    )
    op.execute(
        "INSERT INTO meta (key, value) VALUES ('match_index', 'stale') "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )


def downgrade() -> None:
    op.drop_table("pattern_specs")
