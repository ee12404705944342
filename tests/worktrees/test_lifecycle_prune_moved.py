"""``git isopatch prune`` after the repository, or the repository and its
worktree, were moved, and a prune that cannot remove a worktree (design:
procedure step 7)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")


def _kept(repo: Path, env) -> Path:
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", "echo y > f", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return Path(run.fields()["worktree"])


@contextlib.contextmanager
def _read_only(folder: Path):
    """``folder`` bind-mounted read-only on itself: as root, the way a
    deletion really fails."""
    bind = subprocess.run(["mount", "--bind", folder, folder], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root and mount): {bind.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", folder], check=True)
        yield folder
    finally:
        subprocess.run(["umount", "-l", folder], check=False)


def test_prune_after_the_repository_was_moved(env, make_repo, tmp_path) -> None:
    """``mv repo moved`` leaves the kept worktree's ``.git`` file naming the
    old place; prune mends it (``git worktree repair``) and removes it."""
    repo = make_repo({"f": "x\n"})
    kept = _kept(repo, env)
    moved = tmp_path / "moved"
    repo.rename(moved)
    run = isopatch("prune", "-v", cwd=moved, env=env)
    assert (run.returncode, run.err) == (0, ""), run.err
    assert run.out == f"Removing {kept}: kept\n"
    assert not kept.parent.exists()
    assert isopatch("list", cwd=moved, env=env).out == ""
    assert git("worktree", "list", "--porcelain", cwd=moved, env=env).count(b"worktree ") == 1
    assert not (moved / ".git" / "worktrees").exists()


def test_prune_after_the_repository_and_the_worktree_were_moved(env, make_repo, tmp_path) -> None:
    """Our worktree's folder is gone from where git recorded it: its
    registration is ours to drop; the moved folder is no longer ours."""
    repo = make_repo({"f": "x\n"})
    kept = _kept(repo, env)
    elsewhere = tmp_path / "elsewhere"
    kept.parent.rename(elsewhere)
    moved = tmp_path / "moved"
    repo.rename(moved)
    run = isopatch("prune", cwd=moved, env=env)
    assert (run.returncode, run.out, run.err) == (0, "", "")
    assert not (moved / ".git" / "worktrees").exists()
    assert (elsewhere / kept.name / "f").read_text() == "y\n"


def test_prune_that_cannot_remove_a_worktree_says_so_and_fails(env, make_repo) -> None:
    repo = make_repo({"f": "x\n"})
    kept = _kept(repo, env)
    other = _kept(repo, env)
    # the folder holding it read-only (a mount on the worktree itself is
    # refused before git is asked: test_lifecycle_worktree.py)
    with _read_only(kept.parent):
        run = isopatch("prune", "-v", cwd=repo, env=env)
        assert run.returncode == 1, run.err
        assert run.out == f"Removing {other}: kept\n"
        assert run.err.startswith(f"error: could not prune '{kept}': ")
        assert run.err.count("\n") == 1 and "Read-only file system" in run.err, run.err
        assert (kept / "f").exists()
    assert not other.exists()
