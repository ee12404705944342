"""Placement: ``isopatch.tmpdir`` never names a folder of git's metadata.
There the run's folders and the worktree's files would read as refs,
objects or worktrees of the user's repository; it is refused as ``-o``
there is, with git's bad-value line, before anything is made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state


@pytest.mark.parametrize(
    "value",
    [".git", ".git/refs", ".git/isopatch-tmp", "{top}/.git/worktrees", "link-to-git/x", "sub/.git"],
)
def test_tmpdir_in_the_git_directory_is_a_bad_value(env, make_repo, value: str) -> None:
    repo = make_repo({"README": "hello\n", "sub/file": "x\n"})
    os.symlink(repo / ".git", repo / "link-to-git")
    (repo / "sub" / ".git").mkdir()  # a nested repository's place: git metadata too
    value = value.format(top=repo)
    git("config", "isopatch.tmpdir", value, cwd=repo, env=env)
    before = repo_state(repo, env)
    run = isopatch("--porcelain", "--", "touch", "made", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    lines = run.err.splitlines()
    assert lines[0] == "fatal: bad config value for 'isopatch.tmpdir'", run.err
    assert lines[1].startswith(f"hint: '{repo / value}' is inside the git directory '")
    assert run.out == (
        "version 1\nerror bad config value for 'isopatch.tmpdir'\nerror-code bad-config\n"
        f"hint {lines[1].removeprefix('hint: ')}\n"
    )
    assert len(lines) == 2
    assert repo_state(repo, env) == before
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert [p.name for p in (repo / ".git").iterdir() if "isopatch" in p.name] == []


def test_tmpdir_in_the_git_directory_from_git_c(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch(
        "--", "true", cwd=repo, env={**env, "GIT_CONFIG_PARAMETERS": "'isopatch.tmpdir=.git'"}
    )
    assert run.returncode == 128
    assert run.err.startswith("fatal: bad config value for 'isopatch.tmpdir'\nhint: ")


def test_tmpdir_beside_the_git_directory_is_fine(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    (repo / "gitfoo").mkdir()
    git("config", "isopatch.tmpdir", ".git/../gitfoo", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "touch", "made", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert Path(run.fields()["patch"]).parent.parent.resolve() == repo / "gitfoo"


def test_a_work_tree_inside_a_bare_repository_folder_may_hold_it(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    source = make_repo()
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", source, bare, cwd=tmp_path, env=env)
    linked = bare / "main-tree"
    git("worktree", "add", "-q", linked, "main", cwd=bare, env=env)
    (linked / "tmp").mkdir()
    git("config", "isopatch.tmpdir", linked / "tmp", cwd=linked, env=env)
    run = isopatch("--porcelain", "--", "touch", "made", cwd=linked, env=env)
    assert run.returncode == 0, run.err
