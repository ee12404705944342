"""Renames of folders the copy-on-write layers cannot rename, done for
the command by the launcher (:mod:`.launcher_main`, whose program this
module's code joins, after :mod:`.folder_move`'s: it imports nothing else
of the package, and that only outside the launcher).

Overlayfs mounted in a user namespace has no ``redirect_dir``, so
``rename(2)`` of a folder a lower layer holds (a folder of the base tree,
of the home) fails with ``EXDEV``: ``mv`` then copies, ``git mv`` and
``os.rename`` fail.  So before its ``exec`` the command installs a
seccomp filter that sends every ``rename``, ``renameat`` and
``renameat2`` of it and of all it starts to a listener
(``SECCOMP_RET_USER_NOTIF``, :func:`.seccomp.rename_supervision`), and
hands the listener to the launcher, which serves it beside its control
socket (:class:`Renames`).  The launcher reads the call's paths from the
caller's memory (``/proc/<pid>/mem``, checked with ``ID_VALID`` after; as
the namespace's first process it is every caller's ancestor, as Yama's
``ptrace_scope`` 1 wants), and lets the kernel make the call as the caller
(``SECCOMP_USER_NOTIF_FLAG_CONTINUE``) unless it is a folder renamed
with flags 0 or ``RENAME_NOREPLACE`` by a process of the command's own
mount namespace and filters: then a worker it forks, which drops every
capability first, makes it (:func:`.folder_move.move_folder`), and where
the kernel says ``EXDEV`` within one mount does what ``mv`` does: the
folder copied (modes, links, times), then removed.  Whatever the worker could not do
the kernel then does as the caller, with the caller's own answer.

Why that gives a command nothing it had not: the worker runs as the
command's user, with no capability, in the namespaces the command runs
in (its mount namespace differs only by the real folders our own git
reads later, bound read-only, which no rename can change), on folders it
reaches through the caller's own working folder, root and descriptors;
everything it does the command could do itself with ``mkdir``, ``open``,
``unlink`` (it copies only within one writable mount, never across
mounts, never a folder into itself).  A path the caller changes after it
was read, a caller killed meanwhile, a path too long or unreadable,
flags it does not know, a caller that confined itself further (its own
mount namespace, seccomp filter, or Landlock domain: /proc shows none,
so once one is made, every caller), all end in the kernel's own answer.

Layering: knows nothing of the command line or of git.
"""

import _socket
import errno
import fcntl
import os
import select
import stat
import sys

try:
    from .folder_move import KERNEL, PATH_ONLY, move_folder
except ImportError:  # in the launcher, which runs folder_move's code first, beside this
    pass

#: ``ioctl`` requests of the listener (include/uapi/linux/seccomp.h).
_RECV, _SEND, _ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
_CONTINUE = _NOREPLACE = 1  # SECCOMP_USER_NOTIF_FLAG_CONTINUE, RENAME_NOREPLACE
_AT_FDCWD = -100


