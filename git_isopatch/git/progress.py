"""git's progress meters relayed to the user's terminal (design: "progress
for long checkouts only on a terminal"): git runs with a pseudo-terminal
of ours as its standard error, and what it shows there goes on, but for
the failure, which the caller reports in its own words.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence

from .result import Err, GitError, GitResult, Ok
from .run import DEFAULT_GIT_TIMEOUT, argv_of, cannot_run, timeout_error

#: Lines of git's standard error that :func:`run_git_with_progress` keeps
#: for the caller instead of showing them: the failure, which the caller
#: reports in its own words.
_HELD_BACK = (b"fatal: ", b"error: ")


def _pseudo_terminal(terminal: int) -> tuple[int, int]:
    """A pseudo-terminal pair, its size that of ``terminal``, without output
    processing (``\n`` stays ``\n``)."""
    master, slave = os.openpty()
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    try:
        size = fcntl.ioctl(terminal, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    except OSError:
        pass
    return master, slave


class _Relay:
    """Copy what git writes on the pseudo-terminal to ``terminal``, a line
    (or a ``\r``-ended progress update) at a time, but for the lines of
    :data:`_HELD_BACK`; keep all of it."""

    def __init__(self, master: int, terminal: int) -> None:
        self.master = master
        self.terminal = terminal
        self.kept = bytearray()
        self.pending = b""

    def feed(self, data: bytes) -> None:
        self.kept += data
        self.pending += data
        while True:
            ends = [i for i in (self.pending.find(b"\n"), self.pending.find(b"\r")) if i >= 0]
            if not ends:
                return
            end = min(ends) + 1
            piece, self.pending = self.pending[:end], self.pending[end:]
            self.show(piece)

    def show(self, piece: bytes) -> None:
        if piece.startswith(_HELD_BACK):
            return
        try:
            os.write(self.terminal, piece)
        except OSError:
            pass

    def run(self, process: subprocess.Popen[bytes]) -> None:
        """Until git has exited and the pseudo-terminal is drained (a
        process git left behind holding it open is not waited for)."""
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every writer has closed it
                break
            if not data:
                break
            self.feed(data)
        if self.pending:
            self.show(self.pending)


def run_git_with_progress(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    config: Sequence[tuple[str, str]] = (),
    terminal: int = 2,
    timeout: float | None = DEFAULT_GIT_TIMEOUT,
) -> GitResult[bytes]:
    """:func:`.run.run_git` for a git that shows the user its progress.

    Git shows progress meters (``Updating files:  45% (2000/4400)``) only
    when its standard error is a terminal; captured through a pipe it would
    show none, inherited it would print its failure on the terminal too.
    So git's standard error is a pseudo-terminal of our own: what git writes
    there goes on to ``terminal`` (an open terminal, the caller's standard
    error), but for its ``fatal:`` and ``error:`` lines, and all of it is
    kept for the :class:`GitError` the caller classifies.

    Returns:
        As :func:`.run.run_git`.
    """
    argv = argv_of(config, args)
    master, slave = _pseudo_terminal(terminal)
    try:
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=slave,
                env=dict(env),
                process_group=0,
            )
        except OSError as exc:
            return cannot_run(argv, exc)
        finally:
            os.close(slave)
        relay = _Relay(master, terminal)
        thread = threading.Thread(target=relay.run, args=(process,), daemon=True)
        thread.start()
        try:
            stdout, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            thread.join()
            return timeout_error(argv, bytes(relay.kept), timeout)
        thread.join()
    finally:
        os.close(master)
    if process.returncode != 0:
        return Err(
            GitError(args=tuple(argv), returncode=process.returncode, stderr=bytes(relay.kept))
        )
    return Ok(stdout)
