"""A folder of the command's renamed for it as ``rename(2)`` renames it,
or, where the copy-on-write layers say ``EXDEV`` within one mount, moved
as ``mv`` moves it: copied (modes, links, times), then removed
(:func:`move_folder`).  What a worker of the launcher's rename supervision
(:mod:`.renames`) does once it has dropped every capability; its code
joins the launcher's program, as :mod:`.renames`'s does, and imports
nothing of the package.

Layering: knows nothing of the command line or of git.
"""

import errno
import os
import stat

#: ``open`` flags: a folder as a place to look paths up from, never read.
PATH_ONLY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: What a worker says when it did nothing: the kernel makes the call.
KERNEL = b"k"


def _split(path):
    """``path``'s folder (relative: an absolute path is looked up from
    the caller's root) and last name, or ``None`` (``.`` or ``..``)."""
    folder, _, name = path.rstrip(b"/").rpartition(b"/")
    if name in (b"", b".", b".."):
        return None
    return folder.lstrip(b"/") or b".", name


def _mount(fd):
    with open("/proc/self/fdinfo/%d" % fd, "rb") as info:
        for line in info:
            if line.startswith(b"mnt_id:"):
                return line
    return None


def move_folder(bases, paths, flags):
    """What the worker says: ``0`` when it renamed the folder, an errno
    when it copied but could not remove, :data:`KERNEL` when it did
    nothing."""
    split = [_split(p) for p in paths]
    if None in split:
        return KERNEL
    (old_folder, old), (new_folder, new) = split
    old_parent = os.open(old_folder, PATH_ONLY, dir_fd=bases[0])
    new_parent = os.open(new_folder, PATH_ONLY, dir_fd=bases[1])
    if flags:
        try:
            os.mkdir(new, 0o700, dir_fd=new_parent)
        except OSError:
            return KERNEL
    try:
        os.rename(old, new, src_dir_fd=old_parent, dst_dir_fd=new_parent)
        return b"0"
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            if flags:
                os.rmdir(new, dir_fd=new_parent)
            return KERNEL
    source = os.open(old, _FOLDER, dir_fd=old_parent)
    mount = _mount(source)
    if _mount(old_parent) != mount or _mount(new_parent) != mount or _inside(new_parent, source):
        return KERNEL
    made = bool(flags)
    if not flags:
        try:
            os.mkdir(new, 0o700, dir_fd=new_parent)
            made = True
        except FileExistsError:  # an empty folder: replaced, as rename(2) does
            pass
    target = os.open(new, _FOLDER, dir_fd=new_parent)
    if not made and os.listdir(target):
        return KERNEL
    try:
        _copy(source, target, mount)
    except (OSError, RecursionError):
        _empty(target)
        if made:
            os.rmdir(new, dir_fd=new_parent)
        return KERNEL
    try:
        _empty(source)
        os.rmdir(old, dir_fd=old_parent)
    except OSError as exc:
        return b"%d" % (exc.errno or errno.EIO)
    return b"0"


def _inside(folder, source):
    """``folder`` is ``source`` or beneath it (on its mount)."""
    mark = os.fstat(source)
    fd = os.open(".", PATH_ONLY, dir_fd=folder)
    try:
        while True:
            seen = os.fstat(fd)
            if (seen.st_dev, seen.st_ino) == (mark.st_dev, mark.st_ino):
                return True
            up = os.open("..", PATH_ONLY, dir_fd=fd)
            above = os.fstat(up)
            os.close(fd)
            fd = up
            if above.st_ino == seen.st_ino or above.st_dev != seen.st_dev:
                return False  # the root, or another file system
    finally:
        os.close(fd)


def _copy(source, target, mount):
    """Everything in folder ``source`` copied into ``target`` as ``mv``
    copies: modes, symbolic links, times; never across a mount."""
    for name in os.listdir(source):
        seen = os.stat(name, dir_fd=source, follow_symlinks=False)
        mode = seen.st_mode
        if stat.S_ISDIR(mode):
            os.mkdir(name, 0o700, dir_fd=target)
            inner = os.open(name, _FOLDER, dir_fd=source)
            made = os.open(name, _FOLDER, dir_fd=target)
            try:
                if _mount(inner) != mount:
                    raise OSError(errno.EXDEV, "a mount")
                _copy(inner, made, mount)
            finally:
                os.close(inner)
                os.close(made)
        elif stat.S_ISLNK(mode):
            os.symlink(os.readlink(name, dir_fd=source), name, dir_fd=target)
        elif stat.S_ISREG(mode):
            _copy_file(source, target, name)
        else:
            raise OSError(errno.EXDEV, "not a file")
        if not stat.S_ISLNK(mode):
            os.chmod(name, stat.S_IMODE(mode), dir_fd=target)
        os.utime(
            name, ns=(seen.st_atime_ns, seen.st_mtime_ns), dir_fd=target, follow_symlinks=False
        )
    seen = os.fstat(source)
    os.fchmod(target, stat.S_IMODE(seen.st_mode))
    os.utime(target, ns=(seen.st_atime_ns, seen.st_mtime_ns))


def _copy_file(source, target, name):
    read = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source)
    try:
        write = os.open(name, _NEW, 0o600, dir_fd=target)
        try:
            while os.sendfile(write, read, None, 1 << 30):
                pass
        finally:
            os.close(write)
    finally:
        os.close(read)


def _empty(folder):
    """Everything in ``folder`` removed, through descriptors; a folder its
    owner may not write made writable first: ``rename(2)`` moves a folder
    holding one all the same, and a copy that failed leaves none of it."""
    if os.fstat(folder).st_mode & 0o700 != 0o700:
        os.fchmod(folder, 0o700)
    for name in os.listdir(folder):
        try:
            os.unlink(name, dir_fd=folder)
        except IsADirectoryError:
            inner = os.open(name, _FOLDER, dir_fd=folder)
            try:
                _empty(inner)
            finally:
                os.close(inner)
            os.rmdir(name, dir_fd=folder)
