"""The launcher's own program (:mod:`.launcher` says what it does and why).

bubblewrap starts it as the namespace's first process, on this
interpreter, isolated (``-I -S``): git-isopatch hands it this module's
code, read from its compiled file outside the sandbox, and it runs that
code and calls :func:`main` (:data:`.launcher.MAIN`).  So it imports
nothing of the package and nothing but the interpreter's own
modules (``_signal`` and ``_socket``: ``signal`` and ``socket`` would
import ``enum``), and importing it does nothing but define it.  Once the
command has started it loads nothing more (no module, no codec): the
interpreter's library may be in the command's copy-on-write view.

Layering: knows nothing of the command line or of git.
"""

import _signal as signal
import _socket
import marshal
import os
import select
import sys

#: The counters of a network namespace (``/proc/net/snmp``, ``snmp6``,
#: named ``<table>:<field>`` or as ``snmp6`` names them) that count what its
#: network refused: with only a loopback interface, every other address
#: has no route; a loopback UDP port nobody listens on; a refused TCP
#: connection.
NETWORK_REFUSALS = frozenset(
    {b"Ip:OutNoRoutes", b"Udp:NoPorts", b"Tcp:AttemptFails", b"Ip6OutNoRoutes", b"Udp6NoPorts"}
)


def main(argv, renames=None):
    """``argv``: ``fd err ctype signals bounds view command...`` (no
    command: it only serves); ``err``, when not ``-``, is the descriptor it
    makes its standard error, and the command's, first of all (bubblewrap's
    own is git-isopatch's pipe); ``view``: our own git's mount namespace,
    made before it serves (:func:`own_view`), or ``-``.  The command and
    every program it serves hold no capability."""
    fd, err, ctype, sigs, bounds, view, *command = argv
    if err != "-":
        os.dup2(int(err), 2)
        os.close(int(err))
    _undumpable()
    if bounds != "-":
        _bound(bounds)
    fd = int(fd)
    os.set_inheritable(fd, False)
    control = _Control(fd)
    env = dict(os.environ)
    if ctype == "-":
        env.pop("LC_CTYPE", None)
    else:
        env["LC_CTYPE"] = ctype[1:]
    inherited = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    unblocked = inherited - {int(s) for s in sigs.split(",") if s}
    if command:
        hide = None if view == "-" else _hide_real
        supervised = _supervision(renames)
        pid = _start(fd, os.execvpe, (command[0], command, env), unblocked, hide, supervised)
        if pid is not None:
            _report(control, pid, counted=True, renames=supervised)
    try:
        if view != "-":
            own_view(view)
        drop_capabilities()
    except Exception as exc:  # never serve our own git the command's view
        _kill_all()
        said = exc.args[0] if exc.args and isinstance(exc.args[0], tuple) else ("", b"", b"")
        os.write(control.fd, b"fail %s\n" % marshal.dumps(said).hex().encode("ascii"))
        os._exit(1)
    _serve(control)


def _undumpable():
    """Its socket, memory and ``ptrace`` out of the command's reach
    (``PR_SET_DUMPABLE`` 0, through ``_ctypes``: ``ctypes`` costs more)."""
    try:
        import _ctypes

        prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")
        _ctypes.call_function(prctl, (4, 0, 0, 0, 0))
    except (ImportError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)


def _bound(bounds):
    """Into the run's cgroups (``0`` written to each descriptor), and the
    rlimits set: ``<fd>,...;<resource>=<value>,...``."""
    groups, _, rlimits = bounds.partition(";")
    for group in filter(None, groups.split(",")):
        os.write(int(group), b"0")
        os.close(int(group))
    if rlimits:
        import resource

        for item in rlimits.split(","):
            number, value = map(int, item.split("="))
            hard = resource.getrlimit(number)[1]
            value = value if hard < 0 else min(value, hard)
            resource.setrlimit(number, (value, value))


