"""Commits holding the user's work in progress: the work tree as it is
(``--include-uncommitted``), or the index as it is (``--staged``).

A snapshot is made through a temporary index, the way ``git stash create``
does it but without its side effects: ``GIT_INDEX_FILE`` names a copy of the
user's index in a scratch folder (git(1), ENVIRONMENT); for the work tree,
``git add --all`` records it into that copy (staged, unstaged, and untracked
files that are not ignored; git-add(1)); ``git write-tree`` and ``git
commit-tree`` make a tree and a commit of it.  The user's work tree, index,
refs, reflogs and stash are never written to; the only trace is unreachable
objects in the object store, which ``git gc`` prunes (git-gc(1),
``gc.pruneExpire``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence

from .admin_files import copy_admin_file
from .diff import worktree_args
from .process import Spawn
from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, RepoPath, WorktreePath

#: ``-c`` settings for the snapshot.  A split index would write a new
#: ``sharedindex.*`` file into the user's git directory, and an fsmonitor
#: hook would be asked about a foreign index; no hook runs.  The temporary
#: index is a full one (``index.sparse``): git 2.39 crashes on some writes
#: of a sparse index with entries outside the sparse set (see
#: :data:`.diff.DIFF_CONFIG`).
SNAPSHOT_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.splitIndex", "false"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("index.sparse", "false"),
)

#: Who makes the snapshot commit: fixed, so that a user without
#: ``user.name``/``user.email`` can take a snapshot too.
SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "git-isopatch",
    "GIT_AUTHOR_EMAIL": "git-isopatch@invalid",
    "GIT_COMMITTER_NAME": "git-isopatch",
    "GIT_COMMITTER_EMAIL": "git-isopatch@invalid",
}

SNAPSHOT_MESSAGE = "git-isopatch: snapshot of the work tree"


def user_index_file(git_dir: GitDirPath, top: RepoPath, environ: Mapping[str, str]) -> str:
    """The index the user's git reads: ``GIT_INDEX_FILE`` when set (git(1),
    ENVIRONMENT; a relative one is taken from the top of the work tree,
    where git resolves it), else ``<git_dir>/index``.

    ``git commit -a`` and ``git commit <paths>`` run the pre-commit hook
    with ``GIT_INDEX_FILE`` naming the index they are about to commit
    (githooks(5)), not ``.git/index``.
    """
    named = environ.get("GIT_INDEX_FILE")
    if named:
        return os.path.join(top, named)
    return os.path.join(git_dir, "index")


def _os_error(action: str, exc: OSError) -> Err:
    return Err(GitError(reason=f"{action}: {exc.strerror}", errno=exc.errno))


def snapshot_work_tree(
    git_dir: GitDirPath,
    top: RepoPath,
    parent: CommitId | None,
    scratch: str,
    *,
    env: Mapping[str, str],
    index_file: str | None = None,
) -> GitResult[CommitId]:
    """Make a commit whose tree is the user's work tree as ``git add --all``
    would stage it, with ``parent`` (the user's ``HEAD``) as its parent.

    Args:
        git_dir: the user's git directory (its ``index`` is copied, never
            written).
        top: the top of the user's work tree.
        parent: the commit the snapshot sits on, ``None`` on an unborn branch.
        scratch: an existing private folder for the temporary index; the
            caller removes it.
        env: git-isopatch's own git environment
            (:func:`.run.own_git_environment`, which sets
            ``GIT_OPTIONAL_LOCKS=0``).
        index_file: the user's index (:func:`user_index_file`); default
            ``<git_dir>/index``.

    Returns:
        ``Ok(CommitId)`` of the snapshot, or ``Err(GitError)`` when the index
        cannot be copied or git fails (e.g. no space left for the objects).
    """
    index_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "index")}
    copied = _copy_index(git_dir, parent, index_env, index_file)
    if isinstance(copied, Err):
        return copied
    repository = [f"--git-dir={git_dir}", f"--work-tree={top}"]
    added = run_git(
        [*repository, "add", "--all", "--sparse"], env=index_env, config=SNAPSHOT_CONFIG, cwd=top
    )
    if isinstance(added, Err):
        return added
    return _commit_index(git_dir, parent, SNAPSHOT_MESSAGE, index_env)


def _copy_index(
    git_dir: GitDirPath,
    parent: CommitId | None,
    index_env: Mapping[str, str],
    index_file: str | None = None,
) -> GitResult[None]:
    """Copy the user's index (``index_file``, default ``<git_dir>/index``)
    to ``GIT_INDEX_FILE`` of ``index_env``; without one (a fresh clone with
    ``--no-checkout``, a new repository) start from the parent's tree, or
    from nothing."""
    source = index_file or os.path.join(git_dir, "index")
    try:
        shutil.copyfile(source, index_env["GIT_INDEX_FILE"])
    except FileNotFoundError:
        if parent is not None:
            read = run_git(
                [f"--git-dir={git_dir}", "read-tree", parent], env=index_env, config=SNAPSHOT_CONFIG
            )
            if isinstance(read, Err):
                return read
    except OSError as exc:
        return _os_error(f"cannot copy the index '{source}'", exc)
    return Ok(None)


def _commit_index(
    git_dir: GitDirPath,
    parent: CommitId | None,
    message: str,
    index_env: Mapping[str, str],
    spawn: Spawn | None = None,
) -> GitResult[CommitId]:
    """``git write-tree`` of the temporary index, then ``git commit-tree``."""
    match run_git(
        [f"--git-dir={git_dir}", "write-tree"], env=index_env, config=SNAPSHOT_CONFIG, spawn=spawn
    ):
        case Ok(output):
            tree = output.decode("ascii").strip()
        case Err() as err:
            return err
    args = [f"--git-dir={git_dir}", "commit-tree", "--no-gpg-sign", "-m", message]
    if parent is not None:
        args += ["-p", parent]
    commit_env = {k: v for k, v in index_env.items() if k != "GIT_INDEX_FILE"}
    identity = {**commit_env, **SNAPSHOT_IDENTITY}
    match run_git([*args, tree], env=identity, config=SNAPSHOT_CONFIG, spawn=spawn):
        case Ok(output):
            return Ok(CommitId(output.decode("ascii").strip()))
        case Err() as err:
            return err


SNAPSHOT_INDEX_MESSAGE = "git-isopatch: snapshot of the index"


def snapshot_index(
    git_dir: GitDirPath,
    parent: CommitId | None,
    scratch: str,
    *,
    env: Mapping[str, str],
    index_file: str | None = None,
) -> GitResult[CommitId]:
    """Make a commit whose tree is the user's index: what ``git commit``
    would commit now, with ``parent`` (the user's ``HEAD``) as its parent.

    ``git write-tree`` runs on a copy of the index in ``scratch``: it may
    rewrite the index it reads (the cached trees), and the user's must not
    change.  Unstaged changes and untracked files are not in the index, so
    they stay out.  Intent-to-add entries stay out too, as ``git commit``
    leaves them out (git-add(1), ``--intent-to-add``: "only the fact that
    the path will be added later"); a file staged for deletion is absent.
    Without an index (an unborn branch before the first ``git add``) the
    tree is the parent's, or empty.  ``index_file``: the user's index
    (:func:`user_index_file`, what a pre-commit hook of ``git commit -a``
    is given), default ``<git_dir>/index``.

    Returns:
        ``Ok(CommitId)``, or ``Err(GitError)``: the index holds unmerged
        entries (``git write-tree`` refuses, as ``git commit`` does: "error
        building trees"), cannot be copied, or git fails.
    """
    index_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "index")}
    copied = _copy_index(git_dir, parent, index_env, index_file)
    if isinstance(copied, Err):
        return copied
    return _commit_index(git_dir, parent, SNAPSHOT_INDEX_MESSAGE, index_env)


SESSION_MESSAGE = "git-isopatch: state of a session"
#: The temporary index of :func:`snapshot_worktree`, in the worktree's git directory.
SESSION_INDEX = "isopatch-session-index"


def snapshot_worktree(
    worktree: WorktreePath,
    git_dir: GitDirPath,
    parent: CommitId,
    *,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    spawn: Spawn | None = None,
) -> GitResult[CommitId]:
    """Make a commit whose tree is the worktree (private git directory
    ``git_dir``) as ``git add --all`` would stage it, but for ``exclude``
    (paths from the top), on ``parent``: a session's state after a step.
    It goes through a copy of the worktree's index in ``git_dir`` (never
    through a link put in its place; its times too, so that git reads again
    the files it would: racy entries, every one when the attributes
    changed, :func:`.attributes.look_again_at_every_file`), removed
    after; the objects go where ``env`` says; ``spawn`` confines git."""
    index = os.path.join(git_dir, SESSION_INDEX)
    index_env = {**env, "GIT_INDEX_FILE": index}
    with contextlib.suppress(FileNotFoundError):  # one a killed run left
        os.unlink(index)
    try:
        copy_admin_file(os.path.join(git_dir, "index"), index)  # a sparse one stays sparse
        shutil.copystat(os.path.join(git_dir, "index"), index, follow_symlinks=False)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return _os_error(f"cannot copy the index of '{worktree}'", exc)
    try:
        paths = [":(top)", *(f":(top,exclude,literal){path}" for path in exclude)]
        added = run_git(
            [*worktree_args(worktree, git_dir), "add", "--all", "--sparse", "--", *paths],
            env=index_env,
            config=SNAPSHOT_CONFIG,
            spawn=spawn,
        )
        if isinstance(added, Err):
            return added
        return _commit_index(git_dir, parent, SESSION_MESSAGE, index_env, spawn)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index)


def snapshot_parent(git_dir: GitDirPath, commit: CommitId, env: Mapping[str, str]) -> CommitId:
    """The commit a snapshot (``--include-uncommitted``, ``--staged``) was
    taken on, the user's ``HEAD`` then; ``commit`` itself when it is no
    snapshot (or git cannot tell)."""
    match run_git(
        [f"--git-dir={git_dir}", "log", "-1", "--format=%P%x00%an%x00%s", commit, "--"],
        env=env,
        config=SNAPSHOT_CONFIG,
    ):
        case Ok(output):
            parents, author, subject = output.decode("utf-8", "replace").rstrip("\n").split("\0")
            snapshot = subject in (SNAPSHOT_MESSAGE, SNAPSHOT_INDEX_MESSAGE)
            if snapshot and author == SNAPSHOT_IDENTITY["GIT_AUTHOR_NAME"] and parents:
                return CommitId(parents.split()[0])
    return commit
