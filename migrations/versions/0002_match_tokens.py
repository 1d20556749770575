"""match index: the rare literal tokens that select candidate records for a message

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 19:55:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "match_tokens",
        sa.Column("token", sa.String(), nullable=False),
        sa.Column("record_id", sa.String(length=16), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["record_id"], ["records.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("record_id", "rank"),
    )
    with op.batch_alter_table("match_tokens", schema=None) as batch_op:
        batch_op.create_index("ix_match_tokens_token_rank", ["token", "rank"], unique=False)
    # Existing databases get their index on the next write; until then explain rebuilds it.
    # ON CONFLICT: the upsert both SQLite (3.24+) and PostgreSQL speak.
    op.execute(
        "INSERT INTO meta (key, value) VALUES ('match_index', 'stale') "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )


def downgrade() -> None:
    with op.batch_alter_table("match_tokens", schema=None) as batch_op:
        batch_op.drop_index("ix_match_tokens_token_rank")
    op.drop_table("match_tokens")