def _kill_all():
    """Every other process of the namespace killed and reaped."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


class _Control:
    """The socket git-isopatch holds the other end of: frames in, lines out."""

    def __init__(self, fd):
        self.fd = fd
        self.socket = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)

    def receive(self, size, ancillary=0):
        """``size`` bytes and the descriptors that came with them; when
        git-isopatch closed its end (for writing), everything ends: every
        other process of the namespace is killed and reaped, ``gone`` said
        (:meth:`.inside.Inside.end`), and once git-isopatch has closed its
        end whole (:meth:`.inside.Inside.wait`) the launcher exits."""
        data, fds = b"", []
        while len(data) < size:
            got, anc, _, _ = self.socket.recvmsg(size - len(data), ancillary)
            for level, kind, raw in anc:
                if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                    step = range(0, len(raw) - 3, 4)
                    fds += [int.from_bytes(raw[i : i + 4], sys.byteorder) for i in step]
            if not got:
                for f in fds:
                    os.close(f)
                _kill_all()
                try:
                    os.write(self.fd, b"gone\n")
                except OSError:  # its end closed for reading too
                    pass
                else:
                    _until_closed(self.fd)
                os._exit(0)
            data, ancillary = data + got, 0
        return data, fds

    def frame(self):
        """A frame's kind, payload and descriptors."""
        head, fds = self.receive(5, _socket.CMSG_SPACE(64))
        size = int.from_bytes(head[1:], "big")
        return head[:1], self.receive(size)[0] if size else b"", fds


def _until_closed(fd):
    """Until git-isopatch has closed its end of the socket ``fd`` whole:
    the launcher's exit unmounts the namespaces' file systems, each
    overlay's syncing its upper layer's file system first, and what the
    run removes meanwhile (never written, then) is not written by it."""
    poller = select.poll()
    poller.register(fd, 0)  # POLLHUP alone: the other end closed for reading and writing
    while not poller.poll():
        pass


