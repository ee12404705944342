"""A worktree's registration (``$GIT_COMMON_DIR/worktrees/<id>``, its
private folder) deleted out of git's sight: moved out of ``worktrees/``
with one ``rename(2)``, then deleted by file descriptor
(:func:`.deletion.delete_tree`), for the one removal
(:func:`.removal.remove_ours`).

Design: procedure step 7.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

from ..git.repo import UserRepository
from ..git.types import GitDirPath
from ..logger import log
from .deletion import delete_tree

#: The folder of the common git directory where a registration goes, out
#: of git's sight, to be deleted (:func:`set_aside`); on the file system of
#: ``worktrees/``, so that the move is one ``rename(2)``.
SET_ASIDE_FOLDER = "isopatch-removed"


def set_aside(common_dir: str, name: str) -> str | None:
    """Move ``$GIT_COMMON_DIR/worktrees/<name>`` into a fresh folder of
    :data:`SET_ASIDE_FOLDER`, at once: git reads every folder of
    ``worktrees/`` (worktree.c, ``get_worktrees``), and one deleted file by
    file there is one it reads half gone; moved, it is there whole or not
    at all.  A link planted at the name is moved itself, never followed.

    Returns:
        The fresh folder holding it now, or ``None`` when it could not be
        moved (gone already, a mount point, another file system).
    """
    aside = os.path.join(common_dir, SET_ASIDE_FOLDER)
    source = os.path.join(common_dir, "worktrees", name)
    for _ in range(3):  # another removal may delete the folder, empty, meanwhile
        holder = None
        try:
            os.makedirs(aside, mode=0o700, exist_ok=True)
            holder = tempfile.mkdtemp(dir=aside)
            os.rename(source, os.path.join(holder, name))
            return holder
        except OSError as exc:
            if holder is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(holder)
            if not isinstance(exc, FileNotFoundError) or not os.path.lexists(source):
                return None
    return None


def delete_set_aside(common_dir: str, holder: str) -> None:
    """Delete ``holder`` (:func:`set_aside`), and :data:`SET_ASIDE_FOLDER`
    when that leaves it empty; what cannot be deleted stays there for
    ``prune`` (:func:`forget_set_aside`), out of git's sight."""
    failure = delete_tree(holder)
    if failure is not None:
        log.warning("could not delete a removed registration: %s", failure)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.join(common_dir, SET_ASIDE_FOLDER))


def forget_set_aside(common_dir: str) -> None:
    """Delete what removals set aside and left (:func:`set_aside`: a
    process ended between the move and the deletion).  The caller holds
    the worktree lock; a run deleting its own meanwhile deletes the same."""
    aside = os.path.join(common_dir, SET_ASIDE_FOLDER)
    try:
        names = os.listdir(aside)
    except OSError:
        return
    for name in names:
        delete_set_aside(common_dir, os.path.join(aside, name))


def delete_registration(
    repository: UserRepository, admin_dir: GitDirPath, *, locked: bool = True
) -> bool:
    """Delete the private folder of one worktree of ours, as git's own
    ``worktree prune`` and ``worktree remove`` do (worktree.c,
    ``delete_git_dir``), but out of git's sight first (:func:`set_aside`);
    its lock goes with it.  Only a folder right under ``worktrees/`` of the
    user's repository is touched, by file descriptor
    (:func:`.deletion.delete_tree`: the command may write in it).  With
    ``locked`` (the caller holds the worktree lock, as every ``git worktree
    add`` of ours does), ``$GIT_COMMON_DIR/worktrees`` goes too when that
    leaves it empty: never under another run's add, which makes it, then
    its folder in it.

    Returns:
        True when it is gone: told by the move or the deletion, not by its
        name, which a concurrent ``git worktree add`` may take the moment it
        is free.
    """
    worktrees = os.path.join(repository.common_dir, "worktrees")
    if os.path.realpath(os.path.dirname(admin_dir)) != os.path.realpath(worktrees):
        log.warning("not deleting '%s': not a worktree registration", admin_dir)
        return False
    name = os.path.basename(admin_dir)
    holder = set_aside(repository.common_dir, name)
    if holder is None:
        gone = delete_tree(os.path.join(worktrees, name)) is None
    else:
        gone = True
        delete_set_aside(repository.common_dir, holder)
    if locked:
        with contextlib.suppress(OSError):
            os.rmdir(worktrees)
    return gone
