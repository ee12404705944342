"""The procedure of the design, steps 1-7, as :func:`run`.

Each step lives in a module of its own: the checks before anything exists (:mod:`.start`),
the worktree's life cycle (:func:`.worktrees.lifecycle.worktree_for_run`), populating it
(:mod:`.populate`), the command (:mod:`.execute`), the patch (:mod:`.extract`) and the
report (:mod:`.report`).  :func:`capture` is the keyword form of :func:`run`.

Only the checks and the look at the user's checkout load with this module: the steps after
them load once the look's ``git status`` runs, beside it (a warm run's first git process
starts some 20 ms earlier, and the status of a large checkout overlaps them).  A sandboxed
run takes no look: it loads those up to the command while its worktree's first git runs,
and those after it while the command runs (:func:`load`), not after them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from . import start
from .checkout import CheckoutLook
from .errors import Interrupted, IsopatchError
from .logger import log, warning
from .request import CaptureRequest, request_from

if TYPE_CHECKING:
    from .extract import Compared
    from .git.types import CommitId
    from .result import CaptureResult
    from .sandbox.confinement import Confinement
    from .values import Extracted, Ran, SessionPatch, Start
    from .worktrees.lease import Lease
    from .worktrees.provider import WorktreeProvider
    from .worktrees.results import PrivateFolder
    from .worktrees.sessions import SessionRun
    from .worktrees.worktree_git import WorktreeGit


def capture(
    command: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    provider: WorktreeProvider | None = None,
    warn: Callable[[str], None] | None = None,
    **options: Any,
) -> CaptureResult:
    """Run ``command`` in an ephemeral worktree and capture its changes: the
    convenience form of :func:`run`.

    ``options`` are the fields of :class:`~git_isopatch.request.CaptureRequest`
    by name (``base="main"``, ``repo_path="."``, ``link=["node_modules"]``,
    ``include_uncommitted=True``, ``keep=True``, ``timeout=30``...); lists
    are taken for its tuples.  ``environ``, ``provider`` and ``warn`` are as
    for :func:`run`.

    Raises:
        TypeError: an option that is not a field of the request.
        ValueError, IsopatchError: as :func:`run`.
    """
    request = request_from(command, options)
    return run(request, environ=environ, provider=provider, warn=warn)


def run(
    request: CaptureRequest,
    *,
    environ: Mapping[str, str] | None = None,
    provider: WorktreeProvider | None = None,
    warn: Callable[[str], None] | None = None,
) -> CaptureResult:
    """The procedure (design: "The procedure"): run ``request.command`` in an ephemeral
    worktree at ``request.base`` and capture its changes.

    Args:
        request: what to run and how; fields left ``None`` are completed from ``isopatch.*``
            configuration (:func:`.settings.complete_request`).
        environ: the environment to resolve the repository from and to give the command
            (default ``os.environ``); git's repository variables are removed before it sees it.
        provider: the worktrees' provider (default: as configured).
        warn: called with each one-line warning (a linked or copied path that does not
            exist, a kept worktree removed at ``isopatch.maxWorktrees``,
            ``allow_write``/``allow_network`` without a sandbox); default: the logger.

    Returns:
        A :class:`CaptureResult`, once nothing is left of the run but what it names.
        When extraction fails, ``error`` and ``error_code`` are set, no ``patch_path``,
        the worktree kept (``worktree_path``).  Linked and copied paths are never in it.

    Raises:
        ValueError: a combination that cannot go together (:func:`.request.conflicts`).
        IsopatchError: not a work tree, a bad configuration value, a base that does not resolve, a
            refused include, no room for a worktree (``too-many-worktrees``), no sandbox here, a
            worktree that could not be made (:func:`.start.check`); no worktree was created.
        Interrupted: a signal stopped the run before it had a result.
    """
    started, warn = time.monotonic(), warn or warning
    # 1-2. Options, repository, commit, includes, sandbox plan: checked before anything exists.
    plan = start.check(request, os.environ if environ is None else environ, warn)
    look = _look(plan)  # the user's checkout, looked at while the worktree is got
    from .sandbox.forwarding import forward_signals
    from .worktrees import lifecycle, results

    state: dict[str, int | None] = {"received": None}
    provider = provider or _provider(plan, warn, state)
    with (
        _signal_wins(state),
        forward_signals(state),
        results.private_folder(plan.tmp_root, plan.repository.common_dir) as private,
        contextlib.ExitStack() as ending,  # bubblewrap waited for: after the worktree's end
    ):
        # 3. A worktree at the commit: claimed from the pool or made; given back on leaving.
        with lifecycle.worktree_for_run(
            provider,
            plan.repository,
            plan.commit,
            command=list(plan.command),
            private=private,
            places=(plan.tmp_root, plan.worktree_root),
            session=_session_run(plan),
            over=_over(plan),
        ) as lease:
            # 4. Bring in the sparse files, submodules, --link/--copy paths.
            submodules = _populate(lease, plan, warn)
            # 5. Run the command, confined; the confinement lasts through extraction.
            from . import execute

            command = execute.command(plan, lease.isolation, state, warn, look, ending, _after)
            with command as (ran, confinement):
                lease.keep_answer(ran.fidelity.conversions)
                # 6. Extract the patch; a failure keeps the worktree for inspection.
                lease.keep_on_failure()
                extracted, session = _patches(
                    lease, confinement, plan, private.path, submodules, warn, ran
                )
            failed = isinstance(extracted, IsopatchError)
            lease.settle(keep=plan.keep or failed, poolable=confinement.poolable)
        # 7. Report shared writes, checkout changes, hints; --apply, while the sandbox ends.
        from . import report  # loaded while the command ran

        result = report.report(plan, ran, extracted, state, private.path, lease.kept, warn, session)
        _settle(private, result)  # -o without captured output leaves nothing
    _expire(provider, plan)
    return result._replace(duration=time.monotonic() - started)


@contextlib.contextmanager
def _signal_wins(state: dict[str, int | None]) -> Iterator[None]:
    """A failure after a signal reached the run (recorded in ``state``) is
    the signal's doing (the git it killed as it was starting, still in
    this process group): :class:`.errors.Interrupted`, not the failure."""
    try:
        yield
    except IsopatchError as failure:
        if state["received"] is None:
            raise
        raise Interrupted(failure.message, state["received"]) from failure


def _settle(private: PrivateFolder, result: CaptureResult) -> None:
    """The run's private folder keeps what ``result`` names, nothing else
    (:meth:`.worktrees.results.PrivateFolder.settle`), settled while the sandbox ends: what the
    namespaces wrote there is gone (:meth:`.sandbox.confinement.Confinement.end`)."""
    named = (result.patch_path, result.stdout, result.stderr, result.worktree_path)
    private.settle((*named, result.session_patch))


def _look(plan: Start) -> CheckoutLook:
    """The look at the user's checkout (:class:`.checkout.CheckoutLook`),
    and while its ``git status`` runs, the steps after the checks load
    beside it; a sandboxed run takes no look and loads them at step 5."""
    look = CheckoutLook(plan)
    if look.taken:
        from . import execute, report  # noqa: F401 (loaded, not used here)
    return look


def _provider(
    run: Start, warn: Callable[[str], None], state: dict[str, int | None]
) -> WorktreeProvider:
    """The worktrees of the run; a signal recorded in ``state`` ends a
    wait for the worktree lock."""
    from .worktrees.lock import AdminLock, admin_lock_seconds
    from .worktrees.provider import WorktreeProvider

    provider = WorktreeProvider(
        run.git_env,
        max_worktrees=run.max_worktrees,
        warn=warn,
        pool=0 if run.sandbox.confined else run.pool,  # sandboxed: base trees
        base_trees=run.base_trees,
        progress=run.progress,
        lock=AdminLock(admin_lock_seconds(run.environ), lambda: state["received"]),
    )
    if run.sandbox.confined:  # its steps up to the command load beside its worktree's git
        provider.meanwhile = partial(load, BEFORE_THE_COMMAND)
    return provider


#: What a sandboxed run loads while its worktree's first git runs
#: (:attr:`.worktrees.provider.WorktreeProvider.meanwhile`): steps 4 and 5, the sandbox's
#: launch and its reading of the layers.
BEFORE_THE_COMMAND = (
    "git_isopatch.worktrees.run_layer",
    "git_isopatch.populate",
    "git_isopatch.execute",
    "git_isopatch.sandbox.run_policy",
    "git_isopatch.sandbox.seccomp",
    "git_isopatch.sandbox.layer_state",
)

#: And once bubblewrap has started, while it sets up and the command runs (``meanwhile`` of
#: :func:`.execute.command`): steps 6 and 7, else loaded before extraction's first git.
AFTER_THE_COMMAND = (
    "git_isopatch.extract",
    "git_isopatch.worktrees.compared_index",
    "git_isopatch.sandbox.layer_objects",
    "git_isopatch.sandbox.lfs_objects",
    "git_isopatch.report",
)


def load(names: Sequence[str]) -> None:
    """Import the modules ``names`` now: while a git process runs, their imports would otherwise
    come after it.  A module that fails to import is left to the step that needs it, which imports
    it again and fails there.  What they make is moved out of the collector's reach, as the command
    line's modules are (:func:`.usage.modules_loaded`)."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        for name in names:
            try:
                __import__(name)
            except Exception:  # the step that needs it says why
                return
    finally:
        if collecting:
            gc.freeze()
            gc.enable()


