"""PostgreSQL: a record's search vector as a function, which a bulk write may compute beside it

Migration 0005's trigger computed each record's ``search_tsv`` inside the writing backend, row
by row: parsing ``raw_json`` for the tags and solutions, eight ``regexp_replace`` and
``to_tsvector`` calls, ~100 us a record, which at 500,000 records kept the one backend of a
sync's transaction busy for ~50 s of its time while the machine's other core had little to
do. Its body is now the function ``errkb_search_vector`` (the same expressions, the same
answer), and the trigger keeps a vector the writer gives on INSERT when the transaction says
so (``SET LOCAL errkb.search_vectors = 'given'``): errkb's bulk writes
(``errkb.store.postgres``) have a second connection compute the vectors with this very
function while the first writes the rows. Without that setting, on UPDATE, or for a row given
none, the trigger computes the vector as before, so every other write path is unchanged.

On SQLite this revision changes nothing.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 14:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: Migration 0005's trigger body as a function of the record's columns (its value unchanged).
VECTOR_FUNCTION = r"""
CREATE OR REPLACE FUNCTION errkb_search_vector(
    error_message text, slug text, error_class text, raw_json text, documentation text,
    trigger_scenarios text, common_situations text
) RETURNS tsvector LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    doc jsonb;
    tags text;
    solutions text;
BEGIN
    BEGIN
        doc := raw_json::jsonb;
    EXCEPTION WHEN others THEN
        doc := NULL;
    END;
    IF jsonb_typeof(doc -> 'tags') = 'array' THEN
        tags := (doc -> 'tags')::text;
    END IF;
    IF jsonb_typeof(doc -> 'solutions') = 'array' THEN
        solutions := (doc -> 'solutions')::text;
    END IF;
    RETURN
        setweight(to_tsvector('simple', errkb_search_words(error_message)), 'A')
        || setweight(to_tsvector('simple', errkb_search_words(slug)), 'B')
        || setweight(to_tsvector('simple', errkb_search_words(error_class)), 'C')
        || setweight(to_tsvector('simple', errkb_search_words(tags)), 'C')
        || setweight(to_tsvector('simple', errkb_search_words(documentation)), 'D')
        || setweight(to_tsvector('simple', errkb_search_words(trigger_scenarios)), 'D')
        || setweight(to_tsvector('simple', errkb_search_words(common_situations)), 'D')
        || setweight(to_tsvector('simple', errkb_search_words(solutions)), 'D');
END
$$
"""

TRIGGER_FUNCTION = r"""
CREATE OR REPLACE FUNCTION errkb_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.search_tsv IS NOT NULL
            AND current_setting('errkb.search_vectors', true) = 'given' THEN
        RETURN NEW;
    END IF;
    NEW.search_tsv := errkb_search_vector(
        NEW.error_message, NEW.slug, NEW.error_class, NEW.raw_json, NEW.documentation,
        NEW.trigger_scenarios, NEW.common_situations);
    RETURN NEW;
END
$$
"""


def _postgresql() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    if not _postgresql():
        return
    op.execute(VECTOR_FUNCTION)
    op.execute(TRIGGER_FUNCTION)


def downgrade() -> None:
    if not _postgresql():
        return
    # Migration 0005's trigger again (nothing given is kept), through the function, which
    # stays: it computes what 0005's body did.
    op.execute(
        "CREATE OR REPLACE FUNCTION errkb_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN NEW.search_tsv := errkb_search_vector(NEW.error_message, NEW.slug, "
        "NEW.error_class, NEW.raw_json, NEW.documentation, NEW.trigger_scenarios, "
        "NEW.common_situations); RETURN NEW; END $$"
    )
