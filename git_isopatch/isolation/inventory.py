"""The worktrees git-isopatch made for a repository: list, prune, and the
``isopatch.maxWorktrees`` limit (issue 5, "Kept worktrees").

A worktree is git-isopatch's when its private folder holds our record
(``isopatch.json``, see :mod:`.store`) or when it is locked with our lock
reason (``git-isopatch pid <pid> on <host> started <ticks>``: a run that
has not written its record yet).  Every other worktree is the user's and is
never listed, pruned or counted.  Each of ours is in one state:

``running``
    the process that made it still runs (same pid, same start time; a
    process on another host always counts as running).
``kept``
    kept on purpose (``--keep``, or kept for inspection when extraction
    failed) and its process has ended.
``orphaned``
    its process ended without removing it (killed, or the machine stopped).
``locked``
    ours, its process has ended, but someone locked it since
    (``git worktree lock``): it is left alone like a running one.

Git's own view comes from ``git worktree list --porcelain -z``; the
records from the store.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.types import GitDirPath, WorktreePath
from ..git.worktree import list_worktrees, remove_worktree, worktree_admin_dirs
from .errors import IsopatchError, known_failure
from .store import DEFAULT_MAX_WORKTREES, IsolationStore, parse_lock_reason

__all__ = [
    "DEFAULT_MAX_WORKTREES",
    "OwnedWorktree",
    "discard",
    "make_room",
    "owned_worktrees",
    "prune",
]

log = logging.getLogger("git_isopatch")

RUNNING = "running"
KEPT = "kept"
ORPHANED = "orphaned"
LOCKED = "locked"

#: States a worktree can be pruned in.
PRUNABLE_STATES = frozenset({KEPT, ORPHANED})


@dataclass(frozen=True)
class OwnedWorktree:
    """One worktree git-isopatch made.

    Attributes:
        path: its top folder, as ``git worktree list`` shows it.
        state: :data:`RUNNING`, :data:`KEPT`, :data:`ORPHANED` or :data:`LOCKED`.
        admin_dir: its private folder ``$GIT_COMMON_DIR/worktrees/<id>``,
            when found.
        pid: the process that made it, when known.
        created: when it was made, seconds since the epoch (the record's
            time; else the private folder's modification time), or ``None``.
        head: the commit id checked out, when git reports one.
        command: the command it was made for (empty when unknown).
        tmpdir: the ``git-isopatch-*`` folder holding it and its patch, when
            known.
        prunable: git's reason to prune it (its folder is gone), or ``None``.
    """

    path: str
    state: str
    admin_dir: GitDirPath | None
    pid: int | None
    created: float | None
    head: str | None
    command: tuple[str, ...]
    tmpdir: str | None
    prunable: str | None

    def age(self, now: float) -> float | None:
        """Seconds since it was made, or ``None`` when unknown."""
        return None if self.created is None else max(0.0, now - self.created)


def owned_worktrees(
    repository: UserRepository, store: IsolationStore, *, env: Mapping[str, str]
) -> list[OwnedWorktree]:
    """Every worktree of the repository that git-isopatch made, oldest
    first (those of unknown age last).

    Raises:
        IsopatchError: git could not list the worktrees (a classified failure).
    """
    match list_worktrees(repository.git_dir, env=env):
        case Ok(records):
            pass
        case Err(error):
            raise known_failure("could not list worktrees", error)
    admin_dirs = worktree_admin_dirs(repository.common_dir)
    owned = []
    for entry in records:
        admin_dir = admin_dirs.get(os.path.normpath(entry.path))
        if admin_dir is None:
            continue  # the main work tree, or one git cannot tell us about
        record = store.load(admin_dir)
        lock_owner = parse_lock_reason(entry.locked)
        if record is None and lock_owner is None:
            continue  # not ours
        if record is not None:
            running = record.owner_is_running()
            pid: int | None = record.pid
            created: float | None = record.created
        else:
            assert lock_owner is not None
            running = lock_owner.is_running()
            pid = lock_owner.pid
            try:
                created = os.stat(admin_dir).st_mtime
            except OSError:
                created = None
        if running:
            state = RUNNING
        elif entry.locked is not None and lock_owner is None:
            state = LOCKED
        elif record is not None and record.kept:
            state = KEPT
        else:
            state = ORPHANED
        owned.append(
            OwnedWorktree(
                path=entry.path,
                state=state,
                admin_dir=admin_dir,
                pid=pid,
                created=created,
                head=entry.head,
                command=tuple(record.command) if record is not None else (),
                tmpdir=record.tmpdir if record is not None else None,
                prunable=entry.prunable,
            )
        )
    owned.sort(key=lambda w: (w.created is None, w.created or 0.0))
    return owned


def discard(repository: UserRepository, worktree: OwnedWorktree, *, env: Mapping[str, str]) -> bool:
    """Remove one of our worktrees, kept or orphaned, and its
    ``git-isopatch-*`` folder (which holds its patch and output).

    ``git worktree remove --force --force`` removes it (locked or not, even
    when its folder is gone).  Should git fail while the folder is gone, the
    private folder, which holds our record, is deleted as ``git worktree
    prune`` would, without pruning anyone else's.  The caller holds the
    worktree lock (:func:`.provider.worktree_admin_lock`).  Best effort.

    Returns:
        True when it is gone.
    """
    path = WorktreePath(worktree.path)
    match remove_worktree(repository.git_dir, path, env=env):
        case Ok():
            pass
        case Err(error):
            if os.path.lexists(path) or worktree.admin_dir is None:
                log.warning("could not remove worktree '%s': %s", path, error.message())
                return False
            shutil.rmtree(worktree.admin_dir, ignore_errors=True)
            if os.path.exists(worktree.admin_dir):
                return False
    tmpdir = worktree.tmpdir
    if (
        tmpdir
        and os.path.dirname(os.path.normpath(path)) == os.path.normpath(tmpdir)
        and os.path.basename(os.path.normpath(tmpdir)).startswith("git-isopatch-")
    ):
        shutil.rmtree(tmpdir, ignore_errors=True)
    return True


def prune(
    repository: UserRepository,
    store: IsolationStore,
    *,
    env: Mapping[str, str],
    expire: float | None = None,
    dry_run: bool = False,
) -> list[OwnedWorktree]:
    """Remove our kept and orphaned worktrees; never a running or locked
    one, never the one the caller stands in, never one we did not make.

    Args:
        expire: remove only those made before this time (seconds since the
            epoch; ``git isopatch prune --expire <time>``); ``None`` for all.
        dry_run: remove nothing, report what would go.

    Returns:
        The worktrees removed (or that would be), oldest first.

    Raises:
        IsopatchError: git could not list the worktrees.
    """
    from .provider import worktree_admin_lock

    here = os.path.realpath(repository.top)
    with worktree_admin_lock(repository.common_dir):
        candidates = [
            worktree
            for worktree in owned_worktrees(repository, store, env=env)
            if worktree.state in PRUNABLE_STATES
            and os.path.realpath(worktree.path) != here
            and (expire is None or (worktree.created is not None and worktree.created <= expire))
        ]
        candidates.sort(key=lambda w: w.created or 0.0)
        if dry_run:
            return candidates
        return [w for w in candidates if discard(repository, w, env=env)]


def make_room(
    repository: UserRepository,
    store: IsolationStore,
    *,
    env: Mapping[str, str],
    limit: int,
    warn: Callable[[str], None],
) -> None:
    """Keep fewer than ``limit`` of our worktrees before one more is added:
    remove orphaned ones, oldest first, then the oldest kept ones (with a
    warning).  The caller holds the worktree lock.  ``limit`` 0 or less
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
    owned = owned_worktrees(repository, store, env=env)
    excess = len(owned) - limit + 1
    if excess <= 0:
        return
    here = os.path.realpath(repository.top)

    def oldest_first(state: str) -> list[OwnedWorktree]:
        found = [w for w in owned if w.state == state and os.path.realpath(w.path) != here]
        return sorted(found, key=lambda w: w.created or 0.0)

    for worktree in oldest_first(ORPHANED) + oldest_first(KEPT):
        if excess <= 0:
            break
        if discard(repository, worktree, env=env):
            excess -= 1
            if worktree.state == KEPT:
                warn(
                    f"removed the oldest kept worktree '{worktree.path}' "
                    f"(isopatch.maxWorktrees is {limit})"
                )
    if excess > 0:
        raise IsopatchError(
            "too-many-worktrees",
            f"{len(owned)} git-isopatch worktrees are in use in this repository "
            f"and isopatch.maxWorktrees is {limit}",
            hint="wait for a run to finish, or raise isopatch.maxWorktrees",
        )
