"""A job-control shell on a pseudo-terminal, as small as it goes, and the
``session_for`` fixture that runs git-isopatch as its job: for the tests of
job control, unconfined and through the sandbox."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import termios
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH

#: A shell's job control, as small as it goes: run argv as a job in a
#: process group of its own in the foreground of the terminal on fd 0,
#: report when it stops or ends, take the terminal back when it stops and
#: obey the control pipe (fg, bg). On SIGHUP (its terminal went) it sends
#: SIGHUP and SIGCONT to the job, as bash does.
SHELL = r"""
import os, signal, sys
report = os.fdopen(int(os.environ.pop("SHELL_REPORT_FD")), "w", buffering=1)
control = os.fdopen(int(os.environ.pop("SHELL_CONTROL_FD")), "r")
for sig in (signal.SIGTTOU, signal.SIGTTIN, signal.SIGTSTP):
    signal.signal(sig, signal.SIG_IGN)
job = None
def hangup(_signum, _frame):
    os.killpg(job, signal.SIGHUP)
    os.killpg(job, signal.SIGCONT)
signal.signal(signal.SIGHUP, hangup)
job = os.fork()
if job == 0:
    report.close()
    control.close()
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpid())
    for sig in (signal.SIGTTOU, signal.SIGTTIN, signal.SIGTSTP, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    os.execv(sys.argv[1], sys.argv[1:])
try:
    os.setpgid(job, job)
except OSError:
    pass
os.tcsetpgrp(0, job)
report.write(f"job {job}\n")
while True:
    _, status = os.waitpid(job, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        foreground = "job" if os.tcgetpgrp(0) == job else "other"
        os.tcsetpgrp(0, os.getpgrp())  # before the report: the test may then hang up
        report.write(f"stopped foreground={foreground}\n")
        order = control.readline().strip()
        if order == "fg":
            os.tcsetpgrp(0, job)
        if order:
            os.killpg(job, signal.SIGCONT)
        continue
    report.write(f"exit {os.waitstatus_to_exitcode(status)}\n")
    break
"""


@dataclass
class Session:
    master: int
    report: object
    control: object
    shell: subprocess.Popen[bytes]
    job: int
    seen: bytearray

    def event(self, timeout: float = 20) -> str:
        """The shell's next report line ("" when none comes in ``timeout``)."""
        ready, _, _ = select.select([self.report], [], [], timeout)
        return self.report.readline().strip() if ready else ""

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def shows(self, text: bytes, timeout: float = 20) -> None:
        """Read the terminal until ``text`` is shown."""
        while text not in self.seen:
            ready, _, _ = select.select([self.master], [], [], timeout)
            assert ready, f"{text!r} never shown: {bytes(self.seen)!r}"
            self.seen += os.read(self.master, 65536)

    def order(self, what: str) -> None:
        self.control.write(what + "\n")
        self.control.flush()


@pytest.fixture
def session_for(env) -> Iterator:
    """``session_for(repo, *args)``: git-isopatch ``args`` as a job of
    :data:`SHELL` on a new pseudo-terminal, in ``repo``."""
    started: list[Session] = []

    def start(repo: Path, *args: str) -> Session:
        master, slave = os.openpty()
        report_r, report_w = os.pipe()
        control_r, control_w = os.pipe()

        def child() -> None:
            import fcntl

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        shell = subprocess.Popen(
            [sys.executable, "-c", SHELL, str(ISOPATCH), *args],
            cwd=repo,
            env={**env, "SHELL_REPORT_FD": str(report_w), "SHELL_CONTROL_FD": str(control_r)},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=child,
            pass_fds=(report_w, control_r),
        )
        os.close(slave)
        os.close(report_w)
        os.close(control_r)
        session = Session(
            master, os.fdopen(report_r), os.fdopen(control_w, "w"), shell, 0, bytearray()
        )
        started.append(session)
        first = session.event()
        if not first.startswith("job "):
            with contextlib.suppress(OSError):
                session.seen += os.read(master, 65536)
            raise AssertionError(f"the shell did not start: {bytes(session.seen)!r}")
        session.job = int(first.split()[1])
        return session

    yield start
    for session in started:
        for pgid in (session.job, session.shell.pid):
            if pgid <= 0:  # never killpg(0): that is pytest's own group
                continue
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        session.shell.wait(timeout=60)
        for handle in (session.report, session.control):
            try:
                handle.close()
            except OSError:
                pass
        try:
            os.close(session.master)
        except OSError:
            pass
