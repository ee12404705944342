"""What a run of the installed command imports, by ``python -X importtime``
(which names every module a process imports), and what it had imported
when it started its first git: for the tests that keep start-up from
growing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def imported(args: list[str], cwd: Path, env: dict[str, str], config: str = "") -> set[str]:
    """The modules ``git-isopatch <args>`` imports, by ``-X importtime``."""
    environ = dict(env)
    if config:
        environ["GIT_CONFIG_PARAMETERS"] = config
    names = _importtime(["-m", "git_isopatch", *args], cwd, environ)
    assert "git_isopatch.cli" in names
    return names


#: Runs ``python -m git_isopatch`` with ``sys.argv[2:]``; when the run
#: starts its first git, writes the modules loaded then to ``sys.argv[1]``.
_FIRST_GIT_PROBE = """
import runpy, subprocess, sys
path, start = sys.argv[1], subprocess.Popen._execute_child
def execute_child(self, args, *rest, **options):
    command = [str(arg) for arg in args] if isinstance(args, (list, tuple)) else []
    if command[:1] == ["git"] and not hasattr(execute_child, "seen"):
        execute_child.seen = True
        with open(path, "w") as out:
            out.write("\\n".join(sorted(sys.modules)))
    return start(self, args, *rest, **options)
subprocess.Popen._execute_child = execute_child
sys.argv = ["git-isopatch", *sys.argv[2:]]
runpy.run_module("git_isopatch", run_name="__main__", alter_sys=True)
"""


def imported_before_the_first_git(
    args: list[str], cwd: Path, env: dict[str, str], config: str = ""
) -> set[str]:
    """The modules ``git-isopatch <args>`` had imported when it started
    its first git process (the run itself goes on as usual); none when it
    started no git (but those its launcher runs in the sandbox)."""
    environ = dict(env)
    if config:
        environ["GIT_CONFIG_PARAMETERS"] = config
    listing = cwd.parent / "modules-at-first-git.txt"
    listing.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_GIT_PROBE, str(listing), *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    if not listing.exists():
        return set()
    names = set(listing.read_text().split("\n"))
    assert "git_isopatch.cli" in names
    return names


#: Prints ``module.Class`` for each class a module of ``sys.argv[2:]``
#: defines that is a dataclass (``sys.argv[1] == "dataclass"``) or made by
#: ``collections.namedtuple``, ``typing.NamedTuple`` among them.
_CLASSES_PROBE = """
import dataclasses, importlib, sys
kind = sys.argv[1]
for name in sys.argv[2:]:
    module = importlib.import_module(name)
    for value in list(vars(module).values()):
        if not (isinstance(value, type) and value.__module__ == name):
            continue
        if kind == "dataclass":
            found = dataclasses.is_dataclass(value)
        else:  # collections.namedtuple's
            found = issubclass(value, tuple) and all(
                hasattr(value, attribute) for attribute in ("_fields", "_make")
            )
        if found:
            print(f"{name}.{value.__qualname__}")
"""


def _classes_of(kind: str, modules: list[str], cwd: Path, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _CLASSES_PROBE, kind, *modules],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def dataclasses_of(modules: list[str], cwd: Path, env: dict[str, str]) -> set[str]:
    """The dataclasses (``module.Class``) the package's ``modules`` define."""
    return _classes_of("dataclass", modules, cwd, env)


def named_tuples_of(modules: list[str], cwd: Path, env: dict[str, str]) -> set[str]:
    """The classes (``module.Class``) the package's ``modules`` make with
    ``collections.namedtuple`` (``typing.NamedTuple`` among them)."""
    return _classes_of("namedtuple", modules, cwd, env)


def imported_by_the_libraries(cwd: Path, env: dict[str, str]) -> set[str]:
    """The modules ``import typer, pygit2`` imports (and the interpreter's
    own start): the floor every run stands on."""
    return _importtime(["-c", "import typer, pygit2"], cwd, env)


def _importtime(args: list[str], cwd: Path, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "typer" in names or "git_isopatch.cli" in names, done.stderr[-2000:]
    return names
