"""Repository shapes git handles and git-isopatch must too (issue 10,
kind C): a bare repository with its worktrees inside its folder."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state


def _bare_with_worktree_inside(make_repo, tmp_path: Path, env) -> Path:
    """``git clone --bare up bare; cd bare; git worktree add branches/main
    main``, with an ignored ``node_modules`` in the worktree; returns the
    worktree."""
    up = make_repo({"f": "x\n", ".gitignore": "node_modules/\n"}, name="up")
    git("clone", "-q", "--bare", up, tmp_path / "bare", cwd=tmp_path, env=env)
    git("worktree", "add", "-q", "branches/main", "main", cwd=tmp_path / "bare", env=env)
    worktree = tmp_path / "bare" / "branches" / "main"
    (worktree / "node_modules").mkdir()
    (worktree / "node_modules" / "dep").write_text("dep\n")
    return worktree


@pytest.mark.parametrize("include", ["--copy", "--link"])
def test_a_worktree_inside_a_bare_repository_is_no_git_metadata(
    env, make_repo, tmp_path, include, no_leftovers
) -> None:
    worktree = _bare_with_worktree_inside(make_repo, tmp_path, env)
    before = repo_state(worktree, env)
    run = isopatch(
        "--porcelain", "-o", "out.patch", include, "node_modules", "--",
        "sh", "-c", "cat node_modules/dep > f",
        cwd=worktree, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert run.fields()["patch"] == str(worktree / "out.patch")
    (worktree / "out.patch").rename(tmp_path / "out.patch")
    assert repo_state(worktree, env) == before
    git("apply", tmp_path / "out.patch", cwd=worktree, env=env)
    assert (worktree / "f").read_text() == "dep\n"


@pytest.mark.parametrize("target", ["../../config", "../../newfile", ".git", ".git/x"])
def test_git_metadata_around_a_worktree_inside_a_bare_repository_is_refused(
    env, make_repo, tmp_path, target
) -> None:
    """The bare repository's own files, and the worktree's ``.git`` file,
    are git metadata still."""
    worktree = _bare_with_worktree_inside(make_repo, tmp_path, env)
    dotgit = (worktree / ".git").read_bytes()
    config = (tmp_path / "bare" / "config").read_bytes()
    run = isopatch("--porcelain", "-o", target, "--", "true", cwd=worktree, env=env)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: refusing to write the patch into the git directory")
    assert run.fields()["error-code"] == "bad-output"
    assert (worktree / ".git").read_bytes() == dotgit
    assert (tmp_path / "bare" / "config").read_bytes() == config
    assert not (tmp_path / "bare" / "newfile").exists()


def test_a_link_into_the_bare_repository_is_refused(env, make_repo, tmp_path) -> None:
    worktree = _bare_with_worktree_inside(make_repo, tmp_path, env)
    (worktree / "node_modules" / "up").symlink_to("../../../refs")
    run = isopatch("--copy", "node_modules/up", "--", "true", cwd=worktree, env=env)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: --copy 'node_modules/up' resolves to '")
    assert "outside the repository" in run.err


def _kept(repo: Path, env) -> Path:
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", "echo y > f", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return Path(run.fields()["worktree"])


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


def test_prune_that_cannot_remove_a_worktree_says_so_and_fails(env, make_repo) -> None:
    repo = make_repo({"f": "x\n"})
    kept = _kept(repo, env)
    other = _kept(repo, env)
    # the folder holding it read-only (a mount on the worktree itself is
    # refused before git is asked: test_containment.py)
    with _read_only(kept.parent):
        run = isopatch("prune", "-v", cwd=repo, env=env)
        assert run.returncode == 1, run.err
        assert run.out == f"Removing {other}: kept\n"
        assert run.err.startswith(f"error: could not prune '{kept}': ")
        assert run.err.count("\n") == 1 and "Read-only file system" in run.err, run.err
        assert (kept / "f").exists()
    assert not other.exists()