def _wait_for(control, pid, renames=None):
    """``pid``'s wait status, reaping orphans meanwhile; a ``k`` frame
    kills every other process of the namespace; ``renames`` served
    meanwhile (:class:`.renames.Renames`)."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(control.fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    for f in renames.descriptors() if renames else ():
        poller.register(f, select.POLLIN)
    try:
        while True:
            polled = poller.poll(1000)
            ready = [f for f, _ in polled]
            for f, events in polled if renames else ():
                if f not in (control.fd, pidfd):
                    renames.ready(f, events, poller)
            while True:
                try:
                    done, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    done = 0
                if done == pid:
                    return status
                if done == 0:
                    break
            if control.fd in ready:
                kind, _, fds = control.frame()
                for f in fds:
                    os.close(f)
                if kind == b"k":
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except OSError:
                        pass
    finally:
        os.close(pidfd)


def _start(fd, execute, arguments, mask, setup=None, supervised=None):
    """A child that runs ``setup`` then ``execute(*arguments)`` (an
    ``exec``) with the signal mask ``mask``; ``exec <errno>`` on ``fd``
    when it cannot, and ``None`` when no child could be made (a fork the
    process bound refused: ``exec <errno>`` and ``wait`` said here).
    ``supervised``: its renames filtered and their listener handed to
    ``supervised`` (:func:`_supervision`) before the ``exec``."""
    pair = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM) if supervised else None
    try:
        pid = os.fork()
    except OSError as exc:
        for end in pair or ():
            end.close()
        os.write(fd, b"exec %d\nwait %d\n" % (exc.errno or 0, 126 << 8))
        return None
    if pid:
        if pair:
            pair[1].close()
            supervised.listen(pair[0])
        return pid
    code = 126
    try:
        if setup is not None:
            setup()
        drop_capabilities()
        if pair:
            supervised.hand_over(pair[1])
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        execute(*arguments)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        os.write(fd, b"exec %d\n" % (exc.errno or 0))
    finally:
        os._exit(code)


def _supervision(renames):
    """The command's renames supervised (:class:`.renames.Supervision`,
    whose code, :mod:`.folder_move`'s before it, ``seccomp(2)`` number,
    filter and calls ``renames`` holds), or ``None`` without them."""
    if renames is None:
        return None
    names = {"__name__": "renames"}
    for code in renames[0]:
        exec(code, names)
    return names["Supervision"](*renames[1:], drop_capabilities)


def _refused():
    """How often the namespace's network refused something
    (:data:`NETWORK_REFUSALS`)."""
    tried = 0
    for name in ("/proc/net/snmp", "/proc/net/snmp6"):
        try:
            with open(name, "rb") as handle:
                rows = [row.split() for row in handle.read().splitlines()]
            for row, values in zip(rows, rows[1:], strict=False):
                if row[:1] == values[:1] and len(row) == len(values):
                    pairs = zip([row[0] + key for key in row[1:]], values[1:], strict=False)
                    tried += sum(int(v) for k, v in pairs if k in NETWORK_REFUSALS and v.isdigit())
            tried += sum(
                int(r[1])
                for r in rows
                if len(r) == 2 and r[0] in NETWORK_REFUSALS and r[1].isdigit()
            )
        except Exception:
            pass
    return tried


def _report(control, pid, counted=False, renames=None):
    """Wait for ``pid``, end everything else (once the renames begun for
    it are done), and say how it ended."""
    status = _wait_for(control, pid, renames and renames.renames)
    if renames and renames.renames:
        renames.renames.finish(control.fd)
    said = b"net %d\n" % _refused() if counted else b""
    _kill_all()
    os.write(control.fd, said + b"wait %d\n" % status)


def _serve(control):
    """Run each ``r`` frame's program (:mod:`.inside`) until git-isopatch
    closes its end."""
    while True:
        kind, payload, fds = control.frame()
        if kind != b"r" or len(fds) != 3:
            for f in fds:
                os.close(f)
            continue
        path, args, environ, cwd = marshal.loads(payload)
        pid = _start(control.fd, os.execve, (path, args, environ), set(), _setup(fds, cwd))
        for f in fds:
            os.close(f)
        if pid is not None:
            _report(control, pid)


def _setup(fds, cwd):
    """What a served program's child does before its ``exec``: a session
    of its own, ``fds`` as its standard input, output and error, ``cwd``."""

    def setup():
        os.setsid()
        for target, source in enumerate(fds):
            os.dup2(source, target)
        for source in fds:
            if source > 2:
                os.close(source)
        if cwd is not None:
            os.chdir(cwd)

    return setup


#: The launcher's mount namespace for our own git (``own_view``, run once
#: the command and all it started are gone), as :mod:`.global_config` says
#: why: each real folder bound over the command's view of it, what our own
#: git reads as the command left it moved back on top.  Through ``_ctypes``.
PLACE = b"/run/git-isopatch"


def _call(name, *args):
    import _ctypes

    done = _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None), name), args)
    if done < 0:
        raise OSError((name + " failed", b"", b""))
    return done


def drop_capabilities():
    """Every capability gone, the bounding set's too (``no_new_privs``
    holds: an ``exec`` gains none, even as uid 0)."""
    for number in (21, 8):  # CAP_SYS_ADMIN, CAP_SETPCAP
        if _call("prctl", 23, number, 0, 0, 0):  # PR_CAPBSET_READ
            _call("prctl", 24, number, 0, 0, 0)  # PR_CAPBSET_DROP
    _call("capset", (0x20080522).to_bytes(4, sys.byteorder) + bytes(4), bytes(24))


def _beneath(path, folder):
    return path.startswith(folder.rstrip(b"/") + b"/")


def _show(real, folder):
    """``real`` shown at ``folder``, read-only, through an overlay: a
    socket of the real folder (a tmux server's, an ssh master's) is no
    socket of the overlay's, so our own git, and a filter the command
    planted, cannot connect to it, as the command cannot through its
    copy-on-write view.  Never bound: the kernel refuses an overlay over a
    folder that holds mounts of the system's, and no folder shown has one
    (:meth:`.global_config.GlobalConfig.showing`) unless it was made while
    the command ran: that fails the view."""
    escaped = real.replace(b"\\", b"\\\\").replace(b":", b"\\:").replace(b",", b"\\,")
    lower = b"userxattr,lowerdir=%s:%s/empty" % (escaped, PLACE)
    try:
        _call("mount", b"overlay", folder, b"overlay", 1, lower)  # MS_RDONLY
    except OSError:
        raise OSError(("mount", folder, b"")) from None


def _hide_real():
    """The command's own mount namespace, where :data:`PLACE` (the real
    folders, bound read-only for our own git) is covered by an empty
    read-only tmpfs: a read-only bind still lets a unix socket of the real
    home answer (a tmux server's, an ssh master's), and the command must
    not find it there.  Run in the command's process before its ``exec``,
    with the capabilities it drops then: the launcher's namespace, where
    :func:`own_view` reads them, keeps them (the mounts of a namespace made
    in bubblewrap's nested user namespace are locked, and the cover does
    not propagate back)."""
    _call("unshare", 0x20000)  # CLONE_NEWNS
    _call("mount", b"tmpfs", PLACE, b"tmpfs", 1 | 2 | 4 | 8, b"size=4k,mode=0")


def own_view(spec):
    """A mount namespace of the launcher's own (``spec``: the real folders,
    the folders kept and those kept where they can be,
    :meth:`.global_config.GlobalConfig.view`): each kept folder beneath a
    real one cloned (``open_tree``), each real folder (``PLACE/<n>``)
    shown over the command's view of it (:func:`_show`), then the clones
    moved back on top
    (``move_mount``).  A folder the command made a link fails it, and so
    does a kept folder (the worktree, the git directory) that is not a
    folder reached without a link, in the command's view or the real one
    (our own git would read another folder at its path); one kept where it
    can be (a cache folder) is then left out.  It fails with an
    ``OSError`` whose argument says why: ``(what, path, where)``."""
    folders, kept, optional = marshal.loads(bytes.fromhex(spec))
    _call("unshare", 0x20000)  # CLONE_NEWNS
    _call("mount", None, b"/", None, 0x40000 | 0x4000, None)  # MS_PRIVATE | MS_REC
    wanted = [(path, what) for what, path in kept] + [(path, "") for path in optional]
    wanted = sorted(w for w in wanted if any(_beneath(w[0], f) for f in folders))
    clones = []
    for path, what in wanted:  # the outer first; an optional one inside another goes with it
        if not what and any(_beneath(path, other) for other, _, _ in clones):
            continue
        if _plain(path, what):  # OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC
            clones.append((path, what, _call("syscall", 428, -100, path, 1 | 0x8000 | 0o2000000)))
        elif what:
            raise OSError((what, path, b""))
    for n, folder in enumerate(folders):
        real = b"%s/%d" % (PLACE, n)
        if os.path.realpath(folder) != folder and os.path.lexists(folder):
            raise OSError(("link", folder, b""))
        if os.path.isdir(real):
            _show(real, folder)
        elif os.path.isdir(folder):  # not there for real: an empty one, read-only
            _call("mount", b"tmpfs", folder, b"tmpfs", 1 | 2 | 4, b"size=4k")
        elif os.path.lexists(folder):
            raise OSError(("not a folder", folder, b""))
    for path, what, fd in clones:
        if _plain(path, what):
            try:
                _call("syscall", 429, fd, b"", -100, path, 4)  # MOVE_MOUNT_F_EMPTY_PATH
            except OSError:
                if what:
                    raise
        elif what:
            raise OSError((what, path, [f for f in folders if _beneath(path, f)][0]))
        os.close(fd)


def _plain(path, kept):
    """``path`` is reached without a link: a folder where it is ``kept``,
    else anything there."""
    if os.path.realpath(path) != path:
        return False
    return os.path.isdir(path) if kept else os.path.lexists(path)
