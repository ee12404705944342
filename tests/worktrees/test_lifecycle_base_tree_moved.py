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
