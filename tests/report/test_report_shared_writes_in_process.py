"""Report: the refs of the shared-write report are read in process by
libgit2 (issue 23: no ``git for-each-ref`` before and after every run), and
they are the refs git lists: the same names with the same object ids on
odd repositories, and git itself where libgit2 might differ.  Nothing that
git reports as a shared write is lost."""

from __future__ import annotations

import os
from pathlib import Path

from repo_helpers import git, isopatch

from git_isopatch.git.result import Ok
from git_isopatch.git.shared_state import read_shared_state, refs_in_process
from git_isopatch.git.types import GitDirPath

MISSING = "1234567890123456789012345678901234567890"


def _for_each_ref(repo: Path, env) -> dict[str, str]:
    output = git("for-each-ref", "--format=%(objectname) %(refname)", cwd=repo, env=env)
    refs = {}
    for line in output.decode("utf-8", "surrogateescape").splitlines():
        object_id, _, name = line.partition(" ")
        refs[name] = object_id
    return refs


def _odd_refs(repo: Path, env) -> None:
    """Packed and loose refs, an annotated tag, the stash, symbolic refs
    (one dangling), a non-ASCII name, a ref to a missing object, a loose
    ref file git cannot parse, per-worktree refs of the main work tree."""
    git("tag", "-a", "-m", "t", "v1", cwd=repo, env=env)
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo, env=env)
    git("branch", "packed", cwd=repo, env=env)
    (repo / "README").write_text("changed\n")
    git("stash", "-q", cwd=repo, env=env)
    git("pack-refs", "--all", cwd=repo, env=env)
    git("branch", "loose", cwd=repo, env=env)
    git("update-ref", "refs/heads/é/ü", "HEAD", cwd=repo, env=env)
    git("update-ref", "refs/bisect/bad", "HEAD", cwd=repo, env=env)
    git("update-ref", "refs/worktree/mine", "HEAD", cwd=repo, env=env)
    git("symbolic-ref", "refs/heads/alias", "refs/heads/loose", cwd=repo, env=env)
    git("symbolic-ref", "refs/heads/dangling", "refs/heads/nowhere", cwd=repo, env=env)
    git("update-ref", "refs/heads/shadowed", "HEAD", cwd=repo, env=env)
    git("pack-refs", "--all", cwd=repo, env=env)
    git("update-ref", "refs/heads/shadowed", "HEAD~1", cwd=repo, env=env)  # loose over packed
    heads = repo / ".git" / "refs" / "heads"
    (heads / "missing").write_text(MISSING + "\n")
    (heads / "garbage").write_text("not a ref\n")


def test_the_refs_are_the_ones_git_lists(env, make_repo) -> None:
    repo = make_repo()
    _odd_refs(repo, env)
    git_dir = GitDirPath(str(repo / ".git"))
    listed = _for_each_ref(repo, env)
    assert {"refs/heads/missing", "refs/heads/alias", "refs/stash", "refs/tags/v1"} <= set(listed)
    assert "refs/heads/garbage" not in listed and "refs/heads/dangling" not in listed
    assert refs_in_process(git_dir, git_dir) == listed
    state = read_shared_state(git_dir, git_dir, env=env)
    assert isinstance(state, Ok) and dict(state.value.refs) == listed


def test_a_linked_worktree_of_the_user_is_left_to_git(env, make_repo, tmp_path) -> None:
    """From a linked worktree, which refs are its own is git's to say: git
    lists them, and they are still what git lists."""
    repo = make_repo()
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", "--detach", linked, cwd=repo, env=env)
    git("update-ref", "refs/bisect/bad", "HEAD", cwd=linked, env=env)
    admin = GitDirPath(git("rev-parse", "--absolute-git-dir", cwd=linked, env=env).decode().strip())
    common = GitDirPath(str(repo / ".git"))
    assert refs_in_process(admin, common) is None
    state = read_shared_state(admin, common, env=env)
    assert isinstance(state, Ok) and dict(state.value.refs) == _for_each_ref(linked, env)
    assert "refs/bisect/bad" in state.value.refs


def test_writes_among_odd_refs_are_reported_and_a_repack_is_not(env, make_repo) -> None:
    repo = make_repo()
    _odd_refs(repo, env)
    command = (
        "git pack-refs --all && git branch made && git update-ref -d refs/heads/packed"
        " && git update-ref refs/heads/shadowed HEAD"
        " && git symbolic-ref refs/heads/alias refs/heads/made"
    )
    run = isopatch("--no-sandbox", "--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    records = [line for line in run.stdout.split(b"\n") if line.startswith(b"shared-write ")]
    assert records == [
        b"shared-write refs/heads/made created",
        b"shared-write refs/heads/packed deleted",
        b"shared-write refs/heads/shadowed changed",
    ]


def test_a_repack_alone_is_no_shared_write(env, make_repo) -> None:
    repo = make_repo()
    _odd_refs(repo, env)
    before = os.stat(repo / ".git" / "packed-refs").st_ino
    run = isopatch(
        "--no-sandbox", "--porcelain", "--", "git", "pack-refs", "--all", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert os.stat(repo / ".git" / "packed-refs").st_ino != before
    assert b"shared-write" not in run.stdout
