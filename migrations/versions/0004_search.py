"""full-text search: an FTS5 index over the records' words, kept current by triggers

``search_fts`` is a contentless FTS5 table (the text already lives in ``records``; a second copy
would double the database) over each record's message template, slug, class, tags,
documentation, trigger scenarios, common situations and solutions. ``search_docs`` gives every
record a stable integer key for it (an INTEGER PRIMARY KEY survives VACUUM; the implicit rowid of
``records`` does not). Triggers on ``records`` maintain both in the same transaction as every
write, whatever code path writes: tags and solutions are read from the record's ``raw_json``, so
the child tables need no triggers. Retiring a record only sets its flag (searches filter on it),
so it does not touch the index.

A contentless table forgets its text: removing a row means handing FTS5 the very values it
indexed (the ``'delete'`` command), so the update and delete triggers recompute them from OLD
with the same expressions as the insert trigger. Any later migration that rebuilds ``records``
(a batch ALTER) drops these triggers and must recreate them (``SEARCH_TRIGGERS`` below).

Upgrading fills the index from the records already there.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _values(row: str) -> str:
    """The indexed values of the record ``row`` (NEW, OLD or a table alias), in column order."""

    # A record's unknown fields are kept verbatim, and may hold NaN or Infinity, which SQLite's
    # JSON functions refuse (an error would abort the whole write): such a record is indexed
    # without its tags and solutions rather than not at all.
    def items(path: str) -> str:
        return (
            f"CASE WHEN json_valid({row}.raw_json) THEN (SELECT group_concat(value, ' ') "
            f"FROM json_each({row}.raw_json, '{path}')) END"
        )

    return (
        f"{row}.error_message, {row}.slug, {row}.error_class, ({items('$.tags')}), "
        f"{row}.documentation, {row}.trigger_scenarios, {row}.common_situations, "
        f"({items('$.solutions')})"
    )


COLUMNS = "message, slug, class, tags, documentation, triggers, situations, solutions"

SEARCH_TRIGGERS = (
    f"""
    CREATE TRIGGER search_records_insert AFTER INSERT ON records BEGIN
        INSERT INTO search_docs (record_id) VALUES (NEW.id);
        INSERT INTO search_fts (rowid, {COLUMNS})
            SELECT d.key, {_values("NEW")} FROM search_docs d WHERE d.record_id = NEW.id;
    END
    """,
    f"""
    CREATE TRIGGER search_records_update AFTER UPDATE OF
        error_message, slug, error_class, documentation, trigger_scenarios, common_situations,
        raw_json ON records BEGIN
        INSERT INTO search_fts (search_fts, rowid, {COLUMNS})
            SELECT 'delete', d.key, {_values("OLD")} FROM search_docs d
            WHERE d.record_id = OLD.id;
        INSERT INTO search_fts (rowid, {COLUMNS})
            SELECT d.key, {_values("NEW")} FROM search_docs d WHERE d.record_id = NEW.id;
    END
    """,
    f"""
    CREATE TRIGGER search_records_delete AFTER DELETE ON records BEGIN
        INSERT INTO search_fts (search_fts, rowid, {COLUMNS})
            SELECT 'delete', d.key, {_values("OLD")} FROM search_docs d
            WHERE d.record_id = OLD.id;
        DELETE FROM search_docs WHERE record_id = OLD.id;
    END
    """,
)


def _sqlite() -> bool:
    # FTS5 and these triggers are SQLite's. Another backend keeps its own full-text index
    # (its ReadView.search); on it this revision changes nothing.
    return bool(op.get_bind().dialect.name == "sqlite")


def upgrade() -> None:
    if not _sqlite():
        return
    op.execute(
        "CREATE TABLE search_docs (key INTEGER PRIMARY KEY, record_id VARCHAR(16) NOT NULL UNIQUE)"
    )
    # unicode61 splits on punctuation (slugs, dotted names, snake_case) and folds case and
    # diacritics; the query side quotes every term itself, so no query text is FTS syntax.
    op.execute(
        f"CREATE VIRTUAL TABLE search_fts USING fts5({COLUMNS}, content='', "
        "tokenize='unicode61 remove_diacritics 2')"
    )
    # Document frequencies of terms: the query drops words nearly every record has.
    op.execute("CREATE VIRTUAL TABLE search_vocab USING fts5vocab(search_fts, 'row')")
    op.execute("INSERT INTO search_docs (record_id) SELECT id FROM records ORDER BY id")
    op.execute(
        f"INSERT INTO search_fts (rowid, {COLUMNS}) SELECT d.key, {_values('r')} "
        "FROM records r JOIN search_docs d ON d.record_id = r.id"
    )
    for trigger in SEARCH_TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    if not _sqlite():
        return
    for name in ("search_records_insert", "search_records_update", "search_records_delete"):
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS search_vocab")
    op.execute("DROP TABLE IF EXISTS search_fts")
    op.execute("DROP TABLE search_docs")