_after = partial(load, AFTER_THE_COMMAND)


def _expire(provider: WorktreeProvider, plan: Start) -> None:
    """Old result folders expire (at most once a day), and with them the
    idle base trees unused for as long.  Never raises."""
    from .worktrees import results

    if not results.expire_automatically(plan.repository.common_dir, plan.tmp_root):
        return
    unused_since = time.time() - results.DEFAULT_EXPIRE_SECONDS
    try:
        provider.base_trees_of(plan.repository).trim(unused_since=unused_since)
    except Exception as exc:  # clean-up never raises
        log.debug("could not expire base trees: %s", exc)


def _session_run(plan: Start) -> SessionRun | None:
    """A session's run: its name, its confinement and the user's ``HEAD``
    (a new session keeps both)."""
    if plan.session is None:
        return None
    from .git.repo import resolve_commit
    from .git.result import Ok
    from .git.types import Ref
    from .worktrees.sessions import SessionRun

    match resolve_commit(plan.repository, Ref("HEAD"), env=plan.git_env):
        case Ok(head):
            return SessionRun(plan.session, plan.sandbox.confined, head)
    return SessionRun(plan.session, plan.sandbox.confined)


def _over(plan: Start) -> CommitId | None:
    """The commit of the base tree a run goes over: a sandboxed run's (a session's first step too:
    its layer is kept), but with ``--recurse-submodules`` (its submodules are populated in a
    worktree of its own, as an unconfined run's are), or a snapshot's whose ``.gitattributes``
    differ from ``HEAD``'s (the base tree's files are converted as ``HEAD``'s say, not as a checkout
    of the snapshot would be)."""
    if not plan.sandbox.confined or plan.recurse_submodules:
        return None
    if plan.tree_commit != plan.commit:
        from .git.checkouts import attributes_differ

        git_dir = plan.repository.git_dir
        if attributes_differ(git_dir, plan.tree_commit, plan.commit, env=plan.git_env):
            return None
    return plan.tree_commit


