"""``--staged``: the worktree starts from ``HEAD`` plus the index, what
``git commit`` would commit; unstaged changes and untracked files stay out,
and the user's index is never written (:func:`git_isopatch.git.snapshot.snapshot_index`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, repo_state, write_tree

from git_isopatch.git.result import Err, Ok
from git_isopatch.git.run import own_git_environment
from git_isopatch.git.snapshot import snapshot_index


def _snapshot(repo: Path, env: dict[str, str], tmp_path: Path, parent: str | None = "HEAD"):
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    head = git("rev-parse", parent, cwd=repo, env=env).decode().strip() if parent else None
    return snapshot_index(str(repo / ".git"), head, str(scratch), env=own_git_environment(env))


def _staged_work(make_repo, env: dict[str, str]) -> Path:
    repo = make_repo({"staged": "old\n", "unstaged": "old\n", "both": "old\n", "removed": "r\n"})
    write_tree(repo, {"staged": "staged\n", "both": "staged\n", "added": "new\n"})
    git("add", "staged", "both", "added", cwd=repo, env=env)
    git("rm", "-q", "removed", cwd=repo, env=env)
    write_tree(repo, {"unstaged": "unstaged\n", "both": "unstaged\n", "untracked": "u\n"})
    write_tree(repo, {"intent": "only the intent\n"})
    git("add", "--intent-to-add", "intent", cwd=repo, env=env)
    return repo


def _files(repo: Path, commit: str, env: dict[str, str]) -> dict[str, str]:
    names = git("ls-tree", "-r", "--name-only", commit, cwd=repo, env=env).decode().split()
    return {n: git("show", f"{commit}:{n}", cwd=repo, env=env).decode() for n in names}


def test_the_snapshot_is_what_git_commit_would_commit(env, make_repo, tmp_path) -> None:
    repo = _staged_work(make_repo, env)
    before = repo_state(repo, env)
    match _snapshot(repo, env, tmp_path):
        case Ok(commit):
            pass
        case Err(error):
            pytest.fail(error.message())
    assert repo_state(repo, env) == before  # index bytes, inode and mtime too
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    assert git("rev-parse", f"{commit}^", cwd=repo, env=env).decode().strip() == head
    # what git commit makes of the same index, intent-to-add entry and all
    git("commit", "-q", "-m", "the user's commit", cwd=repo, env=env)
    committed = git("rev-parse", "HEAD^{tree}", cwd=repo, env=env).decode().strip()
    assert git("rev-parse", f"{commit}^{{tree}}", cwd=repo, env=env).decode().strip() == committed
    assert _files(repo, commit, env) == {
        "staged": "staged\n",
        "unstaged": "old\n",
        "both": "staged\n",
        "added": "new\n",
    }


def test_an_unborn_branch_snapshots_what_is_staged(env, tmp_path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git("init", "-q", cwd=repo, env=env)
    match _snapshot(repo, env, tmp_path, parent=None):
        case Ok(commit):
            assert _files(repo, commit, env) == {}
        case Err(error):
            pytest.fail(error.message())
    write_tree(repo, {"a": "a\n", "b": "b\n"})
    git("add", "a", cwd=repo, env=env)
    match _snapshot(repo, env, tmp_path, parent=None):
        case Ok(commit):
            assert _files(repo, commit, env) == {"a": "a\n"}
            assert git("rev-list", "--count", commit, cwd=repo, env=env).strip() == b"1"
        case Err(error):
            pytest.fail(error.message())


def test_unmerged_entries_are_refused_as_git_commit_refuses_them(env, make_repo, tmp_path) -> None:
    repo = make_repo({"a": "base\n"})
    git("checkout", "-q", "-b", "other", cwd=repo, env=env)
    write_tree(repo, {"a": "other\n"})
    git("commit", "-q", "-am", "other", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)
    write_tree(repo, {"a": "main\n"})
    git("commit", "-q", "-am", "main", cwd=repo, env=env)
    git("merge", "-q", "other", cwd=repo, env=env, check=False)
    before = repo_state(repo, env)
    match _snapshot(repo, env, tmp_path):
        case Err(error):
            assert "unmerged" in error.stderr.decode()
        case Ok():
            pytest.fail("a snapshot of an index with conflicts")
    assert repo_state(repo, env) == before
