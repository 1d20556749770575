"""match words: every live record's index words by word, and how many live records hold each

The match index (``match_tokens``) keeps each record's rarest few words; their rarity is a
count over the whole knowledge base, so a write that changes a few records' words could only
be ranked by reading every live record's words again (at 500,000 records a 1% sync that
retired and added records ranked the whole index again: two million rows). Two tables let a
write find exactly the records whose ranking can move, and rank them alone
(``errkb.store.engine``):

* ``match_words`` (word, record id): each live record's index words (``pattern_specs.words``),
  keyed by word: the records holding a word, read by its key;
* ``match_word_counts`` (word, n): how many live records hold the word, indexed by count: the
  words whose rarity lies between a changed word's old and new count.

Upgrading leaves both empty and marks the match index stale (meta ``match_index``, as
migration 0006 did): the next writable open ranks the index whole, which fills them.

It follows 0010 (``pattern_specs.specificity``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 20:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "match_words",
        sa.Column("word", sa.String(), nullable=False),
        sa.Column("record_id", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("word", "record_id"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "match_word_counts",
        sa.Column("word", sa.String(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("word"),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_match_word_counts_n", "match_word_counts", ["n"], unique=False)
    op.execute(
        "INSERT INTO meta (key, value) VALUES ('match_index', 'stale') "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )


def downgrade() -> None:
    op.drop_index("ix_match_word_counts_n", table_name="match_word_counts")
    op.drop_table("match_word_counts")
    op.drop_table("match_words")
