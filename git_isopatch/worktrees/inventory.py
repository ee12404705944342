"""The worktrees git-isopatch made for a repository and the state of each:
the read side of their life cycle.  Nothing here changes a worktree; making,
returning, keeping, evicting and pruning them is :mod:`.provider`'s.

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
    its process ended without removing it (killed, or the machine stopped);
    or its folder is another repository's worktree (a copy of the
    repository, ``cp -a``, keeps the original's registrations).
``locked``
    ours, its process has ended, but someone locked it since
    (``git worktree lock``): it is left alone like a running one.  The
    pool's own reason is not someone's lock: with a record that is not
    pooled (a run killed while it claimed or returned it) it is orphaned.
``pooled``
    waiting in the pool (``isopatch.pool``) for the next run to claim it:
    its record says so and it is locked with the pool's reason.
``session``
    a session's worktree between its steps (:mod:`.sessions`): its record
    names the session and it is locked with the sessions' reason; its age
    is the time since its last step.
``base``
    a base tree (:mod:`.base_trees`): the checkout that sandboxed runs at
    its commit share, kept for the next ones (its own record says so);
    its age is the time since a run last used it.

Git's own view comes from ``git worktree list --porcelain -z``; the
records from the store.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping

from ..errors import known_failure
from ..git.admin_files import claimed_elsewhere
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.types import GitDirPath
from ..git.worktree import WorktreeRecord as WorktreeEntry
from ..git.worktree import list_worktrees, worktree_admin_dirs
from .placement import base_tree_now, made_by_isopatch
from .store import (
    LOCK_REASON_PREFIX,
    POOL_LOCK_REASON,
    GitMetadataStore,
    WorktreeRecord,
    parse_lock_reason,
)

__all__ = [
    "OwnedWorktree",
    "owned_worktrees",
]


RUNNING = "running"
KEPT = "kept"
ORPHANED = "orphaned"
LOCKED = "locked"
POOLED = "pooled"
BASE = "base"
SESSION = "session"

#: The ``git worktree lock`` reason of a session between steps (:mod:`.sessions`).
SESSION_LOCK_REASON = f"{LOCK_REASON_PREFIX} session"

#: States a worktree can be pruned in (a base tree only while no run uses it).
PRUNABLE_STATES = frozenset({KEPT, ORPHANED, POOLED, BASE, SESSION})
#: Lock reasons of ours that name no process.
_OURS = (POOL_LOCK_REASON, SESSION_LOCK_REASON)


class OwnedWorktree(Record):
    """One worktree git-isopatch made.

    Attributes:
        path: its top folder, as ``git worktree list`` shows it.
        state: :data:`RUNNING`, :data:`KEPT`, :data:`ORPHANED`, :data:`LOCKED`,
            :data:`POOLED` or :data:`BASE`.
        admin_dir: its private folder ``$GIT_COMMON_DIR/worktrees/<id>``,
            when found.
        pid: the process that made it, when known.
        created: when it was made, seconds since the epoch (the record's
            time; else the private folder's modification time; for a
            session, when its last step ended), or ``None``.
        head: the commit id checked out, when git reports one.
        command: the command it was made for (empty when unknown).
        tmpdir: the run's private ``git-isopatch-*`` folder holding its
            patch and output, when known.
        container: the folder made for it alone, which holds it
            (:func:`.placement.place_worktree`).
        prunable: git's reason to prune it (its folder is gone), or ``None``.
        session: the name of the session it holds, if any; ``size``: the
            bytes of its whole change (its patch, :mod:`.sessions`).
        used: for a base tree, when a run last used it: its age, and what
            ``prune --expire`` compares (:meth:`since`).
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
    container: str | None = None
    session: str | None = None
    size: int | None = None
    used: float | None = None

    def since(self) -> float | None:
        """When it was made, or, a base tree, last used; ``None`` when unknown."""
        return self.created if self.used is None else self.used

    def age(self, now: float) -> float | None:
        """Seconds since :meth:`since`, or ``None`` when unknown."""
        since = self.since()
        return None if since is None else max(0.0, now - since)


