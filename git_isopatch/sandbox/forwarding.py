"""The signals git-isopatch forwards to the command's process group while
a run lasts (:func:`forward_signals`), and the end of a command that does
not stop on one (:func:`deliver`).

Layering: knows nothing of the command line or of git, but stops its
streams (:func:`..git.stream.stop_streams`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ..git.stream import resume_streams, stop_streams

#: Signals forwarded to the command's process group (issue: hostile environments).
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: Seconds between SIGTERM and SIGKILL when the command is stopped (on
#: ``--timeout``), and between a forwarded signal and SIGKILL when the
#: command's group does not end on it.
KILL_GRACE_SECONDS = 2.0


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def deliver(state: dict[str, Any], pgid: int, signum: int) -> None:
    """Send ``signum`` to the command's group, and end it (``state["kill"]``,
    else SIGKILL to the group) after :data:`KILL_GRACE_SECONDS` unless the
    command has ended by then (a command that traps or ignores it must not
    keep git-isopatch, and the worktree, waiting for ever)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
        os.killpg(pgid, signal.SIGCONT)  # a stopped command acts on it only when continued
    if state.get("escalation") is None:
        kill = state.get("kill") or kill_group
        timer = threading.Timer(KILL_GRACE_SECONDS, kill, args=(pgid,))
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
            deliver(state, pgid, signum)
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
