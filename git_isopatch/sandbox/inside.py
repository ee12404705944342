"""git-isopatch's own git, run inside one run's namespaces (design: "there
is one boundary, not a stronger one for the command and a weaker one after
it").

After the command, the launcher (:mod:`.launcher`), the namespace's first
process, has ended everything else left in it and serves git-isopatch
over a unix socket: each request is an argument list, an environment, a
working folder and three descriptors passed with ``SCM_RIGHTS`` (the
child's standard input, output and error); the launcher starts it in a
session of its own (no controlling terminal), waits for it, ends
whatever it left, and answers with its wait status.  So every git
git-isopatch runs on what a sandboxed command left, and every program
that git starts (a filter of a repository the command planted, an
``fsmonitor``), runs in the same read-only system, copy-on-write folders,
mount, PID, IPC and network namespaces, without capabilities, under the
same seccomp filter, and nothing it starts outlives it.

:class:`Inside` is the socket's end here; :meth:`Inside.spawn` starts one
git (a :class:`Served`, the :class:`..git.process.Spawned` of the git
layer).  Messages to the launcher are frames (a kind, ``r`` to run, ``k``
to end every process of the namespace now; a 4-byte length; a payload in
``marshal``); its answers are lines, ``exec <errno>`` (the program could
not be started) then ``wait <status>``.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import _socket  # socket costs some 11 M instructions to load
import array
import contextlib
import json
import marshal
import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping

#: How long :func:`wait_gone` waits for the namespace to empty.
GONE_TIMEOUT_SECONDS = 10.0

#: What a request's kind is.
RUN, KILL = b"r", b"k"


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """A message to the launcher: its kind, length and payload."""
    return kind + len(payload).to_bytes(4, "big") + payload


class Gone(subprocess.SubprocessError):
    """The namespaces are gone (the launcher ended): nothing more runs inside."""


class ViewFailed(Gone):
    """The launcher could not make our own git's view of the real folders
    (:func:`.launcher_main.own_view`), and ended: the message says what failed."""


def view_failure(line: bytes) -> ViewFailed:
    """The launcher's ``fail <marshal, in hexadecimal>`` line, told:
    ``(what, path, where)`` (:func:`.launcher_main.own_view`)."""
    from ..git.quote import quoted

    try:
        what, path, where = marshal.loads(bytes.fromhex(line[5:].decode("ascii")))
    except (ValueError, EOFError, TypeError, UnicodeDecodeError):
        what, path, where = "", b"", b""
    view = "could not show our own git the real folders"
    if what == "link":
        return ViewFailed(f"{view}: the command replaced {quoted(path)} by a link")
    if what == "mount":
        return ViewFailed(f"{view}: a mount was made beneath {quoted(path)} while the command ran")
    if what == "not a folder":
        return ViewFailed(f"{view}: the command replaced the folder {quoted(path)}")
    if path and where:
        return ViewFailed(f"{view}: {what} {quoted(path)} is no folder in the real {quoted(where)}")
    if path:
        return ViewFailed(f"{view}: {what} {quoted(path)} is no folder in the command's view")
    return ViewFailed(f"{view}: {what or 'it failed'}")


class Inside:
    """The namespaces of one run, served by their launcher.

    Attributes:
        process: bubblewrap, started by git-isopatch (its monitor).
        control: git-isopatch's end of the launcher's socket.
        status_fd: the read end of bubblewrap's JSON status.
    """

    def __init__(
        self, process: subprocess.Popen[bytes], control: _socket.socket, status_fd: int
    ) -> None:
        self.process = process
        self.control = control
        self.status_fd = status_fd
        self._buffer = b""
        self._send = threading.Lock()
        self._programs: dict[tuple[str, str | None], str] = {}
        self.gone = False
        #: :meth:`end` was called: nothing runs inside any more.
        self.ended = False
        #: :meth:`wait` was called: bubblewrap is reaped.
        self.waited = False

    def line(self, timeout: float | None) -> bytes | None:
        """The launcher's next line; ``None`` after ``timeout`` seconds.

        Raises:
            Gone: the launcher ended first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            poller = select.poll()
            poller.register(self.control.fileno(), select.POLLIN)
            if not poller.poll(None if left is None else int(left * 1000)):
                return None
            try:
                chunk = self.control.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                self.gone = True
                raise Gone("the sandbox's namespaces ended")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        if line.startswith(b"fail "):
            self.gone = True
            raise view_failure(line)
        return line

    def send(self, data: bytes, fds: tuple[int, ...] = ()) -> None:
        """``data`` to the launcher, ``fds`` with its first byte.

        Raises:
            Gone: the launcher ended.
        """
        with self._send:
            try:
                if fds:
                    ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))]
                    sent = self.control.sendmsg([data], ancillary)
                    data = data[sent:]
                self.control.sendall(data)
            except OSError as exc:
                self.gone = True
                self._last_words()
                raise Gone(f"the sandbox's namespaces ended: {exc.strerror or exc}") from None

    def _last_words(self) -> None:
        """Raise what the launcher said before it ended, if it said why
        (a ``fail`` line)."""
        with contextlib.suppress(OSError):
            while chunk := self.control.recv(4096, _socket.MSG_DONTWAIT):
                self._buffer += chunk
        for line in self._buffer.split(b"\n"):
            if line.startswith(b"fail "):
                raise view_failure(line) from None

    def program(self, name: str, env: Mapping[str, str]) -> str:
        """``name`` looked up on ``env``'s ``PATH`` here, where the command
        could not change what is found (inside, its copy-on-write home could
        hold a program of that name earlier on the ``PATH``)."""
        key = (name, env.get("PATH"))
        if key not in self._programs:
            self._programs[key] = shutil.which(name, path=env.get("PATH")) or name
        return self._programs[key]

    def spawn(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str | None, fds: tuple[int, int, int]
    ) -> Served:
        """Start ``argv`` inside (its program by its path here:
        :meth:`program`), its stdin, stdout and stderr ``fds``.

        Raises:
            Gone: the namespaces are gone: nothing can run inside.
        """
        if self.gone:
            raise Gone("the sandbox's namespaces ended")
        args = [str(os.fsdecode(arg)) for arg in argv]  # plain str: marshal takes no subclass
        path = args[0] if "/" in args[0] else self.program(args[0], env)
        environ = {str(key): str(value) for key, value in env.items()}
        folder = None if cwd is None else str(os.fsdecode(cwd))
        payload = marshal.dumps((str(path), args, environ, folder))
        self.send(frame(RUN, payload), fds)
        return Served(self, argv)

    def kill(self) -> None:
        """End every process of the namespaces but the launcher, now."""
        with contextlib.suppress(Gone):
            self.send(frame(KILL))

    def end(self) -> None:
        """Begin the namespaces' end, and return once every process of them
        but the launcher is gone: our end of the socket is closed for
        writing, the launcher kills and reaps everything else and says
        ``gone`` (:mod:`.launcher_main`), then waits until :meth:`wait`
        closes our end whole, and exits.  What those processes could write
        can then be removed before the launcher's exit unmounts the
        namespaces' file systems: each overlay's unmount syncs its upper
        layer's file system, and writes nothing of what is gone (a file
        removed once written costs a discard too; removals while it syncs
        give each sync something to write).  When the launcher does not
        say so in :data:`GONE_TIMEOUT_SECONDS` (or ended before it could),
        this waits as :meth:`wait` does.  Nothing runs inside afterwards
        (:meth:`spawn` raises :class:`Gone`)."""
        if self.ended:
            return
        self.ended = self.gone = True
        with contextlib.suppress(OSError):
            self.control.shutdown(_socket.SHUT_WR)
        deadline = time.monotonic() + GONE_TIMEOUT_SECONDS
        while True:
            try:
                line = self.line(max(0.0, deadline - time.monotonic()))
            except Gone:  # it ended without saying so: wait for bubblewrap
                break
            if line is None:  # it does not end: bubblewrap is killed
                with contextlib.suppress(OSError):
                    self.process.kill()
                break
            if line == b"gone":
                return
        self.wait()

    def wait(self) -> None:
        """Let the launcher exit (our end of the socket closed whole), and
        wait until bubblewrap has ended and every process of the
        namespaces is gone (bubblewrap killed when it does not end in
        :data:`GONE_TIMEOUT_SECONDS`)."""
        self.ended = self.gone = True
        if self.waited:
            return
        self.waited = True
        with contextlib.suppress(OSError):
            self.control.close()
        if not _ended(self.process, GONE_TIMEOUT_SECONDS):
            with contextlib.suppress(OSError):
                self.process.kill()
        self.process.wait()
        status = read_status(self.status_fd)
        with contextlib.suppress(OSError):
            os.close(self.status_fd)
        wait_gone(status.get("child-pid"))

    def close(self) -> None:
        """End the namespaces (:meth:`end`) and wait until bubblewrap and
        every process of them are gone (:meth:`wait`)."""
        self.end()
        self.wait()


