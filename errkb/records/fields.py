"""The one table of record fields: JSON name, column name, and whether the v2 contract needs it.

Everything else is derived from ``FIELDS``: the scalar columns of ``records``, the mapping of a
record to a row, the fields kept in child tables (solutions, prevention tips, tags), and the
fields the contract knows (``KNOWN_FIELDS``, in upstream's order). Adding a field is one line.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Storage(enum.StrEnum):
    """Where a record field is kept."""

    COLUMN = "column"  #: one column of ``records``
    CHILD = "child"  #: an ordered list of strings in its own table


@dataclass(frozen=True)
class Field:
    """One field of a schemaVersion-2 record."""

    name: str  #: the JSON name
    column: str  #: the column (or, for a CHILD, the table)
    storage: Storage = Storage.COLUMN
    optional: bool = False  #: may be absent from a record (stored as NULL)
    value_column: str = ""  #: for a CHILD: the column holding each item


def _col(name: str, column: str, *, optional: bool = False) -> Field:
    return Field(name, column, Storage.COLUMN, optional)


def _child(name: str, table: str, value_column: str = "text") -> Field:
    return Field(name, table, Storage.CHILD, value_column=value_column)


#: Every field the schemaVersion-2 contract names, in upstream's order.
FIELDS: tuple[Field, ...] = (
    _col("id", "id"),
    _col("repo", "repo"),
    _col("slug", "slug"),
    _col("errorCode", "error_code"),
    _col("errorMessage", "error_message"),
    _col("messagePattern", "message_pattern"),
    _col("errorType", "error_type"),
    _col("errorClass", "error_class"),
    _col("httpStatus", "http_status"),
    _col("severity", "severity"),
    _col("filePath", "file_path"),
    _col("lineNumber", "line_number"),
    _col("sourceCode", "source_code"),
    _col("sourceCodeStart", "source_code_start"),
    _col("sourceCodeEnd", "source_code_end"),
    _col("githubUrl", "github_url"),
    _col("documentation", "documentation"),
    _col("triggerScenarios", "trigger_scenarios"),
    _col("commonSituations", "common_situations"),
    _child("solutions", "record_solutions"),
    _col("exampleFix", "example_fix"),
    _col("handlingStrategy", "handling_strategy"),
    _col("validationCode", "validation_code"),
    _col("typeGuard", "type_guard"),
    _col("tryCatchPattern", "try_catch_pattern"),
    _child("preventionTips", "record_prevention_tips"),
    _child("tags", "record_tags", "tag"),
    _col("backgroundTag", "background_tag", optional=True),
    _col("contentChangedAt", "content_changed_at", optional=True),
    _col("analyzedSha", "analyzed_sha"),
    _col("analyzedAt", "analyzed_at"),
    _col("schemaVersion", "schema_version"),
)

KNOWN_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS)
#: The record fields kept as columns of ``records``, in column order.
COLUMN_FIELDS: tuple[Field, ...] = tuple(f for f in FIELDS if f.storage is Storage.COLUMN)
#: The list fields kept in child tables.
CHILD_FIELDS: tuple[Field, ...] = tuple(f for f in FIELDS if f.storage is Storage.CHILD)
#: Columns of ``records`` that are not record fields: bookkeeping the store adds.
BOOK_COLUMNS: tuple[str, ...] = (
    "extra_json", "raw_json", "content_hash", "dataset_version", "retired", "added_in",
    "changed_in",
)  # fmt: skip
#: Every column of ``records``, in insert order.
RECORD_COLUMNS: tuple[str, ...] = (*(f.column for f in COLUMN_FIELDS), *BOOK_COLUMNS)
