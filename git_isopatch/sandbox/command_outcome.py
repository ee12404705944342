"""How the user's command ended (:class:`CommandOutcome`), and, run through
the launcher (:mod:`.launcher`), as the launcher told it, or why that cannot
be told (bubblewrap could not set the namespaces up; the launcher ended
before it said).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import IsopatchError, sandbox_failed, unavailable
from ..git.record import Record

if TYPE_CHECKING:
    from .launcher import Report
    from .pidns import Wrapped

#: Exit statuses of a shell for "found but cannot run" and "not found".
NOT_EXECUTABLE_EXIT = 126
NOT_FOUND_EXIT = 127


class CommandOutcome(Record):
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
            command sent (:data:`.launcher_main.NETWORK_REFUSALS`).
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


def told(
    argv: Sequence[str],
    outcome: CommandOutcome,
    wrapped: Wrapped,
    status: dict[str, int],
    received: int | None,
) -> CommandOutcome:
    """``outcome`` (bubblewrap's, with bubblewrap's JSON ``status``) told
    as the launcher saw the command end; as it is when nothing was to be
    told (a timeout, a bound reached, a signal ``received``, no launcher).

    Raises:
        SetUpFailed: bubblewrap could not set up the namespaces.
        LauncherLost: the launcher ended before it said how the command ended.
    """
    if wrapped.report is not None:
        return _reported(argv, outcome, wrapped.report)
    set_up = "exit-code" in status or outcome.start_error is not None or outcome.exit_code <= 0
    stopped = outcome.timed_out or outcome.limit is not None
    if not set_up and not stopped and received is None:
        from .availability import forget

        forget()  # a kept answer that said bubblewrap works is wrong now
        said = wrapped.said()
        raise SetUpFailed(argv[0], said if said or wrapped.stderr is not None else "")
    if wrapped.launched and not stopped and received is None:
        raise LauncherLost(argv[0], status.get("exit-code"), wrapped.said())
    return outcome


class SetUpFailed(IsopatchError):
    """``sandbox-unavailable``: bubblewrap could not set up the namespaces;
    the command did not run (so it may be launched again)."""

    def __init__(self, program: str, said: str | None) -> None:
        """``said``: bubblewrap's words; ``""`` when they went to the
        command's standard error."""
        why = f": {said}" if said else " (see its 'bwrap:' message)" if said == "" else ""
        failure = unavailable(f"bubblewrap could not set up the sandbox for '{program}'{why}")
        super().__init__(failure.code, failure.message, hint=failure.hint)


class LauncherLost(IsopatchError):
    """``sandbox-failed``: the launcher ended before it said how the
    command ended, so bubblewrap's exit status is the launcher's, not the
    command's (:mod:`.launcher`): no exit code can be told, and the run
    fails rather than pass that one off as the command's."""

    def __init__(self, program: str, status: int | None, said: str | None) -> None:
        """``status``: bubblewrap's (``128+N``: a signal N ended the
        launcher); ``said``: bubblewrap's last words, if any."""
        if status is not None and status > 128 and status - 128 < signal.NSIG:
            how = f"killed by {_signal_name(status - 128)}"
        elif status is not None:
            how = f"exit status {status}"
        else:
            how = "no exit status"
        why = f"; bubblewrap said: {said}" if said else ""
        failure = sandbox_failed(
            f"its launcher ended ({how}) before it said how '{program}' ended{why}"
        )
        super().__init__(failure.code, failure.message, hint=failure.hint)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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
