"""The locks of one repository: the one that serialises changes to
git-isopatch's worktrees (add, claim from the pool, return to it, remove,
prune) between concurrent runs, and the one that serialises ``--apply``;
commands themselves are never serialised."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator

from ..git.types import GitDirPath

log = logging.getLogger("git_isopatch")

#: File in the common git directory that holds the lock.
LOCK_FILE = "isopatch.lock"


@contextlib.contextmanager
def worktree_admin_lock(common_dir: GitDirPath) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``<common_dir>/isopatch.lock``.

    Best effort: where the file cannot be opened (a read-only repository)
    the block runs unlocked and git's own locking is all there is.

    Yields:
        True when the lock is held, False when the block runs unlocked
        (what needs the lock to be safe, such as claiming a pooled
        worktree, must not be done then).
    """
    try:
        fd = os.open(os.path.join(common_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        log.debug("no worktree lock: %s", exc)
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


#: File in the common git directory that serialises ``--apply`` runs
#: (:func:`held_within`): a lock of its own, so that an apply waiting for
#: another never holds up the making or removing of worktrees, and a run
#: removing its worktree never waits for an apply.
APPLY_LOCK_FILE = "isopatch-apply.lock"

#: How often a waiting :func:`held_within` tries the lock again, in seconds.
POLL_SECONDS = 0.05


class LockTimeout(Exception):
    """:func:`held_within` gave up: another process held ``path`` for
    ``seconds``."""

    def __init__(self, path: str, seconds: float) -> None:
        super().__init__(path, seconds)
        self.path = path
        self.seconds = seconds


class LockWaitInterrupted(Exception):
    """:func:`held_within` stopped waiting for ``path``: ``interrupted()``
    said so (a signal the caller recorded)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


@contextlib.contextmanager
def held_within(
    path: str,
    seconds: float,
    *,
    interrupted: Callable[[], bool] = lambda: False,
    on_wait: Callable[[], None] | None = None,
) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (made if missing), waiting at
    most ``seconds`` for another holder to let go.

    The wait polls (:data:`POLL_SECONDS`), so that it ends as soon as
    ``interrupted()`` is true (a signal handler that records instead of
    raising, :func:`.command.forward_signals`) and a ``KeyboardInterrupt``
    raised by Python's own handler ends it too.  ``on_wait`` is called once
    when the lock is found held.  The lock goes with the process: a holder
    that dies (even by ``SIGKILL``) lets go at once.

    Yields:
        True when the lock is held; False when ``path`` cannot be opened
        (a read-only repository): the block runs unlocked.

    Raises:
        LockTimeout: ``seconds`` passed with the lock held elsewhere.
        LockWaitInterrupted: ``interrupted()`` said stop.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.debug("no lock %s: %s", path, exc)
        yield False
        return
    try:
        deadline = time.monotonic() + seconds
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            if interrupted():
                raise LockWaitInterrupted(path)
            if time.monotonic() >= deadline:
                raise LockTimeout(path, seconds)
            if not told and on_wait is not None:
                on_wait()
                told = True
            time.sleep(POLL_SECONDS)
        yield True
    finally:
        os.close(fd)
