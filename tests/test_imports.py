"""The package's modules import one another without a circle, and each one
imports on its own (design: Architecture, "No import circles").

The graph counts every import of the package's own modules, at module level
and inside functions alike: a lazy import inside a function still closes a
circle, it only hides it until that function runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "git_isopatch"
PACKAGE = "git_isopatch"


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The package modules an ``from ... import ...`` statement loads."""
    if node.level:
        base = module.split(".")
        if not is_package:
            base.pop()
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    found = []
    for alias in node.names:
        candidate = f"{target}.{alias.name}"
        found.append(candidate if candidate in MODULES else target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its body),
    parents of a submodule left out (importing ``a.b.c`` runs ``a/__init__``
    too, but ``__init__`` files here import only leaves)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = _resolve(module, path.name == "__init__.py", node)
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            edges.update(n for n in names if n in MODULES and n != module)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_has_no_import_circle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_cycle_finder_finds_a_circle() -> None:
    """The check above can fail: a circle through a function-level import,
    as ``inventory`` and ``provider`` once had, is found."""
    graph = import_graph()
    graph["git_isopatch.isolation.inventory"].add("git_isopatch.isolation.provider")
    cycle = find_cycle(graph)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert {"git_isopatch.isolation.inventory", "git_isopatch.isolation.provider"} <= set(cycle)


def test_layers_import_only_what_the_design_allows() -> None:
    """``git/`` knows nothing of isolation; ``isolation/`` nothing of the
    capture, settings or the command line."""
    graph = import_graph()
    for module, imported in graph.items():
        if module.startswith(f"{PACKAGE}.git"):
            assert all(i.startswith(f"{PACKAGE}.git") for i in imported), (module, imported)
        if module.startswith(f"{PACKAGE}.isolation"):
            assert all(
                i.startswith((f"{PACKAGE}.git", f"{PACKAGE}.isolation")) for i in imported
            ), (
                module,
                imported,
            )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.endswith("__main__")))
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    """(``__main__`` runs the command line when imported: left out.)"""
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