def _compared(lease: Lease, ran: Ran) -> Compared | None:
    """Over a base tree, what the extraction compares
    (:meth:`.worktrees.run_layer.RunLayer.compared`) and where the worktree's
    paths lie; every path when the command changed the configuration
    (a conversion may now apply to any file: the bench/README says when)."""
    from .extract import Compared
    from .git.shared_state import CONFIG

    isolation = lease.isolation
    layer = isolation.layer
    if layer is None:
        return None
    made = (isolation.admin_files or {}).get("config.worktree")
    converts_anew = any(w.name == CONFIG for w in ran.shared_writes) or (
        layer.config_worktree(isolation.admin_dir) != made
    )
    if converts_anew:
        return Compared(None, layer.locate)
    looked = layer.compared(isolation.admin_dir, ran.fidelity.attributes_file)
    from .worktrees.compared_index import compared_index

    admin_dir, folds = isolation.admin_dir, ran.fidelity.folds_case
    index = compared_index(layer, admin_dir, isolation.base, looked.paths, folds_case=folds)
    return Compared(looked.paths, layer.locate, looked.attributes, index)


def _populate(lease: Lease, plan: Start, warn: Callable[[str], None]) -> Sequence[Any]:
    """Step 4 (:func:`.populate.populate`); the populated submodules' git
    directories and ``.git`` files are the command's to write too, so they
    are put right as well if the worktree is kept (:func:`.worktrees.kept.snapshot_submodules`)."""
    from . import populate
    from .worktrees import kept

    submodules = populate.populate(lease.isolation, plan, warn)
    lease.guard_index()
    if plan.staged or plan.include_uncommitted:  # HEAD as step 4 made it: the user's
        lease.guard(kept.snapshot(lease.isolation.admin_dir, lease.isolation.worktree))
    if submodules:
        isolation = lease.isolation
        pairs = [(sub.path, sub.git_dir) for sub in submodules]
        lease.guard(kept.snapshot_submodules(isolation.admin_dir, isolation.worktree, pairs))
    return submodules


