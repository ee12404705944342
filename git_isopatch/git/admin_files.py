"""Files git-isopatch writes and reads in a worktree's private folder
(``$GIT_COMMON_DIR/worktrees/<id>``, gitrepository-layout(5)).

That folder is writable by the command the worktree was made for, even
under ``--sandbox`` (git needs it for the worktree's ``HEAD`` and index), so
anything in it may have been replaced by a symbolic link, a folder or a
FIFO.  A file is therefore never written in place or through a name the
command could have planted: the new content goes to a fresh file that only
this process made (``mkstemp``: ``O_CREAT | O_EXCL``, which never follows a
link), which is then renamed over the name (``rename(2)`` replaces a link
itself, never its target).  Reads refuse anything but a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence

from .temporary import make_file


def replace_admin_file(path: str, data: bytes | Sequence[bytes | memoryview]) -> None:
    """Make ``path`` a regular file holding ``data`` (or its pieces, one
    after the other), at once.

    Raises:
        OSError: the folder cannot be written, or ``path`` is a folder.
    """
    folder, name = os.path.split(path)
    fd, temporary = make_file(folder, f".{name}.", ".isopatch-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.writelines([data] if isinstance(data, bytes) else data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def read_admin_file(path: str, limit: int = 1 << 20) -> bytes:
    """The content of ``path`` when it is a regular file (at most ``limit``
    bytes), never through a symbolic link and never blocking on a FIFO.

    Raises:
        OSError: missing, not a regular file (``EINVAL`` then), unreadable.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise OSError(22, "not a regular file", path)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            # read(n) allocates n bytes at once: ask for what the file holds
            # (and one more, to see the end), never for the whole limit
            data = handle.read(min(limit, found.st_size + 1))
            while len(data) < limit:  # it grew meanwhile
                more = handle.read(min(limit - len(data), 1 << 20))
                if not more:
                    break
                data += more
            return data
    finally:
        os.close(fd)


def copy_admin_file(source: str, target: str) -> None:
    """Copy the regular file ``source`` into ``target``, a file this call
    makes (``O_EXCL``: never through a link, never over one), never
    following a link at ``source`` nor blocking on a FIFO there.  The
    kernel copies (``copy_file_range(2)``, Linux 4.5; a read and a write
    where it refuses): an index that grows with the repository is never
    read into this process.  Only its data (``SEEK_DATA``): a hole stays
    a hole, so a sparse file a command left (gigabytes that cost it
    nothing) costs no more here.

    Raises:
        OSError: ``source`` missing, not a regular file (``EINVAL``) or
            unreadable; ``target`` already there or not writable.
    """
    reading = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(reading).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", source)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        writing = os.open(target, flags, 0o666)
        try:
            size, at = os.fstat(reading).st_size, 0
            while (at := _data_from(reading, at, size)) < size:
                end = min(os.lseek(reading, at, os.SEEK_HOLE), size)
                copied = copy_range(reading, writing, min(end - at, 1 << 30), at)
                at = at + copied if copied else size  # it shrank meanwhile
            os.ftruncate(writing, size)
        finally:
            os.close(writing)
    finally:
        os.close(reading)


