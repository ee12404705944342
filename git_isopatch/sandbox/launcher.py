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
command could not be run, a fork refused included (:meth:`.pidns.Wrapped.command_ended`
reads it).  A launcher that ends before it said so (killed from outside
the namespace, or by the kernel) fails the run: bubblewrap's status is
then its own, never the command's (:class:`.command_outcome.LauncherLost`).  A ``k`` frame on the
socket while the command runs kills them all at once (a ``--timeout``,
or a command that outlives a forwarded signal's grace: SIGKILL to the
group would end bubblewrap too).

After that it serves: each ``r`` frame (:mod:`.inside`) is an argument
list, an environment and a folder, with three descriptors (``SCM_RIGHTS``)
for the program's standard input, output and error; the launcher starts it
in a session of its own (no controlling terminal, every signal unblocked),
waits for it (a ``k`` frame kills it and everything else), ends what it
left, and answers ``wait <status>``.  When git-isopatch closes its end (for
writing), the launcher ends everything and says ``gone`` once every other
process of the namespace is reaped; when git-isopatch has closed its end
whole, it exits, and the namespaces with it (the kernel unmounts their
file systems as the launcher exits: on a disk, each copy-on-write layer's
file system is synced first, so git-isopatch removes what it made for the
run before, and none of it is written).

``net <n>`` counts what the namespace's network refused until the command
ended, from the kernel's own counters of that namespace (``/proc/net/snmp``
and ``snmp6``, :data:`.launcher_main.NETWORK_REFUSALS`): a packet for an address no route
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
- the seccomp filter bubblewrap installs before it runs the launcher, and
  one that hands its renames to the launcher (:mod:`.renames`), so that a
  folder the copy-on-write layers cannot rename renames as unconfined;
- ``PATH`` looked up as :class:`subprocess.Popen` does (``os.execvpe``).

The command cannot speak for it: as the namespace's init the kernel keeps
the namespace's signals from it (``SIGSTOP`` and ``SIGKILL`` included),
and it makes itself not dumpable (``PR_SET_DUMPABLE``, through
``_ctypes``: ``ctypes`` costs some 5 ms more), so that its socket, its
memory and ``ptrace`` are out of the command's reach through ``/proc``;
the socket is never inherited.  Only a status some process can end with
is taken.

Its program is :mod:`.launcher_main`, whose code git-isopatch hands it
with :mod:`.renames`'s (:data:`MAIN`, through a pipe), run on this
interpreter, isolated (``-I -S``: no site, no user variables), on
``_signal`` and ``_socket`` (``signal`` and ``socket`` would import
``enum``: some 5 ms); its cost is measured in ``bench/README.md``.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import marshal
import os
import signal
import sys
from collections.abc import Mapping, Sequence

from ..git.record import Record

#: bubblewrap's options keeping the launcher's capabilities, for our own
#: git's view (:func:`.launcher_main.own_view`); it drops them before it
#: starts anything.
CAPABILITIES = ("--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP")

#: Signals git-isopatch blocks while it starts bubblewrap: the ones it
#: forwards and the ones a terminal sends to the foreground group.
BLOCKED_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)


def launcher_argv(
    argv: Sequence[str],
    fd: int,
    env: Mapping[str, str],
    bounds: str = "-",
    stderr: int | None = None,
    program: int = -1,
    view: str = "-",
) -> list[str]:
    """``argv`` run through the launcher, which reports to ``fd``; ``env``
    is the command's environment (its ``LC_CTYPE`` is passed on as is);
    ``bounds``: the cgroups to move into and the rlimits to set before the
    command starts (:meth:`.limits.Bound.launcher_spec`), ``-`` for none;
    ``stderr``: the descriptor the launcher makes its standard error (and
    the command's) in place of bubblewrap's; ``program``: the descriptor
    it reads its program from (a pipe holding :func:`launcher_program`);
    ``view``: our own git's (:meth:`.global_config.GlobalConfig.view`),
    ``-`` for none."""
    ctype = "=" + env["LC_CTYPE"] if "LC_CTYPE" in env else "-"
    sigs = ",".join(str(int(s)) for s in BLOCKED_SIGNALS)
    python = os.path.realpath(sys.executable)
    err = "-" if stderr is None else str(stderr)
    head = [python, "-I", "-S", "-c", MAIN, str(program)]
    return [*head, str(fd), err, ctype, sigs, bounds, view, *argv]


#: What the launcher runs: the code of :mod:`.launcher_main`, read from
#: the descriptor its first argument names (:func:`launcher_program`),
#: then :func:`main <.launcher_main.main>` called with what supervises the
#: command's renames.  It looks up no file
#: for it: a module found by name inside the sandbox could be the
#: command's (a package installed in a cache folder, whose layer the next
#: run mounts again), or missing (a package under ``/dev/shm`` or
#: ``/run``, folders the sandbox replaces).  Not in an argument: the
#: interpreter decodes every argument as it starts (some 2 ms for this
#: one, in hexadecimal).
MAIN = (
    "import marshal, os, sys; fd = int(sys.argv[1]); "
    "code, renames = marshal.loads(os.read(fd, 1 << 20)); exec(code); os.close(fd); "
    "main(sys.argv[2:], renames)"
)


@functools.cache
def launcher_program() -> bytes:
    """:mod:`.launcher_main`'s code, and :mod:`.folder_move`'s and
    :mod:`.renames`'s with the filter and calls of
    :func:`.seccomp.rename_supervision` (``None`` on
    a machine it does not know), marshalled: read here, outside the
    sandbox, by the package's own loader from their compiled files (which
    the loader writes when missing or stale, as an import does), where a
    ``-c`` program would be compiled every time."""
    from .seccomp import rename_supervision

    codes = []
    for name in ("launcher_main", "folder_move", "renames"):
        spec = importlib.util.find_spec(f"{__package__}.{name}")
        codes.append(spec.loader.get_code(spec.name))
    try:
        renames = (tuple(codes[1:]), *rename_supervision())
    except KeyError:
        renames = None
    return marshal.dumps((codes[0], renames))


class Report(Record):
    """What the launcher said: the command's raw wait status, or the
    ``errno`` of its failed ``exec``; and how often the namespace's network
    refused to carry something (see :data:`.launcher_main.NETWORK_REFUSALS`)."""

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
