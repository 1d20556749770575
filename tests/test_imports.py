"""No import cycles: every errkb module imports, and the module graph has no cycle.

The graph is built from the source (``ast``), not from ``sys.modules``, so an import that only
runs inside a function counts too: a cycle hidden in a function is one call away from a
half-initialised module. Imports under ``if TYPE_CHECKING:`` are not edges (they never run).
Importing ``errkb.a.b`` runs ``errkb/a/__init__.py`` first, so it is an edge to ``errkb.a`` as
well; ``from errkb.a import b`` is an edge to ``errkb.a.b`` when ``b`` is a module.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "errkb"
#: Modules whose optional dependencies (the errkb[mcp] extra) may be absent.
OPTIONAL = {"errkb.serve.mcp_tools", "errkb.serve.http"}
#: ``python -m errkb`` runs the command line when imported: it is a script, not a module.
SCRIPTS = {"errkb.__main__"}


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The errkb modules an import statement runs: the named ones and their packages.

    A module's own packages are not counted as implied (they are always initialised before it
    runs), only when named explicitly (``from errkb.pkg import name`` inside ``errkb.pkg.mod``).
    """
    explicit: set[str] = set()
    if isinstance(node, ast.Import):
        explicit = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            explicit.add(sub if sub in MODULES else base)
    own = _ancestors(module)
    implied = {a for name in explicit for a in _ancestors(name)} - own
    return {name for name in explicit | implied if name in MODULES and name != module}


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _edges(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text("utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(_targets(module, node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


GRAPH = {module: _edges(module) for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return components


@pytest.mark.parametrize("module", sorted(set(MODULES) - SCRIPTS))
def test_every_module_imports(module: str) -> None:
    if module in OPTIONAL:
        pytest.importorskip("mcp")
    importlib.import_module(module)


def test_the_graph_sees_imports_inside_functions_and_skips_type_checking() -> None:
    # errkb.kb imports errkb.parse.regions inside explain() and errkb.search under TYPE_CHECKING
    # (plus inside search()): the first is an edge, and the parent package errkb.parse too.
    assert {"errkb.parse.regions", "errkb.parse", "errkb.report"} <= GRAPH["errkb.kb"]
    assert "errkb.kb" not in GRAPH["errkb.report"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Known cycles, each with the reason it stays: none. (The store's factory imports its backends;
#: the backends import the interface module ``errkb.store.interface``, not the package.)
ALLOWED: list[list[str]] = []


def test_no_import_cycles() -> None:
    assert _cycles(GRAPH) == ALLOWED


def test_lazily_re_exported_report_names_are_imported_from_their_module() -> None:
    # errkb.report re-exports each family's values on first use (PEP 562); the graph above sees
    # only the package for those, so errkb's own modules name the submodule instead.
    import errkb.report

    lazy = set(errkb.report._LAZY)
    found: list[str] = []

    def visit(module: str, node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            return
        if isinstance(node, ast.ImportFrom) and node.module == "errkb.report":
            found.extend(f"{module}: {a.name}" for a in node.names if a.name in lazy)
        for child in ast.iter_child_nodes(node):
            visit(module, child)

    for module, path in MODULES.items():
        visit(module, ast.parse(path.read_text("utf-8")))
    assert found == []