def _data_from(fd: int, at: int, size: int) -> int:
    """Where ``fd``'s data goes on at ``at`` or after (``size``: none does)."""
    try:
        return os.lseek(fd, at, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
    return size


def copy_range(source: int, out: int, count: int, at: int) -> int:
    """Copy up to ``count`` bytes at offset ``at`` of ``source`` to the
    same offset of ``out``; the bytes copied (0 at the end of ``source``).
    The kernel copies (``copy_file_range(2)``); where it refuses (two file
    systems of different types: ``EXDEV`` from Linux 5.19, a tmpfs
    ``$TMPDIR`` and the checkout on ext4; an old kernel), a read and a
    write of at most 1 MiB."""
    try:
        return os.copy_file_range(source, out, count, at, at)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
    return os.pwrite(out, os.pread(source, min(count, 1 << 20), at), at)


#: The files of a linked worktree's private folder that tell git where the
#: repository and the worktree are (gitrepository-layout(5),
#: ``worktrees/<id>/commondir`` and ``gitdir``): a ``commondir`` leading
#: elsewhere has every git that uses this private folder read another
#: configuration (which names programs: filters, hooks, an ``uploadpack``
#: of a promisor remote) and breaks ``git worktree list`` in the user's
#: repository; a ``gitdir`` leading elsewhere has git take another folder
#: for the worktree.
POINTER_FILES = ("commondir", "gitdir")

#: The files :func:`restore_pointers` puts back after the command: the
#: pointers, and ``config.worktree``, which git reads (with
#: ``extensions.worktreeConfig``, as ``git sparse-checkout`` sets it) for
#: git-isopatch's own git calls after the run: a filter or an fsmonitor
#: the command named there would run outside its sandbox.
RESTORED_FILES = (*POINTER_FILES, "config.worktree")


def read_pointers(admin_dir: str) -> dict[str, bytes | None]:
    """The content of each of :data:`RESTORED_FILES` of ``admin_dir``
    (``None`` for one that cannot be read as a regular file)."""
    found: dict[str, bytes | None] = {}
    for name in RESTORED_FILES:
        try:
            found[name] = read_admin_file(os.path.join(admin_dir, name))
        except OSError:
            found[name] = None
    return found


def restore_pointers(admin_dir: str, before: dict[str, bytes | None]) -> list[str]:
    """Put back each of :data:`RESTORED_FILES` that no longer holds what
    :func:`read_pointers` read into ``before`` (as a regular file, through
    :func:`replace_admin_file`); one that was not there before and is a
    file or a link now is removed.

    Returns:
        The names of those that had changed, in :data:`RESTORED_FILES` order.

    Raises:
        OSError: one could not be put back.
    """
    now = read_pointers(admin_dir)
    changed = [name for name in RESTORED_FILES if now[name] != before.get(name)]
    for name in RESTORED_FILES:
        path = os.path.join(admin_dir, name)
        content = before.get(name)
        if content is not None and name in changed:
            replace_admin_file(path, content)
        elif content is None and _is_file_or_link(path):
            if name not in changed:
                changed.append(name)
            os.unlink(path)
    return changed


def _is_file_or_link(path: str) -> bool:
    try:
        return not stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def common_dir_of(admin_dir: str) -> str:
    """The repository that holds the private folder ``admin_dir``
    (``$GIT_COMMON_DIR/worktrees/<id>``)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(admin_dir)))


def pointer_leads_to(admin_dir: str, name: str, target: str) -> bool:
    """True when the pointer file ``name`` of ``admin_dir`` (one of
    :data:`POINTER_FILES`), read as a regular file, names ``target``: a
    relative path is taken from ``admin_dir``, and both sides are compared
    with symbolic links resolved."""
    try:
        content = os.fsdecode(read_admin_file(os.path.join(admin_dir, name)).rstrip(b"\r\n"))
    except OSError:
        return False
    return os.path.realpath(os.path.join(admin_dir, content)) == os.path.realpath(target)


def dotgit_target(top: str) -> str | None:
    """The folder that ``<top>/.git`` (``gitdir: <path>``, read as a
    regular file) names, symbolic links resolved, or ``None``: a worktree's
    private folder, the one that should name it back."""
    try:
        text = read_admin_file(os.path.join(top, ".git"), limit=1 << 16).rstrip(b"\r\n")
    except OSError:
        return None
    if not text.startswith(b"gitdir: "):
        return None
    return os.path.realpath(os.path.join(top, os.fsdecode(text[len(b"gitdir: ") :])))


def worktree_add_copies(git_dir: str) -> str:
    """What ``git worktree add`` run from the worktree of ``git_dir``
    copies into the worktree it makes (git 2.36+: its ``config.worktree``
    and sparse-checkout patterns), as a digest; ``""`` when it has neither."""
    parts = []
    for name in ("config.worktree", os.path.join("info", "sparse-checkout")):
        try:
            parts.append(read_admin_file(os.path.join(git_dir, name)))
        except OSError:
            parts.append(b"")
    if not any(parts):
        return ""
    import hashlib  # only for a worktree that has either

    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def claimed_elsewhere(path: str, admin_dir: str) -> bool:
    """True when the worktree at ``path`` is another registration's, not
    ``admin_dir``'s: its ``.git`` names another private folder, which names
    it back (the original's, for a copy of the repository, as git's own
    ``worktree remove`` finds with its "does not point back" check)."""
    target = dotgit_target(path)
    if target is None or target == os.path.realpath(admin_dir):
        return False
    return pointer_leads_to(target, "gitdir", os.path.join(path, ".git"))


def reset_commondir(admin_dir: str) -> bool:
    """Make ``admin_dir/commondir`` lead to the repository that holds
    ``admin_dir`` (``$GIT_COMMON_DIR/worktrees/<id>``: ``../..``, what
    ``git worktree add`` writes) when it leads anywhere else, so that git
    can read, repair and remove this worktree again.

    Returns:
        True when it was rewritten.

    Raises:
        OSError: it could not be.
    """
    if pointer_leads_to(admin_dir, "commondir", common_dir_of(admin_dir)):
        return False
    replace_admin_file(os.path.join(admin_dir, "commondir"), b"../..\n")
    return True
