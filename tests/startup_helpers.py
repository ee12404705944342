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
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "git_isopatch", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "git_isopatch.cli" in names, done.stderr[-2000:]
    return names
