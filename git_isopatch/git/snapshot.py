"""A commit object holding the user's work tree as it is, for
``--include-uncommitted``.

The snapshot is made through a temporary index, the way ``git stash create``
does it but without its side effects: ``GIT_INDEX_FILE`` names a copy of the
user's index in a scratch folder (git(1), ENVIRONMENT), ``git add --all``
records the work tree into that copy (staged, unstaged, and untracked files
that are not ignored; git-add(1)), ``git write-tree`` and ``git commit-tree``
make a tree and a commit of it.  The user's work tree, index, refs, reflogs
and stash are never written to; the only trace is unreachable objects in the
object store, which ``git gc`` prunes (git-gc(1), ``gc.pruneExpire``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, RepoPath

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


def _os_error(action: str, exc: OSError) -> Err:
    return Err(GitError(reason=f"{action}: {exc.strerror}", errno=exc.errno))


def snapshot_work_tree(
    git_dir: GitDirPath,
    top: RepoPath,
    parent: CommitId | None,
    scratch: str,
    *,
    env: Mapping[str, str],
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

    Returns:
        ``Ok(CommitId)`` of the snapshot, or ``Err(GitError)`` when the index
        cannot be copied or git fails (e.g. no space left for the objects).
    """
    index = os.path.join(scratch, "index")
    index_env = {**env, "GIT_INDEX_FILE": index}
    try:
        shutil.copyfile(os.path.join(git_dir, "index"), index)
    except FileNotFoundError:
        # No index yet (a fresh clone with --no-checkout, or a new repository):
        # start from the parent's tree, or from nothing.
        if parent is not None:
            read = run_git(
                [f"--git-dir={git_dir}", "read-tree", parent],
                env=index_env,
                config=SNAPSHOT_CONFIG,
            )
            if isinstance(read, Err):
                return read
    except OSError as exc:
        return _os_error(f"cannot copy the index of '{git_dir}'", exc)
    repository = [f"--git-dir={git_dir}", f"--work-tree={top}"]
    added = run_git(
        [*repository, "add", "--all", "--sparse"], env=index_env, config=SNAPSHOT_CONFIG, cwd=top
    )
    if isinstance(added, Err):
        return added
    match run_git([f"--git-dir={git_dir}", "write-tree"], env=index_env, config=SNAPSHOT_CONFIG):
        case Ok(output):
            tree = output.decode("ascii").strip()
        case Err() as err:
            return err
    args = [f"--git-dir={git_dir}", "commit-tree", "--no-gpg-sign", "-m", SNAPSHOT_MESSAGE]
    if parent is not None:
        args += ["-p", parent]
    commit_env = {**env, **SNAPSHOT_IDENTITY}
    match run_git([*args, tree], env=commit_env, config=SNAPSHOT_CONFIG):
        case Ok(output):
            return Ok(CommitId(output.decode("ascii").strip()))
        case Err() as err:
            return err
