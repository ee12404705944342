"""What a run's result shows and how it ends: the messages, which of the
formats goes where (:mod:`git_isopatch.render`), what may be deleted, and
the exit status, as pure functions of the result and the output mode
(design: Exit status, Architecture).

Nothing here writes or deletes: :func:`plan` says, ``cli.py`` does the
I/O.  The formats are imported only when shown, so a quiet run loads
nothing more than this.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .result import CaptureResult, OutputMode

#: A known failure (git's ``die()``): not a work tree, bad base, ...
FATAL_STATUS = 128
#: A usage error (git's parse-options).
USAGE_STATUS = 129
#: Its ``error-code`` with ``--porcelain`` or ``--json``.
USAGE_ERROR_CODE = "usage"


def fatal_lines(message: str, hint: str | None = None) -> list[str]:
    """``fatal: <message>`` and a ``hint:`` line per line of ``hint``
    (git's advice, as the candidates of an ambiguous short id, spans
    several)."""
    return [f"fatal: {message}", *(f"hint: {line}" for line in (hint or "").splitlines())]


def _some(names: Sequence[str]) -> str:
    """The first five of ``names`` and how many more."""
    more = len(names) - 5
    return ", ".join(names[:5]) + (f" and {more} more" if more > 0 else "")


#: After the checkout changed in a run unconfined by choice (``--no-sandbox``,
#: ``isopatch.sandbox=false``).
CHECKOUT_HINT = (
    "hint: use --sandbox to keep the command's writes in its worktree; "
    "if you edited these files meanwhile, nothing is wrong"
)
#: The same where ``auto`` found no sandbox: ``--sandbox`` would be fatal,
#: and the fallback's warning says what the machine lacks.
CHECKOUT_HINT_NO_SANDBOX = (
    "hint: where the sandbox is available it keeps the command's writes in its worktree "
    "('warning: no sandbox here' says what it lacks); "
    "if you edited these files meanwhile, nothing is wrong"
)


def outside_line(result: CaptureResult) -> list[str]:
    """The one line that sums up the sandboxed command's discarded writes
    outside its worktree: how many, under which folders.  Writes that
    only fill a tool's caches or logs, or a temporary folder, are said in
    an ``isopatch:`` line (they happen on every run of black, npm,
    pre-commit, cargo: nothing to warn of); any other makes it a
    ``warning:`` (the command wrote into the checkout, or a dotfile)."""
    if not result.outside_folders:
        return []
    from .git.quote import quote_c_style  # not for -h: see usage

    count = sum(n for _, n, _ in result.outside_folders)
    folders = _some(
        [
            quote_c_style(os.fsencode(folder)).decode("ascii")
            for folder, _, _ in result.outside_folders
        ]
    )
    paths = f"{count} path{'' if count == 1 else 's'}"
    if all(tool_own for _, _, tool_own in result.outside_folders):
        return [f"isopatch: discarded {paths} written to caches and temporary folders: {folders}"]
    return [f"warning: the command wrote {paths} outside its worktree, discarded: {folders}"]


def notices(
    result: CaptureResult, *, informational: bool = True, summary: bool = True
) -> list[str]:
    """What went wrong or needs saying before the output: the command that
    could not start, its hints (the informational ones only with
    ``informational``: not with ``-q``), the timeout, and what the command
    changed outside its worktree (``error:``, ``hint:``, ``warning:``
    lines; its discarded writes in one line, :func:`outside_line`, only
    with ``summary``: not with ``-q``, nor with porcelain or JSON, which
    list them)."""
    from .git.quote import quote_c_style, quoted, shell_quoted  # not for -h: see usage

    lines = [f"error: {result.command_error}"] if result.command_error else []
    lines += [f"hint: {hint}" for hint in result.hints]
    if informational:
        lines += [f"hint: {hint}" for hint in result.informational_hints]
    if result.timed_out:
        seconds = result.timeout or 0
        lines.append(
            f"error: the command timed out after {seconds:g} second{'' if seconds == 1 else 's'}"
        )
    if result.limit_reached is not None:
        lines.append(limit_line(result.limit_reached, result.limit_value or 0))
    if result.shared_writes and all(write.discarded for write in result.shared_writes):
        lines.append(
            "warning: the command changed what the worktree shares with your repository, "
            "in its copy-on-write view (discarded): "
            + _some([str(write) for write in result.shared_writes])
        )
    elif result.shared_writes:
        lines.append(
            "warning: your repository changed while the command ran: "
            + _some([str(write) for write in result.shared_writes])
        )
        lines.append(
            "hint: a worktree shares refs, the stash and configuration with your "
            "repository; git branch, tag, stash or config in the command write there"
        )
        for write in result.shared_writes:
            if write.where is not None and write.change == "created":
                lines.append(
                    f"hint: the command added the worktree {quoted(write.where)}: its files "
                    f"stay there; 'git worktree remove {shell_quoted(write.where)}' when done "
                    "with it"
                )
    if summary:
        lines += outside_line(result)
    if result.head_moved is not None:
        old, new = result.head_moved
        lines.append(
            f"warning: your HEAD moved while the command ran, from {old[:12]} to {new[:12]}; "
            "your work tree did not move with it, so git status compares it with the new commit"
        )
        lines.append(
            f"hint: 'git reset --soft {old[:12]}' puts HEAD back and leaves the index and "
            "the work tree as they are"
        )
    if result.checkout_changes:
        names = [quote_c_style(os.fsencode(p)).decode("ascii") for p in result.checkout_changes]
        lines.append("warning: your work tree changed while the command ran: " + _some(names))
        lines.append(CHECKOUT_HINT_NO_SANDBOX if result.sandbox_unavailable else CHECKOUT_HINT)
    return lines


def limit_line(reached: str, value: int) -> str:
    """The ``error:`` of a command the sandbox stopped at a bound."""
    if reached == "processes":
        return (
            f"error: the command reached its limit of {value} processes and was stopped "
            "(--max-processes, isopatch.maxProcesses)"
        )
    size = f"{value / (1 << 30):.1f} GiB" if value >= 1 << 30 else f"{value >> 20} MiB"
    return (
        f"error: the command reached its memory limit of {size} and was stopped "
        "(--max-memory, isopatch.maxMemory)"
    )


#: The second hint when --apply fails for a run made from HEAD alone:
#: git apply needs each hunk's context lines as they were, so an edit made
#: before the run near a hunk fails it as one made during the run does.
INCLUDE_UNCOMMITTED_HINT = (
    "the patch was made from HEAD; if your work tree already differed from it "
    "near these lines, --include-uncommitted starts from your work tree as it is"
)


def failure_lines(
    result: CaptureResult, *, from_head: bool = False, informational: bool = True
) -> list[str]:
    """Why the run failed after the command ran, last on stderr: ``--apply``
    could not apply (the patch is kept; ``from_head``: the run started from
    ``HEAD`` alone, so ``--include-uncommitted`` is named for hunks that do
    not fit, unless the apply's hint names the edits it left out; not for a
    failure to write, which no edit explains), or extraction failed (the
    worktree is kept).  The apply's own hints (``apply_hints``) come here,
    after its ``error:``, or after the summary of an apply that worked
    (only with ``informational``: not with ``-q``); else nothing."""
    from .git.quote import quoted

    if result.error_code == "apply-failed":  # as git apply and git am: error:, then hint:
        from .git.apply.compute import DOES_NOT_APPLY

        lines = [
            f"error: {result.error}",
            f"hint: nothing was written; the patch is kept at {quoted(result.patch_path or '')}",
            *(f"hint: {hint}" for hint in result.apply_hints),
        ]
        unfit = (result.error or "").startswith(DOES_NOT_APPLY)
        generic = from_head and unfit and not result.left_out_edits  # else named by the apply
        return lines + ([f"hint: {INCLUDE_UNCOMMITTED_HINT}"] if generic else [])
    if result.applied and informational:  # the apply's own advice, after its summary
        return [f"hint: {hint}" for hint in result.apply_hints]
    if result.error is not None:
        if result.worktree_path is None:  # a session's step: its worktree stays its own
            broken = [f"hint: {result.session_broken}"] if result.session_broken else []
            return [f"fatal: {result.error}", *broken]
        return [
            f"fatal: {result.error}",
            f"hint: the worktree is kept for inspection at {quoted(result.worktree_path)}",
        ]
    return []


def stdout_failure_lines(result: CaptureResult, reason: str) -> list[str]:
    """The patch could not be copied to stdout (``--stdout``): it stays."""
    from .git.quote import quoted

    return [
        f"fatal: could not write the patch to stdout: {reason}",
        f"hint: the patch is kept at {quoted(result.patch_path or '')}",
    ]


def exit_status(result: CaptureResult | None, mode: OutputMode) -> int:
    """The design's exit-status table, one row a branch (design: Exit
    status); ``result`` is ``None`` for a failure before anything existed.
    The usage error (129) is decided by the parser, before a mode exists;
    a patch that cannot be written to stdout is the CLI's (128)."""
    if result is None:  # not a work tree, bad base, bad config value, ...
        return FATAL_STATUS
    if result.error_code == "apply-failed":  # --apply could not apply: patch kept
        return FATAL_STATUS
    if result.error is not None:  # extraction failed: worktree kept
        # a signal that stopped the run says more than the failure it caused
        return result.exit_code if result.signal is not None else FATAL_STATUS
    if mode.exit_code and result.exit_code == 0:  # --exit-code
        return 1 if result.files else 0
    # the command's own code: also 124 (timeout), 126/127 (not executable /
    # not found) and 128+N (signal N), which the procedure sets
    return result.exit_code


