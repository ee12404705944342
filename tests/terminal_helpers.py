"""Run the installed ``git-isopatch`` with its standard error on a
pseudo-terminal, as a user at a terminal runs it."""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from repo_helpers import ISOPATCH


@dataclass
class TerminalRun:
    returncode: int
    stdout: bytes
    terminal: bytes

    @property
    def shown(self) -> str:
        """What the terminal showed, decoded."""
        return self.terminal.decode("utf-8", "replace")


def read_terminal(master: int, timeout: float = 120) -> bytes:
    """Everything written to the pseudo-terminal ``master`` until its last
    writer closes it (``EIO``)."""
    out = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            return bytes(out)
        try:
            data = os.read(master, 65536)
        except OSError:
            return bytes(out)
        if not data:
            return bytes(out)
        out += data


def isopatch_on_terminal(
    *args: str | os.PathLike[str],
    cwd: Path,
    env: Mapping[str, str],
    columns: int = 100,
    stdout_terminal: bool = False,
) -> TerminalRun:
    """Run ``git-isopatch <args>`` with stderr (and stdout when
    ``stdout_terminal``) on a pseudo-terminal ``columns`` wide; stdin is
    ``/dev/null``."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        process = subprocess.Popen(
            [str(ISOPATCH), *map(os.fspath, args)],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=slave if stdout_terminal else subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        slave = -1
        terminal = read_terminal(master)
        stdout = process.stdout.read() if process.stdout else b""
        process.wait(timeout=120)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return TerminalRun(process.returncode, stdout, terminal.replace(b"\r\n", b"\n"))


@dataclass
class SessionRun:
    returncode: int
    #: what git-isopatch and the command wrote to the terminal (``\r\n`` as ``\n``)
    terminal: bytes
    #: what was left to read from the terminal after git-isopatch ended: what
    #: the user's shell reads next
    pending: bytes

    @property
    def shown(self) -> str:
        return self.terminal.decode("utf-8", "replace")


def pending_input(slave: int) -> bytes:
    """Everything the pseudo-terminal ``slave`` (in raw mode) has queued for
    its reader, without waiting."""
    os.set_blocking(slave, False)
    out = bytearray()
    try:
        while True:
            try:
                data = os.read(slave, 65536)
            except BlockingIOError:
                return bytes(out)
            if not data:
                return bytes(out)
            out += data
    finally:
        os.set_blocking(slave, True)


def raw_terminal() -> tuple[int, int]:
    """A pseudo-terminal (master, slave) whose input is neither
    line-buffered nor echoed: each byte put in it is readable at once."""
    import termios
    import tty

    master, slave = os.openpty()
    tty.setraw(slave, termios.TCSANOW)
    return master, slave


def isopatch_in_session(
    *args: str | os.PathLike[str],
    cwd: Path,
    env: Mapping[str, str],
    terminal: tuple[int, int],
    typed: bytes = b"",
    timeout: float = 120,
) -> SessionRun:
    """Run ``git-isopatch <args>`` as a shell runs a job: in a session of
    its own whose controlling terminal is the pseudo-terminal ``terminal``
    (master, slave), the foreground group, with all three standard streams
    on it.  ``typed`` is put in the terminal's input first, as keys typed
    ahead.  The caller keeps both ends open, as the user's shell keeps its
    terminal; :attr:`SessionRun.pending` is what that shell would read next.
    """
    import fcntl
    import termios

    master, slave = terminal

    def take_terminal() -> None:  # after setsid, before exec
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    if typed:
        os.write(master, typed)
    process = subprocess.Popen(
        [str(ISOPATCH), *map(os.fspath, args)],
        cwd=cwd,
        env=dict(env),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=take_terminal,
    )
    shown = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            shown += os.read(master, 65536)
        elif process.poll() is not None:
            break
        elif time.monotonic() > deadline:
            process.kill()
    process.wait(timeout=timeout)
    pending = pending_input(slave)
    return SessionRun(process.returncode, shown.replace(b"\r\n", b"\n"), pending)
