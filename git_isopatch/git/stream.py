"""Git whose standard output is streamed into a file (the patch's ``git
diff --binary``), and the stop of those streams when a signal ends the
run: :func:`stream_git`, beside :func:`.run.run_git`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from .result import Err, GitError, GitResult, Ok
from .run import DEFAULT_GIT_TIMEOUT, argv_of, cannot_run, timeout_error

#: Bytes copied from git's stdout to the file at a time.
_CHUNK = 1 << 20

#: The :func:`stream_git` processes running now, for :func:`stop_streams`:
#: process -> whether it was stopped.
_STREAMS: dict[subprocess.Popen[bytes], bool] = {}

_STREAMS_LOCK = threading.Lock()

#: Once :func:`stop_streams` was called: the seconds each stream may
#: still run, from then or from its own start.
_GRACE: list[float] = []

#: ``reason`` of the ``GitError`` of a stream stopped by :func:`stop_streams`.
STOPPED = "stopped by a signal"


def stop_streams(after: float) -> None:
    """Kill every :func:`stream_git` process still running ``after``
    seconds from now, and any started later ``after`` seconds from its
    start; each returns an ``Err`` whose ``reason`` is :data:`STOPPED`.

    A signal handler calls it: a stream (the patch's ``git diff --binary``)
    writes nothing but its output, so stopping it half-way leaves nothing
    half-done, while a long one (a huge file) would otherwise hold a Ctrl-C
    until it ends; ``after`` lets a short one finish.  The git of
    :func:`run_git` is never stopped.
    """
    _GRACE[:] = [after]
    for process in list(_STREAMS):
        _stop_after(process, after)


def resume_streams() -> None:
    """Let later streams run to their end again: :func:`stop_streams`
    holds only while the signal's run lasts (a long-lived process such as
    the MCP server runs more after it)."""
    _GRACE.clear()


def _stop_after(process: subprocess.Popen[bytes], after: float) -> None:
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


def stream_git(
    args: Sequence[str],
    out: IO[bytes],
    *,
    env: Mapping[str, str],
    config: Sequence[tuple[str, str]] = (),
    cwd: str | None = None,
    timeout: float | None = DEFAULT_GIT_TIMEOUT,
    preexec_fn: Callable[[], None] | None = None,
) -> GitResult[bytes]:
    """:func:`run_git` with git's stdout copied into ``out`` (a binary
    file) chunk by chunk; stdin is ``/dev/null``.

    Git does not write the file itself: when a write fails (no space left,
    a quota, an I/O error) git only says "unknown write failure on standard
    output", while here the ``OSError`` and its ``errno`` are at hand.  Git
    is then stopped.  Nothing is held in memory but one chunk (and git's
    stderr).

    Returns:
        ``Ok(b"")``; an ``Err`` as :func:`run_git`'s, or with the ``errno``
        of the failed write.
    """
    argv = argv_of(config, args)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            process_group=0,
            preexec_fn=preexec_fn,
        )
    except OSError as exc:
        return cannot_run(argv, exc)
    assert process.stdout is not None and process.stderr is not None
    _STREAMS[process] = False
    if _GRACE:
        _stop_after(process, _GRACE[0])
    stderr: list[bytes] = []
    drain = threading.Thread(target=lambda: stderr.append(process.stderr.read()), daemon=True)
    drain.start()
    timed_out = threading.Event()
    timer = _kill_after(process, timeout, timed_out)
    try:
        failed = _copy_stdout(process, out)
    finally:
        process.stdout.close()
        returncode = process.wait()
        with _STREAMS_LOCK:
            stopped = _STREAMS.pop(process, False)
        drain.join()
        process.stderr.close()
        if timer is not None:
            timer.cancel()
    error_output = b"".join(stderr)
    if stopped:
        return Err(GitError(args=tuple(argv), stderr=error_output, reason=STOPPED))
    if failed is not None:
        return Err(
            GitError(
                args=tuple(argv),
                stderr=error_output,
                reason=failed.strerror or str(failed),
                errno=failed.errno,
            )
        )
    if timed_out.is_set():
        return timeout_error(argv, error_output, timeout)
    if returncode != 0:
        return Err(GitError(args=tuple(argv), returncode=returncode, stderr=error_output))
    return Ok(b"")


def _kill_after(
    process: subprocess.Popen[bytes], timeout: float | None, timed_out: threading.Event
) -> threading.Timer | None:
    """A started timer that kills ``process`` after ``timeout`` seconds and
    sets ``timed_out``; ``None`` without a timeout."""
    if timeout is None:
        return None

    def stop() -> None:
        timed_out.set()
        process.kill()

    timer = threading.Timer(timeout, stop)
    timer.daemon = True
    timer.start()
    return timer


def _copy_stdout(process: subprocess.Popen[bytes], out: IO[bytes]) -> OSError | None:
    """Copy ``process``'s stdout into ``out`` until it ends; on a failed
    write, kill the process and return the error."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    while chunk := os.read(fd, _CHUNK):
        try:
            out.write(chunk)
        except OSError as exc:
            process.kill()
            return exc
    return None
