"""Submodules of the worktree: populated with ``--recurse-submodules``,
watched without it (see :mod:`..git.submodule` for how).

Without ``--recurse-submodules`` the worktree's submodule folders stay
empty, the patch holds submodules as gitlinks only, and a submodule whose
content the command changed (it filled the empty folder, or checked the
submodule out itself and edited it) is named in a warning: that content is
not in the patch.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence

from ..errors import known_failure
from ..git.files import HOST_FILES, WorktreeFiles
from ..git.process import Spawn
from ..git.result import Err, Ok
from ..git.submodule import (
    Gitlink,
    Submodule,
    changed_submodules,
    list_gitlinks,
    populate_submodules,
    submodule_names,
    user_submodule_git_dir,
)
from ..git.types import GitDirPath, RepoPath, WorktreePath


def populate(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    user_top: RepoPath,
    *,
    env: Mapping[str, str],
) -> tuple[Submodule, ...]:
    """Populate each submodule of the worktree that the user has checked out
    (its ``.git`` is in the user's work tree), from the user's own
    submodule repository.  Submodules of submodules are not populated.

    Returns:
        the submodules populated, by path.

    Raises:
        IsopatchError: a classified git failure (``submodule-failed``: the
            commit the superproject records is not in the user's submodule
            repository...).
    """
    match list_gitlinks(worktree, git_dir=admin_dir, env=env):
        case Ok(gitlinks):
            pass
        case Err(error):
            raise known_failure("could not list the submodules", error)
    if not gitlinks:
        return ()
    match submodule_names(worktree, env=env):
        case Ok(names):
            pass
        case Err(error):
            raise known_failure("could not read '.gitmodules'", error)
    sources: dict[str, tuple[str, str]] = {}
    commits = {}
    for link in gitlinks:
        name = names.get(link.path)
        source = user_submodule_git_dir(user_top, link.path) if name else None
        if name is not None and source is not None:
            sources[link.path] = (name, source)
            commits[link.path] = link.commit
    match populate_submodules(worktree, git_dir=admin_dir, sources=sources, env=env):
        case Ok():
            pass
        case Err(error):
            raise known_failure(
                "could not populate the submodules from your own",
                error,
                hint="'git submodule update' in your checkout fetches what they lack",
            )
    return tuple(
        Submodule(
            name=name,
            path=path,
            commit=commits[path],
            git_dir=GitDirPath(os.path.join(admin_dir, "modules", name)),
        )
        for path, (name, _) in sorted(sources.items())
    )


def warn_changed(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    *,
    populated: Sequence[Submodule],
    env: Mapping[str, str],
    warn: Callable[[str], None],
    spawn: Spawn | None = None,
    files: WorktreeFiles = HOST_FILES,
) -> None:
    """Warn, naming it, about each submodule whose content changed and is
    not in the patch (every one but ``populated``).  Best effort: when git
    cannot tell, nothing is said.

    ``spawn``: the command's sandbox, under which the look at the
    submodules runs: the command could write the worktree's private folder
    and its submodule folders, and what they name (another ``commondir``,
    a repository whose configuration names filters) git would run.
    """
    try:
        listed = list_gitlinks(worktree, git_dir=admin_dir, env=env, spawn=spawn, files=files)
    except subprocess.SubprocessError:  # the sandbox could not confine git
        return
    match listed:
        case Ok(gitlinks):
            pass
        case Err():
            return
    inside = {submodule.path for submodule in populated}
    others: list[Gitlink] = [link for link in gitlinks if link.path not in inside]
    if not others:
        return
    try:
        changed = changed_submodules(
            worktree,
            git_dir=admin_dir,
            gitlinks=others,
            env=env,
            spawn=spawn,
            files=files,
        )
    except subprocess.SubprocessError:  # the sandbox could not confine git
        return
    match changed:
        case Ok(paths):
            pass
        case Err():
            return
    for path in paths:
        warn(
            f"submodule '{path}' has changes that are not in the patch "
            "(--recurse-submodules captures them)"
        )
