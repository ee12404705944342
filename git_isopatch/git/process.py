"""How git runs for the one wrapper (:mod:`.run`): started where a
:class:`Spawn` starts it (here, or inside the sandbox's namespaces), fed
its input, its output read to the end, stopped on a timeout, on a failed
write of its output, or, for the gits :func:`stop_streams` may stop, after
a signal.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol


class Spawned(Protocol):
    """A git started by a :data:`Spawn` (a :class:`subprocess.Popen` is one).

    ``wait`` returns its exit status as :attr:`subprocess.Popen.returncode`
    (``-N`` for signal N), raises :class:`subprocess.TimeoutExpired` when
    ``timeout`` seconds pass first, and :class:`OSError` when git could
    not be started at all."""

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class Spawn(Protocol):
    """Starts ``argv`` with ``env`` in ``cwd``, its standard input, output
    and error the descriptors ``fds``: where git runs (here, or inside the
    sandbox's namespaces, :meth:`..sandbox.confinement.Confinement.spawn`).

    Raises:
        OSError: git could not be started.
        subprocess.SubprocessError: the place git runs in cannot be had.
    """

    def __call__(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str | None, fds: tuple[int, int, int]
    ) -> Spawned: ...


def spawn_here(
    argv: list[str], *, env: Mapping[str, str], cwd: str | None, fds: tuple[int, int, int]
) -> subprocess.Popen[bytes]:
    """The :data:`Spawn` of git in this process's world, in a process group
    of its own (see :func:`run_git`)."""
    return subprocess.Popen(
        argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], env=dict(env), cwd=cwd, process_group=0
    )


#: Bytes read from git's stdout and stderr at a time.
_CHUNK = 1 << 20

#: The stoppable gits running now (:func:`stream_git`, and :func:`run_git`
#: elsewhere), for :func:`stop_streams`: process -> whether it was stopped.
_STREAMS: dict[Spawned, bool] = {}

_STREAMS_LOCK = threading.Lock()

#: Once :func:`stop_streams` was called: the seconds each stream may
#: still run, from then or from its own start.
_GRACE: list[float] = []

#: ``reason`` of the ``GitError`` of a stream stopped by :func:`stop_streams`.
STOPPED = "stopped by a signal"


def stop_streams(after: float) -> None:
    """Kill every stoppable git still running ``after`` seconds from now,
    and any started later ``after`` seconds from its start; each returns
    an ``Err`` whose ``reason`` is :data:`STOPPED`.

    A signal handler calls it: a stream (the patch's ``git diff
    --binary``) writes nothing but its output, and a git run inside the
    sandbox writes only what is the run's own, so stopping either half-way
    leaves nothing half-done that matters, while a long one (a huge file,
    a FIFO the command left) would otherwise hold a Ctrl-C until it ends;
    ``after`` lets a short one finish.  Any other git of :func:`run_git`
    is never stopped.
    """
    _GRACE[:] = [after]
    for process in list(_STREAMS):
        _stop_after(process, after)


def resume_streams() -> None:
    """Let later streams run to their end again: :func:`stop_streams`
    holds only while the signal's run lasts (a long-lived process such as
    the MCP server runs more after it)."""
    _GRACE.clear()


def _stop_after(process: Spawned, after: float) -> None:
    def stop() -> None:
        with _STREAMS_LOCK:
            if process not in _STREAMS:
                return  # it ended meanwhile
            _STREAMS[process] = True
        with contextlib.suppress(OSError):
            process.kill()

    timer = threading.Timer(after, stop)
    timer.daemon = True
    timer.start()


class Ended:
    """How one git ended (:func:`execute`), filled in as it ends.  A plain
    class: a dataclass compiles its methods as the module loads, on every
    run."""

    __slots__ = ("returncode", "stderr", "timed_out", "stopped", "write_error")

    def __init__(self) -> None:
        self.returncode = 0
        self.stderr = b""
        self.timed_out = False
        self.stopped = False
        self.write_error: OSError | None = None


def execute(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str | None,
    input: bytes | None,
    timeout: float | None,
    spawn: Spawn | None,
    sink: Callable[[bytes], object],
    stoppable: bool,
) -> Ended:
    """Start ``argv`` through ``spawn`` (here when ``None``), feed it
    ``input``, hand its stdout to ``sink`` chunk by chunk and keep its
    stderr, until both end; kill it after ``timeout`` seconds, when
    ``sink`` fails (an ``OSError``), or, when ``stoppable``, on
    :func:`stop_streams`.

    Raises:
        OSError: git could not be started (here or where ``spawn`` runs it).
        subprocess.SubprocessError: ``spawn`` could not have git run.
    """
    return start(argv, env, cwd, input, timeout, spawn, sink, stoppable)()


def start(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str | None,
    input: bytes | None,
    timeout: float | None,
    spawn: Spawn | None,
    sink: Callable[[bytes], object],
    stoppable: bool,
) -> Callable[[], Ended]:
    """:func:`execute` started now: git runs while the caller goes on, and
    the function returned does the rest (its ``timeout`` counts from
    then).  Call it exactly once.

    Raises:
        OSError, subprocess.SubprocessError: as :func:`execute`.
    """
    opened: list[int] = []
    try:
        out_r, out_w = _pipe(opened)
        err_r, err_w = _pipe(opened)
        if input is None:
            in_r, in_w = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), None
            opened.append(in_r)
        else:
            in_r, in_w = _pipe(opened)
        try:
            process = (spawn or spawn_here)(argv, env=env, cwd=cwd, fds=(in_r, out_w, err_w))
        finally:
            for fd in (in_r, out_w, err_w):
                opened.remove(fd)
                os.close(fd)
    except BaseException:
        _close(opened)
        raise

    def finish() -> Ended:
        try:
            return _exchange(process, (opened, in_w, input, out_r, err_r), timeout, sink, stoppable)
        finally:
            _close(opened)

    return finish


def _close(opened: list[int]) -> None:
    for fd in opened:
        with contextlib.suppress(OSError):
            os.close(fd)


def _pipe(opened: list[int]) -> tuple[int, int]:
    read_end, write_end = os.pipe()
    opened += [read_end, write_end]
    return read_end, write_end


def _exchange(
    process: Spawned,
    pipes: tuple[list[int], int | None, bytes | None, int, int],
    timeout: float | None,
    sink: Callable[[bytes], object],
    stoppable: bool,
) -> Ended:
    """:func:`execute` once git has started: ``pipes`` are the open
    descriptors (the caller closes those still in the list), stdin's write
    end and what to write, stdout's and stderr's read ends."""
    opened, in_w, data, out_r, err_r = pipes
    ended = Ended()
    stderr: list[bytes] = []

    def take(chunk: bytes) -> None:
        if ended.write_error is not None:
            return
        try:
            sink(chunk)
        except OSError as exc:
            ended.write_error = exc
            with contextlib.suppress(OSError):
                process.kill()

    if stoppable:
        with _STREAMS_LOCK:
            _STREAMS[process] = False
        if _GRACE:
            _stop_after(process, _GRACE[0])
    deadline = None if timeout is None else time.monotonic() + timeout
    readers = {out_r: take, err_r: stderr.append}
    try:
        try:
            ended.timed_out = _drain(process, (opened, in_w, data or b""), readers, deadline)
        except BaseException:  # KeyboardInterrupt: git is not left running
            with contextlib.suppress(OSError):
                process.kill()
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                process.wait()
            raise
        ended.returncode = process.wait()
    finally:
        with _STREAMS_LOCK:
            ended.stopped = _STREAMS.pop(process, False)
    ended.stderr = b"".join(stderr)
    return ended


def _drain(
    process: Spawned,
    feed: tuple[list[int], int | None, bytes],
    readers: dict[int, Callable[[bytes], object]],
    deadline: float | None,
) -> bool:
    """Write ``feed``'s bytes to its descriptor, then close it (and take it
    from the list of open ones), and read the ``readers``' descriptors to
    their end; past ``deadline`` kill ``process`` and go on reading.
    Whether the deadline passed."""
    opened, in_w, data = feed
    poller = select.poll()
    for fd in readers:
        poller.register(fd, select.POLLIN)
    if in_w is not None:
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    offset, timed_out = 0, False
    while readers or in_w is not None:
        wait = None
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out, deadline = True, None
                with contextlib.suppress(OSError):
                    process.kill()
                continue
            wait = int(left * 1000) + 1
        for fd, _ in poller.poll(wait):
            if fd == in_w:
                try:
                    offset += os.write(in_w, data[offset : offset + _CHUNK])
                except BrokenPipeError:
                    offset = len(data)
                except BlockingIOError:
                    continue
                if offset >= len(data):
                    poller.unregister(in_w)
                    opened.remove(in_w)
                    os.close(in_w)
                    in_w = None
                continue
            chunk = os.read(fd, _CHUNK)
            if chunk:
                readers[fd](chunk)
                continue
            poller.unregister(fd)
            del readers[fd]
    return timed_out