def install(number, program):
    """``program`` installed on this thread (``seccomp(2)``, call
    ``number``), with a listener: its descriptor.  Through ``_ctypes``,
    which cannot point into a structure: ``struct sock_fprog`` gets the
    address of the program's bytes where CPython keeps them, after the
    object's header.  Once the launcher has a call, a signal the caller
    handles waits for the answer (``WAIT_KILLABLE_RECV``), so that the
    kernel never makes the call again on what the launcher half did."""
    import _ctypes

    address = id(program) + sys.getsizeof(program) - len(program) - 1
    fprog = (len(program) // 8).to_bytes(8, sys.byteorder) + address.to_bytes(8, sys.byteorder)
    call = _ctypes.dlsym(_ctypes.dlopen(None), "syscall")
    for flags in (8 | 32, 8):  # NEW_LISTENER, WAIT_KILLABLE_RECV (Linux 5.19)
        fd = _ctypes.call_function(call, (number, 1, flags, fprog))  # SET_MODE_FILTER
        if fd >= 0:
            return fd
    raise OSError(errno.EPERM, "seccomp")


def identity(pid="self"):
    """What a caller must share with the command (:func:`install` ran in
    it): its mount namespace and its count of seccomp filters."""
    seen = os.stat("/proc/%s/ns/mnt" % pid)
    with open("/proc/%s/status" % pid, "rb") as status:
        count = [line for line in status if line.startswith(b"Seccomp_filters:")]
    return b"%d %d %s" % (seen.st_dev, seen.st_ino, b"".join(count).strip())


class Supervision:
    """How the launcher supervises its command's renames: ``number``,
    ``program``, ``kinds`` as :func:`.seccomp.rename_supervision` gives
    them; ``drop``: what a worker calls first (every capability dropped).
    :attr:`renames` is ``None`` until :meth:`listen` got the listener."""

    def __init__(self, number, program, kinds, drop):
        self.number, self.program, self.kinds, self.drop = number, program, kinds, drop
        self.renames = None

    def hand_over(self, end):
        """In the command's child, before its ``exec``: the filter
        installed, its listener and the child's :func:`identity` sent on
        ``end``; nothing when the kernel refuses the filter."""
        try:
            listener = install(self.number, self.program)
        except OSError:
            return
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, listener.to_bytes(4, sys.byteorder))]
        end.sendmsg([identity()], rights)
        os.close(listener)
        end.close()

    def listen(self, end):
        """In the launcher: what the command's child sent on ``end``."""
        said, anc, _, _ = end.recvmsg(4096, _socket.CMSG_SPACE(4))
        end.close()
        for level, kind, raw in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fd = int.from_bytes(raw[:4], sys.byteorder)
                self.renames = Renames(fd, self.kinds, said, self.drop)


