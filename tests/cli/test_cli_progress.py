"""Progress: on a terminal, git says what it does and shows its checkout
progress; never in a pipe, never with ``-q``, ``--porcelain`` or ``--json``."""

from __future__ import annotations

import os
import re
import select

import pytest
from repo_helpers import git, isopatch
from terminal_helpers import isopatch_on_terminal

from git_isopatch.git.progress import run_git_with_progress
from git_isopatch.git.result import Err, Ok
from git_isopatch.git.run import own_git_environment


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


def _repo(make_repo):
    return make_repo({f"d/f{i}": f"{i}\n" for i in range(20)})


def test_a_terminal_shows_what_happens_and_the_checkout_progress(env, make_repo) -> None:
    repo = _repo(make_repo)
    head = git("rev-parse", "--short", "HEAD", cwd=repo, env=env).decode().strip()
    run = isopatch_on_terminal(
        "--", "sh", "-c", "echo x > d/f1", cwd=repo, env={**env, "GIT_PROGRESS_DELAY": "0"}
    )
    assert run.returncode == 0, run.shown
    assert f"Preparing worktree (detached HEAD {head})\n" in run.shown
    assert "Updating files: 100% (20/20), done.\n" in run.shown
    # what happens comes first, the summary last
    assert run.shown.index("Preparing worktree") < run.shown.index("isopatch: 1 file changed")


@pytest.mark.parametrize("option", ["-q", "--porcelain", "--json"])
def test_quiet_and_machine_output_show_no_progress_on_a_terminal(env, make_repo, option) -> None:
    repo = _repo(make_repo)
    run = isopatch_on_terminal(
        option, "--", "true", cwd=repo, env={**env, "GIT_PROGRESS_DELAY": "0"}
    )
    assert run.returncode == 0, run.shown
    assert "Preparing" not in run.shown and "Updating files" not in run.shown
    assert "\r" not in run.shown


def test_no_progress_when_stderr_is_not_a_terminal(env, make_repo) -> None:
    repo = _repo(make_repo)
    run = isopatch("--", "true", cwd=repo, env={**env, "GIT_PROGRESS_DELAY": "0"})
    assert run.returncode == 0, run.err
    assert "Preparing" not in run.err and "Updating files" not in run.err
    assert "\r" not in run.err


def test_a_failed_checkout_on_a_terminal_is_one_classified_fatal(env, make_repo) -> None:
    """Git's own ``fatal:`` line is not shown twice: ours carries it."""
    repo = make_repo({".gitattributes": "*.dat filter=lfs\n", "a.dat": "data\n"})
    git("config", "filter.lfs.smudge", "no-such-filter-program", cwd=repo, env=env)
    git("config", "filter.lfs.required", "true", cwd=repo, env=env)
    run = isopatch_on_terminal("--", "true", cwd=repo, env=env)
    assert run.returncode == 128, run.shown
    fatal = [line for line in run.shown.splitlines() if line.startswith(("fatal:", "error:"))]
    assert len(fatal) == 1, run.shown
    assert fatal[0].startswith("fatal: could not create worktree at ")
    assert "Preparing worktree" in run.shown
    porcelain = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert porcelain.fields()["error-code"] == "filter-failed"


def test_moving_a_base_tree_on_a_terminal_does_not_read_as_a_move_of_your_head(
    env, make_repo
) -> None:
    """A sandboxed run at another commit moves the idle base tree there
    (``git checkout --detach``); git's "Previous HEAD position was ..." and
    "HEAD is now at ..." about that checkout of git-isopatch's own would
    read, on the user's terminal, as news of the user's own HEAD.  Its
    checkout progress still shows where the move is a checkout of the
    whole tree (a ``.gitattributes`` changed: every file is written again);
    a move by the difference writes a few hundred paths at most and shows
    none."""
    repo = _repo(make_repo)
    for i in range(3):
        (repo / "d" / f"f{i}").write_text("later\n")
    (repo / ".gitattributes").write_text("*.bin binary\n")
    git("add", ".gitattributes", cwd=repo, env=env)
    git("commit", "-q", "-am", "later", cwd=repo, env=env)
    shown = []
    for base in ("HEAD~1", "HEAD"):  # the second run moves the first's base tree
        run = isopatch_on_terminal(
            "--sandbox", "--base", base, "--", "true", cwd=repo,
            env={**env, "GIT_PROGRESS_DELAY": "0"},
        )  # fmt: skip
        assert run.returncode == 0, run.shown
        shown.append(run.shown)
    listed = isopatch("list", "--porcelain", cwd=repo, env=env).fields()
    assert listed["state"] == "base"  # one base tree, moved: not a second one made
    assert "Previous HEAD position" not in shown[1] and "HEAD is now at" not in shown[1], shown
    assert re.search(r"Updating files: 100% \(\d+/\d+\), done\.\n", shown[1]), shown[1]
