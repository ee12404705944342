"""Deleting a folder of ours so that nothing can redirect the deletion.

A process the command left behind can still write in the worktree while it
is deleted, and swap a folder for a symbolic link (or a mount) leading to
the user's checkout between the moment a walk looks at a name and the
moment it deletes through it.  A walk by path (``git worktree remove``,
``rm -r``) then deletes the checkout.  :func:`delete_tree` walks by file
descriptor instead: each folder is opened with ``O_DIRECTORY |
O_NOFOLLOW`` relative to the folder it was found in, its entries are
deleted relative to that descriptor (``unlinkat``, ``rmdir`` with
``dir_fd``), and a folder on another mount than the top is never entered.
Whatever is swapped in, a name is only ever unlinked, never followed.

Design: procedure step 7 ("file-descriptor relative, never through a mount
point").
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

#: How a folder is opened: never through a symbolic link, never blocking
#: on a FIFO swapped in for it.
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

#: Walks over the tree before giving up: a leftover process may keep
#: making entries while the walk deletes them.
PASSES = 3


def _mount_id(fd: int) -> int | None:
    """The mount a descriptor lies on (``mnt_id`` of proc(5)
    ``/proc/self/fdinfo``), or ``None`` when it cannot be read: a bind mount
    of the same file system has the same ``st_dev``, not the same mount."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as handle:
            for line in handle:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class _Walk:
    """One deletion: the mount it stays on (``st_dev``, mount id) and the
    first failure met (``path: reason``), for the caller's message."""

    def __init__(self, fd: int) -> None:
        self.where = (os.fstat(fd).st_dev, _mount_id(fd))
        self.failure: str | None = None

    def failed(self, path: str, exc: OSError) -> None:
        if self.failure is None and exc.errno != errno.ENOENT:
            self.failure = f"cannot delete '{path}': {exc.strerror or exc}"

    def on_our_mount(self, fd: int) -> bool:
        return os.fstat(fd).st_dev == self.where[0] and _mount_id(fd) == self.where[1]

    def unlink(self, name: str, parent: int, path: str) -> None:
        try:
            os.unlink(name, dir_fd=parent)
        except OSError as exc:
            self.failed(path, exc)

    def open_folder(self, name: str, parent: int, path: str) -> int | None:
        """``name`` in ``parent`` opened as a folder on our mount, or
        ``None``: anything else is unlinked (a link itself, never what it
        leads to) and a folder on another mount is left alone."""
        try:
            seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            self.failed(path, exc)
            return None
        if not stat.S_ISDIR(seen.st_mode):
            self.unlink(name, parent, path)
            return None
        try:
            fd = os.open(name, FOLDER_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped since the stat
                self.unlink(name, parent, path)
            elif exc.errno == errno.EACCES:
                return self._open_unreadable(name, parent, path)
            else:
                self.failed(path, exc)
            return None
        if not self.on_our_mount(fd):
            os.close(fd)
            self.failed(path, OSError(errno.EBUSY, "a mount point", path))
            return None
        return _writable(fd)

    def _open_unreadable(self, name: str, parent: int, path: str) -> int | None:
        """A folder of ours the command made unreadable (``chmod 000``),
        given back its owner's rights through an ``O_PATH`` descriptor (that
        cannot lead through a link) and opened."""
        flags = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
        try:
            path_fd = os.open(name, flags, dir_fd=parent)
        except OSError as exc:
            self.failed(path, exc)
            return None
        try:
            if not self.on_our_mount(path_fd):
                self.failed(path, OSError(errno.EBUSY, "a mount point", path))
                return None
            os.chmod(f"/proc/self/fd/{path_fd}", 0o700)
            return os.open(f"/proc/self/fd/{path_fd}", FOLDER_FLAGS & ~os.O_NOFOLLOW)
        except OSError as exc:
            self.failed(path, exc)
            return None
        finally:
            os.close(path_fd)

    def names(self, fd: int, path: str) -> list[str]:
        try:
            return os.listdir(fd)
        except OSError as exc:
            self.failed(path, exc)
            return []

    def delete(self, name: str, parent: int, path: str) -> bool:
        """Delete ``name`` in the folder ``parent`` (shown as ``path``) and,
        when it is a folder on our mount, everything in it, depth first
        without recursion; what cannot be deleted stays.

        Returns:
            True when ``name`` went (here or by another's hand): from then
            on the name may be another's (``git worktree add`` makes the
            first free ``worktrees/<id>``), never to be looked at again.
        """
        top = self.open_folder(name, parent, path)
        if top is None:
            return self.failure is None  # unlinked, or gone already
        frames = [(parent, name, path, top, self.names(top, path))]
        while frames:
            above, folder_name, folder_path, fd, names = frames[-1]
            if names:
                child = names.pop()
                child_path = os.path.join(folder_path, child)
                child_fd = self.open_folder(child, fd, child_path)
                if child_fd is not None:
                    frames.append(
                        (fd, child, child_path, child_fd, self.names(child_fd, child_path))
                    )
                continue
            frames.pop()
            os.close(fd)
            try:
                os.rmdir(folder_name, dir_fd=above)
            except FileNotFoundError:
                pass
            except NotADirectoryError:  # swapped for a link since it was opened
                self.unlink(folder_name, above, folder_path)
                continue
            except OSError as exc:
                self.failed(folder_path, exc)
                continue
            if not frames:
                return True
        return False


def _writable(fd: int) -> int:
    """``fd``, a folder whose entries its owner may delete (a command's
    ``chmod 555`` undone)."""
    mode = os.fstat(fd).st_mode
    if mode & 0o700 != 0o700:
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    return fd


def delete_tree(path: str) -> str | None:
    """Delete ``path`` and, when it is a folder, everything in it, by file
    descriptor (see the module's docstring).  The folder holding ``path`` is
    opened by its path, its last component without following a link;
    ``path`` itself, when a symbolic link, is unlinked.  Once ``path`` is
    gone its name is not looked at again: another process may have made
    it anew (git takes the first free ``worktrees/<id>``).  Folders on another
    mount than ``path``'s are left (the caller refuses those first,
    :func:`.mounts.mount_points_under`).  Never raises.

    Returns:
        ``None`` when ``path`` is gone, else why not (the first failure:
        ``cannot delete '<path>': <reason>``).
    """
    holder, name = os.path.split(os.path.normpath(path))
    try:
        parent = os.open(holder or os.curdir, FOLDER_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot open '{holder}': {exc.strerror or exc}"
    try:
        walk = _Walk(parent)
        for _ in range(PASSES):
            if not _exists(name, parent):
                return None
            walk.failure = None
            if walk.delete(name, parent, path):
                return None  # whatever has the name now is not ours
        if not _exists(name, parent):
            return None
        return walk.failure or f"cannot delete '{path}': entries keep appearing in it"
    finally:
        os.close(parent)


def _exists(name: str, parent: int) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True
