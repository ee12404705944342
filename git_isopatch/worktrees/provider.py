"""Getting a run's worktree (claimed from the pool, :mod:`.pool`, or made
with ``git worktree add``) and giving it back (to the pool, kept for the
user, or removed with the one removal, :func:`.removal.remove_ours`), for
the life cycle :func:`.lifecycle.worktree_for_run`.  Every change to one of
our worktrees goes through here or :mod:`.removal`, under
:class:`.lock.AdminLock`; what exists and in which state is read by
:mod:`.inventory`.

Design: procedure steps 3 and 7, Architecture.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ..errors import IsopatchError, known_failure, known_os_failure
from ..git.attributes import is_attributes_file
from ..git.quote import quoted
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..git.worktree import (
    add_detached_worktree,
    discovered_top,
    set_worktree_config,
    unlock_worktree,
    worktree_admin_dir,
)
from . import kept, pool
from .lock import AdminLock, LockWaitInterrupted
from .placement import place_worktree, remove_tree
from .removal import make_room, refusal, remove_ours
from .space import no_space
from .store import GitMetadataStore, WorktreeRecord

if TYPE_CHECKING:
    from .sessions import Step

log = logging.getLogger("git_isopatch")


class Isolation(NamedTuple):
    """A live ephemeral worktree.

    Attributes:
        private_dir: the run's private (0700) ``git-isopatch-*`` folder,
            holding the patch and captured output (:mod:`.results`).
        worktree: the worktree's top folder, ``<container>/<name of the user's top>``.
        admin_dir: its private folder, ``$GIT_COMMON_DIR/worktrees/<id>``.
        repository: the user's repository.
        base: the commit id checked out.
        record: what the store holds for it.
        container: the folder made for the worktree alone, which holds
            nothing else, so that the worktree can outlive the run and its
            patch (:func:`.placement.place_worktree`).
        poolable: it may go back to the pool after the run (its private
            folder held nothing beyond what a plain detached worktree has,
            :func:`..git.refresh.admin_extras`, when it was made).
        index: with a pool, its index as git-isopatch made it, before the
            command ran (:func:`.pool.index_as_made`), put back when it
            returns to the pool.
        admin_files: its ``commondir``, ``gitdir``, ``config.worktree`` and
            ``.git`` as git-isopatch made them (:func:`.kept.snapshot`),
            put back when it is kept.
        index_copy: its index as git-isopatch made it, copied into the
            run's private folder (:func:`.kept.keep_index`), put back when
            it is kept.
        conversions: the reading look's answer (:mod:`.conversions`),
            kept with the worktree when it returns to the pool.
        proved_fresh: claimed from the pool and proved as a fresh add
            leaves it (:func:`..git.refresh.verify_fresh`: ``git status
            --ignored -uall`` printed nothing, no index entry flagged), so
            that no tracked path differs from ``base`` as git sees it now.
        tracks_attributes: its index holds a ``.gitattributes`` (known
            when ``proved_fresh``; else looked for in the index file before
            the command): git may see a path differ from ``base`` once it
            reads the file again.
        session: the step of a session this run is (:mod:`.sessions`).
    """

    private_dir: str
    worktree: WorktreePath
    admin_dir: GitDirPath
    repository: UserRepository
    base: CommitId
    record: WorktreeRecord
    container: str
    poolable: bool = False
    index: bytes | None = None
    admin_files: Mapping[str, bytes | None] | None = None
    proved_fresh: bool = False
    tracks_attributes: bool = True
    conversions: bytes | None = None
    index_copy: str | None = None
    session: Step | None = None


def _worktree_name(repository: UserRepository) -> str:
    name = os.path.basename(repository.top.rstrip(os.sep))
    return name if name and not name.startswith(".") else "worktree"


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
    """

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
    ) -> None:
        self.env = dict(env)
        self.lock = lock or AdminLock()
        self.store = store or GitMetadataStore()
        self.max_worktrees = max_worktrees
        self.warn = warn or log.warning
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
    ) -> Isolation:
        """A detached, locked worktree at ``base`` for one run whose private
        folder is ``private_dir``: claimed from the pool (:meth:`_claim`)
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
        made = self._claim(repository, base, private_dir, command) if self.pool else None
        if made is None:
            container = place_worktree(
                repository.top,
                fallback_root=tmp_root or tempfile.gettempdir(),
                configured_root=worktree_root,
                warn=self.warn,
                same_each_run=not self.pool,  # pooled worktrees keep their own places
            ).container
            made = self._add(repository, base, private_dir, container, command, tmp_root)
        if self.pool and made.poolable:
            made = made._replace(index=pool.index_as_made(made.admin_dir))
        return made._replace(admin_files=kept.snapshot(made.admin_dir, made.worktree))

    def _add(
        self,
        repository: UserRepository,
        base: CommitId,
        private_dir: str,
        container: str,
        command: list[str],
        tmp_root: str | None,
    ) -> Isolation:
        """``git worktree add`` in ``container``; on failure ``container``
        is deleted."""
        path = os.path.join(container, _worktree_name(repository))
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
            added = add_detached_worktree(
                repository.git_dir,
                path,
                base,
                lock_reason=record.lock_reason(),
                env=self.env,
                progress=self.progress,
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
            self._confine(worktree, admin_dir)
            poolable = False
            if self.pool:
                from ..git.refresh import admin_extras

                try:
                    poolable = not admin_extras(admin_dir)
                except OSError:
                    poolable = False
        except BaseException:
            with contextlib.suppress(IsopatchError, LockWaitInterrupted):
                with self.lock.held(repository.common_dir):
                    remove_ours(repository, worktree, None, env=self.env)
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
        """Claim a pooled worktree (:func:`.pool.take`) and bring it to
        ``base`` (:func:`.pool.bring_to`); ``None`` when none waits, or the
        one claimed could not be brought back (then it is removed)."""
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
        (:func:`.pool.put_back`), else :meth:`remove` it.  Best effort,
        never raises.

        Returns:
            True when the worktree is pooled or gone.
        """
        if self.pool and isolation.poolable:
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
        why = refusal(isolation.worktree)
        if why is not None:
            self.warn(f"not removing worktree {quoted(isolation.worktree)}: {why}")
            return False
        try:
            with self.lock.held(isolation.repository.common_dir):
                reason = remove_ours(
                    isolation.repository,
                    isolation.worktree,
                    isolation.admin_dir,
                    env=self.env,
                    warn=self.warn,
                    folder_counts=False,  # the worktree is gone: the run goes on
                )
        except Exception as exc:  # clean-up never raises
            reason = str(exc)
        if reason is not None:
            log.warning("could not remove worktree '%s': %s", isolation.worktree, reason)
            return False
        return True

    def _confine(self, worktree: WorktreePath, admin_dir: GitDirPath) -> None:
        """Make sure git run inside ``worktree`` takes it as its top.

        With ``extensions.worktreeConfig``, a ``core.worktree`` or
        ``core.bare`` in the repository's shared ``config`` applies to every
        worktree (git-worktree(1), "Configuration file"; older
        ``git sparse-checkout init`` left submodules so): git in the worktree
        would take another folder, such as ``.git/modules/<name>``, as its
        work tree, and a ``git clean`` there deletes the repository.  When
        git does not see ``worktree`` as its top, the worktree's own
        ``config.worktree`` gets ``core.bare=false`` and ``core.worktree``
        set to it; then git is asked again.

        Raises:
            IsopatchError: ``worktree-not-isolated`` when git still takes
                another folder as the top.
        """
        real = os.path.realpath(worktree)
        match discovered_top(worktree, env=self.env):
            case Ok(top) if os.path.realpath(top) == real:
                return
            case _:
                pass
        settings = (("core.bare", "false"), ("core.worktree", real))
        match set_worktree_config(admin_dir, settings, env=self.env):
            case Err(error):
                raise known_failure(f"could not configure worktree '{worktree}'", error)
            case Ok():
                pass
        match discovered_top(worktree, env=self.env):
            case Ok(top) if os.path.realpath(top) == real:
                return
            case Ok(top):
                seen = f"'{top}'"
            case Err(error):
                seen = f"nothing ({error.message()})"
        raise IsopatchError(
            "worktree-not-isolated",
            f"git inside the worktree '{worktree}' takes {seen} as its top; "
            "refusing to run the command there",
            hint="check core.worktree and core.bare in the repository's configuration",
        )

    def keep(self, isolation: Isolation) -> None:
        """Keep the worktree for the user: put its administrative files
        right (:meth:`_put_right`), mark it kept in the store and unlock
        it, so that ``git worktree remove`` works on it.  Best effort;
        nothing to do once the registration is gone (a removal that deleted
        it but not the whole folder)."""
        if not os.path.isdir(isolation.admin_dir) or os.path.islink(isolation.admin_dir):
            return
        self._put_right(isolation)
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

    def _put_right(self, isolation: Isolation) -> None:
        """Make the kept worktree's ``commondir``, ``gitdir``,
        ``config.worktree`` and ``.git`` what git-isopatch wrote
        (:func:`.kept.put_right`), and say which the command had changed:
        a planted ``core.fsmonitor`` or a ``commondir`` leading elsewhere
        would run on the user's next ``git status`` there."""
        if isolation.admin_files is None:
            return
        made, worktree = isolation.admin_files, isolation.worktree
        try:
            changed = kept.put_right(isolation.admin_dir, worktree, made)
            disarmed = kept.disarm(isolation.admin_dir, worktree, made, isolation.index_copy)
        except OSError as exc:
            self.warn(f"could not put back {quoted(isolation.admin_dir)}: {exc.strerror or exc}")
            return
        for path in changed:
            self.warn(f"the command rewrote {quoted(path)}; put back")
        for folder in disarmed:
            self.warn(
                f"the command made a repository at {quoted(folder)} in the kept worktree: "
                f"its .git is renamed {kept.DISARMED}, so that git there does not enter it"
            )