def owned_worktrees(
    repository: UserRepository, store: GitMetadataStore, *, env: Mapping[str, str]
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
        found = _base_tree(entry, admin_dir, store, repository.common_dir)
        found = found or _ours(entry, admin_dir, store)
        if found is not None:
            owned.append(found)
    owned.sort(key=lambda w: (w.created is None, w.created or 0.0))
    return owned


def _base_tree(
    entry: WorktreeEntry, admin_dir: GitDirPath, store: GitMetadataStore, common_dir: str
) -> OwnedWorktree | None:
    """``entry`` as a base tree of ours, or ``None``; at the place it lies
    now when the repository was moved with it (:func:`.placement.base_tree_now`)."""
    base = store.load_base(admin_dir)
    if base is None or not made_by_isopatch(entry.path, base.container):
        return None
    now = base_tree_now(common_dir, entry.path, admin_dir)
    return OwnedWorktree(
        path=now,
        state=BASE,
        admin_dir=admin_dir,
        pid=None,
        created=base.created,
        used=base.used,
        head=entry.head,
        command=(),
        tmpdir=None,
        prunable=entry.prunable,
        container=os.path.dirname(now) if now != entry.path else base.container,
    )


def _ours(
    entry: WorktreeEntry, admin_dir: GitDirPath, store: GitMetadataStore
) -> OwnedWorktree | None:
    """``entry`` as a run's worktree of ours, in its state, or ``None``."""
    record: WorktreeRecord | None = store.load(admin_dir)
    lock_owner = parse_lock_reason(entry.locked)
    if record is None and lock_owner is None:
        return None  # not ours
    folder = record.worktree_folder if record is not None else None
    if not made_by_isopatch(entry.path, folder):
        return None  # a record or lock reason written into a worktree we did not make
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
    prunable = entry.prunable
    if claimed_elsewhere(entry.path, admin_dir):  # a copy's: the folder is the original's
        state = ORPHANED
        prunable = prunable or "its folder is another repository's worktree"
    elif record is not None and record.pooled and entry.locked == POOL_LOCK_REASON:
        state = POOLED
    elif record is not None and record.session and entry.locked == SESSION_LOCK_REASON:
        state = SESSION
    elif running:
        state = RUNNING
    elif entry.locked is not None and lock_owner is None and entry.locked not in _OURS:
        state = LOCKED  # the pool's reason with a record that is not pooled: an orphan
    elif record is not None and record.kept:
        state = KEPT
    else:
        state = ORPHANED
    return OwnedWorktree(
        path=entry.path,
        state=state,
        admin_dir=admin_dir,
        pid=pid,
        created=created,
        head=entry.head,
        command=tuple(record.command) if record is not None else (),
        tmpdir=record.tmpdir if record is not None else None,
        prunable=prunable,
        container=os.path.dirname(os.path.normpath(entry.path)),
        session=record.session if record is not None else None,
        size=_session_size(record),
    )


def _session_size(record: WorktreeRecord | None) -> int | None:
    """The bytes the session ``record`` names costs: what its layer holds
    over its base tree (its upper folder), else its whole
    change (``<container>/session/session.patch``); 0 when unknown."""
    if record is None or record.session is None or record.container is None:
        return None
    from .sessions import SESSION_PATCH, layer_folder, state_dir

    held = _layer_size(os.path.join(layer_folder(record.container), "upper"))
    if held is not None:
        return held
    try:
        return os.path.getsize(os.path.join(state_dir(record.container), SESSION_PATCH))
    except OSError:
        return 0


def _layer_size(upper: str) -> int | None:
    """The bytes of the files a session's layer holds (``upper``, its
    upper folder; nothing followed), ``None`` when it has none."""
    if not os.path.isdir(upper):
        return None
    total = 0
    for top, folders, files in os.walk(upper):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(top, name))
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
        folders[:] = [f for f in folders if not os.path.islink(os.path.join(top, f))]
    return total
