"""The package's layering, read from the source: who may import whom, and no cycles.

The subsystem packages stand alone: they never import the agent core (the wiring
root, ``node``, ``server``, ``cluster``, the command line) nor the package's own
``__init__`` re-exports, so a runtime or a PLEG can be used without the agent.
The agent core imports the subsystems, and only the wiring root builds them.
Every import is read with ``ast``, wherever it sits (module level, inside a
function, under ``TYPE_CHECKING``), so a lazy import cannot hide a wrong arrow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent / "kubelet_kit"
PACKAGE = "kubelet_kit"

#: The subsystem packages: each imports only its own modules and the shared base.
SUBSYSTEMS = (
    "api",
    "container",
    "cri",
    "cm",
    "pleg",
    "prober",
    "eviction",
    "volume",
    "runtimes",
    "status",
)
#: The agent core, and the names that re-export it under their first names.
AGENT_CORE = (
    "agent",
    "node",
    "server",
    "cluster",
    "cli",
    "runner",
    "cri_server",
    "kubelet",
    "metrics",
    "nodestatus",
    "podworkers",
)
#: Modules of the agent core that must stay small (one job each). Lines are counted
#: as ``ruff format`` writes them (one argument per line once a call wraps).
MAX_AGENT_CORE_LINES = 450


@attrs.frozen
class Import:
    """One import statement's target, where it is, and how it is reached."""

    source: str  # the importing module
    target: str  # the imported module (or package)
    line: int
    module_level: bool  # executed when the module is imported (not in a function)
    type_checking: bool  # under ``if TYPE_CHECKING:``


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    """Every module of the package, generated protobuf code left out."""
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py")) if "gen" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    """The package-internal imports of one module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, module_level: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        yield Import(module, alias.name, child.lineno, module_level, type_checking)
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(module, is_package, child)
                if target.split(".")[0] != PACKAGE:
                    continue
                yield Import(module, target, child.lineno, module_level, type_checking)
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    if sub in modules:  # ``from pkg import submodule``
                        yield Import(module, sub, child.lineno, module_level, type_checking)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from visit(child, False, type_checking)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), module_level, True)
                for stmt in child.orelse:
                    yield from visit(
                        ast.Module(body=[stmt], type_ignores=[]), module_level, type_checking
                    )
            else:
                yield from visit(child, module_level, type_checking)

    yield from visit(tree, True, False)


def all_imports() -> list[Import]:
    modules = all_modules()
    return [imp for name, path in modules.items() for imp in imports_of(name, path, modules)]


def top(module: str) -> str:
    """The first component under the package: ``kubelet_kit.cri.remote`` -> ``cri``;
    the package itself is ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def executed_edges(imports: list[Import], modules: dict[str, Path]) -> dict[str, set[str]]:
    """What importing each module executes at once: its module-level imports (not
    those under TYPE_CHECKING), each with the ``__init__`` of every package above
    it that Python runs first, except the importer's own packages (already running
    when it is imported)."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for imp in imports:
        if not imp.module_level or imp.type_checking:
            continue
        own = imp.source.split(".")
        ancestors = {".".join(own[:n]) for n in range(1, len(own) + 1)}
        parts = imp.target.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[:n])
            if name in modules and name not in ancestors:
                edges[imp.source].add(name)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
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
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


# -- the contracts -------------------------------------------------------------------


@pytest.mark.parametrize("subsystem", SUBSYSTEMS)
def test_a_subsystem_never_imports_the_agent_core(subsystem: str) -> None:
    wrong = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in all_imports()
        if top(i.source) == subsystem and (top(i.target) in AGENT_CORE or i.target == PACKAGE)
    ]
    assert not wrong, "\n".join(wrong)


def test_runtimes_never_import_the_container_manager() -> None:
    wrong = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in all_imports()
        if top(i.source) == "runtimes" and top(i.target) == "cm"
    ]
    assert not wrong, "\n".join(wrong)


def test_the_agent_core_never_imports_the_wiring_root_or_the_faces_above_it() -> None:
    # node/ is built by the wiring root and served by server/ and cluster/: it
    # knows none of them, nor the command line.
    wrong = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in all_imports()
        if top(i.source) == "node"
        and top(i.target) in ("agent", "server", "cluster", "cli", "runner", "kubelet")
    ]
    assert not wrong, "\n".join(wrong)


def test_the_streaming_protocols_stand_alone() -> None:
    # Shared by the node API and the CRI server, so they import neither, nor any
    # subsystem: the runtime side of a session is the container package's protocols.
    allowed = ("streams", "container", "errors", "clock")
    wrong = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in all_imports()
        if top(i.source) == "streams" and top(i.target) not in allowed
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_level_import_cycle() -> None:
    modules = all_modules()
    found = cycles(executed_edges(all_imports(), modules))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_finds_a_cycle() -> None:
    # The checker itself: a two-module loop, a loop through another package's
    # __init__, and a package importing its own modules (not a loop).
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]
    assert cycles({"p": {"p.x"}, "p.x": {"q"}, "q": {"p"}}) == [["p", "p.x", "q"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    imports = [
        Import("k.p", "k.p.x", 1, True, False),
        Import("k.p.x", "k.p.y", 1, True, False),
        Import("k.q", "k.p.x", 1, True, False),
        Import("k.p.x", "k.q", 1, False, False),
    ]
    modules = {m: Path() for m in ("k", "k.p", "k.p.x", "k.p.y", "k.q")}
    edges = executed_edges(imports, modules)
    assert edges["k.p.x"] == {"k.p.y"}  # its own package is already running
    assert edges["k.q"] == {"k.p", "k.p.x"}  # another's __init__ runs first
    assert cycles(edges) == []  # the function-level import back is no cycle


def test_the_reader_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "import kubelet_kit.clock\n"
        "if TYPE_CHECKING:\n"
        "    from kubelet_kit.node import kubelet\n"
        "def f():\n"
        "    from kubelet_kit.agent import Kubelet\n"
    )
    found = {
        (i.target, i.module_level, i.type_checking)
        for i in imports_of("kubelet_kit.m", path, {"kubelet_kit.node.kubelet": path})
    }
    assert found == {
        ("kubelet_kit.clock", True, False),
        ("kubelet_kit.node", True, True),
        ("kubelet_kit.node.kubelet", True, True),
        ("kubelet_kit.agent", False, False),
    }


def test_agent_core_modules_stay_small() -> None:
    big = []
    for name, path in all_modules().items():
        if top(name) in ("agent", "node", "cli", "runner"):
            lines = len(path.read_text().splitlines())
            if lines > MAX_AGENT_CORE_LINES:
                big.append(f"{name}: {lines} lines")
    assert not big, f"over {MAX_AGENT_CORE_LINES} lines: {big}"
