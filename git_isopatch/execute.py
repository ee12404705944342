"""Step 5 of the procedure: the command, run in its worktree, confined.

The command's output goes to 0600 files of the run's private folder when
captured; it runs in the worktree folder that mirrors where the user stands
(:func:`.worktrees.placement.enter_prefix`), with git's repository
variables removed from its environment, through the run's
:class:`.sandbox.confinement.Confinement` (:mod:`.sandbox.command`).
Around it, what the command changed beyond the worktree is looked at
(:mod:`.report`), and the worktree's ``commondir``/``gitdir`` are put back
if the command rewrote them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import IO

from .checkout import CheckoutLook, checkout_changes
from .errors import known_failure, known_os_failure
from .git.admin_files import read_pointers, restore_pointers
from .git.quote import quoted
from .git.result import Err, Ok
from .git.run import command_environment
from .git.shared_state import read_shared_state
from .sandbox.command import CommandOutcome
from .sandbox.confinement import Confinement, confine
from .values import Ran, Start
from .worktrees.fidelity import Fidelity, Proof, look_before_command, look_over_base_tree
from .worktrees.isolation import Isolation
from .worktrees.placement import enter_prefix, not_other_runs
from .worktrees.results import open_private


@contextlib.contextmanager
def command(
    start: Start,
    isolation: Isolation,
    state: dict[str, int | None],
    warn: Callable[[str], None],
    checkout: CheckoutLook,
    ending: contextlib.ExitStack,
    meanwhile: Callable[[], None] | None = None,  # called once a confined command started
) -> Iterator[tuple[Ran, Confinement]]:
    """Run the command; yield what it did and the confinement, alive for
    the body (git-isopatch's own git in the worktree runs confined too),
    then ended (:meth:`.sandbox.confinement.Confinement.end`); the rest of
    its end is left on ``ending``, closed after the worktree's (step 7).
    ``state`` carries a signal received (:func:`.sandbox.command.forward_signals`);
    ``checkout`` is the look at the user's checkout before the command, under way.

    Raises:
        IsopatchError: the sandbox could not be entered, or a run's file or folder not made.
    """
    repository, layer, git_env = isolation.repository, isolation.layer, start.git_env
    env = command_environment(start.environ)
    before = read_shared_state(repository.git_dir, repository.common_dir, env=git_env)
    with contextlib.ExitStack() as stack:
        try:
            cwd = _enter(isolation, repository.prefix)
            fidelity = _look_before(start, isolation, warn)
            _mirror_index(start, isolation)
            env = fidelity.command_env(env)
            if isolation.session is not None:  # its store read, never written
                env = isolation.session.command_env(env)
            checkout_before = checkout.result()  # None under --sandbox: it cannot change
            stdout, stderr, paths = _output(start, isolation.private_dir, stack)
            confinement = ending.enter_context(
                confine(
                    start.sandbox,
                    worktree=isolation.worktree if layer is None else layer.overlay,
                    admin_dir=isolation.admin_dir,
                    common_dir=repository.common_dir,
                    private_dir=isolation.private_dir,
                    env=env,
                    streams=(stdout, stderr),
                    top=repository.top,
                )
            )
            stack.callback(confinement.end)  # however the block ends
            if start.pool and not confinement.confined:  # it may go back to the pool
                confinement = stack.enter_context(_watched())
            pointers = read_pointers(isolation.admin_dir)
            with contextlib.ExitStack() as files:
                for stream in (s for s in (stdout, stderr) if hasattr(s, "close")):  # files
                    files.callback(stream.close)
                outcome = confinement.run_command(
                    start.command,
                    cwd=cwd,
                    env=env,
                    stdout=stdout,
                    stderr=stderr,
                    timeout=start.timeout,
                    signal_state=state,
                    meanwhile=meanwhile,
                )
        except OSError as exc:  # the folder or the output files cannot be made
            where = exc.filename or isolation.private_dir
            raise known_os_failure(f"could not create '{where}'", exc) from exc
        _restore_pointers(isolation, pointers, warn)
        ours = (isolation.private_dir, isolation.container)
        changes, head_moved = checkout_changes(checkout_before, repository, ours, git_env)
        ran = Ran(
            outcome=outcome,
            stdout=paths[0],
            stderr=paths[1],
            shared_writes=not_other_runs(confinement.shared_writes(before, repository, git_env)),
            outside_writes=confinement.outside_writes(repository.common_dir),
            checkout_before=checkout_before,
            checkout_changes=changes,
            head_moved=head_moved,
            hints=_hints(start, outcome, isolation, paths[1], confinement),
            fidelity=fidelity,
        )
        yield ran, confinement


def _watched() -> contextlib.AbstractContextManager[Confinement]:
    """:func:`.sandbox.orphans.watched`, loaded by a pooled unconfined run alone."""
    from .sandbox.orphans import watched

    return watched()


def _enter(isolation: Isolation, prefix: str) -> str:
    """The folder of the worktree the command runs in
    (:func:`.worktrees.placement.enter_prefix`; over a base tree, refused
    as there where the base tree has no folder, :func:`.worktrees.run_layer.refuse_prefix_over`)."""
    if isolation.layer is not None:
        from .worktrees.run_layer import refuse_prefix_over

        refuse_prefix_over(isolation.layer, prefix)
    return enter_prefix(isolation.worktree, prefix)


def _hints(
    start: Start,
    outcome: CommandOutcome,
    isolation: Isolation,
    stderr: str | None,
    confinement: Confinement,
) -> tuple[str, ...]:
    """:func:`.hints.ran_hints` for the command that ran in ``isolation``."""
    from .hints import ran_hints  # after the command: loaded while it runs

    worktree, files = isolation.worktree, isolation.files
    return ran_hints(start, outcome, worktree, stderr, confinement.confined, files)


def _look_before(start: Start, isolation: Isolation, warn: Callable[[str], None]) -> Fidelity:
    """The worktree just before the command (:mod:`.worktrees.fidelity`).
    A worktree claimed from the pool was proved fresh by its claim; what
    step 4 checks out after it (the sparse files of
    ``--include-uncommitted``, submodules) is why its proof may not hold,
    and then git is asked; where attributes apply (the claim's listing
    says whether a ``.gitattributes`` is tracked), the files a conversion
    applies to are read again.  Linked and copied paths are never
    tracked (:func:`.worktrees.include.refuse_tracked`): they change no
    tracked path.  A session's step starts where its last step left it."""
    layer = isolation.layer
    if layer is not None:
        from .worktrees.base_look import look_of

        return look_over_base_tree(
            isolation.worktree,
            isolation.admin_dir,
            repository=isolation.repository,
            env=start.git_env,
            settings=isolation.settings,
            warn=warn,
            baseline=look_of(layer.pin.tree.admin_dir, layer.pin.tree.record.commit).baseline,
            locate=layer.locate_before,
        )
    proved = (
        isolation.proved_fresh and not start.include_uncommitted and not start.recurse_submodules
    )
    session = isolation.session
    return look_before_command(
        isolation.worktree,
        isolation.admin_dir,
        start.commit if session is None else session.since,
        repository=isolation.repository,
        env=start.git_env if session is None else session.env(start.git_env),
        exclude=[include.path for include in start.includes],
        warn=warn,
        proved=_proof(isolation, proved),
    )


def _mirror_index(start: Start, isolation: Isolation) -> None:
    """From a snapshot of the work tree, git in the worktree sees the
    user's index as its own (:func:`.git.mirror.mirror_index`; ``HEAD``
    is step 4's): after the look before the command, which compares the
    files with the snapshot through the index as the checkout wrote it.

    Raises:
        IsopatchError: a classified git failure.
    """
    if not start.include_uncommitted or start.user_index is None:
        return
    from .git.mirror import mirror_index

    match mirror_index(
        isolation.worktree,
        isolation.admin_dir,
        start.commit,
        user_git_dir=isolation.repository.git_dir,
        user_index=start.user_index,
        env=start.git_env,
    ):
        case Err(error):
            raise known_failure(f"could not give '{isolation.worktree}' your index", error)
        case Ok():
            pass


def _proof(isolation: Isolation, proved: bool) -> Proof | None:
    """What the worktree's claim proved, or a session's later step: no look."""
    if isolation.session is not None and isolation.session.steps:
        return Proof(tracks_attributes=True, fresh=False)
    return Proof(isolation.tracks_attributes) if proved else None


def _output(
    start: Start, private_dir: str, stack: contextlib.ExitStack
) -> tuple[int | IO[bytes] | None, IO[bytes] | None, tuple[str | None, str | None]]:
    """The command's stdout and stderr: 0600 files of ``private_dir`` when
    the output is captured (closed by ``stack``), else as the caller asked
    (``start.command_stdout``; ``None``: ours)."""
    if not start.capture_output:
        return start.command_stdout, None, (None, None)
    stdout_path = os.path.join(private_dir, "stdout")
    stderr_path = os.path.join(private_dir, "stderr")
    stdout = stack.enter_context(open_private(stdout_path))
    stderr = stack.enter_context(open_private(stderr_path))
    return stdout, stderr, (stdout_path, stderr_path)


def _restore_pointers(
    isolation: Isolation, pointers: dict[str, bytes | None], warn: Callable[[str], None]
) -> None:
    """Put back the worktree's ``commondir`` and ``gitdir`` if the command
    rewrote them (:func:`.git.admin_files.restore_pointers`), before any
    git runs there again, and say so: the private folder is the command's
    to write, even under ``--sandbox``, and a ``commondir`` leading
    elsewhere would have git read another configuration and break ``git
    worktree list`` in the user's repository."""
    try:
        changed = restore_pointers(isolation.admin_dir, pointers)
    except OSError as exc:
        why = exc.strerror or exc
        warn(f"could not put back the worktree's {quoted(isolation.admin_dir)}: {why}")
        return
    for name in changed:
        warn(f"the command rewrote {quoted(os.path.join(isolation.admin_dir, name))}; put back")
