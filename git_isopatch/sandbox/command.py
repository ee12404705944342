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
import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from ..errors import IsopatchError
from ..git.stream import resume_streams, stop_streams
from .launcher import Report, signals_blocked
from .limits import watched
from .terminal import set_foreground, stopped, terminal_fd, terminal_modes

if TYPE_CHECKING:  # the sandbox modules load only for --sandbox
    from .landlock import Sandbox
    from .namespaces import Namespaces

#: Signals forwarded to the command's process group (issue: hostile environments).
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: Seconds between SIGTERM and SIGKILL when the command is stopped (on
#: ``--timeout``), and between a forwarded signal and SIGKILL when the
#: command's group does not end on it.
KILL_GRACE_SECONDS = 2.0

#: Seconds the processes the command left behind get between SIGTERM and
#: SIGKILL.
LEFTOVER_GRACE_SECONDS = 0.5

#: Exit status for an expired ``--timeout``, as timeout(1).
TIMEOUT_EXIT = 124
#: Exit statuses of a shell for "found but cannot run" and "not found".
NOT_EXECUTABLE_EXIT = 126
NOT_FOUND_EXIT = 127


class CommandOutcome(NamedTuple):
    """How the command ended.

    Attributes:
        exit_code: its exit status; ``128+N`` when a signal N ended it,
            124 on timeout, 126/127 when it could not be run.
        timed_out: the timeout expired and the group was stopped.
        received_signal: a signal git-isopatch itself received and forwarded
            (SIGINT, SIGTERM or SIGHUP), or ``None``.
        start_error: why the command could not be started, or ``None``.
        died_of: the signal the command died of (its exit status is
            ``128+N`` then), or ``None``; not set on a timeout.
        network_refused: the sandbox's network refused something the
            command sent (:data:`.launcher.NETWORK_REFUSALS`).
        limit: the sandbox's bound the command reached (:mod:`.limits`:
            ``processes``, ``memory``): it was stopped; else ``None``.
    """

    exit_code: int
    timed_out: bool = False
    received_signal: int | None = None
    start_error: str | None = None
    died_of: int | None = None
    network_refused: bool = False
    limit: str | None = None


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


def _stop_group(process: subprocess.Popen[bytes], pgid: int, grace: float) -> None:
    """SIGTERM the group, then SIGKILL whatever is left after ``grace`` seconds.

    The leader is reaped while we wait (``poll``): an unreaped leader is a
    zombie that still counts as a member of its group.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        process.poll()
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _reap_leftovers(process: subprocess.Popen[bytes], pgid: int) -> None:
    """Stop processes the command left behind in its group (background jobs,
    daemons that did not start a session of their own): the worktree they
    stand in is about to go, and a process still writing there would race
    with the extraction of the patch."""
    if _group_alive(pgid):
        _stop_group(process, pgid, LEFTOVER_GRACE_SECONDS)


def _wait(
    process: subprocess.Popen[bytes],
    tty: int | None,
    timeout: float | None,
    own_modes: list[Any] | None,
) -> int | None:
    """Wait for the command's leader to end; its exit status, or ``None``
    when ``timeout`` seconds passed first.  On a terminal, a stop of the
    command is handled as a shell does (:func:`.terminal.stopped`)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    flags = os.WEXITED | os.WNOWAIT | (os.WSTOPPED if tty is not None else 0)
    delay = 0.0005
    while True:
        info = os.waitid(os.P_PID, process.pid, flags | (os.WNOHANG if deadline else 0))
        if info is None:  # WNOHANG: still running
            left = deadline - time.monotonic() if deadline is not None else 0.0
            if left <= 0:
                return None
            delay = min(delay * 2, left, 0.05)
            time.sleep(delay)
            continue
        if info.si_code in (os.CLD_STOPPED, os.CLD_TRAPPED) and tty is not None:
            os.waitid(os.P_PID, process.pid, os.WSTOPPED | os.WNOHANG)  # consume the stop
            stopped(tty, process.pid, own_modes)
            continue
        return process.wait()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _deliver(state: dict[str, Any], pgid: int, signum: int) -> None:
    """Send ``signum`` to the command's group, and SIGKILL after
    :data:`KILL_GRACE_SECONDS` unless the command has ended by then (a
    command that traps or ignores it must not keep git-isopatch, and the
    worktree, waiting for ever)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
        os.killpg(pgid, signal.SIGCONT)  # a stopped command acts on it only when continued
    if state.get("escalation") is None:
        timer = threading.Timer(KILL_GRACE_SECONDS, _kill_group, args=(pgid,))
        timer.daemon = True
        state["escalation"] = timer
        timer.start()


@contextlib.contextmanager
def forward_signals(state: dict[str, Any]) -> Iterator[None]:
    """Forward SIGINT/SIGTERM/SIGHUP to the command's group while it runs,
    and record the first one in ``state["received"]`` for the whole block.

    Capture holds this around the command, the extraction and the clean-up,
    so a signal never interrupts them half-way (git itself runs in process
    groups of its own, see :func:`git_isopatch.git.run.run_git`, so that a
    Ctrl-C on the terminal does not reach it); it ends the run with
    ``128+N`` afterwards.  A command that does not end on the signal is
    killed after :data:`KILL_GRACE_SECONDS`.  Only the main thread can
    install handlers; elsewhere this does nothing.  One ignored (``nohup``'s
    SIGHUP, a script's background job's SIGINT) stays so, as a shell keeps it.

    It takes over from the SIGINT handler it replaces: when that one
    holds a SIGINT in its ``received`` (the executable's handler,
    :mod:`git_isopatch.entry`; the run gets here after one only when a
    finaliser swallowed its ``KeyboardInterrupt``), the SIGINT is raised
    here as ``KeyboardInterrupt``, before the block begins: a Ctrl-C that
    came before the run stops it before anything is made.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        if state.get("received") is None:
            state["received"] = signum
        pgid = state.get("pgid")
        if pgid is not None:
            _deliver(state, pgid, signum)
        if state.get("streams_stopped") is None:  # an extraction ends soon, not when git is done
            state["streams_stopped"] = True
            stop_streams(after=KILL_GRACE_SECONDS)

    obeyed = [sig for sig in FORWARDED_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, handler) for sig in obeyed}
    try:
        if getattr(previous.get(signal.SIGINT), "received", None) is not None:
            raise KeyboardInterrupt
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        resume_streams()


