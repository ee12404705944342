"""Run the user's command in its own process group (design: procedure step 4).

The command runs as an argument list, never through a shell.  It gets a
process group of its own so that a timeout or a signal reaches every process
it started; in a terminal the group is made the foreground one, so that the
command can read the terminal and Ctrl-C reaches it as it would from a shell.

Job control is a shell's: when the command stops (Ctrl-Z, a ``SIGSTOP``),
git-isopatch takes the terminal back and stops its own process group, so
that the user's shell sees the job stopped and gets its terminal; when the
shell continues the job (``fg``, ``bg``), the command gets the terminal
again (in the foreground) and ``SIGCONT``.  A signal forwarded to a
stopped command is followed by ``SIGCONT`` so that it is acted on: a
shell sends ``SIGHUP`` and ``SIGCONT`` to its stopped jobs when its
terminal goes, and the run then ends.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from ..git.record import Record
from .command_outcome import NOT_EXECUTABLE_EXIT, NOT_FOUND_EXIT, told
from .command_outcome import CommandOutcome as CommandOutcome
from .forwarding import FORWARDED_SIGNALS as FORWARDED_SIGNALS
from .forwarding import KILL_GRACE_SECONDS, deliver, kill_group
from .forwarding import forward_signals as forward_signals
from .launcher import signals_blocked
from .limits import watched
from .terminal import set_foreground, stopped, terminal_fd, terminal_modes

if TYPE_CHECKING:  # the sandbox modules load only for --sandbox
    from .pidns import Wrapped

#: Seconds the processes the command left behind get between SIGTERM and
#: SIGKILL.
LEFTOVER_GRACE_SECONDS = 0.5

#: Exit status for an expired ``--timeout``, as timeout(1).
TIMEOUT_EXIT = 124


def _group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` still runs.

    A zombie does not count: it has ended, and it stays a member of its
    group only until its parent reaps it, which may never happen (PID 1 in
    a container without an init, or a subreaper that does not wait, takes
    the orphans of a killed shell).  ``kill(-pgid, 0)`` succeeds for
    zombies too, so the members are read from ``/proc/<pid>/stat`` (proc(5):
    state, field 3; process group, field 5); ``kill`` decides where
    ``/proc`` cannot be read."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in b"ZXx":
            return True
    return False


def _stop_group(process: subprocess.Popen[bytes], pgid: int, grace: float, launch: _Launch) -> None:
    """SIGTERM the group, then end whatever is left after ``grace`` seconds
    (:meth:`_Launch.kill`).

    The leader is reaped while we wait (``poll``): an unreaped leader is a
    zombie that still counts as a member of its group.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not launch.alive(process, pgid):
            return
        time.sleep(0.02)
    launch.kill(pgid)


def _reap_leftovers(process: subprocess.Popen[bytes], pgid: int, launch: _Launch) -> None:
    """Stop processes the command left behind in its group (background jobs,
    daemons that did not start a session of their own): the worktree they
    stand in is about to go, and a process still writing there would race
    with the extraction of the patch."""
    if _group_alive(pgid):
        _stop_group(process, pgid, LEFTOVER_GRACE_SECONDS, launch)


#: What :func:`_wait` returns when the launcher said the command ended
#: (bubblewrap goes on: its namespaces serve git-isopatch's own git).
ENDED = 0

#: Seconds between two looks for a stop of bubblewrap while the launcher
#: is listened to on a terminal (job control).
STOP_LOOK_SECONDS = 0.05

#: Seconds between two looks for a launcher that does not end everything
#: as told (:attr:`_Launch.silent`): a kill may come from another thread.
SILENT_LOOK_SECONDS = 1.0


