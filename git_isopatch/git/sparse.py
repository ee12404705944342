"""Sparse checkout in a worktree (git-sparse-checkout(1)).

``git worktree add`` copies the sparse-checkout patterns of the worktree it
is run from (git 2.36+), so a worktree of a sparse checkout is sparse too:
tracked files outside the patterns are recorded in its index with the
``skip-worktree`` bit and are absent from its folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .diff import DIFF_CONFIG, worktree_args
from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath, RepoPath, WorktreePath


def check_out_present_skipped(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    source_top: RepoPath,
    env: Mapping[str, str],
) -> GitResult[int]:
    """Check out the worktree's skipped paths that the user's work tree has.

    A user's work tree may hold files outside its sparse-checkout patterns
    (untracked ones, or tracked ones git found present and stopped
    skipping).  A worktree made at a snapshot of that work tree
    (``--include-uncommitted``) has them in its commit but, the patterns
    being the same, leaves them out.  This writes each path that
    ``git ls-files -t`` tags ``S`` (skip-worktree) and that exists in
    ``source_top`` with ``git checkout --ignore-skip-worktree-bits`` (which
    also clears the bit), so the command sees the files the user sees.

    Args:
        worktree: the worktree's top folder.
        git_dir: its private folder (``$GIT_COMMON_DIR/worktrees/<id>``).
        source_top: the top of the user's work tree.
        env: git-isopatch's own git environment.

    Returns:
        ``Ok(number of paths checked out)`` or ``Err(GitError)``.
    """
    args = worktree_args(worktree, git_dir)
    match run_git([*args, "ls-files", "-t", "-z", "--full-name"], env=env, config=DIFF_CONFIG):
        case Err() as err:
            return err
        case Ok(output):
            listed = output
    present = [
        entry[2:]
        for entry in listed.split(b"\0")
        if entry.startswith(b"S ")
        and os.path.lexists(os.path.join(os.fsencode(source_top), entry[2:]))
    ]
    if not present:
        return Ok(0)
    result = run_git(
        [
            "--literal-pathspecs",
            *args,
            "checkout",
            "--quiet",
            "--ignore-skip-worktree-bits",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            "--",
        ],
        env=env,
        config=DIFF_CONFIG,
        input=b"".join(path + b"\0" for path in present),
    )
    match result:
        case Ok():
            return Ok(len(present))
        case Err() as err:
            return err
