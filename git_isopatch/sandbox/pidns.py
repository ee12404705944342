"""One spawn in the namespaces (:mod:`.namespaces`): the descriptors its
child inherits, bubblewrap's JSON status, and the wait until its PID
namespace is empty.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from .launcher import Report, read_report

#: How long :func:`wait_gone` waits for the namespace to empty.
GONE_TIMEOUT_SECONDS = 10.0


class Wrapped:
    """One spawn in the namespaces: its argument list, the descriptors the
    child inherits (``pass_fds``), and bwrap's status once it has ended.

    Call :meth:`spawned` right after the child has started (the parent's
    copies of the child's descriptors are closed, so that the status reads
    to its end), and :meth:`finish` once bwrap has exited.  With a
    launcher (:mod:`.launcher`), :attr:`report` is the command's wait
    status after :meth:`finish`."""

    def __init__(
        self,
        argv: list[str],
        child_fds: tuple[int, ...],
        status_fd: int,
        report_fd: int | None = None,
    ) -> None:
        self.argv = argv
        self.pass_fds = child_fds
        self._status_fd = status_fd
        self._report_fd = report_fd
        self._open = list(child_fds)
        #: The launcher's report (:mod:`.launcher`), once :meth:`finish` has
        #: read it; ``None`` without a launcher, or when it said nothing.
        self.report: Report | None = None
        self._status: dict[str, int] | None = None
        #: Every process of the namespace has ended (after :meth:`finish`).
        self.gone = False

    def spawned(self) -> None:
        """Close the parent's copies of the child's descriptors."""
        while self._open:
            with contextlib.suppress(OSError):
                os.close(self._open.pop())

    def finish(self) -> dict[str, int]:
        """bwrap's status (:func:`read_status`), once every process of the
        namespace has ended (:func:`wait_gone`); read once, the same after."""
        if self._status is None:
            self.spawned()
            self._status = read_status(self._status_fd)
            self.gone = wait_gone(self._status.get("child-pid"))
            if self._report_fd is not None:
                self.report = read_report(self._report_fd)
        return self._status

    def close(self) -> None:
        self.spawned()
        for fd in (self._status_fd, self._report_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def read_status(fd: int) -> dict[str, int]:
    """bwrap's JSON status lines from ``fd`` (its read end), merged: the
    ``child-pid`` once the namespaces are made, the ``exit-code`` once the
    command has ended; neither when bwrap failed to set up."""
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    merged: dict[str, int] = {}
    for line in b"".join(chunks).splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                merged.update({k: v for k, v in value.items() if isinstance(v, int)})
    return merged


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X", b"x")


def wait_gone(child_pid: int | None, timeout: float = GONE_TIMEOUT_SECONDS) -> bool:
    """Wait until the namespace's first process (``child-pid``) has ended:
    the kernel ends it only after every other process of its PID namespace.

    Returns:
        True when it is gone (or was never started).
    """
    if child_pid is None:
        return True
    deadline = time.monotonic() + timeout
    while _alive(child_pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True
