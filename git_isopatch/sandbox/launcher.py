"""The small program between bubblewrap and the command (:mod:`.namespaces`):
it reports the command's wait status, which bubblewrap cannot, ends what
the command left, then runs git-isopatch's own git in the same namespaces
(:mod:`.inside`).

bubblewrap exits ``128+N`` for a command killed by signal N, and its
``--json-status-fd`` carries that same number (``propagate_exit_status``
in bubblewrap.c, 0.8 to 0.11), so a command that ``exit 143`` and one that
SIGTERM killed look alike.  The launcher, started by bubblewrap as the
first process of the PID namespace (``--as-pid-1``, in place of
bubblewrap's own init: it reaps the orphans as that one does, and when it
ends the kernel ends every other process of the namespace), forks the
command and waits for it; then it kills every other process of the
namespace (``kill(-1, SIGKILL)``, which the namespace's first process sends
to its namespace alone) and reaps them, and writes one line to a unix
socket git-isopatch holds the other end of: ``wait <status>`` (the raw
``waitpid`` status), after ``net <n>``, or after ``exec <errno>`` when the
command could not be run (:meth:`.pidns.Wrapped.command_ended` reads it).  A ``k`` frame on the
socket while the command runs kills them all at once (a ``--timeout``,
or a command that outlives a forwarded signal's grace: SIGKILL to the
group would end bubblewrap too).

After that it serves: each ``r`` frame (:mod:`.inside`) is an argument
list, an environment and a folder, with three descriptors (``SCM_RIGHTS``)
for the program's standard input, output and error; the launcher starts it
in a session of its own (no controlling terminal, every signal unblocked),
waits for it (a ``k`` frame kills it and everything else), ends what it
left, and answers ``wait <status>``.  When git-isopatch closes its end, the
launcher ends everything and exits, and the namespaces with it.

``net <n>`` counts what the namespace's network refused until the command
ended, from the kernel's own counters of that namespace (``/proc/net/snmp``
and ``snmp6``, :data:`NETWORK_REFUSALS`): a packet for an address no route
leads to (every address but loopback: a name server, a registry), a
datagram for a loopback port nobody listens on (a name server at
``127.0.0.53``), a refused connection.  A command that failed after the
network refused it gets the hint that names ``--allow-network``; one that
never tried the network (a linter whose exit 1 means "issues found") does
not.  Nothing of the command's output is read for it.

What the command gets is what it gets unconfined:

- the same process group (the launcher makes none), so job control, the
  terminal's foreground group and the signals git-isopatch forwards reach
  it as before; the launcher blocks every signal for itself, so a signal
  for the command's group never ends the launcher first;
- the signal dispositions and mask it would inherit: git-isopatch blocks
  the forwarded signals (and SIGQUIT) while it starts bubblewrap, so that
  bubblewrap's monitor, a member of the group, survives a Ctrl-C or a
  forwarded SIGTERM meant for the command (it would otherwise die and take
  the namespace with it); the launcher unblocks exactly those in the
  command, and puts back ``SIGPIPE`` and ``SIGXFSZ``, which Python ignores,
  to their default, as :class:`subprocess.Popen` does;
- the environment as given (Python's C locale coercion, PEP 538, would
  add ``LC_CTYPE``: the launcher is told its original value);
- the seccomp filter bubblewrap installs before it runs the launcher;
- ``PATH`` looked up as :class:`subprocess.Popen` does (``os.execvpe``).

The command cannot speak for it: as the namespace's init the kernel keeps
the namespace's signals from it (``SIGSTOP`` and ``SIGKILL`` included),
and it makes itself not dumpable (``PR_SET_DUMPABLE``, through
``_ctypes``: ``ctypes`` costs some 5 ms more), so that its socket, its
memory and ``ptrace`` are out of the command's reach through ``/proc``;
the socket is never inherited.  Only a status some process can end with
is taken.

It runs on this interpreter, isolated (``-I -S``: no site, no user
variables), on ``_signal`` and ``_socket`` (``signal`` and ``socket``
would import ``enum``: some 5 ms); its cost is measured in
``bench/README.md``.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

#: Signals git-isopatch blocks while it starts bubblewrap: the ones it
#: forwards and the ones a terminal sends to the foreground group.
BLOCKED_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)

#: The counters of a network namespace (``/proc/net/snmp``, ``snmp6``,
#: named ``<table>:<field>`` or as ``snmp6`` names them) that count what its
#: network refused: with only a loopback interface, every other address
#: has no route; a loopback UDP port nobody listens on; a refused TCP
#: connection.  The launcher's program holds the same set.
NETWORK_REFUSALS = frozenset(
    {b"Ip:OutNoRoutes", b"Udp:NoPorts", b"Tcp:AttemptFails", b"Ip6OutNoRoutes", b"Udp6NoPorts"}
)

#: The launcher's program: ``-c`` argv is ``fd err ctype signals bounds
#: argv...`` (no ``argv``: it only serves); ``err``, when not ``-``, is the
#: descriptor it makes its standard error, and the command's, first of all
#: (bubblewrap's own is git-isopatch's pipe).
PROGRAM = """\
import _signal as signal, _socket, marshal, os, select, sys
fd, err, ctype, sigs, bounds, *argv = sys.argv[1:]
if err != "-":
    os.dup2(int(err), 2)
    os.close(int(err))
