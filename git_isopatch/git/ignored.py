"""Ignored files of the user's work tree, as git lists them, for
``.worktreeinclude``.

``.worktreeinclude`` at the top of a work tree names, in gitignore syntax,
the ignored files a new worktree should get (the convention other worktree
tools read).  Only files that git ignores count.  Both sides are asked of
git itself, never matched by hand: ``git ls-files --others --ignored
--directory`` once with ``--exclude-from=.worktreeinclude`` (the files the
file names) and once with ``--exclude-standard`` (the files git ignores:
``.gitignore`` files, ``$GIT_DIR/info/exclude``, ``core.excludesFile``);
see git-ls-files(1).  Reads only: no index, no work tree file is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath, RepoPath

#: The file, at the top of the work tree, that names ignored files to copy.
WORKTREE_INCLUDE_FILE = ".worktreeinclude"


def _list_ignored(
    git_dir: GitDirPath, top: RepoPath, exclusion: str, env: Mapping[str, str]
) -> GitResult[list[str]]:
    """Untracked files matched by ``exclusion`` (an ``--exclude-*`` option);
    a folder matched whole is one entry, without its trailing ``/``."""
    result = run_git(
        [
            f"--git-dir={git_dir}",
            f"--work-tree={top}",
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--directory",
            "--no-empty-directory",
            exclusion,
        ],
        env=env,
        cwd=top,
    )
    match result:
        case Ok(output):
            names = output.split(b"\0")
            return Ok([os.fsdecode(name).rstrip("/") for name in names if name])
        case Err() as err:
            return err


def _self_and_parents(path: str) -> Iterable[str]:
    parts = path.split("/")
    for end in range(len(parts), 0, -1):
        yield "/".join(parts[:end])


def worktree_include_paths(
    git_dir: GitDirPath, top: RepoPath, *, env: Mapping[str, str]
) -> GitResult[list[str]]:
    """The ignored paths that ``<top>/.worktreeinclude`` names.

    A path is taken when ``.worktreeinclude`` matches it (or a folder
    holding it) and git ignores it (or a folder holding it): a folder that
    both match whole is one entry, and inside a folder the file names only
    the ignored files are taken.

    Returns:
        ``Ok(sorted paths relative to the top, "/"-separated)``, empty when
        there is no ``.worktreeinclude``; ``Err`` when git fails.
    """
    include_file = os.path.join(top, WORKTREE_INCLUDE_FILE)
    if not os.path.isfile(include_file):
        return Ok([])
    match _list_ignored(git_dir, top, f"--exclude-from={include_file}", env):
        case Ok(named):
            pass
        case Err() as err:
            return err
    if not named:
        return Ok([])
    match _list_ignored(git_dir, top, "--exclude-standard", env):
        case Ok(ignored):
            pass
        case Err() as err:
            return err
    named_set, ignored_set = set(named), set(ignored)
    taken = {path for path in named if any(p in ignored_set for p in _self_and_parents(path))}
    taken |= {
        path for path in ignored if any(p in named_set for p in list(_self_and_parents(path))[1:])
    }
    return Ok(sorted(taken))
