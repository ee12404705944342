"""Optional system packages some tests need, and what CI makes of a skip.

A test that needs one carries ``@pytest.mark.needs("<package>")``: where the
package is missing it is skipped before its fixtures run, with a reason
naming the Debian package to install.  ``.ci/run`` installs them all; when
the ``CI`` environment variable is set (CI sets ``CI=true``), any skipped
test makes the session fail, so that nothing goes untested there.

This module is a pytest plugin: ``tests/conftest.py`` imports its hooks.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

#: bash-completion's loader, and git's completion script (Debian ships the
#: latter in its git package; elsewhere it is git's
#: contrib/completion/git-completion.bash).
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")
GIT_COMPLETION = Path("/usr/share/bash-completion/completions/git")
#: Where the test environment's programs are (the venv's ``bin``).
BIN_DIR = Path(sys.executable).parent


def _runs(*argv: str) -> bool:
    """``argv`` is on PATH and exits 0 (a program replaced by ``false``, or
    broken, counts as missing)."""
    if shutil.which(argv[0]) is None:
        return False
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    except OSError:
        return False
    return done.returncode == 0


#: Debian package -> (what the tests use of it, a check that it is there).
PACKAGES: dict[str, tuple[str, Callable[[], bool]]] = {
    "man-db": ("the 'man' program", lambda: _runs("man", "--version")),
    "bash-completion": (str(BASH_COMPLETION), BASH_COMPLETION.is_file),
    "git": (f"git's completion script {GIT_COMPLETION}", GIT_COMPLETION.is_file),
    "nodejs": ("the 'node' program", lambda: _runs("node", "--version")),
    "npm": ("the 'npm' program", lambda: _runs("npm", "--version")),
    "git-lfs": ("the 'git lfs' command", lambda: _runs("git", "lfs", "version")),
    "tmux": ("the 'tmux' program", lambda: _runs("tmux", "-V")),
    "strace": ("the 'strace' program", lambda: _runs("strace", "-V")),
    "cargo": ("the 'cargo' program", lambda: _runs("cargo", "--version")),
    "rustfmt": ("'cargo fmt'", lambda: _runs("cargo", "fmt", "--version")),
    "openssh-client": (
        "the 'ssh-agent' and 'ssh-keygen' programs",
        lambda: shutil.which("ssh-agent") is not None and shutil.which("ssh-keygen") is not None,
    ),
}

#: Python packages of the ``test`` extra that some tests run as programs
#: (from the test environment's ``bin``): name -> a check that it is there.
TEST_EXTRA: dict[str, Callable[[], bool]] = {
    name: functools.partial(_runs, str(BIN_DIR / name), "--version")
    for name in ("black", "pre-commit")
}


@functools.cache
def missing_reason(package: str) -> str | None:
    """Why a test needing the system package ``package`` (or the Python
    package of :data:`TEST_EXTRA`) cannot run here (the reason names the
    package), or ``None`` when it is installed.

    Raises:
        KeyError: ``package`` is in neither table.
    """
    if package in TEST_EXTRA:
        if TEST_EXTRA[package]():
            return None
        return (
            f"needs the Python package '{package}' (missing from {BIN_DIR}; "
            "pip install -e '.[test]', as .ci/run does)"
        )
    what, present = PACKAGES[package]
    if present():
        return None
    return (
        f"needs the system package '{package}' ({what} is missing; "
        f"apt-get install {package}, as .ci/run does)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs(*packages): skip unless these Debian packages (or test-extra Python "
        "packages) are installed",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        for package in mark.args:
            reason = missing_reason(package)
            if reason is not None:
                pytest.skip(reason)


def in_ci() -> bool:
    """``CI`` is set to something other than empty, ``0`` or ``false``."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # on the xdist controller, this sees the workers' reports too
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # a module skipped as a whole
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if in_ci() and _skipped and not hasattr(session.config, "workerinput"):
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if in_ci() and _skipped:
        terminalreporter.write_line(
            f"error: CI is set and {len(_skipped)} test(s) were skipped; "
            "nothing may go untested in CI (see the skip reasons above)",
            red=True,
        )
