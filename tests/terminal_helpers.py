"""Run the installed ``git-isopatch`` with its standard error on a
pseudo-terminal, as a user at a terminal runs it."""

from __future__ import annotations

import os
import select
import subprocess
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