def _wait(
    process: subprocess.Popen[bytes],
    tty: int | None,
    timeout: float | None,
    own_modes: list[Any] | None,
    launch: _Launch,
) -> int | None:
    """Wait for the command's leader to end, or the launcher to say that
    the command ended (:attr:`_Launch.reported`: :data:`ENDED`); its exit
    status, or ``None`` when ``timeout`` seconds passed first.  On a
    terminal, a stop of the command is handled as a shell does
    (:func:`.terminal.stopped`)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if launch.meanwhile is not None:
        launch.meanwhile()
    flags = os.WEXITED | os.WNOWAIT | (os.WSTOPPED if tty is not None else 0)
    delay = 0.0005
    heard = _Listening(process, launch) if launch.reported is not None else None
    try:
        while True:
            nohang = os.WNOHANG if deadline is not None or heard is not None else 0
            info = os.waitid(os.P_PID, process.pid, flags | nohang)
            if info is None:  # WNOHANG: still running
                if heard is not None and heard.said():
                    return ENDED
                if launch.silent is not None and launch.silent():
                    process.kill()
                left = deadline - time.monotonic() if deadline is not None else None
                if left is not None and left <= 0:
                    return None
                if heard is not None:
                    look = STOP_LOOK_SECONDS if tty is not None else SILENT_LOOK_SECONDS
                    heard.listen(left, look)
                    continue
                delay = min(delay * 2, left or 0.05, 0.05)
                time.sleep(delay)
                continue
            if info.si_code in (os.CLD_STOPPED, os.CLD_TRAPPED) and tty is not None:
                os.waitid(os.P_PID, process.pid, os.WSTOPPED | os.WNOHANG)  # consume the stop
                stopped(tty, process.pid, own_modes)
                continue
            return process.wait()
    finally:
        if heard is not None:
            heard.close()


class _Listening:
    """The launcher's descriptor and bubblewrap's pidfd, waited on together."""

    def __init__(self, process: subprocess.Popen[bytes], launch: _Launch) -> None:
        self.launch = launch
        self.pidfd = os.pidfd_open(process.pid)
        self.poller = select.poll()
        self.poller.register(self.pidfd, select.POLLIN)
        if launch.listened is not None:
            self.poller.register(launch.listened, select.POLLIN)

    def said(self) -> bool:
        return bool(self.launch.reported and self.launch.reported())

    def listen(self, left: float | None, tick: float | None) -> None:
        waits = [w for w in (left, tick) if w is not None]
        self.poller.poll(int(min(waits) * 1000) + 1 if waits else None)

    def close(self) -> None:
        os.close(self.pidfd)


def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdout: int | IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
    timeout: float | None = None,
    signal_state: dict[str, Any] | None = None,
    sandbox: Wrapped | None = None,
) -> CommandOutcome:
    """Run ``argv`` in ``cwd`` in a new process group and wait for it.

    Args:
        argv: program and arguments; the program is looked up on ``PATH``
            (a name with ``/`` is taken relative to ``cwd``).
        cwd: working directory (a folder of the worktree).
        env: the command's environment.
        stdout, stderr: as for :class:`subprocess.Popen`; ``None`` inherits
            ours (and, in a terminal, hands the terminal over: stdin is
            always ours).
        timeout: seconds before the group gets SIGTERM, then SIGKILL after
            :data:`KILL_GRACE_SECONDS`; ``None`` waits for ever.
        signal_state: a dict the caller keeps; ``"received"`` is set to a
            forwarded signal number.  It is also honoured afterwards, so a
            signal that arrives during extraction is not lost; one that
            arrived before the command started means it is not started.
        sandbox: the command's spawn in the namespaces
            (:meth:`.namespaces.Namespaces.launch`, the caller closes it):
            when this returns every process it started has ended, and the
            namespaces may still serve (:meth:`.pidns.Wrapped.serving`).

    Returns:
        A :class:`CommandOutcome`.  Never raises for a command that cannot
        be started: 127 (not found) or 126 (not executable) is returned.

    Raises:
        IsopatchError: ``sandbox-unavailable``: the sandbox could not be
            set up; the command did not run (bubblewrap's own words in the
            message when its stderr is a file).  ``sandbox-failed``: the
            launcher ended without saying how the command ended
            (:class:`.command_outcome.LauncherLost`).
    """
    state = signal_state if signal_state is not None else {}
    state.setdefault("received", None)
    state["pgid"] = None
    if state["received"] is not None:  # stopped before it started
        return CommandOutcome(128 + state["received"], received_signal=state["received"])
    streams = (stdout, stderr)
    if sandbox is None:
        return _run(argv, _Launch(list(argv)), cwd, env, streams, timeout, state)
    wrapped = sandbox
    if wrapped.stderr is not None:  # the command's own went to the launcher
        streams = (stdout, wrapped.stderr)
    launch = _Launch(
        wrapped.argv,
        wrapped.pass_fds,
        spawned=wrapped.spawned,
        blocked=True,
        ended=lambda: bool(wrapped.finish() is not None and wrapped.gone),
        reported=wrapped.command_ended,
        listened=wrapped.watched,
        end_all=wrapped.kill_all,
        silent=wrapped.silent,
        meanwhile=wrapped.meanwhile,
    )
    with watched(wrapped.bounds, state):
        outcome = _run(argv, launch, cwd, env, streams, timeout, state)
        status = wrapped.finish()
    if state.get("limit") is not None:
        outcome = outcome._replace(limit=state.pop("limit"))
    return told(argv, outcome, wrapped, status, state["received"])


class _Launch(Record):
    """What :func:`_run` starts: the argument list, the descriptors the
    child inherits, and what to do once it has started."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    spawned: Callable[[subprocess.Popen[bytes]], None] | None = None
    #: Started with :data:`.launcher.BLOCKED_SIGNALS` blocked (bubblewrap's
    #: monitor must outlive a signal meant for the command).
    blocked: bool = False
    #: Run once it has ended; true when nothing it started can be left
    #: (its PID namespace is gone), so none is looked for.
    ended: Callable[[], bool] | None = None
    #: True once the launcher said the command ended (read without
    #: waiting), and the descriptor readable when it speaks.
    reported: Callable[[], bool] | None = None
    listened: int | None = None
    #: Ends the command and everything it started at once (in place of
    #: SIGKILL to its group, which would end bubblewrap too).
    end_all: Callable[[], None] | None = None
    #: True when :attr:`end_all` has not ended them in time: bubblewrap is
    #: killed, and its namespaces with it.
    silent: Callable[[], bool] | None = None
    #: Called once it has started, before it is waited for.
    meanwhile: Callable[[], None] | None = None

    def alive(self, process: subprocess.Popen[bytes], pgid: int) -> bool:
        """The command (or what it started) may still run."""
        if self.reported is not None:
            return not self.reported() and process.poll() is None
        process.poll()
        return _group_alive(pgid)

    def kill(self, pgid: int) -> None:
        if self.end_all is not None:
            self.end_all()
        else:
            kill_group(pgid)


