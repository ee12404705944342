"""Reading and removing what a sandboxed command left on disk (its
copy-on-write layers, its private ``TMPDIR``): hostile input (design: "What
the command left is hostile input: read without following links, without
blocking, with limits").

- :func:`read_file` opens a file without following a symbolic link and
  without blocking (``O_NOFOLLOW | O_NONBLOCK``: a FIFO neither blocks the
  open nor a read), takes regular files only (``fstat``), and reads at
  most a limit: a ``config`` made a FIFO or a link to ``/dev/zero`` is
  neither waited on nor read without bound;
- :func:`remove_tree` removes a folder and everything in it, however deep
  (no recursion, and never more than :data:`OPEN_FOLDERS` descriptors
  open: a tree deeper than ``PATH_MAX`` or than the descriptor limit
  goes too), by descriptor, never through a link, giving back its owner's
  rights to a folder made unreadable (``chmod 000``).  Only for folders
  no process writes any more (the namespaces that wrote them are gone):
  it goes up through ``..``.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

#: How a folder is opened: never through a link, never blocking.
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: How a file is opened for reading: the same.
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: The most a file of a layer is read: far more than a configuration file
#: or a hook needs.
READ_LIMIT = 1 << 24

#: Descriptors :func:`remove_tree` keeps open at once, the deepest folders'.
OPEN_FOLDERS = 64


def read_file(path: str, limit: int = READ_LIMIT) -> bytes | None:
    """The first ``limit`` bytes of ``path`` when it is a regular file, read
    as the module says; ``None`` when it is not one (a link, a FIFO, a
    device, a folder), is missing or cannot be read."""
    try:
        fd = os.open(path, FILE)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _open_folder(name: str, parent: int) -> int | None:
    """``name`` in ``parent`` opened as a folder whose entries may be
    removed (its owner's rights given back), or ``None`` when it is not a
    folder (a link is never followed)."""
    for attempt in (1, 2):
        try:
            fd = os.open(name, FOLDER, dir_fd=parent)
        except PermissionError:
            if attempt == 2:
                return None
            with contextlib.suppress(OSError):  # not through a link: chmod does not follow it
                os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)
            continue
        except OSError:
            return None
        mode = os.fstat(fd).st_mode
        if mode & 0o700 != 0o700:
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
        return fd
    return None


def _clear(fd: int) -> list[str]:
    """Unlink every entry of the folder ``fd`` that is not a folder; the
    names of its folders."""
    folders, others = [], []
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            (folders if is_folder else others).append(entry.name)
    for name in others:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
    return folders


def _reopen(frames: list[list], top: int) -> int:
    """Open the deepest of ``frames`` (each ``[name, folders left, fd or
    None]``, the first's name in ``top``) again by name, from the nearest
    one still open: the last :data:`OPEN_FOLDERS` of them stay open."""
    nearest = len(frames) - 1
    while nearest >= 0 and frames[nearest][2] is None:
        nearest -= 1
    fd = top if nearest < 0 else frames[nearest][2]
    keep_from = len(frames) - OPEN_FOLDERS
    for index in range(nearest + 1, len(frames)):
        opened = os.open(frames[index][0], FOLDER, dir_fd=fd)
        if index - 1 > nearest and index - 1 < keep_from:
            os.close(fd)  # a folder above the window: only a step down
        fd = opened
        if index >= keep_from:
            frames[index][2] = opened
    if frames[-1][2] is None:
        frames[-1][2] = fd
    return frames[-1][2]


def remove_tree(path: str) -> bool:
    """Remove ``path`` and everything in it (see the module's words);
    best effort, never raises.

    Returns:
        True when ``path`` is gone.
    """
    holder, name = os.path.split(os.path.normpath(path))
    try:
        top = os.open(holder or os.curdir, FOLDER & ~os.O_NOFOLLOW)
    except OSError:
        return not os.path.lexists(path)
    try:
        _remove_from(top, name)
        try:
            os.lstat(name, dir_fd=top)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return False
    finally:
        os.close(top)


def _remove_from(top: int, name: str) -> None:
    """:func:`remove_tree` of ``name`` in the folder ``top``."""
    first = _open_folder(name, top)
    if first is None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=top)
        return
    frames: list[list] = [[name, _clear(first), first]]
    try:
        while frames:
            frame = frames[-1]
            fd = frame[2] if frame[2] is not None else _reopen(frames, top)
            if frame[1]:
                child = frame[1].pop()
                inner = _open_folder(child, fd)
                if inner is None:
                    with contextlib.suppress(OSError):
                        os.unlink(child, dir_fd=fd)
                    continue
                frames.append([child, _clear(inner), inner])
                _close_beyond(frames)
                continue
            frames.pop()
            os.close(fd)
            parent = top
            if frames:
                parent = frames[-1][2] if frames[-1][2] is not None else _reopen(frames, top)
            with contextlib.suppress(OSError):
                os.rmdir(frame[0], dir_fd=parent)
    except OSError as exc:  # a folder gone or swapped while going up
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
            raise
    finally:
        for frame in frames:
            if frame[2] is not None:
                with contextlib.suppress(OSError):
                    os.close(frame[2])


def _close_beyond(frames: list[list]) -> None:
    """Keep at most :data:`OPEN_FOLDERS` of ``frames`` open, the deepest."""
    if len(frames) > OPEN_FOLDERS:
        closing = frames[-OPEN_FOLDERS - 1]
        if closing[2] is not None:
            os.close(closing[2])
            closing[2] = None


def _folder_beneath(root: str, parts: list[str]) -> int | None:
    """The folder ``root``/``parts`` opened a component at a time, never
    through a link; ``None`` when one is not a folder or cannot be opened."""
    try:
        fd = os.open(root, FOLDER)
    except OSError:
        return None
    for part in parts:
        try:
            inner = os.open(part, FOLDER, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = inner
    return fd


def _split(relative: str) -> list[str]:
    return [part for part in relative.split("/") if part and part != "."]


def lstat_beneath(root: str, relative: str) -> os.stat_result | None:
    """What ``relative`` is in the folder ``root`` (itself, when a link),
    reached without following a link; ``None`` when nothing is there."""
    parts = _split(relative)
    if not parts:
        return None
    fd = _folder_beneath(root, parts[:-1])
    if fd is None:
        return None
    try:
        return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_beneath(root: str, relative: str, limit: int = READ_LIMIT) -> bytes | None:
    """:func:`read_file` of ``relative`` in the folder ``root``, reached
    without following a link."""
    parts = _split(relative)
    fd = _folder_beneath(root, parts[:-1]) if parts else None
    if fd is None:
        return None
    try:
        return read_file(f"/proc/self/fd/{fd}/{parts[-1]}", limit)
    finally:
        os.close(fd)


def open_beneath(root: str, relative: str) -> int | None:
    """A descriptor of the regular file ``relative`` in the folder
    ``root``, reached without following a link and opened without
    blocking; ``None`` when it is not one."""
    parts = _split(relative)
    fd = _folder_beneath(root, parts[:-1]) if parts else None
    if fd is None:
        return None
    try:
        file = os.open(parts[-1], FILE, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        if stat.S_ISREG(os.fstat(file).st_mode):
            return file
    except OSError:
        pass
    os.close(file)
    return None


def chunks_beneath(root: str, relative: str) -> Iterator[bytes]:
    """The content of the regular file ``relative`` in the folder ``root``
    (:func:`open_beneath`), a chunk at a time, to its end; nothing when it
    is not one."""
    fd = open_beneath(root, relative)
    if fd is None:
        return
    try:
        while chunk := os.read(fd, 1 << 20):
            yield chunk
    finally:
        os.close(fd)


def link_beneath(root: str, relative: str) -> bytes | None:
    """The target of the link ``relative`` in the folder ``root``, or ``None``."""
    parts = _split(relative)
    fd = _folder_beneath(root, parts[:-1]) if parts else None
    if fd is None:
        return None
    try:
        return os.fsencode(os.readlink(parts[-1], dir_fd=fd))
    except OSError:
        return None
    finally:
        os.close(fd)


def xattr_beneath(root: str, relative: str, name: str) -> bytes | None:
    """The extended attribute ``name`` of the folder ``relative`` of
    ``root``, reached without following a link; ``None`` when it has none
    or is no folder."""
    fd = _folder_beneath(root, _split(relative))
    if fd is None:
        return None
    try:
        return os.getxattr(fd, name)
    except OSError:
        return None
    finally:
        os.close(fd)


def list_beneath(root: str, relative: str) -> list[str]:
    """The names in the folder ``relative`` of ``root``, reached without
    following a link; empty when it is not one."""
    fd = _folder_beneath(root, _split(relative))
    if fd is None:
        return []
    try:
        return os.listdir(fd)
    except OSError:
        return []
    finally:
        os.close(fd)


#: Entries :func:`walk` looks at before it stops, and how deep it goes.
WALK_LIMIT = 1_000_000
WALK_DEPTH = 256


def _entries(fd: int) -> list[tuple[str, int]]:
    """(name, ``st_mode`` of its ``lstat``) of each entry of the folder ``fd``."""
    try:
        with os.scandir(fd) as entries:
            return [(entry.name, entry.stat(follow_symlinks=False).st_mode) for entry in entries]
    except OSError:
        return []


def walk(
    root: str, relative: str = "", limit: int = WALK_LIMIT
) -> tuple[list[tuple[str, int]], bool]:
    """Every entry below the folder ``relative`` of ``root`` (reached
    without following a link), as (path relative to that folder,
    ``st_mode`` of its ``lstat``), depth first without recursion, at most ``limit`` of
    them and :data:`WALK_DEPTH` folders deep; and whether it saw them all
    (a folder it could not open counts as unseen)."""
    found: list[tuple[str, int]] = []
    top = _folder_beneath(root, _split(relative))
    if top is None:
        return found, True
    stack = [("", top, _entries(top))]
    complete = True
    try:
        while stack:
            here, fd, entries = stack[-1]
            if not entries:
                stack.pop()
                os.close(fd)
                continue
            name, mode = entries.pop()
            path = f"{here}/{name}" if here else name
            if len(found) >= limit:
                return found, False
            found.append((path, mode))
            if not stat.S_ISDIR(mode):
                continue
            try:
                if len(stack) >= WALK_DEPTH:
                    raise OSError(errno.ELOOP, "too deep")
                inner = os.open(name, FOLDER, dir_fd=fd)
            except OSError:
                complete = False
                continue
            stack.append((path, inner, _entries(inner)))
    finally:
        for _, fd, _ in stack:
            os.close(fd)
    return found, complete
