"""The classification table (design: Architecture; issue 4): each row of
``FAILURE_TABLE`` is matched by a failure produced for real, with real git
or a real file operation; a failure no row knows is a bug that crashes with
a hint to report it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, registered_worktrees, tmpfs

from git_isopatch.git.repo import open_user_repository, resolve_commit
from git_isopatch.git.result import Err, GitError, Ok
from git_isopatch.git.run import own_git_environment, run_git
from git_isopatch.git.types import CommitId, GitDirPath, Ref
from git_isopatch.git.worktree import add_detached_worktree
from git_isopatch.isolation.errors import (
    FAILURE_TABLE,
    IsopatchError,
    UnexpectedGitFailure,
    classify,
    classify_os_error,
    known_failure,
)

MISSING_COMMIT = CommitId("1" * 40)


def _err(result) -> GitError:
    assert isinstance(result, Err), result
    return result.error


def _git(env, *args: str, **kwargs) -> GitError:
    return _err(run_git(list(args), env=own_git_environment(env), **kwargs))


def _os_error(operation: Callable[[], object]) -> GitError:
    try:
        operation()
    except OSError as exc:
        return GitError(reason=exc.strerror or "", errno=exc.errno)
    raise AssertionError("the operation did not fail")


def _timeout(env, tmp_path, make_repo) -> GitError:
    return _git(env, "pause", config=[("alias.pause", "!sleep 3")], timeout=0.3)


def _no_space(env, tmp_path, make_repo) -> GitError:
    with tmpfs(tmp_path / "full", "64k") as full:
        filler = full / "filler"
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={filler}", "bs=1k"], capture_output=True, check=False
        )
        return _git(env, "init", "-q", str(full / "repo"))


def _read_only(env, tmp_path, make_repo) -> GitError:
    with tmpfs(tmp_path / "ro", "64k", "ro") as readonly:
        return _git(env, "init", "-q", str(readonly / "repo"))


def _fake_git(tmp_path: Path, mode: int) -> dict[str, str]:
    """A PATH holding only a ``git`` that is not executable (or none)."""
    folder = tmp_path / f"path-{mode:o}"
    folder.mkdir()
    if mode:
        (folder / "git").write_text("#!/bin/sh\n")
        (folder / "git").chmod(mode)
    return {"PATH": str(folder)}


def _permission_denied(env, tmp_path, make_repo) -> GitError:
    # even root cannot run a file without any execute bit (execve(2), EACCES)
    return _git({**env, **_fake_git(tmp_path, 0o644)}, "version")


def _git_not_found(env, tmp_path, make_repo) -> GitError:
    return _git({**env, **_fake_git(tmp_path, 0)}, "version")


def _bad_config(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    with open(repo / ".git" / "config", "a") as config:
        config.write("[isopatch\n")
    return _git(env, "-C", str(repo), "config", "--get-regexp", "^isopatch[.]")


def _no_such_file(env, tmp_path, make_repo) -> GitError:
    return _os_error(lambda: open(tmp_path / "missing" / "x.patch", "wb"))  # noqa: SIM115


def _not_a_directory(env, tmp_path, make_repo) -> GitError:
    (tmp_path / "file").write_text("x\n")
    return _os_error(lambda: open(tmp_path / "file" / "x.patch", "wb"))  # noqa: SIM115


def _is_a_directory(env, tmp_path, make_repo) -> GitError:
    return _os_error(lambda: open(tmp_path, "wb"))  # noqa: SIM115


def _not_a_git_repository(env, tmp_path, make_repo) -> GitError:
    return _git(env, f"--git-dir={tmp_path / 'nowhere'}", "worktree", "list")


def _not_a_work_tree(env, tmp_path, make_repo) -> GitError:
    return _git(env, "-C", str(make_repo() / ".git"), "diff")


def _unborn_head(env, tmp_path, make_repo) -> GitError:
    git("init", "-q", tmp_path / "empty", cwd=tmp_path, env=env)
    match open_user_repository(str(tmp_path / "empty"), env):
        case Ok(repository):
            return _err(resolve_commit(repository, Ref("HEAD")))
    raise AssertionError("no repository")


def _add_worktree(env, repo: Path, path: Path, commit: CommitId | None = None) -> GitError:
    """``git worktree add`` as git-isopatch runs it; it must fail."""
    if commit is None:
        commit = CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())
    git_dir = GitDirPath(repo / ".git")
    env = own_git_environment(env)
    return _err(add_detached_worktree(git_dir, str(path), commit, lock_reason="test", env=env))


def _unknown_revision(env, tmp_path, make_repo) -> GitError:
    return _add_worktree(env, make_repo(), tmp_path / "wt", MISSING_COMMIT)


def _worktree_locked(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    git("worktree", "add", "-q", "--lock", tmp_path / "wt", cwd=repo, env=env)
    return _git(env, "-C", str(repo), "worktree", "remove", "--force", str(tmp_path / "wt"))


def _worktree_exists(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    return _add_worktree(env, repo, repo)


def _index_locked(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    (repo / ".git" / "index.lock").touch()
    return _git(env, "-C", str(repo), "add", "README")


def _checkout_failed(env, tmp_path, make_repo) -> GitError:
    repo = make_repo({"big.bin": os.urandom(256 * 1024), "small": "x\n"})
    with tmpfs(tmp_path / "small", "128k") as small:
        return _add_worktree(env, repo, small / "wt")


def _unsupported_repository(env, tmp_path, make_repo) -> GitError:
    repo = tmp_path / "sha256"
    repo.mkdir()
    git("init", "-q", "--object-format=sha256", cwd=repo, env=env)
    return _err(open_user_repository(str(repo), env))


def _filter_failed(env, tmp_path, make_repo) -> GitError:
    repo = make_repo({".gitattributes": "*.dat filter=lfs\n", "a.dat": "data\n"})
    git("config", "filter.lfs.smudge", "no-such-filter-program", cwd=repo, env=env)
    git("config", "filter.lfs.required", "true", cwd=repo, env=env)
    return _add_worktree(env, repo, tmp_path / "wt")


def _embedded_repository(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    git("init", "-q", repo / "inner", cwd=repo, env=env)
    return _git(env, "-C", str(repo), "add", "--intent-to-add", "inner")


#: code -> a real failure of that kind.
CASES: dict[str, Callable[..., GitError]] = {
    "timeout": _timeout,
    "no-space": _no_space,
    "read-only": _read_only,
    "permission-denied": _permission_denied,
    "git-not-found": _git_not_found,
    "bad-config": _bad_config,
    "no-such-file": _no_such_file,
    "not-a-directory": _not_a_directory,
    "is-a-directory": _is_a_directory,
    "not-a-git-repository": _not_a_git_repository,
    "not-a-work-tree": _not_a_work_tree,
    "unborn-head": _unborn_head,
    "unknown-revision": _unknown_revision,
    "worktree-locked": _worktree_locked,
    "worktree-exists": _worktree_exists,
    "index-locked": _index_locked,
    "checkout-failed": _checkout_failed,
    "unsupported-repository": _unsupported_repository,
    "filter-failed": _filter_failed,
    "embedded-repository": _embedded_repository,
}


def test_every_row_has_a_case() -> None:
    assert sorted(CASES) == sorted(row.code for row in FAILURE_TABLE)


@pytest.mark.parametrize("code", sorted(CASES))
def test_row(env, tmp_path: Path, make_repo, code: str) -> None:
    error = CASES[code](env, tmp_path, make_repo)
    assert classify(error) == code, error
    failure = known_failure("could not do it", error)
    assert isinstance(failure, IsopatchError) and failure.code == code
    assert failure.message.startswith("could not do it: ")
    assert "\n" not in failure.message and not failure.message.endswith(".")
    if error.errno is not None and not error.stderr:
        assert classify_os_error(OSError(error.errno, error.reason)) == code


def _corrupt_index_command() -> list[str]:
    """A command that leaves its worktree's index unreadable, so that git
    fails in a way no row knows ("index file smaller than expected")."""
    return ["sh", "-c", 'echo new > new.txt; printf garbage > "$(git rev-parse --git-dir)/index"']


def test_an_unknown_git_failure_is_a_bug_that_crashes(env, make_repo) -> None:
    """Through the executable: a traceback, then git's ``hint:`` line asking
    for a report, exit 128; the worktree is kept (unlocked) for a look."""
    repo = make_repo()
    run = isopatch("--porcelain", "--", *_corrupt_index_command(), cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.startswith("Traceback (most recent call last):\n"), run.err
    assert "UnexpectedGitFailure: could not mark new files intent-to-add in '" in run.err
    assert "index file smaller than expected" in run.err
    assert run.err.splitlines()[-1] == (
        "hint: this is a bug in git-isopatch; please report it with the output above"
    )
    (worktree,) = registered_worktrees(repo, env)
    assert b"locked" not in git("worktree", "list", "--porcelain", cwd=repo, env=env)
    git("worktree", "remove", "--force", worktree[len("worktree ") :], cwd=repo, env=env)


def test_known_failure_raises_for_an_unknown_failure(env, make_repo) -> None:
    """Through the Python API: the same failure raises
    ``UnexpectedGitFailure`` out of ``capture``, and ``known_failure``
    raises it for git's real message."""
    from git_isopatch import capture

    repo = make_repo()
    with pytest.raises(UnexpectedGitFailure) as raised:
        capture(_corrupt_index_command(), repo_path=str(repo))
    error = raised.value.error
    assert b"index file smaller than expected" in error.stderr
    assert classify(error) is None
    with pytest.raises(UnexpectedGitFailure):
        known_failure("could not do it", error)
    for line in registered_worktrees(repo, env):
        git("worktree", "remove", "--force", line[len("worktree ") :], cwd=repo, env=env)
