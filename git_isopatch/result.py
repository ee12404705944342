"""The result of one run (design: Porcelain v1 has the same fields) and the
output mode it is shown in, on their own so that rendering reads them
without importing the procedure.

Annotations here are evaluated as the module loads (no ``from __future__
import annotations``): ``NamedTuple`` compiles each string annotation as it
makes the class, on every run; only names imported for type checking are
strings."""

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # annotations only: importing the result stays cheap
    from .git.patch.paths import PathChange
    from .git.shared_state import SharedWrite
    from .git.types import CommitId


class CaptureResult(NamedTuple):
    """What :func:`capture` hands back (design: Porcelain v1 has the same fields).

    Attributes:
        base: full id of the commit the worktree started at.
        exit_code: the command's exit status; 128+N when signal N ended it
            or git-isopatch received it; 124 on timeout; 126/127 when the
            command could not be run.
        patch_path: the patch file, or ``None`` when extraction failed.
        files: number of paths in the patch, or ``None`` when extraction failed.
        stdout: file holding the command's stdout, when captured.
        stderr: file holding the command's stderr, when captured.
        limit_reached: the sandbox's bound the command reached
            (``processes``, ``memory``): it was stopped; ``limit_value``:
            that bound (a count, or bytes).
        stdout_text, stderr_text: the end of each captured file, inline
            (:func:`.worktrees.results.output_tail`: at most 16 KiB, from a
            line's start), for ``--json`` and MCP; ``None`` when not captured.
        worktree_path: the worktree, when it was kept (``keep`` or failure).
        tmpdir: the private temporary folder of this run (mode 0700), the
            caller's to delete (:func:`git_isopatch.worktrees.results.discard`)
            once it has read the patch and output; already deleted when it
            holds nothing reported here (``output`` without ``capture_output``).
            Folders left behind expire after two weeks (checked at most once a
            day per repository) and with ``git isopatch prune``.
        error: one line saying why extraction failed, else ``None``.
        error_code: the stable code of that failure (see
            :data:`git_isopatch.errors.FAILURE_TABLE`), else ``None``.
        timed_out: the timeout expired.
        signal: the signal git-isopatch received and forwarded, else ``None``.
        command_error: why the command could not be started, else ``None``.
        head_moved: unconfined, the commits the user's ``HEAD`` named before
            and after the command, when it moved meanwhile (the command
            moved the checked-out branch, a shared ref); else ``None``.
        checkout_changes: paths of the user's work tree that changed while
            the command ran, as ``git status`` sees them (a command that
            wrote there through an absolute path, a ``--link``, or the user
            editing meanwhile), from the top, sorted; empty when nothing
            changed or the look failed.
        shared_writes: refs and configuration of the user's repository that
            changed while the command ran (a linked worktree shares them;
            see :mod:`git_isopatch.git.shared_state`), refs in the order of
            their names, then the configuration file; empty when nothing
            changed.
        timeout: the timeout in force, in seconds (``timeout`` or
            ``isopatch.timeout``), or ``None`` for no limit.
        hints: one-line advice where users get stuck (a command that could
            not run a program: :func:`command_hints`; signing the sandbox
            keeps from the command); empty otherwise.
        informational_hints: one-line advice that only informs (a failing
            command ran in the default sandbox, which may be why; a run
            from ``HEAD`` left the uncommitted changes out), after ``hints``;
            ``-q`` leaves them off stderr, as git's ``-q`` does its
            informational advice.
        top: the top of the user's work tree (``git -C <top> apply`` brings
            the patch home from anywhere).
        diffstat: ``git diff --stat --summary`` of the patch, coloured or
            not (see :attr:`.request.CaptureRequest.diffstat`), when asked
            for and the patch is not empty; else ``None``.
        outside_writes: under the sandbox, the paths outside the worktree
            (and the git directory) the command wrote, each write discarded
            with the run's copy-on-write layers, in order; empty otherwise.
        applied: ``None`` when ``apply`` was not asked for; ``True`` when
            the patch was applied to the work tree; ``False`` when it was
            not: the command did not exit 0, the patch is empty, or it did
            not apply (then ``error_code`` is ``apply-failed``, nothing was
            written, and the patch is kept).
        applied_to_index: with ``applied``, the patch went into the index
            as well as the work tree (``--staged --apply``).
        apply_hints: advice on an ``--apply``, shown after its ``error:``,
            or after the summary when it applied (the porcelain's ``hint``
            records hold them after ``hints``); empty otherwise.
        patch_copied_to: the character device or FIFO ``-o`` named
            (``/dev/null``, a terminal), which the patch was copied into, as
            ``--stdout`` copies it to stdout; ``patch_path`` is then in
            ``tmpdir``.
        left_out_edits: with ``--apply`` of a run from ``HEAD`` alone, the
            paths the patch touches (from the top) that held uncommitted
            edits when it was applied: the command never saw them
            (``apply_hints`` names them and ``--include-uncommitted``).
        command: the command that ran, as its argument list.
        command_signal: the signal that ended the command (one it died of,
            or one git-isopatch received and forwarded), else ``None``.
        paths: each path of the patch with its status, as ``git diff
            --name-status`` (:class:`.git.patch.paths.PathChange`), in the
            patch's order; ``None`` when extraction failed.
        insertions: lines the patch adds (as ``git apply --numstat`` counts; binary
            files count none), or ``None`` when extraction failed.
        deletions: lines the patch removes, likewise.
        outside_writes: paths outside the worktree that the sandboxed
            command wrote (in its copy-on-write layer, discarded), sorted.
        outside_folders: the same writes by the folder they lie in, for a
            person (:func:`.sandbox.caches.place`: ``~/.cache/black``, the
            checkout), in the order met: the folder, how many paths, and
            whether it is a tool's cache, log or temporary folder.
        duration: seconds the run took, from the start of the request to
            its result, or ``None`` when not measured.
        sandboxed: whether the command ran in the sandbox (under
            ``isopatch.sandbox=auto`` the machine decides); ``None`` when
            it did not run.
        sandbox_unavailable: ``isopatch.sandbox=auto`` found no sandbox
            here and ran the command unconfined (a warning said what is
            missing), so ``--sandbox`` would fail.
        session: the name of the session this run was a step of
            (``--session``); ``patch_path`` then holds the step's own
            change, and ``session_patch`` the session's whole change
            against ``base`` after it (``None`` when it could not be
            taken), with ``session_files`` paths; ``session_broken``: why
            the session is broken now, when this step's extraction failed too
            (a hint after its error).
    """

    base: "CommitId"
    exit_code: int
    patch_path: str | None
    files: int | None
    stdout: str | None
    stderr: str | None
    worktree_path: str | None
    tmpdir: str
    error: str | None = None
    error_code: str | None = None
    timed_out: bool = False
    signal: int | None = None
    command_error: str | None = None
    timeout: float | None = None
    shared_writes: "tuple[SharedWrite, ...]" = ()
    hints: tuple[str, ...] = ()
    informational_hints: tuple[str, ...] = ()
    top: str | None = None
    diffstat: bytes | None = None
    applied: bool | None = None
    applied_to_index: bool = False
    apply_hints: tuple[str, ...] = ()
    left_out_edits: tuple[str, ...] = ()
    patch_copied_to: str | None = None
    checkout_changes: tuple[str, ...] = ()
    head_moved: tuple[str, str] | None = None
    command: tuple[str, ...] = ()
    command_signal: int | None = None
    paths: "tuple[PathChange, ...] | None" = None
    insertions: int | None = None
    deletions: int | None = None
    outside_writes: tuple[str, ...] = ()
    outside_folders: tuple[tuple[str, int, bool], ...] = ()
    duration: float | None = None
    sandboxed: bool | None = None
    sandbox_unavailable: bool = False
    stdout_text: str | None = None
    stderr_text: str | None = None
    limit_reached: str | None = None
    limit_value: int | None = None
    session: str | None = None
    session_patch: str | None = None
    session_files: int | None = None
    session_broken: str | None = None


class OutputMode(NamedTuple):
    """How the command line shows a result; the procedure never reads it.

    Attributes:
        porcelain: porcelain v1 on stdout (``--porcelain``).
        nul: with ``porcelain``, records end with NUL, nothing quoted (``-z``).
        json: one JSON object on stdout (``--json``).
        stdout: the patch on stdout (``--stdout``).
        exit_code: exit 1 when the patch is not empty and the command
            succeeded (``--exit-code``).
        quiet: no summary on stderr (``-q``; implied by ``porcelain`` and
            ``json``).
        informational: the result's ``informational_hints`` on stderr;
            ``False`` with ``-q``, which keeps errors, warnings and the
            hints that explain them, as git's ``-q`` drops checkout's
            detached-HEAD advice but not push's advice on rejected refs.
    """

    porcelain: bool = False
    nul: bool = False
    json: bool = False
    stdout: bool = False
    exit_code: bool = False
    quiet: bool = False
    informational: bool = True

    @property
    def machine(self) -> bool:
        """The result goes to stdout for a program (porcelain or JSON)."""
        return self.porcelain or self.json
