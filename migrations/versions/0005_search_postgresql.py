"""full-text search on PostgreSQL: a tsvector column with a GIN index, kept current by a trigger

Migration 0004 built SQLite's FTS5 index; this is the same index for the PostgreSQL backend
(``errkb.store.postgres``), over the same fields: message template, slug, class, tags,
documentation, trigger scenarios, common situations and solutions. ``records.search_tsv`` holds
each record's words (the ``simple`` configuration: lower-cased, no stemming and no stop words,
like FTS5's unicode61), weighted A (message), B (slug), C (class, tags) and D (the prose and the
solutions), and ``search_records_tsv`` is its GIN index. A BEFORE trigger computes the column on
every insert and on every update of those fields, so every write path (ingest, sync, rollback,
COPY) keeps it current in its own transaction. Retiring a record only sets its flag (searches
filter on it), so it does not touch the index.

Words are split where the query side splits them (``errkb.search.words``: letters and digits),
so punctuation is turned into spaces first: PostgreSQL's parser would otherwise keep
``torch.nn.functional`` or a path as one token that no query word equals. Tags and solutions are
read from the record's ``raw_json``, as on SQLite; a record whose JSON PostgreSQL refuses (NaN
in an unknown field) is indexed without them rather than failing the write.

On SQLite this revision changes nothing.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: Punctuation (ASCII; other symbols the parser drops itself) to spaces, bounded in length: a
#: tsvector holds at most 1 MB, and the words of a record's first 256 KiB per field find it.
WORDS_FUNCTION = r"""
CREATE FUNCTION errkb_search_words(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT regexp_replace(left(coalesce(value, ''), 262144), '[[:punct:][:space:]]+', ' ', 'g') $$
"""

TRIGGER_FUNCTION = r"""
CREATE FUNCTION errkb_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    doc jsonb;
    tags text;
    solutions text;
BEGIN
    BEGIN
        doc := NEW.raw_json::jsonb;
    EXCEPTION WHEN others THEN
        doc := NULL;
    END;
    IF jsonb_typeof(doc -> 'tags') = 'array' THEN
        tags := (doc -> 'tags')::text;
    END IF;
    IF jsonb_typeof(doc -> 'solutions') = 'array' THEN
        solutions := (doc -> 'solutions')::text;
    END IF;
    NEW.search_tsv :=
        setweight(to_tsvector('simple', errkb_search_words(NEW.error_message)), 'A')
        || setweight(to_tsvector('simple', errkb_search_words(NEW.slug)), 'B')
        || setweight(to_tsvector('simple', errkb_search_words(NEW.error_class)), 'C')
        || setweight(to_tsvector('simple', errkb_search_words(tags)), 'C')
        || setweight(to_tsvector('simple', errkb_search_words(NEW.documentation)), 'D')
        || setweight(to_tsvector('simple', errkb_search_words(NEW.trigger_scenarios)), 'D')
        || setweight(to_tsvector('simple', errkb_search_words(NEW.common_situations)), 'D')
        || setweight(to_tsvector('simple', errkb_search_words(solutions)), 'D');
    RETURN NEW;
END
$$
"""

TRIGGER = """
CREATE TRIGGER search_records_tsv BEFORE INSERT OR UPDATE OF
    error_message, slug, error_class, documentation, trigger_scenarios, common_situations,
    raw_json ON records FOR EACH ROW EXECUTE FUNCTION errkb_search_tsv()
"""


def _postgresql() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    if not _postgresql():
        return
    op.execute("ALTER TABLE records ADD COLUMN search_tsv tsvector")
    op.execute(WORDS_FUNCTION)
    op.execute(TRIGGER_FUNCTION)
    op.execute(TRIGGER)
    # Upgrading fills the column from the records already there (the trigger computes it).
    op.execute("UPDATE records SET raw_json = raw_json")
    op.execute("CREATE INDEX search_records_tsv ON records USING gin (search_tsv)")


def downgrade() -> None:
    if not _postgresql():
        return
    op.execute("DROP INDEX IF EXISTS search_records_tsv")
    op.execute("DROP TRIGGER IF EXISTS search_records_tsv ON records")
    op.execute("DROP FUNCTION IF EXISTS errkb_search_tsv()")
    op.execute("DROP FUNCTION IF EXISTS errkb_search_words(text)")
    op.execute("ALTER TABLE records DROP COLUMN search_tsv")
