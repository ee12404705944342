"""The code keeps the shape the design gives it (design: Architecture;
issue 18, "Measure it"): no module of the package over 450 lines, no
function over 80 lines or 8 parameters (typer's command declarations
aside, and the MCP server's tools: their parameters are the options), and
``cli.py`` under 400 lines.
The layer order and the absence of import circles are
``test_imports.py``'s."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "git_isopatch"
MAX_MODULE_LINES = 450
MAX_CLI_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8

#: What is still over a limit, each with its measure now: a ceiling (a
#: listed one may not grow) that must equal the measure, so that a change
#: which brings one down records its new measure, and the list only shrinks
#: (the check fails on anything over a limit that is not listed, and on a
#: listed one back under its limit).
NOT_YET: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    return {
        str(path.relative_to(PACKAGE_DIR.parent)): path
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
    }


def _is_command_declaration(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A typer command (decorated with ``<app>.command(...)``) or an MCP
    tool (``<server>.tool(...)``): its parameters are its options."""
    return any(
        isinstance(d, ast.Call)
        and isinstance(d.func, ast.Attribute)
        and d.func.attr in ("command", "tool")
        for d in node.decorator_list
    )


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    return count - (bool(names) and names[0].arg in ("self", "cls"))


def measures() -> dict[str, int]:
    """``{"<module>": lines}`` for each module over its limit and
    ``{"<module>:<function> lines|parameters": n}`` for each function over
    one, nested functions and methods included."""
    over: dict[str, int] = {}
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > (MAX_CLI_LINES if name == "git_isopatch/cli.py" else MAX_MODULE_LINES):
            over[name] = lines
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if _is_command_declaration(node):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                over[f"{name}:{node.name} lines"] = length
            if _parameters(node) > MAX_PARAMETERS:
                over[f"{name}:{node.name} parameters"] = _parameters(node)
    return over


def departures(found: dict[str, int], listed: dict[str, int]) -> dict[str, str]:
    """What ``found`` (:func:`measures`) says against the ``listed``
    ceilings: each measure over a limit that is not listed, each listed one
    back under its limit, and each listed one whose measure is not its
    ceiling (it grew, or it shrank and the list was not told)."""
    out: dict[str, str] = {}
    for key, value in found.items():
        if key not in listed:
            out[key] = f"{value}: over its limit"
        elif value > listed[key]:
            out[key] = f"{value}: grew over its ceiling {listed[key]}"
        elif value < listed[key]:
            out[key] = f"{value}: shrank, record it in NOT_YET (was {listed[key]})"
    for key in listed.keys() - found.keys():
        out[key] = "back under its limit: take it off NOT_YET"
    return out


def test_no_module_or_function_is_over_its_limit() -> None:
    assert departures(measures(), NOT_YET) == {}


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ({"m.py": 500}, {}),
        ({"m.py": 501}, {"m.py": "501: grew over its ceiling 500"}),
        ({"m.py": 499}, {"m.py": "499: shrank, record it in NOT_YET (was 500)"}),
        ({}, {"m.py": "back under its limit: take it off NOT_YET"}),
        ({"m.py": 500, "n.py": 451}, {"n.py": "451: over its limit"}),
    ],
)
def test_a_listed_measure_is_a_ceiling_it_equals(found: dict, expected: dict) -> None:
    assert departures(found, {"m.py": 500}) == expected


def test_cli_is_under_400_lines() -> None:
    assert len((PACKAGE_DIR / "cli.py").read_text().splitlines()) < MAX_CLI_LINES


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(a, b, c, d, e, f, g, h, i):\n    pass\n", {"f parameters": 9}),
        ("class C:\n    def m(self, a, b, c, d, e, f, g, h):\n        pass\n", {}),
        ("def f():\n" + "    x = 1\n" * 80, {"f lines": 81}),
        ("@app.command()\ndef cmd(a, b, c, d, e, f, g, h, i):\n    pass\n", {}),
    ],
)
def test_the_measure_can_fail(tmp_path, monkeypatch, source: str, expected: dict) -> None:
    package = tmp_path / "git_isopatch"
    package.mkdir()
    (package / "m.py").write_text(source)
    monkeypatch.setattr(__import__(__name__), "PACKAGE_DIR", package)
    found = {k.split(":", 1)[1]: v for k, v in measures().items()}
    assert found == expected
