"""What a command touched in its worktree: the paths its copy-on-write
layer holds (design: procedure step 6, "the paths to compare are those
the run's layer holds").

The run's worktree is an overlay of read-only lower layers (its base tree,
and what git-isopatch put in before the command); everything the command
changes lands in the upper layer: a file it wrote or whose mode or times
it changed (copied up whole), a link, a new folder, a removal (a
*whiteout*: a character device 0/0), a folder it removed and made again
(an *opaque* folder: ``user.overlay.opaque``, ``trusted.overlay.opaque``
as root on the host, hides what the lower layers hold there).  A folder
only copied up because something inside it changed is not itself a
change: the walk goes on inside it.  A folder the lower layers do not hold
(new), or that is opaque or redirected, is named as a whole and not
entered: everything below it is the command's.

The layer is the command's to write, so it is hostile input
(:func:`touched_paths`): read by file descriptor, each folder opened
``O_NOFOLLOW | O_DIRECTORY | O_NONBLOCK`` from the one above it (no link
is followed, no FIFO opened), no file's content read, the walk iterative
and bounded (:data:`MAX_ENTRIES`, :data:`MAX_DEPTH`): past a bound the
listing says it is incomplete and the caller compares everything.

Layering: knows nothing of git.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence

from ..git.record import Record

#: Entries looked at, at most; a layer holding more is compared whole.
MAX_ENTRIES = 200_000
#: Folders deep, at most (a path git can name is shorter anyway).
MAX_DEPTH = 1024

#: The extended attributes that make a folder of the upper layer hide the
#: lower ones (``userxattr``: the unprivileged mount's; ``trusted``: root's).
OPAQUE = (b"user.overlay.opaque", b"trusted.overlay.opaque")
#: ... and the ones that redirect a folder to another lower one.
REDIRECT = (b"user.overlay.redirect", b"trusted.overlay.redirect")

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Touched(Record):
    """The paths a layer holds a change for.

    Attributes:
        paths: each path from the top of the worktree (bytes, ``/``
            separated, sorted); a folder stands for everything below it.
        complete: False when the walk stopped at a bound or could not read
            a folder: then :attr:`paths` is not all of it.
    """

    paths: tuple[bytes, ...]
    complete: bool


def _xattr(fd: int, names: Sequence[bytes]) -> bytes | None:
    for name in names:
        with contextlib.suppress(OSError):
            return os.getxattr(fd, name)
    return None


def _open_folder(name: bytes, parent: int) -> int | None:
    """``name`` in the open folder ``parent``, opened when it is a real
    folder (never a link), else ``None``."""
    try:
        return os.open(name, _FOLDER, dir_fd=parent)
    except OSError:
        return None


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def touched_paths(upper: str, lowers: Sequence[str] = ()) -> Touched:
    """The paths the upper layer ``upper`` holds a change for, over the
    ``lowers`` (topmost first; what the command cannot write).  Never
    raises for what the layer holds: an unreadable folder makes the
    listing incomplete.

    Raises:
        OSError: ``upper`` itself cannot be opened.
    """
    top = os.open(upper, _FOLDER)
    lower_fds: list[int] = []
    try:
        for lower in lowers:
            with contextlib.suppress(OSError):
                lower_fds.append(os.open(lower, _FOLDER))
        return _walk(top, lower_fds)
    finally:
        for fd in (top, *lower_fds):
            os.close(fd)


def _walk(top: int, lowers: Sequence[int]) -> Touched:
    """The iterative walk of :func:`touched_paths`: each stacked folder of
    the upper layer goes with the same folder in each lower layer that
    holds it as a real folder (a folder none holds is new: named whole)."""
    found: list[bytes] = []
    complete, seen = True, 0
    stack: list[tuple[int, list[int], bytes, int]] = [
        (os.dup(top), [os.dup(fd) for fd in lowers], b"", 0)
    ]
    while stack:
        fd, below, prefix, depth = stack.pop()
        try:
            with os.scandir(fd) as entries:  # never more than the bound, however many
                bounded = zip(entries, range(MAX_ENTRIES + 1 - seen), strict=False)
                listed = [(os.fsencode(e.name), e.stat(follow_symlinks=False)) for e, _ in bounded]
        except OSError:
            complete, listed = False, []
        for name, info in listed:
            seen += 1
            if seen > MAX_ENTRIES:
                complete = False
                break
            relative = prefix + name
            child = _open_folder(name, fd) if stat.S_ISDIR(info.st_mode) else None
            if child is None:
                found.append(relative)  # a file, a link, a whiteout, anything else
                complete = complete and not stat.S_ISDIR(info.st_mode)
                continue
            inner = [f for f in (_open_folder(name, lower) for lower in below) if f is not None]
            whole = (
                not inner or _xattr(child, OPAQUE) == b"y" or _xattr(child, REDIRECT) is not None
            )
            if whole or depth + 1 >= MAX_DEPTH:
                found.append(relative)
                complete = complete and whole
                _close_all([child, *inner])
            else:
                stack.append((child, inner, relative + b"/", depth + 1))
        _close_all([fd, *below])
        if seen > MAX_ENTRIES:
            for rest, rest_below, _, _ in stack:
                _close_all([rest, *rest_below])
            break
    return Touched(tuple(sorted(found)), complete)