class Rendering(NamedTuple):
    """What the command line writes for one result, in this order, and
    what it may delete afterwards (:func:`plan`).

    Attributes:
        notices: stderr lines first (:func:`notices`).
        record: porcelain or JSON for stdout, or ``None``.
        patch_to_stdout: the patch file to copy to stdout (``--stdout``).
        diffstat: ``git diff --stat`` bytes for stderr, or ``None``.
        summary: stderr lines after the diffstat (:func:`summary_lines`).
        closing: stderr lines last (:func:`failure_lines`).
        discard: the run's private folder holds nothing anyone is told of
            (``--stdout``, ``-q``, an applied or empty patch): it may go.
        drop_patch: when the folder cannot go (it holds a kept worktree,
            or the session's whole change the summary names), the patch
            file may (it went to stdout, or it is empty).
        status: the exit status (:func:`exit_status`).
    """

    notices: tuple[str, ...]
    record: bytes | None
    patch_to_stdout: str | None
    diffstat: bytes | None
    summary: tuple[str, ...]
    closing: tuple[str, ...]
    discard: bool
    drop_patch: bool
    status: int


def plan(
    result: CaptureResult, mode: OutputMode, *, cwd: str, from_head: bool = False
) -> Rendering:
    """How ``result`` is shown in ``mode`` (``cwd``: where the user stands,
    for the next step's command; ``from_head``: see :func:`failure_lines`)."""
    record = None
    if mode.machine:
        from .render import encode, result_fields

        record = encode(result_fields(result), mode)
    closing = tuple(failure_lines(result, from_head=from_head, informational=mode.informational))
    failed_apply = result.error_code == "apply-failed"
    status = exit_status(result, mode)
    if result.error is not None and not failed_apply:  # nothing else to show
        shown = tuple(notices(result, informational=mode.informational, summary=not mode.quiet))
        return Rendering(shown, record, None, None, (), closing, False, False, status)
    # a patch in the run's private folder was not asked for by -o
    private = (
        not failed_apply
        and result.patch_path is not None
        and os.path.dirname(result.patch_path) == result.tmpdir
    )
    on_stdout = mode.stdout and result.patch_path is not None and not failed_apply
    # like stdout: a device or FIFO of -o took a copy (the file stays for porcelain)
    sent = on_stdout or (result.patch_copied_to is not None and not mode.machine)
    # nothing to read, as git diff prints nothing (the record names it all the same)
    empty = private and not mode.machine and not result.files
    summary: tuple[str, ...] = ()
    if not mode.quiet:
        from .render import summary_lines

        copied = mode.stdout or result.patch_copied_to is not None
        shown_patch = not ((copied and private) or empty)
        summary = tuple(summary_lines(result, show_patch=shown_patch, cwd=cwd))
    unread = not mode.machine and (mode.quiet or bool(result.applied))
    # the summary names the session's whole change, in the same folder
    whole = not mode.quiet and bool(result.session_files) and not result.applied
    return Rendering(
        notices=tuple(notices(result, informational=mode.informational, summary=not mode.quiet)),
        record=record,
        patch_to_stdout=result.patch_path if on_stdout else None,
        diffstat=None if mode.quiet else result.diffstat or None,
        summary=summary,
        closing=closing,
        discard=not failed_apply and (((sent or empty) and private and not whole) or unread),
        drop_patch=(sent or empty) and private,
        status=status,
    )
