"""A process the command leaves behind (possible when it runs unconfined):
the Python of a script that forks, leaves the command's session and its
output, and says its pid, and the stop that ends it after the test."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: Python statements (``os`` and ``sys`` imported, ``pidfile`` the path of
#: the pid file): the parent exits, so that the command ends; the child
#: goes on in a session of its own, its stdin, stdout and stderr
#: ``/dev/null``, and writes its pid to ``pidfile``.
LEAVE_BEHIND = """
if os.fork():
    sys.exit(0)
os.setsid()
fd = os.open(os.devnull, os.O_RDWR)
for target in (0, 1, 2):
    os.dup2(fd, target)
with open(pidfile, "w") as handle:
    handle.write(str(os.getpid()))
"""


def leftover_script(before: str, after: str) -> str:
    """A script that runs ``before`` in the command, then leaves
    (:data:`LEAVE_BEHIND`) and runs ``after`` as the leftover."""
    return before.rstrip("\n") + "\n" + LEAVE_BEHIND.lstrip("\n") + after.lstrip("\n")


def stop_leftover(pidfile: Path, seconds: float = 10) -> None:
    """End the leftover whose pid is in ``pidfile`` (it was started by the
    test's command), waiting up to ``seconds`` for it to say its pid;
    nothing when it never did or has ended."""
    deadline = time.monotonic() + seconds
    while not (pidfile.exists() and pidfile.read_text()):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    try:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
    except (ProcessLookupError, ValueError):
        pass
