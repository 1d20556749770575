"""No import cycles: every errkb module imports, and the module graph has no cycle.

The graph is built from the source (``ast``), not from ``sys.modules``, so an import that only
runs inside a function counts too: a cycle hidden in a function is one call away from a
half-initialised module. Imports under ``if TYPE_CHECKING:`` are not edges (they never run).
Importing ``errkb.a.b`` runs ``errkb/a/__init__.py`` first, so it is an edge to ``errkb.a`` as
well; ``from errkb.a import b`` is an edge to ``errkb.a.b`` when ``b`` is a module.

The same graph, folded into rooms (``errkb.<room>...``), is checked against the room order
ARCHITECTURE.md declares: every edge goes down. There, type-only imports count too: a room that
names an upper room's class in an annotation depends on it as surely, and reaches it by a
protocol of its own instead.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

from tests.conftest import require_extra

ROOT = Path(__file__).resolve().parent.parent / "errkb"
#: Modules whose optional dependencies (the errkb[mcp] extra) may be absent.
OPTIONAL = {"errkb.serve.mcp_tools", "errkb.serve.http", "errkb.serve.runner"}
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


def _edges(module: str, *, types: bool = False) -> set[str]:
    """The modules ``module`` imports; with ``types``, under ``if TYPE_CHECKING:`` as well."""
    tree = ast.parse(MODULES[module].read_text("utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in [*node.body, *node.orelse] if types else node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(_targets(module, node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Every module's run-time imports (built on first use: collection must not parse errkb)."""
    return {module: _edges(module) for module in MODULES}


@functools.cache
def typed_graph() -> dict[str, set[str]]:
    """With type-only imports, but not the package's own: ``errkb/__init__.py`` names the public
    API it loads on first use (PEP 562) for type checkers; at run time it imports the bottom only.
    """
    return {module: _edges(module, types=module != "errkb") for module in MODULES}


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
        require_extra("mcp")
        require_extra("uvicorn")
    importlib.import_module(module)


def test_the_graph_sees_imports_inside_functions_and_skips_type_checking() -> None:
    # errkb.explain.engine imports errkb.parse.regions inside explain(), errkb.kb imports
    # errkb.search under TYPE_CHECKING (plus inside search()): the first is an edge, and the
    # parent package errkb.parse too.
    assert {"errkb.parse.regions", "errkb.parse", "errkb.report"} <= graph()["errkb.explain.engine"]
    assert "errkb.search" in graph()["errkb.kb"]
    assert "errkb.kb" not in graph()["errkb.report"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Known cycles, each with the reason it stays: none. (The store's factory imports its backends;
#: the backends import the interface module ``errkb.store.interface``, not the package.)
ALLOWED: list[list[str]] = []


def test_no_import_cycles() -> None:
    assert _cycles(graph()) == ALLOWED


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


# ------------------------------------------------------------------------------- rooms
def _room(module: str) -> str:
    """The room of a module: ``errkb.match.scan`` is in ``match``, ``errkb`` in ``errkb``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _declared_order() -> list[str]:
    """The room order of ARCHITECTURE.md's "Room order" section, bottom first."""
    text = (ROOT.parent / "ARCHITECTURE.md").read_text("utf-8")
    section = text.split("\n## Room order\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([\w.]+)`", section, re.MULTILINE)


ORDER = _declared_order()


def _upward(graph: dict[str, set[str]], order: list[str]) -> dict[tuple[str, str], list[str]]:
    """Every edge from a room to one above it (or to a room the order does not list), by rooms."""
    level = {room: n for n, room in enumerate(order)}
    found: dict[tuple[str, str], list[str]] = {}
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = _room(module), _room(target)
            if low != high and level.get(high, len(order)) > level.get(low, -1):
                found.setdefault((low, high), []).append(f"{module} -> {target}")
    return found


#: Upward room edges, each with the reason it still stands. When one goes, its entry goes too.
#: Upward edges tolerated for now, each with its reason (none: the store is fed by its callers).
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def test_the_declared_order_names_every_room_once() -> None:
    rooms = {_room(module) for module in MODULES}
    assert len(ORDER) == len(set(ORDER)), "a room is listed twice in ARCHITECTURE.md"
    assert set(ORDER) == rooms


def test_the_room_check_sees_an_upward_edge_and_a_type_only_one() -> None:
    # records is below match: an import the other way is reported, by rooms and by module.
    assert _upward({"errkb.records.x": {"errkb.match.y"}}, ORDER) == {
        ("records", "match"): ["errkb.records.x -> errkb.match.y"]
    }
    assert _upward({"errkb.match.y": {"errkb.records.x"}}, ORDER) == {}
    # serve names KnowledgeBase only for annotations: an edge of the typed graph alone.
    assert "errkb.kb" in typed_graph()["errkb.serve"] - graph()["errkb.serve"]
    assert not (typed_graph()["errkb"] - graph()["errkb"])


def test_every_room_imports_only_rooms_below_it() -> None:
    found = _upward(typed_graph(), ORDER)
    assert {pair: found[pair] for pair in found if pair not in ALLOWED_UPWARD} == {}
    assert set(found) == set(ALLOWED_UPWARD), "an allowed upward edge is gone: drop its entry"


def test_no_module_imports_a_lazily_exported_public_name() -> None:
    # The package sits near the bottom of the order because at run time it imports only the
    # exception tree and the lazy loader. Its public names (KnowledgeBase, check, Report...)
    # load the top rooms on first use, so from inside errkb they would be an upward edge the
    # graph cannot see: modules name the module defining them instead.
    import errkb

    lazy = set(errkb._LAZY)
    found: list[str] = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "errkb" and not node.level:
                found.extend(f"{module}: {a.name}" for a in node.names if a.name in lazy)
    assert found == []


#: Rooms above the knowledge base, and search (handed a view): they reach the store only through
#: ``KnowledgeBase`` methods, never its ``store`` attribute.
FRONT_DOOR_CALLERS = {"cli", "serve", "search", "render", "maint"}


def test_callers_go_through_the_knowledge_base_not_its_store() -> None:
    found = [
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        if _room(module) in FRONT_DOOR_CALLERS
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "store"
    ]
    assert found == []
