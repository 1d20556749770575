"""The knowledge base's tables, as a typed SQLAlchemy 2 ORM (a test checks they match Alembic's).

A record row is never deleted: absent from a full snapshot, it is ``retired``. Every change
adds a ``record_history`` row with the content *before* it (None: added), tagged with its
``dataset_versions`` row, so any record at any version can be rebuilt and a rollback is one
more change.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from errkb.store.interface import ChangeKind, VersionKind

__all__ = ["Base", "ChangeKind", "VersionKind"]


class Base(DeclarativeBase):
    """Declarative base of errkb's tables."""


class RecordRow(Base):
    __tablename__ = "records"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    repo: Mapped[str] = mapped_column(String)
    slug: Mapped[str] = mapped_column(String, index=True)
    error_code: Mapped[str | None] = mapped_column(String)
    error_message: Mapped[str] = mapped_column(Text)
    message_pattern: Mapped[str] = mapped_column(Text)
    error_type: Mapped[str] = mapped_column(String)
    error_class: Mapped[str | None] = mapped_column(String, index=True)
    http_status: Mapped[int | None] = mapped_column(Integer)
    severity: Mapped[str] = mapped_column(String)
    file_path: Mapped[str] = mapped_column(Text)
    line_number: Mapped[int | None] = mapped_column(Integer)
    source_code: Mapped[str | None] = mapped_column(Text)
    source_code_start: Mapped[int | None] = mapped_column(Integer)
    source_code_end: Mapped[int | None] = mapped_column(Integer)
    github_url: Mapped[str] = mapped_column(Text)
    documentation: Mapped[str] = mapped_column(Text)
    trigger_scenarios: Mapped[str] = mapped_column(Text)
    common_situations: Mapped[str] = mapped_column(Text)
    example_fix: Mapped[str | None] = mapped_column(Text)
    handling_strategy: Mapped[str | None] = mapped_column(String)
    validation_code: Mapped[str | None] = mapped_column(Text)
    type_guard: Mapped[str | None] = mapped_column(Text)
    try_catch_pattern: Mapped[str | None] = mapped_column(Text)
    background_tag: Mapped[str | None] = mapped_column(String)
    content_changed_at: Mapped[str | None] = mapped_column(String)
    analyzed_sha: Mapped[str] = mapped_column(String(40))
    analyzed_at: Mapped[str] = mapped_column(String)
    schema_version: Mapped[int] = mapped_column(Integer)
    #: Fields the v2 contract does not know, as a JSON object (None when there are none).
    extra_json: Mapped[str | None] = mapped_column(Text)
    #: The record exactly as it came in (key order kept): what export gives back.
    raw_json: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    #: The datasetVersion the current content was published in, when known.
    dataset_version: Mapped[str | None] = mapped_column(String)
    # Not indexed: nearly every record is live, and an index here misleads SQLite's planner.
    retired: Mapped[bool] = mapped_column(Boolean, default=False)
    added_in: Mapped[int] = mapped_column(ForeignKey("dataset_versions.id"))
    changed_in: Mapped[int] = mapped_column(ForeignKey("dataset_versions.id"))

    # Liveness by id (0007), and a sync's inventory and kept ids (0008), from the indexes alone.
    __table_args__ = (
        Index("ix_records_live", "id", "retired"),
        Index("ix_records_inventory", "repo", "id", "retired", "content_hash"),
    )


