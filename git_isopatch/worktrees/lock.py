"""The locks of one repository: the one that serialises changes to
git-isopatch's worktrees (add, claim from the pool, return to it, remove,
prune) between concurrent runs, the one that serialises ``--apply``, and
the pins of its base trees (:func:`open_pin`); commands themselves are
never serialised."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator, Mapping

from ..errors import Interrupted, IsopatchError
from ..git.types import GitDirPath
from ..logger import log
from .store import RECORD_FILE

#: File in the common git directory that holds the lock.
LOCK_FILE = "isopatch.lock"


#: File in the common git directory that serialises ``--apply`` runs
#: (:func:`held_within`): a lock of its own, so that an apply waiting for
#: another never holds up the making or removing of worktrees, and a run
#: removing its worktree never waits for an apply.
APPLY_LOCK_FILE = "isopatch-apply.lock"

#: How often a waiting :func:`held_within` tries the lock again, in
#: seconds, at the most: it tries after :data:`FIRST_POLL_SECONDS`, then
#: twice as long each time up to this, so that a run waiting for another's
#: short hold (runs started together) is not kept waiting much longer than
#: the hold, and one waiting for a long checkout polls rarely.
POLL_SECONDS = 0.05
FIRST_POLL_SECONDS = 0.002

#: The file of a base tree's private folder that runs pin
#: (:mod:`.base_trees`): a shared ``flock`` for each run using the base
#: tree; an exclusive one, taken without waiting, to move or remove it.
PIN_FILE = "isopatch-pin"


def open_pin(admin_dir: str) -> int | None:
    """A descriptor of the pin file of the base tree whose private folder
    is ``admin_dir`` (made if missing; never through a link, never
    blocking), or ``None`` when it cannot be opened."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        return os.open(os.path.join(admin_dir, PIN_FILE), flags, 0o600)
    except OSError as exc:
        log.debug("cannot open the pin of '%s': %s", admin_dir, exc)
        return None


#: The folder of a base tree's private folder that holds the lasting pins
#: of the sessions standing on it (:func:`stand_on`): one file each, named
#: after the session's worktree's private folder and holding its path.
STANDING_FOLDER = "isopatch-sessions"


def stand_on(tree_admin_dir: str, session_admin_dir: str) -> None:
    """Pin the base tree whose private folder is ``tree_admin_dir`` for
    the session whose worktree's private folder is ``session_admin_dir``,
    beyond any process: while that private folder holds our record, no
    run moves or removes the base tree (:func:`stood_on`).  The caller
    holds the base tree's pin.

    Raises:
        OSError: the pin could not be written.
    """
    folder = os.path.join(tree_admin_dir, STANDING_FOLDER)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, os.path.basename(session_admin_dir.rstrip("/")))
    fresh = os.path.join(folder, f".{os.getpid()}")  # the name may be as long as a name can be
    with open(fresh, "wb") as handle:
        handle.write(os.fsencode(session_admin_dir))
    os.replace(fresh, path)


def leave(tree_admin_dir: str, session_admin_dir: str) -> None:
    """Take back the lasting pin of :func:`stand_on` (best effort)."""
    folder = os.path.join(tree_admin_dir, STANDING_FOLDER)
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(folder, os.path.basename(session_admin_dir.rstrip("/"))))
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def stood_on(tree_admin_dir: str) -> bool:
    """A live session stands on the base tree whose private folder is
    ``tree_admin_dir``: one of its lasting pins names a worktree's private
    folder that still holds our record.  A pin whose session is gone
    (ended, pruned, its folder deleted) is dropped; one that cannot be
    read counts, so that a base tree is never taken from a session."""
    folder = os.path.join(tree_admin_dir, STANDING_FOLDER)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    standing = False
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb", opener=_no_follow) as handle:
                session_admin_dir = os.fsdecode(handle.read(4096))
        except OSError:
            standing = True
            continue
        if os.path.isfile(os.path.join(session_admin_dir, RECORD_FILE)):
            standing = True
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return standing


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def idle_pin(admin_dir: str) -> int | None:
    """The pin of the base tree whose private folder is ``admin_dir``,
    held exclusively (:func:`open_pin`, :func:`try_flock`): no run uses
    it and no session stands on it (:func:`stood_on`), so it may be moved
    or removed; ``None`` when it may not (or cannot be opened)."""
    fd = open_pin(admin_dir)
    if fd is None:
        return None
    if try_flock(fd, exclusive=True) and not stood_on(admin_dir):
        return fd
    os.close(fd)
    return None


