"""What a run of the installed command imports, by ``python -X importtime``
(which names every module a process imports): for the tests that keep
start-up from growing."""

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
