"""Progress: on a terminal, git says what it does and shows its checkout
progress; never in a pipe, never with ``-q``, ``--porcelain`` or ``--json``."""

from __future__ import annotations

import os
import select

import pytest
from repo_helpers import git

from git_isopatch.git.result import Err, Ok
from git_isopatch.git.run import own_git_environment, run_git_with_progress


def read_all(master: int, timeout: float = 10.0) -> bytes:
    """What was written to the terminal whose master side is ``master``,
    until nothing more comes for a moment."""
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], timeout if not out else 0.2)
        if not ready:
            return out
        try:
            data = os.read(master, 65536)
        except OSError:
            return out
        if not data:
            return out
        out += data


@pytest.fixture
def terminal():
    """A pseudo-terminal: ``(master, slave)`` file descriptors."""
    master, slave = os.openpty()
    yield master, slave
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


def test_git_progress_reaches_the_terminal_and_failures_stay_with_us(
    env, make_repo, tmp_path, terminal
) -> None:
    master, slave = terminal
    repo = make_repo({f"d/f{i}": f"{i}\n" for i in range(30)})
    own = {**own_git_environment(env), "GIT_PROGRESS_DELAY": "0"}
    path = tmp_path / "wt"
    result = run_git_with_progress(
        [f"--git-dir={repo / '.git'}", "worktree", "add", "--detach", str(path), "HEAD"],
        env=own,
        terminal=slave,
    )
    assert isinstance(result, Ok), result
    shown = read_all(master)
    head = git("rev-parse", "--short", "HEAD", cwd=repo, env=env).decode().strip()
    assert f"Preparing worktree (detached HEAD {head})".encode() in shown
    assert b"Updating files: 100% (30/30), done." in shown
    assert b"\r" in shown.split(b"Preparing")[1]  # progress updates in place

    result = run_git_with_progress(
        [f"--git-dir={repo / '.git'}", "worktree", "add", "--detach", str(path), "HEAD"],
        env=own,
        terminal=slave,
    )
    match result:
        case Err(error):
            assert b"fatal: " in error.stderr and b"already exists" in error.stderr
            assert error.returncode == 128
        case Ok():
            pytest.fail("a second worktree at the same path")
    assert b"fatal" not in read_all(master, timeout=0.5)
