"""Sessions against a hostile step: what a step's command plants in the
session's git directory (design: procedure step 6, the worktree's git
directory read as hostile input).  A step whose patch cannot be taken says
so in git's manner and names no worktree it did not keep: the session's
worktree is not handed to the user."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, isopatch


@pytest.mark.hostile
def test_a_step_that_plants_a_fifo_in_its_git_dir_names_no_empty_worktree(make_repo, env) -> None:
    repo = make_repo({"README": "hello\n"})
    script = 'mkfifo "$(git rev-parse --git-dir)/planted"; echo hi > f'
    run = isopatch("--sandbox", "--session", "s", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 128
    lines = run.err.splitlines()
    assert lines[0].startswith("fatal: the command left ") and "no patch taken" in lines[0]
    assert not [line for line in lines if "''" in line], run.err
    porcelain = isopatch(
        "--sandbox", "--porcelain", "--session", "s", "--", "true", cwd=repo, env=env
    )
    assert "worktree" not in porcelain.fields()


@pytest.mark.hostile
def test_a_step_ends_while_another_run_has_staged_what_only_it_sees(make_repo, env) -> None:
    """A sandboxed run's index lies in the repository (its registration)
    while the blobs its command stages lie in its own copy-on-write view of
    the object store: what a session's step keeps of its objects must not
    read the other worktrees' indexes (``--indexed-objects`` reads them
    all), or the other run breaks the session."""
    repo = make_repo({"README": "hello\n"})
    script = "echo only-mine > n; git add n; sleep 120"
    other = subprocess.Popen(
        [ISOPATCH, "--sandbox", "-q", "--", "sh", "-c", script],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _staged_elsewhere(repo, env), what="the other run's git add")
        for step in ("echo a > a; git add a; echo b > a", "git diff --cached --stat"):
            run = isopatch(
                "--sandbox",
                "--porcelain",
                "--session",
                "s",
                "--",
                "sh",
                "-c",
                step,
                cwd=repo,
                env=env,
            )
            assert run.returncode == 0, run.err
    finally:
        other.send_signal(signal.SIGTERM)
        other.wait(timeout=120)


def _staged_elsewhere(repo: Path, env: dict[str, str]) -> bool:
    """A registration's index names the path ``n``."""
    for admin_dir in (repo / ".git" / "worktrees").glob("*"):
        listed = subprocess.run(
            ["git", f"--git-dir={admin_dir}", "ls-files", "--", "n"],
            env=env,
            capture_output=True,
            check=False,
        )
        if listed.stdout == b"n\n":
            return True
    return False
