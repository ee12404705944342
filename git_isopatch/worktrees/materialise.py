"""A kept run's worktree made a real folder (design: procedure step 7, "a
kept worktree is a real folder"): over a base tree, the worktree the
command saw was an overlay, gone with the run; :func:`materialise` writes
the base tree's files, then the start and upper layers over them, into the
worktree's folder.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping

from ..git.admin_files import copy_range
from ..git.checkouts import check_out_index_copy
from ..git.quote import quoted
from ..git.result import Err, Ok
from ..git.temporary import make_folder
from ..git.types import WorktreePath
from ..sandbox.layer_writes import is_opaque
from .deletion import delete_tree
from .run_layer import RunLayer


def materialise(
    layer: RunLayer,
    worktree: WorktreePath,
    *,
    env: Mapping[str, str],
    warn: Callable[[str], None],
) -> bool:
    """Make the worktree's folder the real folder the command left: the base
    tree's files (checked out again from a copy of its index, so the base
    tree stays as it is), then the start layer, then the upper layer laid
    over them, whiteouts removing and opaque folders replacing what lies
    below.  The layers' entries are moved, not copied (they are discarded
    after), so a large or sparse file costs a rename (copied, holes kept,
    only across file systems); a link is moved as a link, never followed.
    The new tree is made beside the worktree, given the mode of the top
    folder the command saw, and renamed over it; a layer's folder without
    write permission is given it, as its entries move out.  Best effort:
    False (and a warning) when it could not be made; the worktree's folder
    is then as it was.
    """
    container = os.path.dirname(worktree)
    try:
        target = make_folder(container, ".isopatch-kept-")
    except OSError as exc:
        warn(f"could not keep the worktree {quoted(worktree)}: {exc.strerror or exc}")
        return False
    try:
        match check_out_index_copy(layer.pin.tree.admin_dir, target, env=env):
            case Err(error):
                raise OSError(0, error.message())
            case Ok():
                pass
        top = stat.S_IMODE(os.stat(layer.overlay.upper).st_mode)  # the command's top folder
        for source in (layer.start, layer.overlay.upper):
            _lay_over(source, target)
        os.chmod(target, top)
        old = worktree + ".isopatch-old"
        os.rename(worktree, old)
        os.rename(target, worktree)
        delete_tree(old)
    except OSError as exc:
        delete_tree(target)
        warn(f"could not keep the worktree {quoted(worktree)}: {exc.strerror or exc}")
        return False
    return True


def _lay_over(source: str, target: str) -> None:
    """Move the overlay layer ``source``'s entries over the folder
    ``target``, folder by folder (by descriptor: nothing in ``source`` is
    followed).  A merged folder gets the layer's mode once everything in
    it is laid (a folder the command made read-only takes no new entry
    from a user without root's rights)."""
    stack = [""]
    modes: list[tuple[str, int]] = []
    while stack:
        relative = stack.pop()
        fd = os.open(os.path.join(source, relative) if relative else source, _FOLDER)
        try:
            _writable(fd)  # its entries move out of it
            with os.scandir(fd) as entries:
                listed = sorted((e.name, e.stat(follow_symlinks=False)) for e in entries)
            for name, info in listed:
                path = os.path.join(relative, name)
                into = os.path.join(target, path)
                if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:  # a whiteout
                    _remove(into)
                elif stat.S_ISDIR(info.st_mode) and _is_folder(into):
                    if is_opaque(os.path.join(source, path)):
                        _remove(into)
                        _move(fd, name, into)
                    else:
                        stack.append(path)  # merged: what is inside is laid over
                        modes.append((into, stat.S_IMODE(info.st_mode)))
                else:
                    _remove(into)
                    _move(fd, name, into)
        finally:
            os.close(fd)
    for folder, mode in reversed(modes):  # the innermost first
        os.chmod(folder, mode)


def _writable(fd: int) -> None:
    """Give the layer's open folder ``fd`` write permission (the layer is
    discarded after)."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if not mode & stat.S_IWUSR:
        os.fchmod(fd, mode | stat.S_IWUSR)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _move(folder: int, name: str, into: str) -> None:
    """Move ``name`` of the open folder ``folder`` to ``into``; across file
    systems, copy it (links as links, files with their holes).  A folder
    without write permission is given it while it moves (its ``..``
    changes: rename(2), ``EACCES``), then its mode back."""
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    mode = stat.S_IMODE(info.st_mode)
    read_only = stat.S_ISDIR(info.st_mode) and not mode & stat.S_IWUSR
    try:
        if read_only:  # a folder (lstat above), which the command no longer changes
            os.chmod(name, mode | stat.S_IWUSR, dir_fd=folder)
        os.rename(name, into, src_dir_fd=folder)
        if read_only:
            os.chmod(into, mode)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    _copy_across(folder, name, into)


def _copy_across(folder: int, name: str, into: str) -> None:
    """:func:`_move` across file systems: copy ``name`` of ``folder`` to
    ``into``, folder by folder without recursion (a command may nest
    thousands), each folder's mode set once its entries are in.  Nothing
    in the layer changes any more (its command has ended): a path below
    ``folder`` leads where the walk found it."""
    stack, modes = [(name, into)], []
    while stack:
        relative, target = stack.pop()
        info = os.stat(relative, dir_fd=folder, follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(relative, dir_fd=folder), target)
        elif stat.S_ISREG(info.st_mode):
            _copy_sparse(folder, relative, target, mode)
        elif stat.S_ISDIR(info.st_mode):
            os.mkdir(target, mode | 0o700)
            inner = os.open(relative, _FOLDER, dir_fd=folder)
            try:
                entries = os.listdir(inner)
            finally:
                os.close(inner)
            stack += [(os.path.join(relative, e), os.path.join(target, e)) for e in entries]
            modes.append((target, mode))
        elif stat.S_ISFIFO(info.st_mode):
            os.mkfifo(target, mode)
    for target, mode in reversed(modes):  # the innermost first
        os.chmod(target, mode)


def _copy_sparse(folder: int, name: str, into: str, mode: int) -> None:
    """Copy a regular file, its holes kept (``SEEK_DATA``/``SEEK_HOLE``),
    opened without following a link or blocking."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    source = os.open(name, flags, dir_fd=folder)
    try:
        out = os.open(into, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(source).st_size
            at = 0
            while at < size:
                try:
                    at = os.lseek(source, at, os.SEEK_DATA)
                except OSError as exc:  # no data past here: the rest is a hole
                    if exc.errno == errno.ENXIO:
                        break
                    raise
                end = os.lseek(source, at, os.SEEK_HOLE)
                while at < end:
                    copied = copy_range(source, out, end - at, at)
                    if not copied:
                        break
                    at += copied
            os.ftruncate(out, size)
            os.fchmod(out, mode)
        finally:
            os.close(out)
    finally:
        os.close(source)


def _is_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _remove(path: str) -> None:
    if _is_folder(path):
        delete_tree(path)
    elif os.path.lexists(path):
        os.unlink(path)
