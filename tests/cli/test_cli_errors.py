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
from base_helpers import colliding, commit_template, owned_by_another_user, write_object
from repo_helpers import (
    git,
    isopatch,
    registered_worktrees,
    tmpfs,
    without_program_on_path,
    worktree_list,
)

from git_isopatch.errors import (
    FAILURE_TABLE,
    IsopatchError,
    UnexpectedGitFailure,
    classify,
    classify_os_error,
    known_failure,
)
from git_isopatch.git.repo import open_user_repository, resolve_commit
from git_isopatch.git.result import Err, GitError, Ok
from git_isopatch.git.run import own_git_environment, run_git
from git_isopatch.git.stream import resume_streams, stop_streams, stream_git
from git_isopatch.git.submodule import populate_submodules
from git_isopatch.git.types import CommitId, GitDirPath, Ref
from git_isopatch.git.worktree import add_detached_worktree

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


def _interrupted(env, tmp_path, make_repo) -> GitError:
    """A stream still running when :func:`stop_streams`' grace ends, as
    a signal during a long extraction leaves it."""
    stop_streams(after=0.3)
    try:
        with (tmp_path / "patch").open("wb") as out:
            return _err(
                stream_git(
                    ["pause"], out, env=own_git_environment(env),
                    config=[("alias.pause", "!sleep 30")],
                )
            )  # fmt: skip
    finally:
        resume_streams()


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
    """A repository extension neither libgit2 nor git knows."""
    repo = make_repo()
    git("config", "core.repositoryformatversion", "1", cwd=repo, env=env)
    git("config", "extensions.noSuchThing", "true", cwd=repo, env=env)
    return _err(open_user_repository(str(repo), env))


def _filter_failed(env, tmp_path, make_repo) -> GitError:
    repo = make_repo({".gitattributes": "*.dat filter=lfs\n", "a.dat": "data\n"})
    git("config", "filter.lfs.smudge", "no-such-filter-program", cwd=repo, env=env)
    git("config", "filter.lfs.required", "true", cwd=repo, env=env)
    return _add_worktree(env, repo, tmp_path / "wt")


def _filter_process_failed(env, tmp_path, make_repo) -> GitError:
    """What ``git lfs install`` writes, without git-lfs on ``PATH``."""
    repo = make_repo({".gitattributes": "*.dat filter=lfs\n", "a.dat": "data\n"})
    git("config", "filter.lfs.process", "git-lfs filter-process", cwd=repo, env=env)
    git("config", "filter.lfs.required", "true", cwd=repo, env=env)
    return _add_worktree(without_program_on_path(env, tmp_path / "bin"), repo, tmp_path / "wt")


def _dubious_ownership(env, tmp_path, make_repo) -> GitError:
    return _git(env, "-C", str(owned_by_another_user(env, make_repo)), "status")