try:
    import _ctypes
    _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None), "prctl"), (4, 0, 0, 0, 0))
except (ImportError, AttributeError):
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
NET = @NET@
if bounds != "-":
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
fd = int(fd)
os.set_inheritable(fd, False)
control = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
env = dict(os.environ)
if ctype == "-":
    env.pop("LC_CTYPE", None)
else:
    env["LC_CTYPE"] = ctype[1:]
inherited = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
unblocked = inherited - {int(s) for s in sigs.split(",") if s}

def kill_all():
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return

def receive(size, ancillary=0):
    data, fds = b"", []
    while len(data) < size:
        got, anc, _, _ = control.recvmsg(size - len(data), ancillary)
        for level, kind, raw in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                step = range(0, len(raw) - 3, 4)
                fds += [int.from_bytes(raw[i:i + 4], sys.byteorder) for i in step]
        if not got:
            for f in fds:
                os.close(f)
            kill_all()
            os._exit(0)
        data, ancillary = data + got, 0
    return data, fds

def frame():
    head, fds = receive(5, _socket.CMSG_SPACE(64))
    size = int.from_bytes(head[1:], "big")
    return head[:1], receive(size)[0] if size else b"", fds

def wait_for(pid):
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    try:
        while True:
            ready = [f for f, _ in poller.poll(1000)]
            while True:
                try:
                    done, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    done = 0
                if done == pid:
                    return status
                if done == 0:
                    break
            if fd in ready:
                kind, _, fds = frame()
                for f in fds:
                    os.close(f)
                if kind == b"k":
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except OSError:
                        pass
    finally:
        os.close(pidfd)

def start(run, mask, setup=None):
    pid = os.fork()
    if pid:
        return pid
    code = 126
    try:
        if setup is not None:
            setup()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        run()
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        os.write(fd, b"exec %d\\n" % (exc.errno or 0))
    finally:
        os._exit(code)

def refused():
    tried = 0
    for name in ("/proc/net/snmp", "/proc/net/snmp6"):
        try:
            with open(name, "rb") as handle:
                rows = [row.split() for row in handle.read().splitlines()]
            for row, values in zip(rows, rows[1:]):
                if row[:1] == values[:1] and len(row) == len(values):
                    pairs = zip([row[0] + key for key in row[1:]], values[1:])
                    tried += sum(int(v) for k, v in pairs if k in NET and v.isdigit())
            tried += sum(int(r[1]) for r in rows if len(r) == 2 and r[0] in NET and r[1].isdigit())
        except Exception:
            pass
    return tried

def report(pid, counted=False):
    status = wait_for(pid)
    said = b"net %d\\n" % refused() if counted else b""
    kill_all()
    os.write(fd, said + b"wait %d\\n" % status)

if argv:
    report(start(lambda: os.execvpe(argv[0], argv, env), unblocked), counted=True)
while True:
    kind, payload, fds = frame()
    if kind != b"r" or len(fds) != 3:
        for f in fds:
            os.close(f)
        continue
    path, args, environ, cwd = marshal.loads(payload)

    def setup():
        os.setsid()
        for target, source in enumerate(fds):
            os.dup2(source, target)
        for source in fds:
            if source > 2:
                os.close(source)
        if cwd is not None:
            os.chdir(cwd)

    pid = start(lambda: os.execve(path, args, environ), set(), setup)
    for f in fds:
        os.close(f)
    report(pid)
""".replace("@NET@", repr(set(NETWORK_REFUSALS)))


def launcher_argv(
    argv: Sequence[str],
    fd: int,
    env: Mapping[str, str],
    bounds: str = "-",
    stderr: int | None = None,
) -> list[str]:
    """``argv`` run through the launcher, which reports to ``fd``; ``env``
    is the command's environment (its ``LC_CTYPE`` is passed on as is);
    ``bounds``: the cgroups to move into and the rlimits to set before the
    command starts (:meth:`.limits.Bound.launcher_spec`), ``-`` for none;
    ``stderr``: the descriptor the launcher makes its standard error (and
    the command's) in place of bubblewrap's."""
    ctype = "=" + env["LC_CTYPE"] if "LC_CTYPE" in env else "-"
    sigs = ",".join(str(int(s)) for s in BLOCKED_SIGNALS)
    python = os.path.realpath(sys.executable)
    err = "-" if stderr is None else str(stderr)
    return [python, "-I", "-S", "-c", PROGRAM, str(fd), err, ctype, sigs, bounds, *argv]


class Report(NamedTuple):
    """What the launcher said: the command's raw wait status, or the
    ``errno`` of its failed ``exec``; and how often the namespace's network
    refused to carry something (see :data:`NETWORK_REFUSALS`)."""

    wait_status: int | None = None
    exec_errno: int | None = None
    network_refusals: int = 0


@contextlib.contextmanager
def signals_blocked() -> object:
    """:data:`BLOCKED_SIGNALS` blocked in this thread for the block (a
    child started inside inherits the mask); what arrives meanwhile is
    delivered when it ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
