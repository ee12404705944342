"""The one way to remove a worktree of ours, and what uses it besides the
run: prune (``git isopatch prune``) and eviction at ``isopatch.maxWorktrees``.

:func:`remove_ours` is the removal: the run's giving back
(:meth:`.provider.WorktreeProvider.remove`), :func:`prune` and
:func:`make_room` all call it, under :class:`.lock.AdminLock`.

Design: procedure step 7, Architecture.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence

from ..errors import IsopatchError
from ..git.admin_files import claimed_elsewhere, pointer_leads_to, reset_commondir
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.types import GitDirPath, WorktreePath
from ..git.worktree import worktree_admin_dirs
from ..logger import log, warning
from .deletion import delete_tree
from .inventory import (
    BASE,
    KEPT,
    ORPHANED,
    POOLED,
    PRUNABLE_STATES,
    SESSION,
    OwnedWorktree,
    owned_worktrees,
)
from .lock import AdminLock, open_pin, stood_on, try_flock
from .mounts import mount_points_under
from .placement import TMP_PREFIX, forget_left_beside, made_by_isopatch, remove_tree
from .registration import delete_registration, forget_set_aside
from .store import GitMetadataStore


def _mend_our_commondirs(repository: UserRepository, store: GitMetadataStore) -> None:
    """Point ``commondir`` of each of our registrations back at the
    repository (:func:`.git.admin_files.reset_commondir`) where a command
    rewrote it: one that leads nowhere has ``git worktree list`` fail in
    the whole repository, so nothing could be listed or pruned."""
    folder = os.path.join(repository.common_dir, "worktrees")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        admin_dir = GitDirPath(os.path.join(folder, name))
        if store.load(admin_dir) is not None:
            with contextlib.suppress(OSError):
                reset_commondir(admin_dir)


def _registration_of(repository: UserRepository, path: WorktreePath) -> GitDirPath | None:
    """The private folder (``$GIT_COMMON_DIR/worktrees/<id>``) whose
    ``gitdir`` names ``<path>/.git``, or ``None``: read from the
    repository's side, never from the worktree's ``.git`` file, which the
    command may have rewritten."""
    folder = os.path.join(repository.common_dir, "worktrees")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    dotgit = os.path.join(path, ".git")
    for name in names:
        admin_dir = GitDirPath(os.path.join(folder, name))
        if pointer_leads_to(admin_dir, "gitdir", dotgit):
            return admin_dir
    return None


def _since(worktree: OwnedWorktree) -> float:
    """When ``worktree`` was made (a base tree: last used); unknown: never."""
    since = worktree.since()
    return float("inf") if since is None else since


def registered_inside(repository: UserRepository, folder: str, ours: str) -> str | None:
    """A registered worktree other than ``ours`` that lies in ``folder``
    (or is it), or ``None``: deleting ``folder`` would delete its files and
    leave its registration (a command's ``git worktree add ../agent``)."""
    real = os.path.realpath(folder)
    for top in worktree_admin_dirs(repository.common_dir):
        other = os.path.realpath(top)
        if other != os.path.realpath(ours) and (other == real or other.startswith(real + os.sep)):
            return top
    return None


def refusal(path: str) -> str | None:
    """Why ``path`` is no worktree of ours to remove, or ``None``: only a
    worktree whose path proves git-isopatch made it
    (:func:`.placement.made_by_isopatch`) is touched, and none with a mount
    point in it (:func:`.mounts.mount_points_under`): removing it would
    delete what is mounted."""
    if not made_by_isopatch(path, os.path.dirname(os.path.normpath(path))):
        return "git-isopatch did not make it (it is not in a folder git-isopatch made)"
    mounted = mount_points_under(path) if os.path.lexists(path) else []
    if mounted:
        return f"'{mounted[0]}' is a mount point in it"
    return None


def remove_ours(
    repository: UserRepository,
    path: WorktreePath,
    admin_dir: GitDirPath | None,
    *,
    also: Sequence[str | None] = (),
    warn: Callable[[str], None] = warning,
    folder_counts: bool = True,
    locked: bool = True,
) -> str | None:
    """Remove one of our worktrees (running, kept, pooled or orphaned), the
    folder made for it, and ``also`` (a run's private folder) when its name
    says git-isopatch made it.  The caller holds the worktree lock
    (:class:`.lock.AdminLock`), but a run over a base tree removing its own
    (:meth:`.provider.WorktreeProvider._held_to_remove`): ``locked`` false.

    Nothing is touched when :func:`refusal` refuses.  What ``git worktree
    remove --force --force`` does is done here, by file descriptor
    (:func:`.deletion.delete_tree`), because git walks the worktree by
    path and a process the command left behind can redirect that walk into
    the user's checkout: the worktree's folder is deleted (locked or not,
    whatever its state), then its private folder (``admin_dir``, else the
    one whose ``gitdir`` names it; it holds our record and git's lock),
    even when some of the worktree's folder could not be deleted (as
    git's ``delete_git_dir`` after ``delete_git_work_tree``; out of git's
    sight first, :func:`.registration.delete_registration`), and
    ``$GIT_COMMON_DIR/worktrees`` when empty and ``locked``, without pruning
    anyone else's.  Last, no registration may name it any more (one more the
    command made for the same path), read as ``git worktree list`` reads
    them (:func:`.git.worktree.worktree_admin_dirs`), without a git
    process.  A folder of ours that cannot be deleted (something is
    mounted in it) is said through ``warn``, and counts as a failure only
    with ``folder_counts`` (prune: the user asked for it to go).

    Returns:
        ``None`` when it is gone, else why not (one line).
    """
    why = refusal(path)
    if why is not None:
        return why
    inside = registered_inside(repository, path, path)
    if inside is not None:
        return f"it holds the registered worktree '{inside}'"
    folder = os.path.dirname(os.path.normpath(path))
    admin_dir = admin_dir or _registration_of(repository, path)
    if admin_dir is not None and claimed_elsewhere(path, admin_dir):
        # a copy of the repository (``cp -a``) registers the original's worktree:
        # only that registration is this repository's to remove
        if delete_registration(repository, admin_dir, locked=locked):
            return None
        return f"could not delete its registration '{admin_dir}'"
    if admin_dir and os.path.isdir(admin_dir):
        with contextlib.suppress(OSError):  # a command may have rewritten it
            reset_commondir(admin_dir)
    failure = delete_tree(path)
    if admin_dir is not None and os.path.lexists(admin_dir):
        if not delete_registration(repository, admin_dir, locked=locked):  # as git does
            return failure or f"could not delete its registration '{admin_dir}'"
    if failure is not None:
        return failure
    real = os.path.realpath(path)
    if any(os.path.realpath(top) == real for top in worktree_admin_dirs(repository.common_dir)):
        return "it is still registered"
    for ours in (folder, *also):
        # folder is proven ours (refusal); a run's private folder by its name
        if ours == folder and registered_inside(repository, folder, path) is not None:
            continue  # the registered worktree's files stay (reported as a shared write)
        if ours and (
            ours == folder or os.path.basename(os.path.normpath(ours)).startswith(TMP_PREFIX)
        ):
            if not remove_tree(ours, warn=warn) and ours == folder and folder_counts:
                return f"could not delete '{folder}'"
    return None


def discard(repository: UserRepository, worktree: OwnedWorktree, by: str) -> bool:
    """:func:`remove_ours` for a worktree of the inventory, its run's
    private folder with it; the reason logged as a warning; a session's
    next step told it was ended ``by`` that.

    Returns:
        True when it is gone.
    """
    path = WorktreePath(worktree.path)
    reason = remove_ours(repository, path, worktree.admin_dir, also=(worktree.tmpdir,))
    if reason is not None:
        log.warning("could not remove worktree '%s': %s", worktree.path, reason)
    _forget_session(repository, worktree, reason, by)
    return reason is None


def _forget_session(
    repository: UserRepository, worktree: OwnedWorktree, reason: str | None, by: str
) -> None:
    """A session's worktree gone: its lock file too, and word for its next
    step that it was ended ``by`` that (:mod:`.sessions`)."""
    if reason is None and worktree.session is not None:
        from .sessions import forget_lock, mark_ended

        mark_ended(repository.common_dir, worktree.session, by)
        forget_lock(repository.common_dir, worktree.session)


class Pruned(Record):
    """What :func:`prune` did.

    Attributes:
        removed: the worktrees removed (or that would be, with ``dry_run``),
            oldest first.
        failed: the worktrees that could not be removed, each with why.
        here: the one that would have been removed but that the caller
            stands in (its shell would be left in a deleted folder), if any.
    """

    removed: list[OwnedWorktree]
    failed: list[tuple[OwnedWorktree, str]]
    here: OwnedWorktree | None = None


def prune(
    repository: UserRepository,
    store: GitMetadataStore,
    *,
    env: Mapping[str, str],
    expire: float | None = None,
    sessions: bool = False,
    dry_run: bool = False,
    lock: AdminLock | None = None,
) -> Pruned:
    """Remove our kept, orphaned and pooled worktrees and the base trees no
    run uses (:func:`remove_ours`), and with ``sessions`` the idle
    sessions; never a running or locked one, never a base tree a run has
    pinned or a session stands on, never the one the caller stands in
    (returned as :attr:`Pruned.here`), never one we did not make.

    Args:
        expire: remove only those made before this time (seconds since the
            epoch; ``git isopatch prune --expire <time>``); ``None`` for all.
        sessions: end idle sessions too (``--sessions``): another agent's
            next step then says so (:func:`.sessions.ended_by`); the word
            left for those ended before ``expire`` goes.
        dry_run: remove nothing, report what would go.
        lock: the repository's worktree lock and its bounded wait.

    Returns:
        :class:`Pruned`: the worktrees removed (or that would be), oldest
        first, and those that could not be, with why.

    Raises:
        IsopatchError: git could not list the worktrees; ``lock-timeout``.
    """
    here = os.path.realpath(repository.top)
    lock = lock or AdminLock()
    with lock.held(repository.common_dir):
        if not dry_run:
            _mend_our_commondirs(repository, store)
            forget_set_aside(repository.common_dir)
            forget_left_beside(repository.top, repository.common_dir, time.time() - lock.seconds)
            if sessions:
                from .sessions import forget_ended

                forget_ended(repository.common_dir, expire)
        prunable = [
            worktree
            for worktree in owned_worktrees(repository, store, env=env)
            if worktree.state in PRUNABLE_STATES
            and (sessions or worktree.state != SESSION)
            and (expire is None or _since(worktree) <= expire)
        ]
        standing = next((w for w in prunable if os.path.realpath(w.path) == here), None)
        candidates = [w for w in prunable if os.path.realpath(w.path) != here]
        candidates.sort(key=lambda w: w.created or 0.0)
        with contextlib.ExitStack() as pins:
            candidates = [w for w in candidates if w.state != BASE or _unpinned(w, pins, dry_run)]
            if dry_run:
                return Pruned(candidates, [], standing)
            removed, failed = [], []
            # the sessions first: a base tree goes once none of them stands on it
            for worktree in sorted(candidates, key=lambda w: w.state == BASE):
                if worktree.state == BASE and stood_on(str(worktree.admin_dir)):
                    continue
                reason = remove_ours(
                    repository,
                    WorktreePath(worktree.path),
                    worktree.admin_dir,
                    also=(worktree.tmpdir,),
                )
                if reason is None:
                    removed.append(worktree)
                    _forget_session(repository, worktree, reason, "'git isopatch prune --sessions'")
                else:
                    failed.append((worktree, reason))
            removed.sort(key=lambda w: w.created or 0.0)
            if any(w.state == BASE or w.session is not None for w in removed):
                from .sessions import forget_folders

                forget_folders(repository.common_dir)
            return Pruned(removed, failed, standing)


def _unpinned(worktree: OwnedWorktree, pins: contextlib.ExitStack, standing: bool) -> bool:
    """The base tree ``worktree`` is used by no run: its pin is now held
    exclusively (until ``pins`` closes), so that no run takes it meanwhile;
    with ``standing``, no session stands on it either (:func:`.lock.stood_on`)."""
    fd = open_pin(worktree.admin_dir) if worktree.admin_dir is not None else None
    if fd is None:
        return False
    pins.callback(os.close, fd)
    held = try_flock(fd, exclusive=True)
    return held and not (standing and stood_on(str(worktree.admin_dir)))


def make_room(
    repository: UserRepository,
    store: GitMetadataStore,
    *,
    env: Mapping[str, str],
    limit: int,
    warn: Callable[[str], None],
) -> None:
    """Keep fewer than ``limit`` of our worktrees before one more is added:
    remove pooled ones, then orphaned ones, oldest first, then the oldest
    kept ones (with a warning).  The caller holds the worktree lock.  ``limit`` 0 or less
    means no limit.

    Raises:
        IsopatchError: ``too-many-worktrees`` when the rest are running (or
            locked) and no room can be made.
    """
    if limit <= 0:
        return
    try:  # fewer linked worktrees of any owner than the limit: no need to ask git
        if len(os.listdir(os.path.join(repository.common_dir, "worktrees"))) < limit:
            return
    except OSError:
        return  # no linked worktree at all
    owned = [w for w in owned_worktrees(repository, store, env=env) if w.state != BASE]
    excess = len(owned) - limit + 1
    if excess <= 0:
        return
    here = os.path.realpath(repository.top)

    def oldest_first(state: str) -> list[OwnedWorktree]:
        found = [w for w in owned if w.state == state and os.path.realpath(w.path) != here]
        return sorted(found, key=lambda w: w.created or 0.0)

    idle = sorted(oldest_first(KEPT) + oldest_first(SESSION), key=lambda w: w.created or 0.0)
    for worktree in oldest_first(POOLED) + oldest_first(ORPHANED) + idle:
        if excess <= 0:
            break
        if discard(
            repository, worktree, f"a run that made room (isopatch.maxWorktrees is {limit})"
        ):
            excess -= 1
            if worktree.state in (KEPT, SESSION):
                what = "kept worktree" if worktree.state == KEPT else "idle session"
                warn(
                    f"removed the oldest {what} '{worktree.session or worktree.path}' "
                    f"(isopatch.maxWorktrees is {limit})"
                )
    if excess > 0:
        raise IsopatchError(
            "too-many-worktrees",
            f"{len(owned)} git-isopatch worktrees are in use in this repository "
            f"and isopatch.maxWorktrees is {limit}",
            hint="wait for a run to finish, or raise isopatch.maxWorktrees",
        )


def prune_cache_layer_of(
    repository: UserRepository, *, before: float | None, dry_run: bool
) -> list[str]:
    """Clear the repository's cache layer (:func:`..sandbox.cache_layer.prune`):
    the layers removed."""
    from ..sandbox import cache_layer

    root = cache_layer.cache_root(repository.common_dir)
    return cache_layer.prune(root, before=before, dry_run=dry_run)