def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdout: int | IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
    timeout: float | None = None,
    signal_state: dict[str, Any] | None = None,
    sandbox: Sandbox | Namespaces | None = None,
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
        sandbox: a :class:`.landlock.Sandbox` confines the command in the
            child between fork and exec (the caller closes it); a
            :class:`.namespaces.Namespaces` runs it through bubblewrap, and
            when this returns every process it started has ended.

    Returns:
        A :class:`CommandOutcome`.  Never raises for a command that cannot
        be started: 127 (not found) or 126 (not executable) is returned.

    Raises:
        IsopatchError: ``sandbox-unavailable``: the sandbox could not be
            entered or set up; the command did not run (bubblewrap's own
            words in the message when its stderr is a file).
    """
    state = signal_state if signal_state is not None else {}
    state.setdefault("received", None)
    state["pgid"] = None
    if state["received"] is not None:  # stopped before it started
        return CommandOutcome(128 + state["received"], received_signal=state["received"])
    streams = (stdout, stderr)
    if sandbox is None or not hasattr(sandbox, "wrap"):
        preexec = sandbox.confine if sandbox is not None else None  # type: ignore[union-attr]
        return _run(argv, _Launch(list(argv), preexec=preexec), cwd, env, streams, timeout, state)
    with sandbox.wrap(argv, cwd=cwd, env=env) as wrapped:
        launch = _Launch(
            wrapped.argv,
            wrapped.pass_fds,
            spawned=wrapped.spawned,
            blocked=True,
            ended=lambda: bool(wrapped.finish() is not None and wrapped.gone),
        )
        with watched(getattr(sandbox, "bounds", None), state):
            outcome = _run(argv, launch, cwd, env, streams, timeout, state)
            status = wrapped.finish()
    if state.get("limit") is not None:
        outcome = outcome._replace(limit=state.pop("limit"))
    if wrapped.report is not None:
        return _reported(argv, outcome, wrapped.report)
    set_up = "exit-code" in status or outcome.start_error is not None or outcome.exit_code <= 0
    stopped = outcome.timed_out or outcome.limit is not None
    if not set_up and not stopped and state["received"] is None:
        from .availability import forget
        from .bwrap import last_words, unavailable

        forget()  # a kept answer that said bubblewrap works is wrong now
        said = last_words(stderr)
        raise unavailable(
            f"bubblewrap could not set up the sandbox for '{argv[0]}'"
            + (f": {said}" if said else " (see its 'bwrap:' message)")
        )
    return outcome


def _reported(argv: Sequence[str], outcome: CommandOutcome, report: Report) -> CommandOutcome:
    """``outcome`` (of bubblewrap) told as the launcher saw the command
    end: what :func:`_run` tells of a command it started itself."""
    outcome = outcome._replace(network_refused=report.network_refusals > 0)
    if outcome.timed_out:
        return outcome
    if report.exec_errno is not None:
        code = NOT_FOUND_EXIT if report.exec_errno == errno.ENOENT else NOT_EXECUTABLE_EXIT
        why = f"cannot run '{argv[0]}': {os.strerror(report.exec_errno)}"
        return outcome._replace(exit_code=code, start_error=why, died_of=None)
    returncode = os.waitstatus_to_exitcode(report.wait_status or 0)
    if returncode < 0:
        return outcome._replace(exit_code=128 - returncode, died_of=-returncode)
    return outcome._replace(exit_code=returncode, died_of=None)


class _Launch(NamedTuple):
    """What :func:`_run` starts: the argument list, the descriptors the
    child inherits, what it runs between fork and exec, and what to do
    once it has started."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    preexec: Callable[[], None] | None = None
    spawned: Callable[[], None] | None = None
    #: Started with :data:`.launcher.BLOCKED_SIGNALS` blocked (bubblewrap's
    #: monitor must outlive a signal meant for the command).
    blocked: bool = False
    #: Run once it has ended; true when nothing it started can be left
    #: (its PID namespace is gone), so none is looked for.
    ended: Callable[[], bool] | None = None


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
                preexec_fn=launch.preexec,
            )
    except subprocess.SubprocessError as exc:  # only preexec_fn raises it
        from .landlock import UNAVAILABLE

        raise IsopatchError(
            UNAVAILABLE, f"--sandbox is not available: could not confine '{argv[0]}': {exc}"
        ) from None
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
        launch.spawned()
    if tty is not None:
        # Hand the terminal to the command's group, as a shell does; a read it
        # made before this stopped it (SIGTTIN), so let it go on.
        set_foreground(tty, process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGCONT)
    pgid = process.pid
    state["pgid"] = pgid
    if state["received"] is not None:  # a signal arrived while starting
        _deliver(state, pgid, state["received"])
    timed_out = False
    try:
        returncode = _wait(process, tty, timeout, own_modes)
        if returncode is None:
            timed_out = True
            _stop_group(process, pgid, KILL_GRACE_SECONDS)
            returncode = process.wait()
        if launch.ended is None or not launch.ended():
            _reap_leftovers(process, pgid)
    finally:
        state["pgid"] = None
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
