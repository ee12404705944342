"""The package's modules import one another without a circle, each layer
only the layers the design allows, and each module imports on its own
(design: Architecture, "No import circles").

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

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "git_isopatch"
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
    graph["git_isopatch.worktrees.inventory"].add("git_isopatch.worktrees.provider")
    cycle = find_cycle(graph)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert {"git_isopatch.worktrees.inventory", "git_isopatch.worktrees.provider"} <= set(cycle)


#: The layers of the design (design: Architecture), each with the layers
#: its modules may import; a module's own layer is always allowed.  Every
#: top-level module not named here is of the procedure: its steps
#: (:data:`STEPS`), the values they hand each other, the request.
LAYERS: dict[str, frozenset[str]] = {
    "git": frozenset(),
    # the classified failures: git's own words are what they classify
    "errors": frozenset({"git"}),
    # the sandbox knows nothing of the worktree's life cycle
    "sandbox": frozenset({"git", "errors"}),
    "worktrees": frozenset({"git", "errors", "sandbox"}),
    "settings": frozenset({"git"}),
    "steps": frozenset({"git", "errors", "sandbox", "worktrees", "settings", "result"}),
    # prune honours isopatch.tmpdir (design: Placement), a setting
    "manage": frozenset({"git", "errors", "worktrees", "settings"}),
    # the formats (render) and what of them is shown (outcome): the result
    # value and git's types only
    "render": frozenset({"result", "git"}),
    "result": frozenset({"git"}),
    "cli": frozenset(
        {"git", "errors", "sandbox", "worktrees", "settings", "steps", "manage", "render", "result"}
    ),
}

#: Modules by layer where the name alone does not say it.
NAMED_LAYERS = {
    f"{PACKAGE}.errors": "errors",
    f"{PACKAGE}.logger": "errors",  # the warnings' logger, made on first use
    f"{PACKAGE}.settings": "settings",
    f"{PACKAGE}.manage": "manage",
    f"{PACKAGE}.render": "render",
    f"{PACKAGE}.outcome": "render",
    f"{PACKAGE}.result": "result",
    f"{PACKAGE}.cli": "cli",
    f"{PACKAGE}.usage": "cli",
    f"{PACKAGE}.manual": "cli",
    f"{PACKAGE}.__main__": "cli",
    f"{PACKAGE}.entry": "cli",  # the executable's entry point, before the command line
    # git isopatch mcp: the command line of the MCP server, and the server,
    # a front end that runs git-isopatch and applies through manage
    f"{PACKAGE}.mcp_cli": "cli",
    f"{PACKAGE}.session_cli": "cli",
    f"{PACKAGE}.manage_cli": "cli",  # git isopatch list, prune: loaded only for them
    f"{PACKAGE}.mcp_server": "cli",
    f"{PACKAGE}.mcp_parameters": "cli",
    f"{PACKAGE}.mcp_policy": "cli",
    f"{PACKAGE}.mcp_runs": "cli",
    PACKAGE: "cli",  # the package's front door: the Python API
}

#: The step modules of the procedure (design: "The procedure"), side by
#: side: none imports another; the procedure (``capture``) imports each.
STEPS = frozenset(
    f"{PACKAGE}.{name}"
    for name in ("start", "populate", "execute", "extract", "session_patch", "report")
)
PROCEDURE = f"{PACKAGE}.capture"

#: Imports across layers that the design does not allow yet, each with why
#: it is still there.  The check fails when one of them is gone, so that the
#: list only shrinks.
NOT_YET: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> str:
    if module in NAMED_LAYERS:
        return NAMED_LAYERS[module]
    for layer in ("git", "sandbox", "worktrees"):
        if module == f"{PACKAGE}.{layer}" or module.startswith(f"{PACKAGE}.{layer}."):
            return layer
    return "steps"


def layer_violations(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """``(module, imported)`` for each import the layer table refuses."""
    return {
        (module, other)
        for module, imported in graph.items()
        for other in imported
        if layer_of(other) != layer_of(module) and layer_of(other) not in LAYERS[layer_of(module)]
    }


def test_each_layer_imports_only_the_layers_the_design_allows() -> None:
    """``git/`` knows nothing of the rest, ``sandbox/`` nothing of the
    worktrees, neither of them anything of the procedure, settings or the
    command line, the step modules nothing of rendering or the command
    line, rendering nothing but the result."""
    found = layer_violations(import_graph())
    assert found - set(NOT_YET) == set()
    assert set(NOT_YET) - found == set(), "fixed: take it off NOT_YET"


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("git.worktree", "errors"),
        ("errors", "worktrees.lock"),
        ("sandbox.confinement", "worktrees.placement"),
        ("sandbox.command", "worktrees.provider"),
        ("worktrees.provider", "settings"),
        ("worktrees.include", "capture"),
        ("settings", "capture"),
        ("capture", "render"),
        ("capture", "cli"),
        ("manage", "render"),
        ("render", "worktrees.inventory"),
        ("outcome", "capture"),
        ("result", "errors"),
    ],
)
def test_the_layer_check_refuses_an_import_upwards(module: str, forbidden: str) -> None:
    graph = import_graph()
    graph[f"{PACKAGE}.{module}"].add(f"{PACKAGE}.{forbidden}")
    assert (f"{PACKAGE}.{module}", f"{PACKAGE}.{forbidden}") in layer_violations(graph)


def step_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """``(step, other step)`` for each step module importing another."""
    return {(m, o) for m in STEPS for o in graph.get(m, ()) if o in STEPS}


def test_the_steps_stand_side_by_side() -> None:
    """No step module imports another (the values they hand each other
    live in ``values``); the procedure imports every step."""
    graph = import_graph()
    assert step_imports(graph) == set()
    assert STEPS <= graph[PROCEDURE]


def test_the_step_check_refuses_a_step_importing_a_step() -> None:
    graph = import_graph()
    graph[f"{PACKAGE}.execute"].add(f"{PACKAGE}.report")
    assert step_imports(graph) == {(f"{PACKAGE}.execute", f"{PACKAGE}.report")}


def test_every_module_has_a_layer_the_table_knows() -> None:
    assert {layer_of(module) for module in MODULES} <= set(LAYERS)


def outside_imports(path: Path) -> set[str]:
    """The top-level names of the modules outside the package that ``path``
    imports (``__future__`` left out)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - {PACKAGE, "__future__"}


def test_the_git_layer_imports_only_the_standard_library_and_pygit2() -> None:
    for module, path in MODULES.items():
        if layer_of(module) == "git":
            extra = outside_imports(path) - sys.stdlib_module_names - {"pygit2"}
            assert extra == set(), (module, extra)


def test_rendering_imports_only_the_standard_library() -> None:
    """Formats need no third-party package: a ``--porcelain`` run pays for
    nothing more."""
    for module, path in MODULES.items():
        if layer_of(module) == "render":
            assert outside_imports(path) - sys.stdlib_module_names == set(), module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.endswith("__main__")))
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    """(``__main__`` runs the command line when imported: left out.)"""
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
