"""The processes an unconfined command leaves running, out of its process
group (a double fork, ``setsid``): :func:`adopt` makes git-isopatch their
parent (a child subreaper, prctl(2) ``PR_SET_CHILD_SUBREAPER``: an orphan
of the command's tree is reparented to it, not to init), and
:func:`running` tells whether one still runs when the run ends.  Such a
process can go on writing in the worktree: a worktree it stands in does
not go back to the pool (:attr:`Watched.poolable`, the confinement of a
pooled unconfined run: :func:`watched`), where the next run would take its
writes for its own command's.

A process started outside the command's tree (``systemd-run``, ``at``, a
daemon already running that the command asks) is not seen.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .confinement import Confinement

#: prctl(2) options (include/uapi/linux/prctl.h).
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    import ctypes  # only for a pooled unconfined run

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0


def adopt() -> bool:
    """Make this process the subreaper of the processes it starts from now
    on; False where the kernel refuses."""
    try:
        return _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        return False


def release() -> None:
    """Stop being a subreaper (the orphans adopted stay children)."""
    with contextlib.suppress(OSError, AttributeError):
        _prctl(_PR_SET_CHILD_SUBREAPER, 0)


def running() -> bool:
    """A child of this process still runs (a zombie does not count: it has
    ended).  True where ``/proc`` cannot tell: the worktree cannot be
    vouched for then.

    A child reaped while the list is read can make the kernel skip the
    next one (proc(5): the list is reliable only with the children
    stopped; it goes on by position once the last one given is gone): a
    listed child gone when looked at has the list read again."""
    for _ in range(_TRIES):
        children = _children()
        if children is None:
            return True
        gone = False
        for pid in children:
            try:
                with open(f"/proc/{pid}/stat", "rb") as handle:
                    state = handle.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                gone = True  # ended and reaped since
                continue
            if state not in (b"Z", b"X", b"x"):
                return True
        if not gone:
            return False
    return True


#: Times the children are listed when one listed was reaped meanwhile.
_TRIES = 8


def _children() -> set[str] | None:
    """The pids of this process's children: each thread's own, in
    ``/proc/self/task/<tid>/children`` (proc(5)); ``None`` where they
    cannot be read.  A thread that ends (a timer, a stream's copy) hands
    its children to the first live thread of the group, the leader
    (kernel/exit.c, ``find_new_reaper``), before its entry leaves
    ``/proc``: the other threads are read first and the leader last, so a
    thread gone before its file is read has already handed its children
    to a list still to be read."""
    leader = str(os.getpid())
    try:
        tasks = [task for task in os.listdir("/proc/self/task") if task != leader]
    except OSError:
        return None
    children: set[str] = set()
    try:
        for task in tasks:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                children.update(_task_children(task))
        children.update(_task_children(leader))
    except OSError:
        return None
    return children


def _task_children(task: str) -> list[str]:
    with open(f"/proc/self/task/{task}/children", "rb") as handle:
        return handle.read().decode("ascii").split()


class Watched(Confinement):
    """Unconfined, in a run whose worktree may go back to the pool: what
    the command leaves running out of its process group is this process's
    to see (:func:`adopt`), and while any of it runs the worktree is not
    pooled (it could write in the next run's worktree)."""

    def __init__(self, adopted: bool) -> None:
        self.adopted = adopted

    @property
    def poolable(self) -> bool:  # type: ignore[override]
        return self.adopted and not running()


@contextlib.contextmanager
def watched() -> Iterator[Watched]:
    """An unconfined run's :class:`Watched` confinement: this process the
    subreaper of what the command starts, for as long as it lasts."""
    try:
        yield Watched(adopt())
    finally:
        release()
