"""``--apply``: the patch into the user's work tree (and, with ``--staged``,
the index), one apply at a time per repository, all or nothing.

:func:`bring_home` is the one entry point, for the report step and the MCP
server alike: it waits (bounded, interruptibly) for the repository's apply
lock, so that each apply starts from the previous one's result, then
applies with :func:`.git.apply.apply_to_work_tree`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping

from .git.apply import UNSTAGED_REFUSAL, apply_to_work_tree
from .git.quote import quoted
from .git.record import Record
from .git.repo import UserRepository
from .git.result import Err, GitError, Ok
from .logger import warning
from .result import CaptureResult
from .worktrees.lock import APPLY_LOCK_FILE, LockTimeout, LockWaitInterrupted, held_within

#: Said when the fix does not merge with unstaged edits, and the way on:
#: in a pre-commit hook (git names the index it commits in
#: ``GIT_INDEX_FILE``) the commit is stopped; elsewhere the run is.
UNSTAGED_HINT = "stage those files whole (git add) or set their unstaged edits aside, then {}"

#: How long an apply waits for another one to the same repository, in
#: seconds, before it gives up with nothing written.
APPLY_LOCK_SECONDS = 60.0


class ApplyOutcome(Record):
    """What :func:`bring_home` did.

    Attributes:
        applied: the patch is in the work tree (and index).
        error: one line saying why not (nothing was written), else ``None``.
        signal: the signal that stopped the apply before anything was
            written (a Ctrl-C while it waited for the lock), else ``None``.
        warnings: one-line warnings (touched paths that do not hold what
            the patch says right after the apply: someone else wrote them).
    """

    applied: bool
    error: str | None = None
    signal: int | None = None
    warnings: tuple[str, ...] = ()


def bring_home(
    repository: UserRepository,
    patch: str,
    *,
    env: Mapping[str, str],
    index_file: str | None = None,
    signal_state: Mapping[str, int | None] | None = None,
    on_wait: Callable[[str], None] | None = None,
    lock_seconds: float = APPLY_LOCK_SECONDS,
) -> ApplyOutcome:
    """Apply ``patch`` to ``repository``'s work tree as it is now, and to
    ``index_file`` too when given (``--staged``: the index the patch is
    relative to), under the repository's apply lock.

    Args:
        repository: the user's repository.
        patch: the patch file.
        env: git-isopatch's own git environment.
        index_file: the index to write as well, else ``None`` (work tree only).
        signal_state: where a signal handler records what it received
            (``"received"``, :func:`.sandbox.command.forward_signals`):
            one ends the wait for the lock, and one that arrives before the
            first write stops the apply; ``None``: Python's own handlers
            (a ``KeyboardInterrupt`` ends the wait and writes nothing).
        on_wait: told the lock's path once when another apply holds it.
        lock_seconds: how long to wait for the lock.
    """
    lock = os.path.join(repository.common_dir, APPLY_LOCK_FILE)

    def received() -> int | None:
        return signal_state.get("received") if signal_state is not None else None

    try:
        with held_within(
            lock,
            lock_seconds,
            interrupted=lambda: received() is not None,
            on_wait=(lambda: on_wait(lock)) if on_wait is not None else None,
        ):
            done = apply_to_work_tree(
                repository.git_dir,
                repository.top,
                patch,
                env=env,
                index_file=index_file,
                proceed=lambda: received() is None,
            )
    except LockTimeout as timeout:
        return ApplyOutcome(
            applied=False,
            error=(
                f"another git-isopatch apply to this repository held the lock '{timeout.path}' for "
                f"{timeout.seconds:g} second{'' if timeout.seconds == 1 else 's'}; "
                "nothing was written"
            ),
        )
    except LockWaitInterrupted:
        return ApplyOutcome(applied=False, signal=received() or signal.SIGINT)
    match done:
        case Ok(applied):
            warnings = tuple(
                f"{quoted(path)} changed during the apply: it does not hold what the patch says"
                for path in applied.not_as_patched
            )
            return ApplyOutcome(applied=True, warnings=warnings)
        case Err(error):
            if received() is not None:
                return ApplyOutcome(applied=False, signal=received())
            return ApplyOutcome(applied=False, error=_reason(error))


def _reason(error: GitError) -> str:
    """One line: why the patch did not apply (:mod:`.git.apply` says it
    whole), or git's own failure."""
    return error.reason or error.message()


def apply_result(
    result: CaptureResult,
    repository: UserRepository,
    *,
    env: Mapping[str, str],
    environ: Mapping[str, str],
    staged: bool,
    signal_state: Mapping[str, int | None] | None = None,
    warn: Callable[[str], None] = warning,
) -> CaptureResult:
    """The report step's ``--apply``: ``result`` once its patch is brought
    home (:func:`bring_home`; with ``staged``, into the index git names in
    ``environ`` as well, :func:`.git.snapshot.user_index_file`).  When it
    does not apply, ``error_code`` is ``apply-failed`` and the patch is
    kept; a signal that stopped it before any write ends the run with
    ``128+N``; ``applied`` says which."""
    from .git.snapshot import user_index_file  # --staged alone: a plain run does not load it

    assert result.patch_path is not None
    index_file = user_index_file(repository.git_dir, repository.top, environ) if staged else None
    outcome = bring_home(
        repository,
        result.patch_path,
        env=env,
        index_file=index_file,
        signal_state=signal_state,
        on_wait=lambda lock: warn(
            f"another git-isopatch apply to this repository is running; waiting for '{lock}'"
        ),
    )
    for line in outcome.warnings:
        warn(line)
    if outcome.signal is not None:
        received = outcome.signal  # it reached git-isopatch: porcelain "signal" names it
        return result._replace(
            applied=False,
            signal=received,
            command_signal=received,
            exit_code=128 + received,
        )
    if outcome.error is not None:
        again = "commit again" if environ.get("GIT_INDEX_FILE") else "run it again"
        unstaged = outcome.error.startswith(UNSTAGED_REFUSAL)
        hints = (UNSTAGED_HINT.format(again),) if unstaged else ()
        return result._replace(
            applied=False,
            error=outcome.error,
            error_code="apply-failed",
            apply_hints=(*hints, *result.apply_hints),
        )
    return result._replace(applied=True, applied_to_index=staged)
