"""The store is the only room with SQL: no SQL text in library code outside ``errkb/store``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "errkb"
#: Upper-case SQL keywords, as SQL text spells them (prose says "update", not "UPDATE").
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|BEGIN)\b")


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal (f-string parts too) that is not a docstring."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def sql_outside_the_store() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("errkb", "store") or "_bundle" in rel.parts:
            continue
        for line, text in _literals(ast.parse(path.read_text(encoding="utf-8"))):
            if SQL.search(text):
                found.append(f"{rel}:{line}: {text[:60]!r}")
    return found


def test_no_sql_text_outside_the_store() -> None:
    assert sql_outside_the_store() == []


def test_the_check_finds_sql(tmp_path: Path) -> None:
    tree = ast.parse('"""Docs may say BEGIN IMMEDIATE."""\nq = "SELECT id FROM records"\n')
    assert [t for _n, t in _literals(tree) if SQL.search(t)] == ["SELECT id FROM records"]
    tree = ast.parse('x = f"DELETE FROM {table}"\n')
    assert [t for _n, t in _literals(tree) if SQL.search(t)] == ["DELETE FROM "]


def test_no_database_driver_is_imported_outside_the_store() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("errkb", "store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{rel}: {n}" for n in names if n.split(".")[0] in ("sqlite3", "sqlalchemy")]
    assert found == []
