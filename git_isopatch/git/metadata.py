"""Which paths are git's own metadata, and which are work tree files.

A git directory usually sits inside its work tree (``repo/.git``), but a
work tree may also sit inside a git directory: the layout of a bare clone
with its worktrees inside it (``git clone --bare up bare; cd bare;
git worktree add branches/main main``), or ``core.worktree`` pointing into
the git directory.  A file of such a work tree is the user's, not git's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .repo import UserRepository
from .worktree import worktree_admin_dirs


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _has_dot_git(path: str, top: str) -> bool:
    """``path`` (inside ``top``) is a ``.git`` of ``top`` or lies below one."""
    return ".git" in os.path.relpath(path, top).split(os.sep)


def work_trees(repository: UserRepository) -> list[str]:
    """The real paths of the repository's work trees that git-isopatch
    knows of: the user's own and every registered linked worktree
    (``$GIT_COMMON_DIR/worktrees/<id>/gitdir``, gitrepository-layout(5))."""
    tops = {os.path.realpath(repository.top)}
    tops.update(os.path.realpath(top) for top in worktree_admin_dirs(repository.common_dir))
    return sorted(tops)


def git_metadata_dir(repository: UserRepository, path: str) -> str | None:
    """The git directory that ``path`` belongs to as git metadata, or ``None``
    when it is no git metadata of this repository.

    ``path`` (resolved with :func:`os.path.realpath`) is git metadata when it
    is inside the git directory or the common git directory and not inside a
    work tree that itself lies inside that directory; and, in any work tree,
    when it is a ``.git`` file or folder or lies below one (a worktree's
    ``gitdir:`` file, a submodule's git directory).

    Returns:
        the real path of the git directory (or of the work tree whose
        ``.git`` it is), or ``None``.
    """
    real = os.path.realpath(path)
    tops = work_trees(repository)
    for top in tops:
        if _inside(real, top) and real != top and _has_dot_git(real, top):
            return top
    for git_dir in _unique(
        os.path.realpath(d) for d in (repository.git_dir, repository.common_dir)
    ):
        if not _inside(real, git_dir):
            continue
        nested = [top for top in tops if _inside(top, git_dir) and top != git_dir]
        if not any(_inside(real, top) for top in nested):
            return git_dir
    return None


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
