"""Step 7 of the procedure: what the run did beyond its patch, and the result.

The writes the command made to state the worktree shares with the user's
repository (refs, configuration) and to the user's checkout, the hints
(:mod:`.hints`), ``--apply``, and the
:class:`~git_isopatch.result.CaptureResult` itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .errors import IsopatchError
from .git.result import GitResult, Ok
from .git.status import CheckoutState, read_checkout
from .git.types import CommitId
from .hints import (
    UNCOMMITTED_HINT,
    checkout_path_hints,
    hard_link_hints,
    left_out_edits_hint,
    sandbox_hint,
)
from .result import CaptureResult
from .values import Extracted, Ran, SessionPatch, Start
from .worktrees.results import output_tail


def outside_folders(start: Start, paths: tuple[str, ...]) -> tuple[tuple[str, int, bool], ...]:
    """The writes outside the worktree by folder (see
    :attr:`.result.CaptureResult.outside_folders`)."""
    if not paths:
        return ()
    from .sandbox.caches import places  # only where the sandbox discarded writes

    return places(paths, start.environ, start.repository.top)


def _edited(start: Start, checkout: GitResult[CheckoutState] | None) -> CheckoutState | None:
    """The user's work tree as the look before the command saw it, or as
    it is now where none was taken (in the sandbox, which the checkout's
    writes cannot reach); ``None`` when the look failed."""
    if checkout is None:
        repository = start.repository
        checkout = read_checkout(repository.git_dir, repository.top, env=start.git_env)
    match checkout:
        case Ok(state):
            return state
    return None


def _left_out_edits(start: Start, ran: Ran, extracted: Extracted) -> tuple[str, ...]:
    """The paths of the patch (from the top) that hold uncommitted edits
    of the user's (an untracked folder counts for what lies in it) in a
    run from ``HEAD`` alone: ``--apply`` puts the patch around them."""
    if not start.from_head_alone:
        return ()
    state = _edited(start, ran.checkout_before)
    if state is None or not state.entries:
        return ()
    folders = [p for p in state.entries if p.endswith(b"/")]
    touched = []
    for change in extracted.contents.paths or ():
        for path in (change.path, change.old_path):
            name = os.fsencode(path) if path is not None else None
            if (
                name is not None
                and path not in touched
                and (name in state.entries or any(name.startswith(f) for f in folders))
            ):
                touched.append(path)
    return tuple(touched)


def _left_out_uncommitted(start: Start, ran: Ran) -> bool:
    """The run started from ``HEAD`` (no snapshot) while the user's work
    tree had changes (:func:`_edited`), and the command was not merely
    missing from ``PATH`` (no ``/`` in its name: the work tree had no part
    in that)."""
    if not start.from_head_alone:
        return False
    if ran.outcome.start_error is not None and "/" not in start.command[0]:
        return False
    state = _edited(start, ran.checkout_before)
    return state is not None and bool(state.entries)


def _bound(start: Start, reached: str | None) -> int | None:
    """The value of the bound the command reached."""
    limits = getattr(start.sandbox, "limits", None)
    if reached is None or limits is None:
        return None
    return limits.processes if reached == "processes" else limits.memory


def report(
    start: Start,
    ran: Ran,
    extracted: Extracted | IsopatchError,
    state: dict[str, int | None],
    private_dir: str,
    kept: str | None,
    warn: Callable[[str], None],
    session: SessionPatch | IsopatchError | None = None,
) -> CaptureResult:
    """Step 7: the result of the run (``extracted``: the patch, or why
    extraction failed: then the worktree is ``kept`` for inspection), with
    ``--apply`` done when asked and the command exited 0
    (:func:`.bring_home.apply_result`: one apply at a time, a signal in
    ``state`` stops it before it writes, ``warn`` says it waits).  A
    session's step (``start.session``) brings home the session's whole
    change (``session``); one whose state could not be recorded
    (``session`` a failure: the session is broken) fails, its step's patch
    kept and nothing applied (a hint after extraction's own failure)."""
    received = state.get("received")
    result = CaptureResult(
        base=start.commit,
        exit_code=128 + received if received is not None else ran.outcome.exit_code,
        patch_path=None,
        files=None,
        stdout=ran.stdout,
        stderr=ran.stderr,
        worktree_path=kept,
        tmpdir=private_dir,
        timed_out=ran.outcome.timed_out,
        signal=received,
        command_error=ran.outcome.start_error,
        timeout=start.timeout,
        shared_writes=ran.shared_writes,
        hints=ran.hints
        + hard_link_hints(ran.outcome, ran.outside_writes)
        + checkout_path_hints(
            start.command, start.repository.top, ran.outside_writes, ran.checkout_changes
        ),
        informational_hints=sandbox_hint(start, ran.outcome),
        top=start.repository.top,
        checkout_changes=ran.checkout_changes,
        head_moved=ran.head_moved,
        command=start.command,
        command_signal=received if received is not None else ran.outcome.died_of,
        outside_writes=ran.outside_writes,
        outside_folders=outside_folders(start, ran.outside_writes),
        sandboxed=start.sandbox.confined,
        sandbox_unavailable=start.sandbox_unavailable,
        limit_reached=ran.outcome.limit,
        limit_value=_bound(start, ran.outcome.limit),
        stdout_text=output_tail(ran.stdout),
        stderr_text=output_tail(ran.stderr),
        session=start.session,
    )
    if isinstance(session, SessionPatch):
        result = result._replace(session_patch=session.patch, session_files=session.files)
    if start.session is not None:
        moved = _moved(start, session.user_head if isinstance(session, SessionPatch) else None)
        result = result._replace(informational_hints=(*result.informational_hints, *moved))
    if isinstance(extracted, IsopatchError):
        if isinstance(session, IsopatchError):  # a hint after the step's own error
            result = result._replace(session_broken=f"{session.message}; {session.hint}")
        return result._replace(error=extracted.message, error_code=extracted.code)
    informational = result.informational_hints
    if not extracted.files and start.informational_hints and _left_out_uncommitted(start, ran):
        informational = (*informational, UNCOMMITTED_HINT)
    result = result._replace(
        patch_path=extracted.patch,
        patch_copied_to=extracted.copied_to,
        files=extracted.files,
        diffstat=extracted.diffstat,
        informational_hints=informational,
        paths=extracted.contents.paths,
        insertions=extracted.contents.insertions,
        deletions=extracted.contents.deletions,
    )
    if isinstance(session, IsopatchError):
        return result._replace(error=session.message, error_code=session.code)
    return _apply(start, ran, extracted, result, state, warn) if start.apply else result


def _apply(
    start: Start,
    ran: Ran,
    extracted: Extracted,
    result: CaptureResult,
    state: dict[str, int | None],
    warn: Callable[[str], None],
) -> CaptureResult:
    """``--apply``: the patch brought home when the command exited 0 and
    it is not empty (:func:`.bring_home.apply_result`), with the hint that
    names the edited files a run from ``HEAD`` left out; a session's step
    brings home the session's whole change."""
    session = start.session is not None
    files = result.session_files if session else extracted.files
    if not files or result.exit_code != 0:
        return result._replace(applied=False)
    from .bring_home import apply_result  # only with --apply: it loads git.apply

    left_out = () if session else _left_out_edits(start, ran, extracted)  # before the apply
    if left_out:
        hints = (*result.apply_hints, left_out_edits_hint(left_out))
        result = result._replace(left_out_edits=left_out, apply_hints=hints)
    whole = result._replace(patch_path=result.session_patch, files=files) if session else result
    applied = apply_result(
        whole,
        start.repository,
        env=start.git_env,
        environ=start.environ,
        staged=start.staged,
        signal_state=state,
        warn=warn,
    )
    return applied._replace(patch_path=result.patch_path, files=result.files)


def _moved(start: Start, began: CommitId | None) -> tuple[str, ...]:
    """The hint for a session begun at the user's ``HEAD`` ``began``, which
    has moved since (not known: when ``HEAD`` is no longer its base, or,
    for a snapshot's, the commit it was taken on): it keeps its base.  A
    session begun at another ``--base`` gets none while ``HEAD`` stays."""
    from .git.repo import resolve_commit
    from .git.result import Ok
    from .git.snapshot import snapshot_parent
    from .git.types import Ref

    match resolve_commit(start.repository, Ref("HEAD"), env=start.git_env):
        case Ok(head):
            pass
        case _:
            return ()
    if began is not None:
        if head == began:
            return ()
    elif head == start.commit:
        return ()
    elif snapshot_parent(start.repository.git_dir, start.commit, start.git_env) == head:
        return ()
    return (
        f"session '{start.session}' keeps its base {start.commit[:12]}; HEAD is now {head[:12]}",
    )
