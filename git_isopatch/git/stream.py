"""git's output streamed into a file (:func:`stream_git`, the patch's ``git
diff --binary``), and the stop of such gits by a signal
(:func:`.process.stop_streams`), beside the one wrapper (:mod:`.run`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO

from .process import STOPPED as STOPPED
from .process import Ended, Spawn, execute
from .process import resume_streams as resume_streams
from .process import stop_streams as stop_streams
from .result import Err, GitError, GitResult, Ok
from .run import DEFAULT_GIT_TIMEOUT, argv_of, cannot_run, timeout_error


def stream_git(
    args: Sequence[str],
    out: IO[bytes],
    *,
    env: Mapping[str, str],
    config: Sequence[tuple[str, str]] = (),
    cwd: str | None = None,
    timeout: float | None = DEFAULT_GIT_TIMEOUT,
    spawn: Spawn | None = None,
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
        ended = execute(argv, env, cwd, None, timeout, spawn, out.write, True)
    except OSError as exc:
        return cannot_run(argv, exc)
    return _streamed(argv, ended, timeout)


def _streamed(argv: list[str], ended: Ended, timeout: float | None) -> GitResult[bytes]:
    """:func:`stream_git`'s answer for how its git ended."""
    if ended.stopped:
        return Err(GitError(args=tuple(argv), stderr=ended.stderr, reason=STOPPED))
    if ended.write_error is not None:
        failed = ended.write_error
        return Err(
            GitError(
                args=tuple(argv),
                stderr=ended.stderr,
                reason=failed.strerror or str(failed),
                errno=failed.errno,
            )
        )
    if ended.timed_out:
        return timeout_error(argv, ended.stderr, timeout)
    if ended.returncode != 0:
        return Err(GitError(args=tuple(argv), returncode=ended.returncode, stderr=ended.stderr))
    return Ok(b"")
