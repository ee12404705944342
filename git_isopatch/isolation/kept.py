"""A kept worktree's administrative files, put right before the user gets
its path.

The worktree's private folder (``$GIT_COMMON_DIR/worktrees/<id>``) and its
``.git`` file are the command's to write, and a process it left behind may
still write them after the run put ``commondir`` and ``gitdir`` back
(:func:`.git.admin_files.restore_pointers`).  A ``commondir`` leading to
another repository, or a ``config.worktree`` (read with
``extensions.worktreeConfig``) naming a ``core.fsmonitor``, would run a
planted program on the user's next ``git status`` there.  So when the
worktree is handed over, each of :data:`GUARDED` is made again what
git-isopatch wrote (:func:`snapshot`, taken when the worktree was ready
for the command): a file that was not there is removed.

Design: procedure step 7 ("or keep it").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..git.admin_files import read_admin_file, replace_admin_file
from .deletion import delete_tree

#: The files of the private folder that tell git where the repository is,
#: where the worktree is, and the worktree's own configuration.
GUARDED = ("commondir", "gitdir", "config.worktree")

#: The worktree's own ``.git`` file, which names its private folder.
DOTGIT = ".git"


def _paths(admin_dir: str, worktree: str) -> dict[str, str]:
    paths = {name: os.path.join(admin_dir, name) for name in GUARDED}
    # only into the worktree's own folder: never through a link the command
    # put in its place (to the user's checkout), never into a folder it deleted
    real = os.path.join(os.path.realpath(os.path.dirname(worktree)), os.path.basename(worktree))
    if (
        not os.path.islink(worktree)
        and os.path.isdir(worktree)
        and os.path.realpath(worktree) == real
    ):
        paths[DOTGIT] = os.path.join(worktree, DOTGIT)
    return paths


def _content(path: str) -> bytes | None:
    """``path``'s bytes as a regular file, ``None`` when absent.

    Raises:
        OSError: it is something else (a folder, a link, a FIFO).
    """
    try:
        return read_admin_file(path)
    except FileNotFoundError:
        return None


def snapshot(admin_dir: str, worktree: str) -> dict[str, bytes | None]:
    """What each guarded file holds now (``None``: absent or not a regular
    file, which git-isopatch never makes)."""
    taken: dict[str, bytes | None] = {}
    for name, path in _paths(admin_dir, worktree).items():
        try:
            taken[name] = _content(path)
        except OSError:
            taken[name] = None
    return taken


def put_right(admin_dir: str, worktree: str, made: Mapping[str, bytes | None]) -> list[str]:
    """Make each guarded file hold what :func:`snapshot` read into ``made``
    again: rewritten by rename (never through a link), or removed when it
    was not there.

    Returns:
        The paths that were put right.

    Raises:
        OSError: one could not be.
    """
    changed = []
    for name, path in _paths(admin_dir, worktree).items():
        if name not in made:
            continue
        expected = made.get(name)
        try:
            if _content(path) == expected:
                continue
        except OSError:
            pass  # not a regular file: replaced below
        if os.path.isdir(path) and not os.path.islink(path):
            failure = delete_tree(path)
            if failure is not None:
                raise OSError(failure)
        if expected is None:
            if os.path.lexists(path):
                os.unlink(path)
        else:
            replace_admin_file(path, expected)
        changed.append(path)
    return changed
