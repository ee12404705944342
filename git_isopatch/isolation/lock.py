"""The lock that serialises changes to git-isopatch's worktrees of one
repository (add, claim from the pool, return to it, remove, prune) between
concurrent runs; commands themselves are never serialised."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator

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
