"""A base tree whose folder is not where its registration says: the
repository was moved (``mv repo moved``: the base tree, inside its git
directory, moved with it, while git's registration still names the old
place), or the folder was deleted by hand.  The next sandboxed run makes
a base tree again, rather than failing every run with "--sandbox is not
available" until a prune; the moved checkout does not stay behind in the
git directory, after a run or a prune."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lifecycle_helpers import _listed
from repo_helpers import git, isopatch


def _registered(repo: Path, env: dict[str, str]) -> list[str]:
    listing = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def _base_folders(repo: Path) -> list[Path]:
    return sorted((repo / ".git" / "isopatch").glob("git-isopatch-*"))


def _moved(repo: Path, env: dict[str, str], tmp_path: Path) -> Path:
    first = isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=env)
    assert first.returncode == 0, first.err
    assert len(_base_folders(repo)) == 1
    moved = tmp_path / "moved"
    shutil.move(repo, moved)
    return moved


@pytest.mark.parametrize("how", ["moved", "deleted"])
def test_a_run_after_the_base_tree_went_makes_one_again(env, make_repo, tmp_path, how) -> None:
    repo = make_repo({"a.txt": "a\n"})
    if how == "moved":
        repo = _moved(repo, env, tmp_path)
    else:
        assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=env).returncode == 0
        (folder,) = _base_folders(repo)
        shutil.rmtree(folder)
    run = isopatch(
        "--sandbox", "--porcelain", "--", "sh", "-c", "echo b >> a.txt", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "1" and run.fields()["sandbox"] == "true"
    (folder,) = _base_folders(repo)  # the new one; the moved one is gone
    (tree,) = [Path(p) for p in _registered(repo, env) if p != str(repo)]
    assert tree.parent == folder
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=env).returncode == 0


def test_prune_after_a_move_leaves_no_base_tree_behind(env, make_repo, tmp_path) -> None:
    repo = _moved(make_repo({"a.txt": "a\n"}), env, tmp_path)
    pruned = isopatch("prune", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert _registered(repo, env) == [str(repo)]
    assert _base_folders(repo) == []


def _copied(repo: Path, env: dict[str, str], tmp_path: Path) -> Path:
    """A copy of ``repo`` (``cp -a``: a backup restored, a second
    checkout made by copying), made after a run at ``HEAD~1`` left a base
    tree there; then the original's base tree is moved to ``HEAD``."""
    first = isopatch("--sandbox", "-q", "--base", "HEAD~1", "--", "true", cwd=repo, env=env)
    assert first.returncode == 0, first.err
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    moved = isopatch("--sandbox", "-q", "--base", "HEAD", "--", "true", cwd=repo, env=env)
    assert moved.returncode == 0, moved.err
    return copy


def _two_commits(make_repo, env: dict[str, str]) -> Path:
    repo = make_repo({"f.txt": "one\n", "g.txt": "x\n"})
    (repo / "f.txt").write_text("two\n")
    git("commit", "-q", "-am", "two", cwd=repo, env=env)
    git("config", "isopatch.baseTrees", "1", cwd=repo, env=env)
    return repo


@pytest.mark.hostile
def test_a_copy_of_the_repository_never_runs_over_the_originals_base_tree(
    env, make_repo, tmp_path
) -> None:
    repo = _two_commits(make_repo, env)
    copy = _copied(repo, env, tmp_path)
    (original,) = _base_folders(repo)
    script = "cat f.txt; echo '* -text' > .gitattributes"  # a full comparison
    run = isopatch(
        "--sandbox", "--porcelain", "--base", "HEAD~1", "--", "sh", "-c", script, cwd=copy, env=env
    )
    assert run.returncode == 0, run.err
    # the command saw its base, not the commit the original's base tree moved to
    assert Path(run.fields()["stdout"]).read_text() == "one\n"
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"f.txt" not in patch and run.fields()["files"] == "1"
    # the original's base tree is where it was, at its commit
    assert _base_folders(repo) == [original]
    (tree,) = [Path(p) for p in _registered(repo, env) if p != str(repo)]
    assert (tree / "f.txt").read_text() == "two\n"
    # and the copy's own base tree lies in the copy's git directory
    (tree,) = [Path(p) for p in _registered(copy, env) if p != str(copy)]
    assert tree.is_relative_to(copy / ".git" / "isopatch")


@pytest.mark.hostile
def test_prune_in_a_copy_leaves_the_originals_worktrees(env, make_repo, tmp_path) -> None:
    repo = _two_commits(make_repo, env)
    kept = isopatch("--no-sandbox", "--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    copy = _copied(repo, env, tmp_path)
    before = sorted(_registered(repo, env))
    pruned = isopatch("prune", cwd=copy, env=env)
    assert pruned.returncode == 0, pruned.err
    assert str(repo) not in pruned.err and str(repo) not in pruned.out
    assert sorted(_registered(repo, env)) == before
    assert all(Path(p).is_dir() for p in before)
    assert Path(kept.fields()["worktree"]).is_dir()
    # the copy keeps no registration of them
    assert _registered(copy, env) == [str(copy)]


def _by_path(repo: Path, env: dict[str, str]) -> dict[str, dict[str, str]]:
    """``git isopatch list --porcelain -z``: each worktree's records, by path."""
    return {entry["worktree"]: entry for entry in _listed(repo, env)}


@pytest.mark.hostile
def test_list_in_a_copy_never_shows_the_originals_kept_worktree_as_its_own(
    env, make_repo, tmp_path
) -> None:
    """After ``cp -a``, the copy's registration names the original's kept
    worktree: that folder is the original's, so the copy lists its
    registration as orphaned, saying why it may be pruned (and prune
    removes only the registration); the original's list is unchanged."""
    repo = _two_commits(make_repo, env)
    kept = isopatch("--no-sandbox", "--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    worktree = kept.fields()["worktree"]
    copy = _copied(repo, env, tmp_path)
    assert _by_path(repo, env)[worktree]["state"] == "kept"
    listed = _by_path(copy, env)[worktree]
    assert listed["state"] == "orphaned", listed
    assert "another repository" in listed.get("prunable", ""), listed
    assert _by_path(repo, env)[worktree]["state"] == "kept"
