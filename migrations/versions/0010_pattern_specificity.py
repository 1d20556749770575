"""pattern_specs.specificity: how much of a message a record's template pins down

A match of a generic template (``Expected {}``, ``error: {}``, a message the interpreter itself
prints) is an answer only with the record's class and frame (``errkb.match.decide``). The
measure of how generic a template is (``errkb.records.specificity``) is computed with the rest
of a record's matcher at sync time and stored beside it. Rows written before this revision hold
NULL, which explain reads as "compute it from the stored template" (the same value), until the
next write compiles them again (``COMPILER_VERSION`` 3).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07 20:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pattern_specs", sa.Column("specificity", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pattern_specs") as batch:
        batch.drop_column("specificity")
