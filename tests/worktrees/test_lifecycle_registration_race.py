"""A registration that goes while git reads it (design: procedure step 7):
git reads every folder of ``$GIT_COMMON_DIR/worktrees`` (worktree.c,
``get_worktrees``), so a registration of ours leaves it at once, moved out
of git's sight, before a file of it is deleted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch


def _registered(repo: Path, env) -> list[str]:
    """What git sees of the linked worktrees: ``git worktree list`` and
    what ``git worktree prune`` would prune."""
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    pruned = subprocess.run(
        ["git", "worktree", "prune", "-n", "-v"], cwd=repo, env=env, capture_output=True
    )
    assert pruned.returncode == 0, pruned.stderr
    tops = [line for line in listed.splitlines() if line.startswith("worktree ")][1:]
    return tops + (pruned.stdout + pruned.stderr).decode().splitlines()


def test_git_never_sees_a_registration_half_deleted(
    env, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whenever the removal deletes a file of the registration, git sees no
    linked worktree at all: the registration left ``worktrees/`` at once."""
    from git_isopatch.git.repo import UserRepository
    from git_isopatch.git.types import GitDirPath, WorktreePath
    from git_isopatch.worktrees.removal import remove_ours

    repo = make_repo({"a.txt": "a\n"})
    ours = tmp_path / "git-isopatch-abcdefgh" / "wt"
    git("worktree", "add", "--detach", str(ours), cwd=repo, env=env)
    unlink, seen = os.unlink, []

    def unlink_and_look(path, *, dir_fd=None):
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else path
        if folder.startswith(str(repo / ".git")):
            seen.append(_registered(repo, env))
        unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink_and_look)
    repository = UserRepository(str(repo), str(repo / ".git"), str(repo / ".git"), "")
    admin_dir = GitDirPath(str(repo / ".git" / "worktrees" / "wt"))
    reason = remove_ours(repository, WorktreePath(str(ours)), admin_dir)
    monkeypatch.undo()
    assert reason is None
    assert len(seen) >= 3, "the registration's files were deleted one by one"
    assert seen == [[]] * len(seen)
    assert not (repo / ".git" / "worktrees").exists()
    assert not (repo / ".git" / "isopatch-removed").exists()


def test_a_removal_ended_after_the_move_leaves_nothing_git_sees_and_prune_deletes_it(
    env, make_repo, tmp_path: Path
) -> None:
    """A removal ended (a crash, SIGKILL) between moving a registration out
    of ``worktrees/`` and deleting it: git sees nothing of it, ``list``
    neither, and ``prune`` deletes it."""
    from git_isopatch.worktrees.registration import SET_ASIDE_FOLDER, set_aside

    repo = make_repo({"a.txt": "a\n"})
    ours = tmp_path / "git-isopatch-abcdefgh" / "wt"
    git("worktree", "add", "--detach", "--lock", str(ours), cwd=repo, env=env)
    holder = set_aside(str(repo / ".git"), "wt")
    assert holder is not None
    left = Path(holder) / "wt"
    assert {"HEAD", "commondir", "gitdir", "index", "locked"} <= set(os.listdir(left))
    assert _registered(repo, env) == []
    assert git("fsck", "--no-progress", cwd=repo, env=env) == b""
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert listed.returncode == 0 and listed.out == "", listed.err
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert not (repo / ".git" / SET_ASIDE_FOLDER).exists()
    assert _registered(repo, env) == []
