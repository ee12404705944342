"""Fixtures: a hermetic environment per test and repository factories."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from job_control_helpers import session_for  # noqa: F401 (a fixture of two sections)
from node_helpers import prettier_node_modules  # noqa: F401 (a fixture of two sections)
from packages import (  # noqa: F401 (pytest hooks: optional packages, skips in CI)
    pytest_collectreport,
    pytest_configure,
    pytest_runtest_logreport,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from repo_helpers import (
    git,
    hermetic_environ,
    write_tree,
)
from sandbox_helpers import no_bwrap  # noqa: F401 (a fixture of two sections)

#: The signals a test sends to what it starts, as a terminal or a user would.
SENT_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)


def _ignored_signals_caught() -> None:
    """A signal this process started with ignored (under ``nohup``, as a
    shell's background job) is caught by a handler that does nothing: this
    process stays as unmoved by it, and every program a test starts gets
    it at its default again (``exec`` resets a caught signal, never an
    ignored one), as from a terminal; a test of a signal ignored at the
    start ignores it in its own child."""
    for signum in SENT_SIGNALS:
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, lambda *_: None)


_ignored_signals_caught()


def _mounts_of_our_own() -> None:
    """This process (pytest, or one worker of ``pytest -n``) gets a mount
    namespace of its own, nothing propagating out of it: a tmpfs or bind
    mount a test makes under ``/tmp`` (a mount beneath a copy-on-write
    folder) is seen by that test's runs only, never by those of a test in
    another worker, which would see their temporary folder changed under
    them; one left mounted ends with the worker.  Not root: no test mounts."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x20000) == 0:  # CLONE_NEWNS
        libc.mount(None, b"/", None, 0x40000 | 0x4000, None)  # MS_PRIVATE | MS_REC


_mounts_of_our_own()


@pytest.fixture(autouse=True, scope="session")
def _no_machine_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests that call the sandbox's checks in process, without the
    ``env`` fixture, keep their answers in a folder of the session, not in
    the machine's ``~/.cache`` or ``$XDG_RUNTIME_DIR``."""
    saved = {key: os.environ.get(key) for key in ("XDG_CACHE_HOME", "XDG_RUNTIME_DIR")}
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    os.environ.pop("XDG_RUNTIME_DIR", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The hermetic environment, also applied to this process (pygit2 and
    the Python API read it)."""
    home = tmp_path / "home"
    tmp = tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    environ = hermetic_environ(home, tmp)
    for key in list(os.environ):
        if key not in environ:
            monkeypatch.delenv(key)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    return environ


@pytest.fixture
def make_repo(tmp_path: Path, env: dict[str, str]):
    """Factory: ``make_repo(files, name="repo")`` makes a repository with one
    commit holding ``files`` at ``name`` (a path below ``tmp_path``, such as
    ``home/src/repo``) and returns its top folder."""

    def factory(files: Mapping[str, bytes | str] | None = None, name: str = "repo") -> Path:
        top = tmp_path / name
        top.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=top, env=env)
        write_tree(top, files if files is not None else {"README": "hello\n"})
        git("add", "-A", cwd=top, env=env)
        git("commit", "-q", "-m", "base", cwd=top, env=env)
        return top

    return factory


@pytest.fixture
def no_base_trees(env: dict[str, str]) -> None:
    """Runs keep no base tree (``isopatch.baseTrees=0``, as ``git -c``
    passes it): for the tests of the runs' own worktrees (``list``,
    ``prune``, the limit, placement), which see only those; base trees
    have tests of their own (``worktrees/test_lifecycle_base_tree*.py``)."""
    env["GIT_CONFIG_PARAMETERS"] = "'isopatch.baseTrees=0'"


@pytest.fixture
def no_leftovers(env: dict[str, str], tmp_path: Path) -> Iterator[None]:
    """After the test, no git-isopatch worktree folder is left in TMPDIR,
    nor beside the repositories ``make_repo`` makes."""
    yield
    tmp = Path(env["TMPDIR"])
    left = [p for p in tmp.glob("git-isopatch-*") for c in p.iterdir() if c.is_dir()]
    for name in (".git-isopatch-*", "*.isopatch-*"):
        left += [*tmp_path.glob(name), *tmp_path.glob(f"*/{name}")]
    assert not left, f"worktree folders left behind: {left}"


@pytest.fixture
def victim(tmp_path: Path):
    """A folder the command bind-mounts into its worktree; every mount of it
    is undone after the test."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("do not delete\n")
    probe = subprocess.run(["mount", "--bind", folder, folder], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root and mount): {probe.stderr.strip()}")
    subprocess.run(["umount", folder], check=True)
    yield folder
    with open("/proc/self/mountinfo") as handle:
        mounts = [line.split()[4] for line in handle]
    for mountpoint in reversed(mounts):
        if mountpoint.startswith(str(tmp_path) + "/") and mountpoint != str(folder):
            subprocess.run(["umount", "-l", mountpoint], check=False)
