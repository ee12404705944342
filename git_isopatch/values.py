"""The values one step of the procedure hands the next (design: Architecture,
"step modules"): the run resolved and checked (:class:`Start`, steps 1-2),
what the command did (:class:`Ran`, step 5) and the patch (:class:`Extracted`,
step 6).  Every step may import this module; no step imports another.

Annotations are strings, never evaluated (as for every
:class:`~.git.record.Record`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .git.record import Record

if TYPE_CHECKING:  # annotations only: the steps load what they use
    from .git.patch.paths import PatchContents
    from .git.repo import UserRepository
    from .git.result import GitResult
    from .git.shared_state import SharedWrite
    from .git.status import CheckoutState
    from .git.types import CommitId
    from .sandbox.command import CommandOutcome
    from .sandbox.confinement import ConfinementPlan
    from .worktrees.fidelity import Fidelity
    from .worktrees.include import Include


class Start(Record):
    """One run, resolved and checked (black's ``Mode``: nothing left to
    complete).  ``None`` below is a value, never "not resolved yet".

    Attributes:
        command: the argument list to run.
        repository: the user's repository.
        commit: the commit the worktree starts at.
        tree_commit: the commit of the base tree a sandboxed run's worktree
            goes over: ``commit``, or a snapshot's parent (the user's
            ``HEAD``) with the snapshot's difference laid over it (none
            when that difference holds a ``.gitattributes``:
            :func:`.capture._over`).
        includes: the paths to link or copy in, checked.
        sandbox: the confinement plan (:data:`.sandbox.confinement.UNCONFINED`
            with ``--no-sandbox``, or where ``auto`` found no sandbox).
        sandboxed_by_default: confined because ``isopatch.sandbox`` is
            ``auto`` (no ``--sandbox``, no ``true``): a failing command
            gets a hint that the sandbox may be why.
        sandbox_unavailable: ``auto`` found no sandbox here: the command
            runs unconfined, after a warning saying what is missing.
        environ: the caller's environment; ``git_env``: the one for
            git-isopatch's own git calls.
        output: ``-o`` as an absolute path; ``None``: the run's private folder.
        output_folder: the real path of the folder of ``output`` before the
            command ran (the patch goes there, never where a link the
            command put in its place leads); ``output_identity``: the
            device, inode, kind and device number of the character device
            or FIFO ``output`` was then, which the patch is copied into.
        user_head: under ``--staged``/``--include-uncommitted``, the user's
            ``HEAD`` commit the snapshot sits on (``None``: an unborn
            branch, or no snapshot); ``user_index``: the index the snapshot
            was taken from.  Git inside the worktree sees them as its
            ``HEAD`` and index (:mod:`.git.mirror`).
        timeout: seconds; ``None``: no limit.
        tmp_root: where the run's private folder goes.
        worktree_root: where the worktree goes (``isopatch.tmpdir``);
            ``None``: beside the checkout.
        keep, pool, base_trees, max_worktrees, recurse_submodules:
            completed from configuration.
        include_uncommitted, staged, from_head_alone, capture_output,
        command_stdout, apply, progress, diffstat, informational_hints,
        terminal_columns, session:
            as the request says (:class:`~git_isopatch.request.CaptureRequest`).
    """

    command: tuple[str, ...]
    repository: "UserRepository"
    commit: "CommitId"
    tree_commit: "CommitId"
    includes: "tuple[Include, ...]"
    sandbox: "ConfinementPlan"
    sandboxed_by_default: bool
    sandbox_unavailable: bool
    environ: Mapping[str, str]
    git_env: Mapping[str, str]
    output: str | None
    timeout: float | None
    tmp_root: str
    worktree_root: str | None
    keep: bool
    pool: int
    max_worktrees: int
    base_trees: int
    recurse_submodules: bool
    include_uncommitted: bool
    staged: bool
    from_head_alone: bool
    capture_output: bool
    command_stdout: int | None
    apply: bool
    progress: bool
    diffstat: bool
    informational_hints: bool
    terminal_columns: int | None
    output_folder: str | None = None
    output_identity: tuple[int, int, int, int] | None = None
    user_head: "CommitId | None" = None
    user_index: str | None = None
    session: str | None = None


class Ran(Record):
    """What step 5 saw of the command.

    Attributes:
        outcome: how it ended.
        stdout, stderr: the files holding its output, when captured.
        shared_writes: what it changed in the refs and configuration the
            worktree shares with the user's repository.
        checkout_before: the user's checkout before it ran (``None``: not
            looked at, under ``--sandbox``), and ``checkout_changes``:
            the paths of it that changed during the run; ``head_moved``:
            the commits its ``HEAD`` named before and after, when it moved.
        hints: advice for a command that could not run a program.
        fidelity: the worktree just before it ran, and the settings pinned
            for git there (:mod:`.worktrees.fidelity`).
        outside_writes: under the sandbox, what it wrote outside its
            worktree, discarded.
    """

    outcome: "CommandOutcome"
    stdout: str | None
    stderr: str | None
    shared_writes: "tuple[SharedWrite, ...]"
    checkout_before: "GitResult[CheckoutState] | None"
    checkout_changes: tuple[str, ...]
    hints: tuple[str, ...]
    fidelity: "Fidelity"
    outside_writes: tuple[str, ...] = ()
    head_moved: tuple[str, str] | None = None


class Extracted(Record):
    """The patch of one run.

    Attributes:
        patch: its path.
        copied_to: the character device or FIFO of ``-o`` it was copied
            into (``patch`` is then in the run's private folder), or ``None``.
        files: the number of paths in it.
        diffstat: git's diffstat of it, when asked for and git could show it.
        contents: its paths with their status and its line counts, read
            from the patch itself.
    """

    patch: str
    files: int
    diffstat: bytes | None
    contents: "PatchContents"
    copied_to: str | None = None


class SessionPatch(Record):
    """A session after one of its steps (step 6, :mod:`.session_patch`).

    Attributes:
        name: the session's name.
        state: the commit of its worktree now, in its own object store.
        patch: its whole change against its base.
        files: the number of paths in it.
        user_head: the user's ``HEAD`` when the session began (``None``:
            not known).
    """

    name: str
    state: "CommitId"
    patch: str
    files: int
    user_head: "CommitId | None" = None