def try_flock(fd: int, *, exclusive: bool) -> bool:
    """Take the ``flock`` of ``fd``, shared or ``exclusive``, without
    waiting (a lock this descriptor holds is converted); False when
    another holds it."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            log.debug("cannot lock a pin: %s", exc)
        return False
    return True


class LockTimeout(Exception):
    """:func:`held_within` gave up: another process held ``path`` for
    ``seconds``."""

    def __init__(self, path: str, seconds: float) -> None:
        super().__init__(path, seconds)
        self.path = path
        self.seconds = seconds


class LockWaitInterrupted(Interrupted):
    """:func:`held_within` stopped waiting for ``path``: ``interrupted()``
    said so (a signal the caller recorded: ``signum`` when known)."""

    def __init__(self, path: str, signum: int | None = None) -> None:
        super().__init__(path, signum)
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

    The wait polls (every :data:`FIRST_POLL_SECONDS` at first, then less
    often, up to :data:`POLL_SECONDS`), so that it ends as soon as
    ``interrupted()`` is true (a signal handler that records instead of
    raising, :func:`..sandbox.command.forward_signals`) and a ``KeyboardInterrupt``
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
        pause = FIRST_POLL_SECONDS
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
            time.sleep(pause)
            pause = min(pause * 2, POLL_SECONDS)
        yield True
    finally:
        os.close(fd)


#: How long a run or ``prune`` waits for another process to let go of
#: :data:`LOCK_FILE` by default, in seconds (:class:`AdminLock`): making a
#: worktree of a large repository holds it for as long as its checkout.
ADMIN_LOCK_SECONDS = 60.0

#: How long the clean-up of a run that a signal ended waits for the lock
#: (the signal itself no longer ends the wait: it came before).
SIGNALLED_LOCK_SECONDS = 5.0

#: The environment variable that sets that wait (seconds, a number > 0).
LOCK_TIMEOUT_VARIABLE = "ISOPATCH_LOCK_TIMEOUT"


def admin_lock_seconds(environ: Mapping[str, str]) -> float:
    """The wait for :data:`LOCK_FILE`: :data:`LOCK_TIMEOUT_VARIABLE` when
    it holds a number of seconds above 0, else :data:`ADMIN_LOCK_SECONDS`."""
    try:
        seconds = float(environ.get(LOCK_TIMEOUT_VARIABLE, ""))
    except ValueError:
        return ADMIN_LOCK_SECONDS
    return seconds if 0 < seconds < float("inf") else ADMIN_LOCK_SECONDS


class AdminLock:
    """The lock that serialises changes to git-isopatch's worktrees of a
    repository (add, claim from the pool, return to it, remove, prune):
    an exclusive ``flock`` on ``<common_dir>/isopatch.lock``, waited for at
    most ``seconds`` (:func:`held_within`), and no longer once ``interrupted()``
    names a signal the caller recorded during the wait (a run a signal
    already ended waits at most :data:`SIGNALLED_LOCK_SECONDS` to clean up).

    A holder that never lets go (a process an unconfined command left
    behind, holding the lock it inherited or took) makes the wait end
    with ``lock-timeout``; after one such wait the same run no longer
    waits for the lock (its clean-up would wait again, each time in vain).
    """

    def __init__(
        self,
        seconds: float = ADMIN_LOCK_SECONDS,
        interrupted: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.seconds = seconds
        self.interrupted = interrupted
        self.gave_up = False

    @contextlib.contextmanager
    def held(self, common_dir: GitDirPath) -> Iterator[bool]:
        """Hold the lock for the block.  Best effort: where the file cannot
        be opened (a read-only repository) the block runs unlocked and
        git's own locking is all there is.

        Yields:
            True when the lock is held, False when the block runs unlocked
            (what needs the lock to be safe, such as claiming a pooled
            worktree, must not be done then).

        Raises:
            IsopatchError: ``lock-timeout``, naming the lock file.
            LockWaitInterrupted: a signal arrived while waiting.
        """
        path = os.path.join(common_dir, LOCK_FILE)
        seconds = 0.0 if self.gave_up else self.seconds
        before = self.interrupted()
        if before is not None:  # the clean-up of a run a signal ended
            seconds = min(seconds, SIGNALLED_LOCK_SECONDS)
        stack = contextlib.ExitStack()
        try:
            held = stack.enter_context(
                held_within(
                    path,
                    seconds,
                    interrupted=lambda: before is None and self.interrupted() is not None,
                )
            )
        except LockTimeout:
            self.gave_up = True
            raise IsopatchError(
                "lock-timeout",
                f"another process has held the lock '{path}' for {self.seconds:g} "
                f"second{'' if self.seconds == 1 else 's'}",
                hint=(
                    "a process an earlier unconfined run left behind may hold it "
                    f"(fuser -v '{path}' names it); {LOCK_TIMEOUT_VARIABLE} sets the wait"
                ),
            ) from None
        except LockWaitInterrupted:
            raise LockWaitInterrupted(path, self.interrupted()) from None
        with stack:
            yield held
