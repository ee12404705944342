"""The README's test command passes on a machine without the optional
system packages: a test needing one skips with a reason naming it; with
``CI`` set, any skip fails the run (tests/packages.py).

The packages are hidden for real, in a private mount namespace: an empty
folder over ``/usr/share/bash-completion``, ``false`` over the programs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
INSTALL = TESTS / "packaging" / "test_packaging_install.py"

PROBE = """
import pytest

@pytest.mark.needs("man-db")
def test_man(): pass

@pytest.mark.needs("bash-completion")
def test_bash_completion(): pass

@pytest.mark.needs("nodejs", "npm")
def test_node(): pass

def test_plain(): pass
"""


def _pytest_hiding(
    hide: list[str], args: list[str], cwd: Path, ci: str | None, plugin: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run pytest (with the ``packages`` plugin, or through our conftest
    without ``plugin``) in a mount namespace where each path of ``hide`` is
    covered: a folder by an empty one, a file by ``/bin/false``."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("hiding system packages needs root and unshare (util-linux)")
    empty = cwd / "empty"
    empty.mkdir(exist_ok=True)
    mounts = [
        f"mount --bind {shlex.quote(str(empty) if os.path.isdir(p) else '/bin/false')} "
        f"{shlex.quote(p)}"
        for p in hide
    ]
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(TESTS)
    if ci is not None:
        env["CI"] = ci
    argv = [sys.executable, "-m", "pytest", *(["-p", "packages"] if plugin else [])]
    argv += ["-p", "no:cacheprovider"]
    script = " && ".join([*mounts, shlex.join([*argv, "-p", "no:xdist", "-q", "-rs", *args])])
    return subprocess.run(
        [unshare, "-m", "sh", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


HIDE_ALL = [
    "/usr/share/bash-completion",
    *(p for p in (shutil.which("man"), shutil.which("node"), shutil.which("npm")) if p),
]


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "test_probe.py").write_text(PROBE)
    return tmp_path


def test_a_missing_package_is_named_in_the_skip_reason(probe: Path) -> None:
    done = _pytest_hiding(HIDE_ALL, ["test_probe.py"], probe, ci=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 3 skipped" in done.stdout, done.stdout
    for package in ("man-db", "bash-completion", "nodejs"):
        assert f"needs the system package '{package}'" in done.stdout, done.stdout


def test_in_ci_a_skip_fails_the_run(probe: Path) -> None:
    done = _pytest_hiding(HIDE_ALL, ["test_probe.py"], probe, ci="true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CI is set and 3 test(s) were skipped" in done.stdout


@pytest.mark.needs("man-db", "bash-completion", "nodejs", "npm")
def test_in_ci_with_every_package_nothing_is_skipped(probe: Path) -> None:
    done = _pytest_hiding([], ["test_probe.py"], probe, ci="true")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    off = _pytest_hiding([], ["test_probe.py"], probe, ci="false")
    assert off.returncode == 0, off.stdout + off.stderr


def test_the_real_tests_skip_naming_the_package(tmp_path: Path) -> None:
    """The completion and manual-page tests, without bash-completion (git's
    completion script goes with it here) and man-db: skipped, not failed,
    before the wheel is built."""
    tests = [
        str(TESTS / "cli" / "test_cli_completion.py"),
        f"{INSTALL}::test_man_finds_the_installed_page",
        f"{INSTALL}::test_bash_completion_finds_the_installed_script",
    ]
    hide = ["/usr/share/bash-completion", *(p for p in [shutil.which("man")] if p)]
    done = _pytest_hiding(hide, ["--rootdir", str(ROOT), *tests], tmp_path, ci=None, plugin=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" not in done.stdout and "failed" not in done.stdout, done.stdout
    assert "needs the system package 'git' (git's completion script" in done.stdout
    assert "needs the system package 'man-db'" in done.stdout
    assert "needs the system package 'bash-completion'" in done.stdout


def test_ci_installs_every_optional_package() -> None:
    from packages import PACKAGES

    script = (ROOT / ".ci" / "run").read_text()
    for package in PACKAGES:
        assert f"need_debian+=({package})" in script, package
    assert 'export CI="${CI:-true}"' in script