def _start(
    argv: Sequence[str],
    launch: _Launch,
    cwd: str,
    env: Mapping[str, str],
    streams: tuple[int | IO[bytes] | None, int | IO[bytes] | None],
    state: dict[str, Any],
) -> subprocess.Popen[bytes] | CommandOutcome:
    """``launch`` started in its own process group, or why it could not be."""
    blocked = signals_blocked() if launch.blocked else contextlib.nullcontext()
    try:
        with blocked:
            return subprocess.Popen(
                launch.argv,
                pass_fds=launch.pass_fds,
                cwd=cwd,
                env=dict(env),
                stdout=streams[0],
                stderr=streams[1],
                process_group=0,
            )
    except OSError as exc:  # ENOENT; EACCES, ENOEXEC, EISDIR...
        code = NOT_FOUND_EXIT if isinstance(exc, FileNotFoundError) else NOT_EXECUTABLE_EXIT
        return CommandOutcome(
            code,
            start_error=f"cannot run '{argv[0]}': {exc.strerror}",
            received_signal=state["received"],
        )


def _run(
    argv: Sequence[str],
    launch: _Launch,
    cwd: str,
    env: Mapping[str, str],
    streams: tuple[int | IO[bytes] | None, int | IO[bytes] | None],
    timeout: float | None,
    state: dict[str, Any],
) -> CommandOutcome:
    """:func:`run_command` once it is known what to start (``launch``)."""
    tty = terminal_fd(None)
    own_modes = terminal_modes(tty) if tty is not None else None
    process = _start(argv, launch, cwd, env, streams, state)
    if isinstance(process, CommandOutcome):
        return process
    if launch.spawned is not None:
        launch.spawned(process)
    if tty is not None:
        # Hand the terminal to the command's group, as a shell does; a read it
        # made before this stopped it (SIGTTIN), so let it go on.
        set_foreground(tty, process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGCONT)
    pgid = process.pid
    state["pgid"] = pgid
    if launch.end_all is not None:
        state["kill"] = lambda _pgid: launch.kill(pgid)
    if state["received"] is not None:  # a signal arrived while starting
        deliver(state, pgid, state["received"])
    timed_out = False
    try:
        returncode = _wait(process, tty, timeout, own_modes, launch)
        if returncode is None:
            timed_out = True
            _stop_group(process, pgid, KILL_GRACE_SECONDS, launch)
            served = launch.reported is not None  # bwrap goes on: the launcher reports
            returncode = _wait(process, None, None, None, launch) if served else process.wait()
        if launch.ended is None or not launch.ended():
            _reap_leftovers(process, pgid, launch)
    finally:
        state["pgid"] = None
        state.pop("kill", None)
        escalation = state.pop("escalation", None)
        if escalation is not None:
            escalation.cancel()
        if tty is not None:
            set_foreground(tty, os.getpgrp())
    if timed_out:
        exit_code = TIMEOUT_EXIT
    elif returncode < 0:
        exit_code = 128 - returncode
    else:
        exit_code = returncode
    return CommandOutcome(
        exit_code,
        timed_out=timed_out,
        received_signal=state["received"],
        died_of=-returncode if returncode < 0 and not timed_out else None,
    )
