"""A repository whose ``worktrees/`` is a file system of its own (design:
procedure step 3): the registration written beside it cannot be moved in
with one ``rename(2)`` (``EXDEV``), and ``git worktree add`` registers the
run's worktree; once that file system is full, the run fails with one
``fatal:`` line.  Either way nothing of git-isopatch's is left in the
git directory."""

from __future__ import annotations

import os
from pathlib import Path

from repo_helpers import isopatch, tmpfs


def test_worktrees_on_a_file_system_of_their_own(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"README": "hello\n"})
    git_dir = repo / ".git"
    with tmpfs(git_dir / "worktrees", "256k"):
        made = isopatch("-q", "--", "true", cwd=repo, env=env)  # the base tree
        assert made.returncode == 0, made.err
        assert not (git_dir / "isopatch-removed").exists()
        before = sorted(os.listdir(git_dir))
        run = isopatch("--porcelain", "--", "sh", "-c", "echo x >> README", cwd=repo, env=env)
        assert run.returncode == 0, run.err
        assert run.fields()["sandbox"] == "true", run.out
        assert b"+x\n" in Path(run.fields()["patch"]).read_bytes()
        assert sorted(os.listdir(git_dir)) == before
        with open(git_dir / "worktrees" / "fill", "wb", buffering=0) as fill:
            try:
                while True:
                    fill.write(b"\0" * 4096)
            except OSError:
                pass
        full = isopatch("--", "sh", "-c", "echo x >> README", cwd=repo, env=env)
        assert full.returncode == 128, full.err
        assert full.err.startswith("fatal: ") and full.err.count("\n") == 1, full.err
        assert "No space left on device" in full.err, full.err
        assert sorted(os.listdir(git_dir)) == before
        assert sorted(os.listdir(git_dir / "worktrees")) == ["fill", "repo"]  # the base tree
        assert isopatch("prune", "--expire", "now", cwd=repo, env=env).returncode == 0