def _ambiguous_revision(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    template = commit_template(repo, env)
    prefix = write_object(repo, env, "commit", template % b"first")[:4]
    body = colliding("commit", lambda n: template % b"second %d" % n, prefix)
    write_object(repo, env, "commit", body)
    return _git(env, "-C", str(repo), "rev-parse", "--verify", f"{prefix}^{{commit}}")


def partial_clone_without_its_remote(env, tmp_path: Path, make_repo) -> Path:
    """A blobless clone whose promisor remote is gone: ``HEAD~1``'s blob
    was never fetched."""
    upstream = make_repo({"f": "one\n"}, name="promisor")
    (upstream / "f").write_text("two\n")
    git("commit", "-q", "-a", "-m", "two", cwd=upstream, env=env)
    git("config", "uploadpack.allowFilter", "true", cwd=upstream, env=env)
    clone = tmp_path / "partial"
    git("clone", "-q", "--filter=blob:none", f"file://{upstream}", clone, cwd=tmp_path, env=env)
    upstream.rename(tmp_path / "gone")
    return clone


def _promisor_remote(env, tmp_path, make_repo) -> GitError:
    clone = partial_clone_without_its_remote(env, tmp_path, make_repo)
    return _git(env, "-C", str(clone), "cat-file", "-p", "HEAD~1:f")


def corrupt_index_command() -> list[str]:
    """A command that leaves its worktree's index unreadable, so that git
    fails in a way no specific row knows ("index file smaller than
    expected")."""
    return ["sh", "-c", 'echo new > new.txt; printf garbage > "$(git rev-parse --git-dir)/index"']


def _git_failed(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    (repo / ".git" / "index").write_bytes(b"garbage")
    return _git(env, "-C", str(repo), "add", "--intent-to-add", "README")


def _embedded_repository(env, tmp_path, make_repo) -> GitError:
    repo = make_repo()
    git("init", "-q", repo / "inner", cwd=repo, env=env)
    return _git(env, "-C", str(repo), "add", "--intent-to-add", "inner")


def _submodule_failed(env, tmp_path, make_repo) -> GitError:
    """The commit the superproject records is not in the repository the
    submodule is populated from (``--recurse-submodules``)."""
    source = tmp_path / "source"
    git("init", "-q", source, cwd=tmp_path, env=env)
    git("commit", "-q", "--allow-empty", "-m", "other", cwd=source, env=env)
    repo = make_repo({".gitmodules": '[submodule "sub"]\n\tpath = sub\n\turl = ./nowhere\n'})
    git("update-index", "--add", "--cacheinfo", f"160000,{MISSING_COMMIT},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "gitlink", cwd=repo, env=env)
    result = populate_submodules(
        repo,
        git_dir=repo / ".git",
        sources={"sub": ("sub", str(source))},
        env=own_git_environment(env),
    )
    return _err(result)


#: code -> a real failure of that kind.
CASES: dict[str, Callable[..., GitError]] = {
    "timeout": _timeout,
    "interrupted": _interrupted,
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
    "dubious-ownership": _dubious_ownership,
    "ambiguous-revision": _ambiguous_revision,
    "promisor-remote": _promisor_remote,
    "git-failed": _git_failed,
    "submodule-failed": _submodule_failed,
}

#: more failures of a row's kind, each as git really produces it.
MORE_CASES: dict[str, tuple[str, Callable[..., GitError]]] = {
    "filter-process": ("filter-failed", _filter_process_failed),
}


def test_every_row_has_a_case() -> None:
    assert sorted(CASES) == sorted(row.code for row in FAILURE_TABLE)


@pytest.mark.parametrize("case", sorted(CASES) + sorted(MORE_CASES))
def test_row(env, tmp_path: Path, make_repo, case: str) -> None:
    code, make = MORE_CASES.get(case, (case, CASES.get(case)))
    error = make(env, tmp_path, make_repo)
    assert classify(error) == code, error
    failure = known_failure("could not do it", error)
    assert isinstance(failure, IsopatchError) and failure.code == code
    assert failure.message.startswith("could not do it: ")
    assert "\n" not in failure.message and not failure.message.endswith(".")
    if error.errno is not None and not error.stderr:
        assert classify_os_error(OSError(error.errno, error.reason)) == code


def test_an_unknown_git_failure_is_gits_own_message(env, make_repo) -> None:
    """A refusal no specific row knows is still git's, not a bug: one
    ``fatal:`` line with git's words, ``git-failed``, exit 128; the
    worktree is kept (unlocked) for a look."""
    repo = make_repo()
    run = isopatch("--porcelain", "--", *corrupt_index_command(), cwd=repo, env=env)
    assert run.returncode == 128
    lines = run.err.splitlines()
    # the first git call that reads the worktree's index after the command
    # (the index flags it may have set, cleared before the diff)
    assert lines[0].startswith("fatal: could not read the index of '"), run.err
    assert lines[0].endswith(": index file smaller than expected"), run.err
    assert lines[1:] == [
        f"hint: the worktree is kept for inspection at '{run.fields()['worktree']}'"
    ]
    assert run.fields()["error-code"] == "git-failed"
    (worktree,) = registered_worktrees(repo, env)
    assert b"locked" not in worktree_list(repo, env)
    git("worktree", "remove", "--force", worktree[len("worktree ") :], cwd=repo, env=env)


def test_a_filter_process_that_died_while_git_wrote_to_it() -> None:
    """When the filter process dies while git is writing to it (a race with
    the case above, seen in CI), git's last line is "packet write with
    format failed (...)": the same one line naming the filter, git's own
    words in parentheses."""
    error = GitError(
        args=("git", "worktree", "add"),
        returncode=128,
        stderr=b"git-lfs filter-process: 1: git-lfs: not found\n"
        b"fatal: packet write with format failed (a.dat: smudge filter lfs failed)\n",
    )
    failure = known_failure("could not create worktree at '/w'", error)
    assert failure.code == "filter-failed"
    assert failure.message == (
        "could not create worktree at '/w': a filter process failed: "
        "git-lfs filter-process: 1: git-lfs: not found "
        "(packet write with format failed (a.dat: smudge filter lfs failed))"
    )


def test_a_git_usage_error_is_a_bug(env, tmp_path: Path) -> None:
    """git's own usage error (129) means git-isopatch called it wrongly:
    no row knows it, and ``known_failure`` raises ``UnexpectedGitFailure``."""
    error = _git(env, "-C", str(tmp_path), "diff", "--no-such-option")
    assert error.returncode == 129
    assert classify(error) is None
    with pytest.raises(UnexpectedGitFailure):
        known_failure("could not do it", error)


def test_a_required_filter_process_that_cannot_run(env, tmp_path: Path, make_repo) -> None:
    """``filter.lfs.process`` as ``git lfs install`` writes it, ``required``,
    and no git-lfs: one ``fatal:`` line naming what failed."""
    repo = make_repo({".gitattributes": "*.dat filter=lfs\n", "a.dat": "data\n"})
    git("config", "filter.lfs.process", "git-lfs filter-process", cwd=repo, env=env)
    git("config", "filter.lfs.required", "true", cwd=repo, env=env)
    no_lfs = without_program_on_path(env, tmp_path / "bin")
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=no_lfs)
    assert run.returncode == 128
    (line,) = run.err.splitlines()
    assert line.startswith("fatal: could not create worktree at '"), run.err
    assert "a filter process failed: git-lfs filter-process: 1: git-lfs: not found" in line
    assert run.fields()["error-code"] == "filter-failed"
    assert registered_worktrees(repo, env) == []


def test_a_promisor_remote_that_is_gone(env, tmp_path: Path, make_repo) -> None:
    clone = partial_clone_without_its_remote(env, tmp_path, make_repo)
    run = isopatch("--porcelain", "--base", "HEAD~1", "--", "true", cwd=clone, env=env)
    assert run.returncode == 128
    (line,) = run.err.splitlines()
    assert line.startswith("fatal: could not create worktree at '"), run.err
    assert line.endswith("from promisor remote"), line
    assert run.fields()["error-code"] == "promisor-remote"
    assert registered_worktrees(clone, env) == []


@pytest.mark.parametrize(
    "script",
    [
        "mkdir ../isopatch.patch",
        "mkdir -p ../isopatch.patch/x && echo y > ../isopatch.patch/x/y",
        'ln -s "$HOME/victim" ../isopatch.patch',
        "ln -s .. ../isopatch.patch",
        "mkfifo ../isopatch.patch",
    ],
)
def test_the_command_takes_the_patch_name_in_the_private_folder(
    env, make_repo, script: str
) -> None:
    """The private folder is the worktree's parent: a command can guess it.
    Whatever it puts under our name, the patch is written beside it, and
    what it made is left alone."""
    repo = make_repo()
    victim = Path(env["HOME"]) / "victim"
    victim.write_text("mine\n")
    run = isopatch("--porcelain", "--", "sh", "-c", f"{script}; echo x > y", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"])
    assert patch.is_file() and not patch.is_symlink()
    assert patch.read_bytes().startswith(b"diff --git a/y b/y\n")
    assert patch.stat().st_mode & 0o777 == 0o600
    assert os.path.lexists(patch.parent / "isopatch.patch")
    assert victim.read_text() == "mine\n"