class Renames:
    """The listener ``fd`` served; ``kinds``: which call each ``(arch,
    number)`` is; ``command``: the command's :func:`identity`; ``drop``:
    what a worker calls first (every capability dropped)."""

    def __init__(self, fd, kinds, command, drop):
        self.fd, self.kinds, self.drop, self.command = fd, kinds, drop, command
        self.workers, self.landlocked = {}, False  # a worker's pipe: its notification's id

    def descriptors(self):
        """The descriptors to poll: the listener, each worker's pipe."""
        return [self.fd, *self.workers] if self.fd is not None else list(self.workers)

    def ready(self, fd, events, poller):
        """``fd`` polled ``events``: a notification received and answered
        or given to a worker, a worker's answer sent, or the listener
        closed once no process uses the filter."""
        if fd != self.fd:
            said = os.read(fd, 16)
            os.close(fd)
            poller.unregister(fd)
            number = self.workers.pop(fd)
            self._send(number, int(said) if said[:1].isdigit() else None)
        elif events & 1:  # POLLIN
            worker = self._receive()
            if worker is not None:
                poller.register(worker, 1)
        else:
            poller.unregister(fd)
            os.close(fd)
            self.fd = None

    def finish(self, control):
        """Each worker's rename done before what the command left is
        ended: a folder is never left half copied.  A frame on
        ``control`` (a ``k``: everything ends now) stops the wait."""
        poller = select.poll()
        for fd in (control, *self.workers):
            poller.register(fd, 1)
        while self.workers:
            ready = [f for f, _ in poller.poll()]
            if control in ready:
                return
            for fd in ready:
                poller.unregister(fd)
                os.close(fd)
                del self.workers[fd]

    def _receive(self):
        notification = bytearray(80)
        try:
            fcntl.ioctl(self.fd, _RECV, notification, True)
        except OSError:  # the caller is gone meanwhile
            return None
        number = notification[:8]
        try:
            call = self._call(notification, number)
        except Exception:  # whatever the caller made of its paths
            call = None
        if call is None:
            self._send(number, None)
            return None
        return self._work(number, *call)

    def _call(self, notification, number):
        """``(bases, paths, flags)`` of a folder renamed as
        :func:`.folder_move.move_folder` makes it, or ``None``: the kernel
        makes the call.  Cheap for all but a folder: the first path read
        and looked at, nothing opened."""
        word = [int.from_bytes(notification[i : i + 8], sys.byteorder) for i in range(16, 80, 8)]
        pid = int.from_bytes(notification[8:12], sys.byteorder)
        nr, arch = word[0] & 0xFFFFFFFF, word[0] >> 32
        kind = self.kinds.get((nr, arch) if sys.byteorder == "big" else (arch, nr))
        self.landlocked = self.landlocked or kind == 3  # all it starts inherit the domain
        args = word[2:]
        dirs, at, flags = (_AT_FDCWD, _AT_FDCWD), (args[0], args[1]), 0
        if kind:
            dirs, at = (_signed(args[0]), _signed(args[2])), (args[1], args[3])
            flags = args[4] & 0xFFFFFFFF if kind == 2 else 0
        if kind is None or self.landlocked or flags not in (0, _NOREPLACE):
            return None
        old = _read(pid, at[0])
        if not old or not stat.S_ISDIR(os.lstat(_base(pid, dirs[0], old) + old).st_mode):
            return None
        paths = [old, _read(pid, at[1])]
        if paths[1] is None or not self._valid(number) or identity(pid) != self.command:
            return None  # or a caller that confined itself further
        bases = []
        try:
            for folder, path in zip(dirs, paths, strict=True):
                bases.append(os.open(_base(pid, folder, path), PATH_ONLY))
        except OSError:
            for fd in bases:
                os.close(fd)
            return None
        return bases, paths, flags

    def _valid(self, number):
        try:
            fcntl.ioctl(self.fd, _ID_VALID, bytes(number))
        except OSError:
            return False
        return True

    def _work(self, number, bases, paths, flags):
        read, write = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError:
            pid = None
        if pid == 0:
            said = KERNEL
            try:
                os.close(read)
                self.drop()
                said = move_folder(bases, paths, flags)
            except BaseException:
                pass
            finally:
                os.write(write, said)
                os._exit(0)
        for fd in (*bases, write):
            os.close(fd)
        if pid is None:
            os.close(read)
            self._send(number, None)
            return None
        self.workers[read] = number
        return read

    def _send(self, number, error):
        """The answer: ``error`` (0: done), or ``None``: the kernel makes
        the call as the caller."""
        if self.fd is None:  # no process uses the filter any more
            return
        value = -error if error else 0
        flags = _CONTINUE if error is None else 0
        answer = bytes(number) + bytes(8) + value.to_bytes(4, sys.byteorder, signed=True)
        try:
            fcntl.ioctl(self.fd, _SEND, bytearray(answer + flags.to_bytes(4, sys.byteorder)))
        except OSError:  # the caller is gone, or the listener
            pass


def _signed(word):
    word &= 0xFFFFFFFF
    return word - (1 << 32) if word >> 31 else word


def _base(pid, folder, path):
    """Where the caller ``pid`` looks ``path`` up from (relative to
    ``folder``, a descriptor or ``AT_FDCWD``), as a folder of ``/proc``."""
    if path[:1] == b"/":
        return b"/proc/%d/root" % pid
    if folder == _AT_FDCWD:
        return b"/proc/%d/cwd/" % pid
    return b"/proc/%d/fd/%d/" % (pid, folder)


def _read(pid, at):
    """The path at ``at`` in ``pid``'s memory (at most ``PATH_MAX``, read
    a page at a time, trailing slashes dropped), or ``None``: also when
    the memory reads empty (the caller ended since it was opened)."""
    try:
        memory = os.open("/proc/%d/mem" % pid, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        path = b""
        while b"\0" not in path and len(path) < 4096:
            page = os.pread(memory, 4096 - (at + len(path)) % 4096, at + len(path))
            if not page:
                return None
            path += page
    except (OSError, OverflowError):
        return None
    finally:
        os.close(memory)
    if b"\0" not in path:
        return None
    path = path[: path.index(b"\0")]
    return path.rstrip(b"/") or path