def _patches(
    lease: Lease,
    confinement: Confinement,
    run: Start,
    private_dir: str,
    submodules: Sequence[Any],
    warn: Callable[[str], None],
    ran: Ran,
) -> tuple[Extracted | IsopatchError, SessionPatch | IsopatchError | None]:
    """Step 6: the patch (:func:`_extract`) and, for a session's step, the
    session's whole change after it (:func:`_session`)."""
    git = _worktree_git(lease, confinement, run, ran)
    aside = _index_aside(lease, git, private_dir)
    step = _step(lease, run)
    compared = _compared(lease, ran)
    try:
        extracted = _extract(git, step, private_dir, submodules, warn, ran, compared)
    finally:
        if compared is not None and compared.index is not None:
            from .worktrees.compared_index import drop_compared_index

            drop_compared_index(compared.index)
    session = _session(lease, git, run, private_dir, aside)
    if confinement.confined:  # the LFS objects they name go home as the sandbox ends
        made = [p for p in (extracted, session) if p and not isinstance(p, Exception)]
        confinement.patches = tuple(p.patch for p in made)
    return extracted, session


def _worktree_git(lease: Lease, confinement: Confinement, run: Start, ran: Ran) -> WorktreeGit:
    """git bound to the worktree, confined as the command was (a
    session's: its object store too)."""
    from .git.pinned import with_config
    from .git.shared_state import replacing_pins
    from .worktrees.worktree_git import WorktreeGit

    isolation = lease.isolation
    env = with_config(ran.fidelity.own_env(run.git_env), replacing_pins(ran.shared_writes))
    if isolation.session is not None:
        env = isolation.session.env(env)
    files, attributes = isolation.files, ran.fidelity.attributes_file
    return WorktreeGit(isolation.worktree, isolation.admin_dir, env, confinement, files, attributes)


def _index_aside(lease: Lease, git: WorktreeGit, private_dir: str) -> str | None:
    """A session's index as the command left it, set aside (:func:`.session_patch.index_aside`)."""
    if lease.isolation.session is None:
        return None
    from . import session_patch

    return session_patch.index_aside(git, private_dir)


def _extract(
    git: WorktreeGit,
    run: Start,
    private_dir: str,
    submodules: Sequence[Any],
    warn: Callable[[str], None],
    ran: Ran,
    compared: Compared | None,
) -> Extracted | IsopatchError:
    """Step 6 (:func:`.extract.extract`) with ``git``; its classified failure as a value."""
    from . import extract
    from .git.shared_state import INFO_ATTRIBUTES

    try:
        return extract.extract(
            git,
            run,
            private_dir,
            submodules,
            warn,
            fidelity=ran.fidelity,
            attributes_outside=any(w.name == INFO_ATTRIBUTES for w in ran.shared_writes),
            compared=compared,
        )
    except IsopatchError as failure:
        return failure


def _step(lease: Lease, run: Start) -> Start:
    """The run as extraction sees it: a session's step starts at its session's last state."""
    step = lease.isolation.session
    return run if step is None else run._replace(commit=step.since)


def _session(
    lease: Lease,
    git: WorktreeGit,
    run: Start,
    private_dir: str,
    aside: str | None,
) -> SessionPatch | IsopatchError | None:
    """Step 6 for a session (:func:`.session_patch.take`): kept with the session when the step ends.
    A state that cannot be recorded leaves the session broken (``session-broken``): its worktree no
    longer matches its last state, and a later step would lose this one's change."""
    step = lease.isolation.session
    if step is None:
        return None
    from . import session_patch
    from .worktrees.sessions import broken

    taken = session_patch.take(git, run, step, private_dir, aside)
    if isinstance(taken, IsopatchError):
        failure = broken(step.name, taken.message)
        lease.session_broken(taken.message)
        return failure
    lease.session_state(taken.state, taken.patch)
    return taken
