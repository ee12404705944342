"""Sessions against a hostile step: what a step's command plants in the
session's git directory (design: procedure step 6, the worktree's git
directory read as hostile input).  A step whose patch cannot be taken says
so in git's manner and names no worktree it did not keep: the session's
worktree is not handed to the user."""

from __future__ import annotations

import pytest
from repo_helpers import isopatch


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