class _ListItem:
    """A row of one of a record's lists: which record, and where in the list."""

    record_id: Mapped[str] = mapped_column(
        ForeignKey("records.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)


class SolutionRow(_ListItem, Base):
    __tablename__ = "record_solutions"

    text: Mapped[str] = mapped_column(Text)


class PreventionTipRow(_ListItem, Base):
    __tablename__ = "record_prevention_tips"

    text: Mapped[str] = mapped_column(Text)


class TagRow(_ListItem, Base):
    __tablename__ = "record_tags"

    tag: Mapped[str] = mapped_column(String, index=True)


class VersionRow(Base):
    __tablename__ = "dataset_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    #: Upstream's export timestamp; None for a local ingest of records without envelopes.
    dataset_version: Mapped[str | None] = mapped_column(String, index=True)
    kind: Mapped[str] = mapped_column(String)  # VersionKind
    source: Mapped[str] = mapped_column(Text)
    partial: Mapped[bool] = mapped_column(Boolean, default=False)
    full: Mapped[bool] = mapped_column(Boolean, default=False)
    #: JSON object of the hashes checked (manifest and file sha256s), or None.
    hashes_json: Mapped[str | None] = mapped_column(Text)
    added: Mapped[int] = mapped_column(Integer, default=0)
    updated: Mapped[int] = mapped_column(Integer, default=0)
    unchanged: Mapped[int] = mapped_column(Integer, default=0)
    retired: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[str] = mapped_column(String)
    finished_at: Mapped[str] = mapped_column(String)
    #: For a rollback: the version id it restored.
    restores: Mapped[int | None] = mapped_column(Integer)


class HistoryRow(Base):
    __tablename__ = "record_history"
    __table_args__ = (Index("ix_record_history_record_version", "record_id", "version_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    record_id: Mapped[str] = mapped_column(ForeignKey("records.id"))
    version_id: Mapped[int] = mapped_column(ForeignKey("dataset_versions.id"), index=True)
    change: Mapped[str] = mapped_column(String)  # ChangeKind
    #: The record's JSON before this change; None when the change added the record.
    previous_json: Mapped[str | None] = mapped_column(Text)
    previous_retired: Mapped[bool | None] = mapped_column(Boolean)
    previous_dataset_version: Mapped[str | None] = mapped_column(String)


class MetaRow(Base):
    """Small key/value state: the current dataset version and the change counter readers poll."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class MatchTokenRow(Base):
    """The match index: for each live record, its rarest literal tokens (rank 0 = rarest).

    Rebuilt in the transaction of every change, so it always agrees with the records.
    """

    __tablename__ = "match_tokens"
    __table_args__ = (Index("ix_match_tokens_token_rank", "token", "rank"),)

    token: Mapped[str] = mapped_column(String)
    record_id: Mapped[str] = mapped_column(
        String(16), ForeignKey("records.id", ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)


class MatchWordRow(Base):
    """One live record's index word, keyed by word (migration 0011): its holders read by key."""

    __tablename__ = "match_words"
    __table_args__ = ({"sqlite_with_rowid": False},)

    word: Mapped[str] = mapped_column(String, primary_key=True)
    record_id: Mapped[str] = mapped_column(String(16), primary_key=True)


class MatchWordCountRow(Base):
    """How many live records hold an index word (``match_words`` counted; migration 0011)."""

    __tablename__ = "match_word_counts"
    __table_args__ = (Index("ix_match_word_counts_n", "n"), {"sqlite_with_rowid": False})

    word: Mapped[str] = mapped_column(String, primary_key=True)
    n: Mapped[int] = mapped_column(Integer)


class PatternSpecRow(Base):
    """A record's compiled matcher as narrow columns (tuples as JSON), and its words."""

    __tablename__ = "pattern_specs"

    record_id: Mapped[str] = mapped_column(
        String(16), ForeignKey("records.id", ondelete="CASCADE"), primary_key=True
    )
    regex: Mapped[str] = mapped_column(Text)
    names: Mapped[str] = mapped_column(Text)
    repr_groups: Mapped[str] = mapped_column(Text)
    kinds: Mapped[str] = mapped_column(Text)
    anchor: Mapped[str] = mapped_column(Text)
    literal_length: Mapped[int] = mapped_column(Integer)
    origin: Mapped[str] = mapped_column(String)
    reason: Mapped[str | None] = mapped_column(Text)
    error_class: Mapped[str | None] = mapped_column(String)
    file_path: Mapped[str] = mapped_column(Text)
    line_number: Mapped[int | None] = mapped_column(Integer)
    functions: Mapped[str] = mapped_column(Text)
    template: Mapped[str] = mapped_column(Text)
    literals: Mapped[str] = mapped_column(Text)
    words: Mapped[str] = mapped_column(Text)
    #: ``errkb.records.specificity`` of the template; NULL before migration 0010 (computed on read).
    specificity: Mapped[float | None] = mapped_column(Float, nullable=True)
