"""The pool of warm worktrees (``isopatch.pool``): what waits there, the
atomic claim of one, bringing it to a commit, and putting one back.

The life cycle (:mod:`.provider`) calls these; a worktree the pool cannot
vouch for is removed there, never used.
"""

from __future__ import annotations

import contextlib
import os
import shutil

from ..git.admin_files import read_admin_file, replace_admin_file
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..git.worktree import worktree_admin_dir, worktree_admin_dirs
from ..logger import log
from .conversions import ANSWER_FILE
from .lock import AdminLock
from .removal import registered_inside
from .store import POOL_LOCK_REASON, GitMetadataStore, WorktreeRecord


def write_lock_reason(admin_dir: GitDirPath, reason: str) -> None:
    """Set the worktree's lock reason: the ``locked`` file of its private
    folder, which ``git worktree lock --reason`` writes and ``git worktree
    list``/``prune`` read (gitrepository-layout(5), ``worktrees/<id>/locked``)."""
    replace_admin_file(os.path.join(admin_dir, "locked"), reason.encode("utf-8"))


def empty_container(container: str, worktree: str) -> bool:
    """Empty the folder holding a pooled worktree of everything but the
    worktree (what a command wrote in ``..``); False if that fails."""
    name = os.path.basename(worktree)
    try:
        for entry in os.listdir(container):
            if entry == name:
                continue
            path = os.path.join(container, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        return os.listdir(container) == [name]
    except OSError as exc:
        log.debug("cannot empty '%s': %s", container, exc)
        return False


def pooled(
    repository: UserRepository, store: GitMetadataStore
) -> list[tuple[WorktreePath, GitDirPath]]:
    """The worktrees waiting in the pool of ``repository``, from their
    private folders alone (no git call): our record says pooled, the
    ``locked`` file holds the pool's reason, the folder exists.  The
    caller holds the worktree lock."""
    found = []
    for top, admin_dir in worktree_admin_dirs(repository.common_dir).items():
        record = store.load(admin_dir)
        if record is None or not record.pooled:
            continue
        try:
            locked = read_admin_file(os.path.join(admin_dir, "locked"))
            reason = locked.decode("utf-8", "surrogateescape")
        except OSError:
            continue
        if reason == POOL_LOCK_REASON and os.path.isdir(top) and not os.path.islink(top):
            found.append((WorktreePath(top), admin_dir))
    return found


def take(
    repository: UserRepository,
    store: GitMetadataStore,
    base: CommitId,
    command: list[str],
    *,
    lock: AdminLock | None = None,
) -> tuple[WorktreePath, GitDirPath, WorktreeRecord] | None:
    """Claim a pooled worktree for this process; ``None`` when none waits.

    The claim is atomic: under the worktree lock, the claimant writes its
    own lock reason and then its record over the pool's, so that no other
    run can see it as pooled any more; a run that cannot take the lock
    claims nothing.  From then on the worktree is this run's (``running``;
    if the run dies, ``orphaned``, which ``prune`` clears).  Lock reason
    first: a run killed between the two writes leaves a worktree locked by
    a process that is gone, with the pool's record, which is an orphan; the
    other order left one locked as pooled with a record that is not, which
    nothing claimed or pruned.
    """
    with (lock or AdminLock()).held(repository.common_dir) as locked:
        if not locked:
            return None
        waiting = pooled(repository, store)
        if not waiting:
            return None
        worktree, admin_dir = waiting[0]
        container = os.path.dirname(worktree)
        record = WorktreeRecord.for_this_process(container=container, base=base, command=command)
        try:
            write_lock_reason(admin_dir, record.lock_reason())
            store.save(admin_dir, record)
        except OSError as exc:
            log.debug("could not claim pooled worktree '%s': %s", worktree, exc)
            return None
    return worktree, admin_dir, record


def bring_to(
    worktree: WorktreePath, admin_dir: GitDirPath, base: CommitId, env: dict[str, str]
) -> list[bytes] | None:
    """Bring a claimed worktree to ``base`` (:func:`..git.refresh.refresh_worktree`,
    outside the lock) and empty its folder of what a command left there;
    the paths of its index, or ``None`` when it cannot be vouched for."""
    from ..git.refresh import refresh_worktree  # only with a pool

    refreshed = refresh_worktree(worktree, admin_dir, base, env=env)
    if isinstance(refreshed, Ok) and empty_container(os.path.dirname(worktree), worktree):
        return refreshed.value
    if isinstance(refreshed, Err):
        log.debug("pooled worktree '%s' not used: %s", worktree, refreshed.error.message())
    return None


class AsMade(Record):
    """What :func:`put_back` writes in a worktree's private folder, as this
    process held it since before the command ran.

    Attributes:
        index: the index as git-isopatch's own git left it
            (:func:`index_as_made`).
        conversions: the answer of the reading look
            (:mod:`.conversions`), or ``None``: then none is kept.
    """

    index: bytes
    conversions: bytes | None = None


def index_as_made(admin_dir: GitDirPath) -> bytes | None:
    """The worktree's index as git-isopatch's own git left it, before the
    command runs (:func:`put_back` puts it back); ``None`` if unreadable."""
    try:
        return read_admin_file(os.path.join(admin_dir, "index"), limit=1 << 34)
    except OSError:
        return None


def put_back(
    repository: UserRepository,
    store: GitMetadataStore,
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    record: WorktreeRecord,
    size: int,
    made: AsMade | None,
    *,
    lock: AdminLock | None = None,
) -> bool:
    """Return the worktree to the pool when fewer than ``size`` wait there.

    Its index goes back to ``made.index``, the one :func:`index_as_made` read
    before the command ran: the next claim's ``git read-tree --reset -u``
    trusts an entry's stat data (a file whose stat data matches is taken
    for unchanged), and a command can write an index whose entry for a file
    it changed carries the changed file's stat data and the old object id.
    The stat data git-isopatch's own checkout wrote cannot match a file
    changed since (its change time moved).  Without ``made`` it is not
    pooled.  The reading look's answer is written from ``made`` too, or
    the file removed (:mod:`.conversions`): never one the command wrote.

    ``HEAD`` is detached (a pooled worktree never holds a branch the user
    may want to check out elsewhere), the record says pooled and the
    ``locked`` file holds :data:`.store.POOL_LOCK_REASON` (so ``git worktree
    prune`` leaves it alone), record first: a run that dies between the two
    leaves an orphan, never a pooled worktree that is not clean.  What the
    command left in it is cleared by the next claim.
    """
    if made is None or os.path.islink(worktree) or not os.path.isdir(worktree):
        return False
    if registered_inside(repository, os.path.dirname(worktree), worktree) is not None:
        return False  # the next claim would empty the folder of it
    match worktree_admin_dir(worktree):
        case Ok(pointer) if os.path.realpath(pointer) == os.path.realpath(admin_dir):
            pass
        case _:
            return False
    with (lock or AdminLock()).held(repository.common_dir) as locked:
        if not locked or len(pooled(repository, store)) >= size:
            return False
        replace_admin_file(os.path.join(admin_dir, "HEAD"), f"{record.base}\n".encode())
        replace_admin_file(os.path.join(admin_dir, "index"), made.index)
        answer = os.path.join(admin_dir, ANSWER_FILE)
        if made.conversions is not None:
            replace_admin_file(answer, made.conversions)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(answer)  # what the command left there, if anything
        record.pooled = True
        store.save(admin_dir, record)
        write_lock_reason(admin_dir, POOL_LOCK_REASON)
    return True
