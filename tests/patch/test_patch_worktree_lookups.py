"""The patch, against a hostile command: git-isopatch's own look-ups in a
worktree (the baseline before the command, the submodules after it) go
through one function, :func:`git_isopatch.git.diff.worktree_output`, which
names the worktree's git directory and top explicitly and pins the diff
configuration, so that a command that rewrote ``<worktree>/.git`` or a
user's configuration cannot change what they read."""

from __future__ import annotations

from pathlib import Path

from repo_helpers import git

from git_isopatch.git.baseline import read_baseline
from git_isopatch.git.diff import worktree_output
from git_isopatch.git.result import Err, Ok
from git_isopatch.git.types import CommitId, GitDirPath, WorktreePath


def _worktree(repo: Path, env) -> tuple[WorktreePath, GitDirPath]:
    folder = repo.parent / "wt"
    git("worktree", "add", "-q", "--detach", folder, cwd=repo, env=env)
    admin = git("rev-parse", "--absolute-git-dir", cwd=folder, env=env).decode().strip()
    return WorktreePath(str(folder)), GitDirPath(admin)


def test_a_rewritten_dot_git_does_not_lead_the_look_up_away(env, make_repo) -> None:
    repo = make_repo({"ours": "o\n"})
    other = make_repo({"theirs": "t\n"}, name="other")
    worktree, admin = _worktree(repo, env)
    (Path(worktree) / ".git").write_text(f"gitdir: {other / '.git'}\n")
    listed = worktree_output(
        worktree, ["ls-files", "-z"], lambda out: out.split(b"\0"), git_dir=admin, env=env
    )
    assert listed == Ok([b"ours", b""])


def test_the_users_configuration_does_not_change_what_is_read(env, make_repo) -> None:
    """``core.quotePath=false`` in the environment: the pinned ``true`` wins."""
    repo = make_repo({"é": "e\n"})
    worktree, admin = _worktree(repo, env)
    hostile = {**env, "GIT_CONFIG_COUNT": "1"}
    hostile |= {"GIT_CONFIG_KEY_0": "core.quotePath", "GIT_CONFIG_VALUE_0": "false"}
    listed = worktree_output(worktree, ["ls-files"], bytes, git_dir=admin, env=hostile)
    assert listed == Ok(b'"\\303\\251"\n')


def test_a_refusal_is_gits_error_and_nothing_is_parsed(env, make_repo) -> None:
    repo = make_repo()
    worktree, admin = _worktree(repo, env)

    def parse(out: bytes) -> bytes:
        raise AssertionError("parsed a failure")

    failed = worktree_output(worktree, ["rev-parse", "no-such-rev"], parse, git_dir=admin, env=env)
    assert isinstance(failed, Err)
    assert failed.error.returncode == 128


def test_the_baseline_reads_the_worktree_named(env, make_repo) -> None:
    """A path that differs right after checkout (``text`` on a CRLF blob)
    is in the baseline, whatever ``<worktree>/.git`` now says."""
    repo = make_repo({"a.txt": b"one\r\n"})
    (repo / ".gitattributes").write_text("*.txt text\n")
    git("add", ".gitattributes", cwd=repo, env=env)
    git("commit", "-q", "-m", "attributes", cwd=repo, env=env)
    base = CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())
    other = make_repo({"b.txt": "b\n"}, name="other")
    worktree, admin = _worktree(repo, env)
    (Path(worktree) / ".git").write_text(f"gitdir: {other / '.git'}\n")
    found = read_baseline(worktree, base, git_dir=admin, env=env)
    assert isinstance(found, Ok)
    assert list(found.value.paths) == [b"a.txt"]
