"""Getting a run's worktree (claimed from the pool, :mod:`.pool`, or made with ``git
worktree add``) and giving it back (to the pool, kept for the user, or removed with the one
removal, :func:`.removal.remove_ours`), for the life cycle :func:`.lifecycle.worktree_for_run`.
Every change to one of our worktrees goes through here or :mod:`.removal`, under
:class:`.lock.AdminLock` (but a run over a base tree removing its own); what exists and in
which state is read by :mod:`.inventory`.

Design: procedure steps 3 and 7, Architecture.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from ..errors import IsopatchError, known_failure, known_os_failure
from ..git.attributes import is_attributes_file
from ..git.quote import quoted
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.temporary import default_folder
from ..git.types import CommitId, GitDirPath
from ..git.worktree import unlock_worktree, worktree_admin_dir
from ..logger import log, warning
from . import kept
from .isolation import Isolation, OverBaseTree
from .lock import AdminLock, LockWaitInterrupted
from .own_top import start_taking_as_top, take_as_top
from .placement import place_worktree, remove_tree, worktree_name
from .registration import register_worktree
from .removal import make_room, refusal, remove_ours
from .space import no_space
from .store import GitMetadataStore, WorktreeRecord

if TYPE_CHECKING:  # over base trees: sandboxed runs alone load them
    from .base_trees import BaseTrees


def _as_added(admin_dir: GitDirPath) -> bool:
    """The private folder holds what a plain ``git worktree add --detach`` leaves and nothing
    else (:func:`..git.refresh.admin_extras`): the worktree may go back to the pool."""
    from ..git.refresh import admin_extras  # only with a pool

    try:
        return not admin_extras(admin_dir)
    except OSError:
        return False


class WorktreeProvider:
    """Ephemeral linked worktrees made with ``git worktree add``.

    Args:
        env: environment for git-isopatch's own git calls
            (:func:`git_isopatch.git.run.own_git_environment`).
        store: where the worktrees made are recorded.
        max_worktrees: ``isopatch.maxWorktrees``: at most this many of our
            worktrees stay registered; before one more is made, orphaned and
            then the oldest kept ones are removed (:func:`make_room`).
            0 or less: no limit.
        warn: called with a one-line warning (a kept worktree removed).
        pool: ``isopatch.pool``: keep up to this many worktrees warm for
            later runs (:meth:`release`) and claim one of them before making
            a new one (:meth:`create`); 0: no pool.
        progress: ``git worktree add`` shows the user what it does and its
            checkout progress on our standard error, a terminal
            (:func:`git_isopatch.git.worktree.add_detached_worktree`).
        lock: the repository's worktree lock, its bounded wait and the
            signals that end it (default: :class:`.lock.AdminLock`).
        base_trees: ``isopatch.baseTrees``: how many base trees the runs
            over one (:meth:`create` with ``over``) keep (:mod:`.base_trees`).
    """

    #: What the run does while its worktree is made: beside ``git worktree
    #: add``, or git's first look in it (:func:`.own_top.start_taking_as_top`).
    meanwhile: Callable[[], None] | None = None

    def __init__(
        self,
        env: Mapping[str, str],
        store: GitMetadataStore | None = None,
        *,
        max_worktrees: int,
        warn: Callable[[str], None] | None = None,
        pool: int = 0,
        progress: bool = False,
        lock: AdminLock | None = None,
        base_trees: int = 0,
    ) -> None:
        self.env = dict(env)
        self.base_trees = max(0, base_trees)
        self.lock = lock or AdminLock()
        self.store = store or GitMetadataStore()
        self.max_worktrees = max_worktrees
        self.warn = warn or warning
        self.pool = max(0, pool)
        self.progress = progress

    def create(
        self,
        repository: UserRepository,
        base: CommitId,
        *,
        command: list[str],
        private_dir: str,
        tmp_root: str | None = None,
        worktree_root: str | None = None,
        over: OverBaseTree | None = None,
    ) -> Isolation:
        """A detached, locked worktree at ``base`` for one run whose private
        folder is ``private_dir``: with ``over``, over the base tree of that
        commit (:meth:`_over_base_tree`; :class:`OverBaseTree` says where
        its layer is kept); else claimed from the pool (:meth:`_claim`)
        when one waits there, else made with ``git worktree add`` as
        ``<container>/<name>``, in a folder of its own where
        :func:`.placement.place_worktree` says: beside the checkout, or in
        ``worktree_root`` (``isopatch.tmpdir`` when set), or with a warning
        in ``tmp_root`` (default: ``$TMPDIR``).  The worktree is named after
        the user's top folder so that tools deriving a project name from it
        behave alike.

        Raises:
            IsopatchError: the worktree could not be made (codes of
                :data:`..errors.FAILURE_TABLE`), or ``too-many-worktrees``
                (``max_worktrees``); nothing is left behind.
        """
        claim = self.pool and over is None
        made = self._claim(repository, base, private_dir, command) if claim else None
        if made is None:
            container = place_worktree(
                repository.top,
                fallback_root=tmp_root or default_folder(),
                configured_root=worktree_root,
                warn=self.warn,
                same_each_run=not self.pool,  # pooled worktrees keep their own places
            ).container
            if over is not None and over.layer_in is not None:
                from ..sandbox.layers import holds_upper_layer  # a sandboxed session's

                if not holds_upper_layer(container):  # its kept layer: a checkout instead
                    over = None
            if over is not None:
                roots = (worktree_root, tmp_root)
                made = self._over_base_tree(
                    repository, (base, over), private_dir, container, command, roots
                )
            else:
                made = self._add(repository, base, private_dir, container, command, tmp_root)
        if claim and made.poolable:
            from .pool import index_as_made  # only with a pool

            made = made._replace(index=index_as_made(made.admin_dir))
        return made._replace(admin_files=kept.snapshot(made.admin_dir, made.worktree))

    def base_trees_of(self, repository: UserRepository, root: str | None = None) -> BaseTrees:
        """The base trees of ``repository``, as this provider keeps them
        (new ones made under ``root``: :func:`.base_trees.base_tree_folder`)."""
        from .base_trees import BaseTrees

        return BaseTrees(
            repository,
            env=self.env,
            lock=self.lock,
            limit=self.base_trees,
            progress=self.progress,
            warn=self.warn,
            store=self.store,
            root=root,
        )

    def _over_base_tree(
        self,
        repository: UserRepository,
        commits: tuple[CommitId, OverBaseTree],
        private_dir: str,
        container: str,
        command: list[str],
        roots: tuple[str | None, str | None],
    ) -> Isolation:
        """A run's worktree at ``base`` over the base tree of ``over``
        (``commits``; pinned, made or moved there when needed, under the
        configured worktree root of ``roots``, with the temporary root):
        registered without a checkout in ``container``, its layer made
        (:func:`.run_layer.make_run_layer`) in ``private_dir``, or kept in
        ``container`` (:attr:`OverBaseTree.layer_in`)."""
        (base, over), (worktree_root, tmp_root) = commits, roots
        trees = self.base_trees_of(repository, worktree_root)
        layers = private_dir if over.layer_in is None else os.path.join(container, over.layer_in)
        try:
            os.makedirs(layers, mode=0o700, exist_ok=True)
            pin = trees.pin(over.commit, tmp_root=tmp_root)
        except BaseException:
            remove_tree(container, warn=self.warn)
            raise
        made = top = None
        try:
            made = self._add(repository, base, private_dir, container, command, None, False)
            dirs = (repository.common_dir, made.admin_dir)
            top = start_taking_as_top(made.worktree, dirs, env=self.env)
            if self.meanwhile is not None:
                self.meanwhile()
            from .run_layer import make_run_layer

            layer = make_run_layer(pin, made.worktree, made.admin_dir, layers, base, env=self.env)
            top, finish = None, top
            finish()
        except BaseException:
            if top is not None:  # its git is waited for
                with contextlib.suppress(Exception):
                    top()
            if made is not None:
                self.remove(made)
            trees.release(pin)
            raise
        settings, shared = trees.settings
        return made._replace(layer=layer, settings=settings if shared else None)

    def _add(
        self,
        repository: UserRepository,
        base: CommitId,
        private_dir: str,
        container: str,
        command: list[str],
        tmp_root: str | None,
        checkout: bool = True,
    ) -> Isolation:
        """A worktree registered in ``container`` (:func:`.registration.register_worktree`;
        without a checkout the caller makes git take it as its top beside its
        own work, :func:`.own_top.start_taking_as_top`); on failure
        ``container`` is deleted."""
        path = os.path.join(container, worktree_name(repository.top))
        record = WorktreeRecord.for_this_process(container=container, base=base, command=command)
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(self.lock.held(repository.common_dir))
                make_room(
                    repository,
                    self.store,
                    env=self.env,
                    limit=self.max_worktrees,
                    warn=self.warn,
                )
            except BaseException:
                remove_tree(container, warn=self.warn)
                raise
            added = register_worktree(
                repository,
                path,
                base,
                lock_reason=record.lock_reason(),
                env=self.env,
                checkout=checkout,
                progress=self.progress,
                meanwhile=self.meanwhile,
            )
        match added:
            case Err(error):
                # git removes its own half-made registration (worktree.c, is_junk)
                remove_tree(container, warn=self.warn)
                failure = known_failure(f"could not create worktree at '{path}'", error)
                if failure.code == "checkout-failed":
                    failure = no_space(repository, base, path, tmp_root, failure, env=self.env)
                raise failure
            case Ok(worktree):
                pass
        try:
            match worktree_admin_dir(worktree):
                case Err(error):
                    raise known_failure(f"could not read worktree '{worktree}'", error)
                case Ok(admin_dir):
                    pass
            try:
                self.store.save(admin_dir, record)
            except OSError as exc:
                raise known_os_failure(f"could not record worktree '{worktree}'", exc) from exc
            if checkout:  # without one, beside the run's layer (_over_base_tree)
                take_as_top(worktree, (repository.common_dir, admin_dir), env=self.env)
            poolable = bool(self.pool) and checkout and _as_added(admin_dir)
        except BaseException:
            with contextlib.suppress(IsopatchError, LockWaitInterrupted):
                with self.lock.held(repository.common_dir):
                    remove_ours(repository, worktree, None)
            remove_tree(container, warn=self.warn)
            raise
        return Isolation(
            private_dir=private_dir,
            worktree=worktree,
            admin_dir=admin_dir,
            repository=repository,
            base=base,
            record=record,
            container=container,
            poolable=poolable,
        )

    def _claim(
        self, repository: UserRepository, base: CommitId, private_dir: str, command: list[str]
    ) -> Isolation | None:
        """Claim a pooled worktree (:func:`.pool.take`) and bring it to ``base``
        (:func:`.pool.bring_to`); ``None`` when none waits, or the one claimed could not be
        brought back (then it is removed)."""
        from . import pool  # only with a pool

        taken = pool.take(repository, self.store, base, command, lock=self.lock)
        if taken is None:
            return None
        worktree, admin_dir, record = taken
        isolation = Isolation(
            private_dir=private_dir,
            worktree=worktree,
            admin_dir=admin_dir,
            repository=repository,
            base=base,
            record=record,
            container=os.path.dirname(worktree),
            poolable=True,
        )
        paths = pool.bring_to(worktree, admin_dir, base, self.env)
        if paths is not None:
            attributes = any(is_attributes_file(path) for path in paths)
            return isolation._replace(proved_fresh=True, tracks_attributes=attributes)
        self.remove(isolation)
        return None

    def release(self, isolation: Isolation) -> bool:
        """After a run: return the worktree to the pool when there is room
        (:func:`.pool.put_back`), else :meth:`remove` it.  Best effort, never raises.

        Returns:
            True when the worktree is pooled or gone.
        """
        if self.pool and isolation.poolable and isolation.layer is None:
            from . import pool  # only with a pool

            index, answer = isolation.index, isolation.conversions
            made = None if index is None else pool.AsMade(index, answer)
            try:
                if pool.put_back(
                    isolation.repository,
                    self.store,
                    isolation.worktree,
                    isolation.admin_dir,
                    isolation.record,
                    self.pool,
                    made,
                    lock=self.lock,
                ):
                    return True
            except Exception as exc:  # clean-up never raises
                log.debug("could not return '%s' to the pool: %s", isolation.worktree, exc)
        return self.remove(isolation)

    def remove(self, isolation: Isolation) -> bool:
        """Remove the worktree with the one removal
        (:func:`.removal.remove_ours`).  Best effort (design: "Clean-up ...
        never raises"): a refusal is a warning, a failure is logged as one.
        The run's private folder stays: it holds the patch.

        Returns:
            True when the worktree's folder and its registration are gone.
        """
        with self._letting_go(isolation):
            return self._remove(isolation)

    @contextlib.contextmanager
    def _letting_go(self, isolation: Isolation) -> Iterator[None]:
        """After the body: a run over a base tree discards its upper layer
        and lets go of its base tree (:meth:`.base_trees.BaseTrees.release`)."""
        try:
            yield
        finally:
            if isolation.layer is not None:
                from .run_layer import discard

                discard(isolation.private_dir)
                self.base_trees_of(isolation.repository).release(isolation.layer.pin)

    def _remove(self, isolation: Isolation) -> bool:
        """The one removal (under :meth:`_held_to_remove`)."""
        why = refusal(isolation.worktree)
        if why is not None:
            self.warn(f"not removing worktree {quoted(isolation.worktree)}: {why}")
            return False
        try:
            with self._held_to_remove(isolation) as locked:
                reason = remove_ours(
                    isolation.repository,
                    isolation.worktree,
                    isolation.admin_dir,
                    warn=self.warn,
                    folder_counts=False,  # the worktree is gone: the run goes on
                    locked=locked,
                )
        except Exception as exc:  # clean-up never raises
            reason = str(exc)
        if reason is not None:
            log.warning("could not remove worktree '%s': %s", isolation.worktree, reason)
            return False
        return True

    def _held_to_remove(self, isolation: Isolation) -> contextlib.AbstractContextManager[bool]:
        """The worktree lock, for a removal; none over a base tree, so
        that runs started together do not wait for each other's deletions
        (on a disk that discards freed blocks, each unlink waits): the
        worktree is running until then (no make_room or prune takes it),
        never pooled, and the base tree it pins keeps ``worktrees/`` from
        being emptied under another run's ``git worktree add``."""
        if isolation.layer is not None and isolation.layer.pin.held:
            return contextlib.nullcontext(False)
        return self.lock.held(isolation.repository.common_dir)

    def keep(self, isolation: Isolation) -> None:
        """Keep the worktree for the user: put its administrative files
        right (:func:`.kept.hand_over`), mark it kept in the store and unlock
        it, so that ``git worktree remove`` works on it.  Best effort;
        nothing to do once the registration is gone (a removal that deleted
        it but not the whole folder)."""
        with self._letting_go(isolation):
            if isolation.layer is not None:
                from .materialise import materialise

                materialise(isolation.layer, isolation.worktree, env=self.env, warn=self.warn)
            self._keep(isolation)

    def _keep(self, isolation: Isolation) -> None:
        if not os.path.isdir(isolation.admin_dir) or os.path.islink(isolation.admin_dir):
            return
        if isolation.admin_files is not None:
            made, index_copy = isolation.admin_files, isolation.index_copy
            kept.hand_over(isolation.admin_dir, isolation.worktree, made, index_copy, self.warn)
        isolation.record.kept = True
        try:
            self.store.save(isolation.admin_dir, isolation.record)
        except OSError as exc:
            log.warning("could not record kept worktree '%s': %s", isolation.worktree, exc)
        try:
            with self.lock.held(isolation.repository.common_dir):
                unlocked = unlock_worktree(
                    isolation.repository.git_dir, isolation.worktree, env=self.env
                )
        except (IsopatchError, LockWaitInterrupted) as exc:
            log.warning("could not unlock worktree '%s': %s", isolation.worktree, exc)
            return
        if isinstance(unlocked, Err):
            log.warning(
                "could not unlock worktree '%s': %s", isolation.worktree, unlocked.error.message()
            )
