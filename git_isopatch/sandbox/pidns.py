"""One spawn in the namespaces (:mod:`.namespaces`): the descriptors its
child inherits, bubblewrap's JSON status, and the wait until its PID
namespace is empty.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import _socket
import contextlib
import os
import subprocess
import time
from typing import TYPE_CHECKING

from .inside import GONE_TIMEOUT_SECONDS as GONE_TIMEOUT_SECONDS
from .inside import Gone, Inside, read_status, wait_gone
from .inside import _alive as _alive
from .launcher import Report

if TYPE_CHECKING:
    from collections.abc import Callable

    from .limits import Bound


class Wrapped:
    """One spawn in the namespaces: its argument list, the descriptors the
    child inherits (``pass_fds``), and bwrap's status once it has ended.

    Call :meth:`spawned` right after the child has started (the parent's
    copies of the child's descriptors are closed, so that the status reads
    to its end), and :meth:`finish` once bwrap has exited, or once
    :meth:`command_ended` said the launcher (:mod:`.launcher`) saw the
    command end: then :attr:`report` is the command's wait status, and
    the namespaces are served (:meth:`serving`)."""

    def __init__(
        self,
        argv: list[str],
        child_fds: tuple[int, ...],
        status_fd: int,
        control: _socket.socket | None = None,
        bounds: Bound | None = None,
        said: tuple[int, int] | None = None,
    ) -> None:
        self.argv = argv
        #: The bounds of the namespace's processes (:mod:`.limits`), if any.
        self.bounds = bounds
        self.pass_fds = child_fds
        self._status_fd: int | None = status_fd
        self._control = control
        #: Run through the launcher, which must say how the command ended.
        self.launched = control is not None
        self._open = list(child_fds)
        #: bubblewrap's own standard error (a pipe's write end), when the
        #: command's is passed to the launcher; ``None``: they are one.
        self.stderr: int | None = None
        self._said: int | None = None
        if said is not None:
            self._said, self.stderr = said
            self._open.append(self.stderr)
        #: The launcher's report (:mod:`.launcher`), once :meth:`command_ended`
        #: or :meth:`finish` has read it; ``None`` without a launcher, or
        #: when it said nothing.
        self.report: Report | None = None
        self._exec_errno: int | None = None
        self._refusals = 0
        self._status: dict[str, int] | None = None
        self._inside: Inside | None = None
        #: When :meth:`kill_all` told the launcher to end everything.
        self._killed: float | None = None
        #: Every process of the namespace but the launcher has ended (after
        #: :meth:`finish`).
        self.gone = False
        #: Called once bubblewrap has started, before it is waited for: the
        #: run loads what it needs after the command while the namespaces are set up.
        self.meanwhile: Callable[[], None] | None = None

    def spawned(self, process: subprocess.Popen[bytes] | None = None) -> None:
        """Close the parent's copies of the child's descriptors; with the
        launcher, ``process`` (bubblewrap) is what the namespaces are
        served through afterwards."""
        while self._open:
            with contextlib.suppress(OSError):
                os.close(self._open.pop())
        if process is not None and self._control is not None and self._inside is None:
            self._inside = Inside(process, self._control, self._status_fd)

    def said(self) -> str | None:
        """bubblewrap's last ``bwrap:`` line (why it could not set up the
        namespaces), read without waiting; ``None`` when it said none."""
        if self._said is None:
            return None
        os.set_blocking(self._said, False)
        chunks = []
        with contextlib.suppress(OSError):
            while len(chunks) < 16 and (chunk := os.read(self._said, 4096)):
                chunks.append(chunk)
        lines = [line for line in b"".join(chunks).splitlines() if line.startswith(b"bwrap: ")]
        return lines[-1][len(b"bwrap: ") :].decode("utf-8", "replace") if lines else None

    @property
    def watched(self) -> int | None:
        """A descriptor readable when the launcher speaks."""
        return None if self._control is None else self._control.fileno()

    def command_ended(self) -> bool:
        """The launcher said how the command ended (read without waiting)."""
        while self.report is None and self._inside is not None:
            try:
                line = self._inside.line(0)
            except Gone:
                return False
            if line is None:
                return False
            kind, _, number = line.partition(b" ")
            with contextlib.suppress(ValueError, OverflowError):
                if kind == b"exec" and 0 <= int(number) < 4096:
                    self._exec_errno = int(number)
                elif kind == b"net":
                    self._refusals = max(0, int(number))
                elif kind == b"wait" and self._exec_errno is not None:
                    self.report = Report(exec_errno=self._exec_errno)
                elif kind == b"wait":
                    os.waitstatus_to_exitcode(int(number))  # raises for no real ending
                    self.report = Report(wait_status=int(number), network_refusals=self._refusals)
        return self.report is not None

    def kill_all(self) -> None:
        """End every process of the namespace but the launcher (the
        command and all it started); it then reports."""
        if self._inside is not None:
            self._killed = self._killed or time.monotonic()
            self._inside.kill()

    def silent(self) -> bool:
        """:meth:`kill_all` told the launcher to end everything
        :data:`GONE_TIMEOUT_SECONDS` ago, and it has not reported: it no
        longer serves (a fault of ours), and only bubblewrap's end, which
        ends the namespaces, ends the command."""
        waited = time.monotonic() - (self._killed or time.monotonic())
        return waited > GONE_TIMEOUT_SECONDS and not self.command_ended()

    def finish(self) -> dict[str, int]:
        """bwrap's status (:func:`read_status`) once every process of the
        namespace has ended (:func:`wait_gone`), or, once the launcher
        reported, what it said so far; read once, the same after."""
        if self._status is None:
            self.spawned()
            if self.command_ended():
                self._status, self.gone = {}, True
                return self._status
            self._status = read_status(self._status_fd)
            self.gone = wait_gone(self._status.get("child-pid"))
            self.command_ended()
        return self._status

    def serving(self) -> Inside | None:
        """The namespaces, served, once the launcher reported and while
        they last; who takes them closes them (:meth:`.inside.Inside.close`)."""
        if self.report is None or self._inside is None:
            return None
        inside, self._inside, self._control, self._status_fd = self._inside, None, None, None
        if inside.process.poll() is not None:
            inside.close()
            return None
        return inside

    def close(self) -> None:
        self.spawned()
        if self._said is not None:
            with contextlib.suppress(OSError):
                os.close(self._said)
            self._said = None
        if self._inside is not None:
            self._inside.close()
            self._inside = None
            return
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        if self._status_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._status_fd)
