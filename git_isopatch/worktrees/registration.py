"""A worktree's registration (``$GIT_COMMON_DIR/worktrees/<id>``, its
private folder) made and deleted out of git's sight: a run's over a base
tree written whole beside ``worktrees/`` and moved in with one
``rename(2)`` (:func:`register_detached`); any of ours moved out with one,
then deleted by file descriptor (:func:`.deletion.delete_tree`), for the
one removal (:func:`.removal.remove_ours`).

Design: procedure steps 3 and 7.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping

from ..git.repo import UserRepository
from ..git.result import GitResult, Ok
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..git.worktree import add_detached_worktree, worktree_admin_dirs
from ..logger import log
from .deletion import delete_tree

#: The folder of the common git directory where a registration goes, out
#: of git's sight, to be deleted (:func:`set_aside`), or is written before
#: it goes in (:func:`register_detached`); on the file system of
#: ``worktrees/``, so that each move is one ``rename(2)``.  What a process
#: ended left there, ``prune`` deletes (:func:`forget_set_aside`).
SET_ASIDE_FOLDER = "isopatch-removed"


def set_aside(common_dir: str, name: str) -> str | None:
    """Move ``$GIT_COMMON_DIR/worktrees/<name>`` into
    :data:`SET_ASIDE_FOLDER`, under a name of its own
    (``<name>-<random>``), at once: git reads every folder of
    ``worktrees/`` (worktree.c, ``get_worktrees``), and one deleted file by
    file there is one it reads half gone; moved, it is there whole or not
    at all.  A link planted at the name is moved itself, never followed.
    No folder is made for it: on a file system that discards what it
    frees, each folder made and deleted costs a discard.

    Returns:
        Where it is now, or ``None`` when it could not be moved (gone
        already, a mount point, another file system).
    """
    source = os.path.join(common_dir, "worktrees", name)
    try:
        return _into_aside(common_dir, name, lambda target: os.rename(source, target))
    except OSError:
        _forget_aside_folder(common_dir)
        return None


def _fresh_aside(common_dir: str, name: str) -> str:
    """A new folder ``<name>-<random>`` of :data:`SET_ASIDE_FOLDER`, mode
    0777 under the umask as git makes a registration (:func:`_into_aside`).

    Raises:
        OSError: it cannot be made.
    """
    return _into_aside(common_dir, name, lambda folder: os.mkdir(folder, 0o777))


def _into_aside(common_dir: str, name: str, put: Callable[[str], None]) -> str:
    """``put(<path>)`` for a new path ``<name>-<random>`` of
    :data:`SET_ASIDE_FOLDER` (made when missing; no folder is made around
    the path, see :func:`set_aside`), again when another removal deleted
    that folder, empty, meanwhile; the path.

    Raises:
        OSError: ``put`` failed otherwise, or three times.
    """
    aside = os.path.join(common_dir, SET_ASIDE_FOLDER)
    tries = 3
    while True:
        path = os.path.join(aside, f"{name}-{os.urandom(8).hex()}")
        try:
            os.makedirs(aside, mode=0o700, exist_ok=True)
            put(path)
            return path
        except FileNotFoundError:
            tries -= 1
            if not tries:
                raise


def delete_set_aside(common_dir: str, holder: str) -> None:
    """Delete ``holder`` (what :func:`set_aside` moved), and
    :data:`SET_ASIDE_FOLDER` when that leaves it empty; what cannot be
    deleted stays there for ``prune`` (:func:`forget_set_aside`), out of
    git's sight."""
    failure = delete_tree(holder)
    if failure is not None:
        log.warning("could not delete a removed registration: %s", failure)
    _forget_aside_folder(common_dir)


def _forget_aside_folder(common_dir: str) -> None:
    """Delete :data:`SET_ASIDE_FOLDER` when it is empty (a run putting a
    path there meanwhile makes it again, :func:`_into_aside`)."""
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


#: A worktree's folder name that git takes as its registration's name
#: unchanged (refs.c, ``sanitize_refname_component``, changes no character
#: of it); another is left to ``git worktree add``.
_PLAIN_NAME = re.compile(r"\A[A-Za-z0-9_-](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?\Z")


def register_worktree(
    repository: UserRepository,
    path: str,
    commit: CommitId,
    *,
    lock_reason: str,
    env: Mapping[str, str],
    checkout: bool,
    progress: bool,
    meanwhile: Callable[[], None] | None,
) -> GitResult[WorktreePath]:
    """A worktree at ``path``, detached at ``commit`` and locked with
    ``lock_reason``: ``git worktree add`` (checked out when ``checkout``,
    ``meanwhile`` called while git runs) or, with no checkout, registered
    without git where it can be (:func:`register_detached`)."""
    if not checkout:
        registered = register_detached(repository, path, commit, lock_reason=lock_reason)
        if registered is not None:
            return Ok(registered)
    return add_detached_worktree(
        repository.git_dir,
        path,
        commit,
        lock_reason=lock_reason,
        env=env,
        progress=progress and checkout,
        checkout=checkout,
        meanwhile=meanwhile if checkout else None,
    )


