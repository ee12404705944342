"""The terminal while the command runs, as a shell handles a job's
(:mod:`.command`): handing it to the command's process group, taking it
back, and doing what a shell does when the job stops.  ``termios`` loads
only where there is a terminal to hand over."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import IO, Any


def terminal_fd(stdin: int | IO[bytes] | None) -> int | None:
    """The terminal to hand to the command, when we are its foreground group."""
    if stdin is not None:
        return None
    try:
        fd = sys.stdin.fileno()
        if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except (OSError, ValueError, AttributeError):
        return None
    return None


def set_foreground(tty: int, pgid: int) -> None:
    """Make ``pgid`` the terminal's foreground group (SIGTTOU ignored meanwhile)."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(tty, pgid)
    finally:
        signal.signal(signal.SIGTTOU, old)


def terminal_modes(tty: int) -> list[Any] | None:
    import termios

    try:
        return termios.tcgetattr(tty)
    except termios.error:
        return None


def _setterminal_modes(tty: int, modes: list[Any] | None) -> None:
    import termios

    if modes is not None:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(tty, termios.TCSADRAIN, modes)


def stopped(tty: int, pgid: int, own_modes: list[Any] | None) -> None:
    """The command's group stopped: do what a shell does with a stopped job.

    Take the terminal back (with the modes it had before the command ran,
    keeping the command's for later) and stop our own process group with
    ``SIGTSTP``, as Ctrl-Z would have had the terminal been ours: the
    user's shell sees its job stopped and takes the terminal.  Once the
    shell continues us, give the command the terminal again if the shell
    gave it to us (``fg``; after ``bg`` the command stays in the
    background) and continue it.  Where our group cannot stop (SIGTSTP
    ignored, an orphaned group), the command is simply continued.
    """
    job_modes = terminal_modes(tty)
    with contextlib.suppress(OSError):
        if os.tcgetpgrp(tty) == pgid:
            set_foreground(tty, os.getpgrp())
            _setterminal_modes(tty, own_modes)
    with contextlib.suppress(OSError):
        os.killpg(os.getpgrp(), signal.SIGTSTP)
    # continued
    with contextlib.suppress(OSError):
        if os.tcgetpgrp(tty) == os.getpgrp():
            _setterminal_modes(tty, job_modes)
            set_foreground(tty, pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGCONT)