def _ended(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether ``process`` ends within ``timeout`` seconds, waited for on
    its pidfd (Popen's own wait with a timeout sleeps in growing steps,
    and bubblewrap takes some milliseconds to end: each step overshoots)."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:  # reaped already, or no pidfd here
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))
    finally:
        os.close(pidfd)


class Served:
    """One program running inside (:meth:`Inside.spawn`)."""

    def __init__(self, inside: Inside, argv: list[str]) -> None:
        self.inside = inside
        self.argv = argv
        self.returncode: int | None = None
        self.exec_errno: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status (``-N`` for signal N; ``-9`` when the namespaces
        ended under it).

        Raises:
            subprocess.TimeoutExpired: ``timeout`` seconds passed first.
            OSError: it could not be started.
            ViewFailed: the launcher could not make our own git's view
                (it said so while this one waited to start).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                line = self.inside.line(left)
            except ViewFailed:  # it never ran: the launcher says why
                raise
            except Gone:
                self.returncode = -9
                break
            if line is None:
                raise subprocess.TimeoutExpired(self.argv, timeout or 0)
            kind, _, number = line.partition(b" ")
            if kind == b"exec":
                self.exec_errno = int(number)
            elif kind == b"wait":
                self.returncode = os.waitstatus_to_exitcode(int(number))
        if self.exec_errno:
            raise OSError(self.exec_errno, os.strerror(self.exec_errno), self.argv[0])
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """End it, and everything else running inside."""
        self.inside.kill()


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