def register_detached(
    repository: UserRepository, path: str, commit: CommitId, *, lock_reason: str
) -> WorktreePath | None:
    """Register a worktree at ``path`` (a folder to make), detached at
    ``commit`` and locked with ``lock_reason``, as ``git worktree add
    --no-checkout --detach --lock --reason <lock_reason>`` registers one
    (builtin/worktree.c, ``add_worktree``), without its two git
    processes: ``worktrees/<name>`` (the folder's name, then ``<name>1``,
    ``<name>2``..., the first free, as git names it) holding ``locked``,
    ``gitdir`` (the real path of ``path/.git``), ``commondir`` (``../..``)
    and ``HEAD`` (``commit``), and ``path/.git`` naming it.  The
    registration is written whole out of git's sight
    (:data:`SET_ASIDE_FOLDER`) and moved in with one ``rename(2)``
    (:func:`_move_in`): a git reading every registration (``git worktree
    list``, another's ``add``) sees it whole or not at all, never a
    ``commondir`` made but not yet written, and ``git worktree prune``
    never a folder without ``gitdir`` nor ``locked``.  No reflog entry is
    written (``git reflog`` there is empty) and paths are absolute, as git
    writes them by default.  The caller holds the worktree lock.

    Returns:
        The worktree, or ``None`` where ``git worktree add`` must do it,
        nothing made: it copies what this does not (the user's worktree's
        ``config.worktree``, its sparse checkout's patterns), another ref
        storage (``reftable/``), a name git changes, ``path`` registered
        already (git refuses, or prunes), or a file that could not be made.
    """
    name = os.path.basename(path)
    worktrees = os.path.join(repository.common_dir, "worktrees")
    copied = (
        os.path.join(repository.git_dir, "config.worktree"),
        os.path.join(repository.git_dir, "info", "sparse-checkout"),
        os.path.join(repository.common_dir, "reftable"),
    )
    if not _PLAIN_NAME.match(name) or name.endswith(".lock") or ".." in name:
        return None
    if any(os.path.lexists(file) for file in copied) or os.path.lexists(path):
        return None
    top = os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(path)), name))
    if top in worktree_admin_dirs(GitDirPath(repository.common_dir)):
        return None
    made: list[str] = []  # what to delete when a step fails, the last made first
    try:
        written = _fresh_aside(repository.common_dir, name)
        made.append(written)
        for file, text in (
            ("locked", lock_reason),
            ("gitdir", os.path.join(top, ".git")),
            ("commondir", "../.."),
            ("HEAD", commit),
        ):
            _write_new(os.path.join(written, file), text)
        os.mkdir(path, 0o777)
        made.append(path)
        os.makedirs(worktrees, exist_ok=True)
        _move_in(written, worktrees, name, os.path.join(path, ".git"))
    except OSError:  # worktrees/ on another file system too (EXDEV)
        for folder in reversed(made):
            delete_tree(folder)
        _forget_aside_folder(repository.common_dir)
        return None
    return WorktreePath(path)


def _move_in(written: str, worktrees: str, name: str, dotgit: str) -> None:
    """Move the registration ``written`` to ``worktrees/<name>``, else
    ``<name>1``, ``<name>2``..., the first name free (as ``git worktree
    add`` names it), never over anything there (``renameat2(2)``,
    ``RENAME_NOREPLACE``: not even over an empty folder another ``git
    worktree add`` just made), the worktree's ``.git`` file ``dotgit``
    naming it first.

    Raises:
        OSError: it could not be moved (the file system refuses
            ``RENAME_NOREPLACE``).
    """
    rename = _rename_noreplace()
    real = os.path.join(os.path.realpath(os.path.dirname(worktrees)), "worktrees")
    counter = 0
    while True:
        chosen = f"{name}{counter or ''}"
        target = os.path.join(worktrees, chosen)
        counter += 1
        if os.path.lexists(target):
            continue
        with open(dotgit, "wb") as handle:
            handle.write(f"gitdir: {os.path.join(real, chosen)}\n".encode())
        if rename(os.fsencode(written), os.fsencode(target)) == 0:
            return
        if not os.path.lexists(target):
            raise OSError(f"cannot move '{written}' to '{target}'")


def _rename_noreplace() -> Callable[[bytes, bytes], int]:
    """``renameat2(AT_FDCWD, old, AT_FDCWD, new, RENAME_NOREPLACE)`` as a
    function of ``old`` and ``new``, 0 when done (through ``_ctypes``:
    ``ctypes`` costs more to load).

    Raises:
        OSError: the C library has no ``renameat2``.
    """
    try:
        import _ctypes

        function = _ctypes.dlsym(_ctypes.dlopen(None), "renameat2")
    except (ImportError, AttributeError, OSError) as exc:
        raise OSError(f"no renameat2: {exc}") from exc
    at_cwd, noreplace = -100, 1
    return lambda old, new: _ctypes.call_function(function, (at_cwd, old, at_cwd, new, noreplace))


def _write_new(path: str, text: str) -> None:
    """A new file at ``path`` holding the line ``text``, as git's
    ``write_file`` writes it (mode 0666 under the umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        os.write(fd, os.fsencode(text) + b"\n")
    finally:
        os.close(fd)
