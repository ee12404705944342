"""The life cycle of git-isopatch's worktrees, in one place: create one for a
run (:meth:`WorktreeProvider.create`), remove or keep it after the run,
evict old ones at ``isopatch.maxWorktrees`` (:func:`make_room`) and prune
them (:func:`prune`, ``git isopatch prune``).  Every change to one of our
worktrees goes through here, under :func:`worktree_admin_lock`; what exists
and in which state is read by :mod:`.inventory`.

Design: procedure steps 3 and 7, Architecture.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..git.admin_files import (
    pointer_leads_to,
    read_admin_file,
    replace_admin_file,
    reset_commondir,
)
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..git.worktree import (
    add_detached_worktree,
    checkout_size,
    discovered_top,
    list_worktrees,
    remove_worktree,
    set_worktree_config,
    unlock_worktree,
    worktree_admin_dir,
    worktree_admin_dirs,
)
from .errors import IsopatchError, known_failure, known_os_failure
from .inventory import (
    DEFAULT_MAX_WORKTREES,
    KEPT,
    ORPHANED,
    POOLED,
    PRUNABLE_STATES,
    OwnedWorktree,
    owned_worktrees,
)
from .lock import worktree_admin_lock
from .mounts import mount_points_under
from .placement import (
    TMP_PREFIX,
    made_by_isopatch,
    place_worktree,
    remove_tree,
)
from .store import POOL_LOCK_REASON, GitMetadataStore, IsolationStore, WorktreeRecord

log = logging.getLogger("git_isopatch")


@dataclass(frozen=True)
class Isolation:
    """A live ephemeral worktree.

    Attributes:
        tmpdir: the run's private (0700) ``mkdtemp`` folder, holding the
            patch and captured output (and the worktree, unless
            ``container`` says otherwise).
        worktree: the worktree's top folder, ``<container>/<name of the user's top>``.
        admin_dir: its private folder, ``$GIT_COMMON_DIR/worktrees/<id>``.
        repository: the user's repository.
        base: the commit id checked out.
        record: what the store holds for it.
        container: the ``git-isopatch-*`` folder holding the worktree:
            ``tmpdir``, or with a pool (``isopatch.pool``) a folder of its
            own that holds nothing else, so that the worktree can outlive
            the run and its patch.
        poolable: it may go back to the pool after the run (its private
            folder held nothing beyond what a plain detached worktree has,
            :func:`..git.refresh.admin_extras`, when it was made).
    """

    tmpdir: str
    worktree: WorktreePath
    admin_dir: GitDirPath
    repository: UserRepository
    base: CommitId
    record: WorktreeRecord
    container: str = ""
    poolable: bool = False

    @property
    def holder(self) -> str:
        """The folder holding the worktree (``container`` or ``tmpdir``)."""
        return self.container or self.tmpdir


class IsolationProvider(Protocol):
    def create(
        self,
        repository: UserRepository,
        base: CommitId,
        *,
        command: list[str],
        tmp_root: str | None = None,
        worktree_root: str | None = None,
    ) -> Isolation: ...

    def remove(self, isolation: Isolation) -> bool: ...

    def release(self, isolation: Isolation) -> bool: ...

    def keep(self, isolation: Isolation) -> None: ...


def _delete_registration(repository: UserRepository, admin_dir: GitDirPath) -> None:
    """Delete the private folder of one worktree of ours, and
    ``$GIT_COMMON_DIR/worktrees`` when that leaves it empty, as git's own
    ``worktree prune`` and ``worktree remove`` do (worktree.c,
    ``delete_git_dir``); its lock goes with it.  Only a folder right under
    ``worktrees/`` of the user's repository is touched."""
    worktrees = os.path.join(repository.common_dir, "worktrees")
    if os.path.realpath(os.path.dirname(admin_dir)) != os.path.realpath(worktrees):
        log.warning("not deleting '%s': not a worktree registration", admin_dir)
        return
    shutil.rmtree(admin_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(worktrees)


def _make_private_folder(tmp_root: str | None) -> str:
    """A new ``git-isopatch-*`` folder, mode 0700, under ``tmp_root``."""
    try:
        return tempfile.mkdtemp(prefix="git-isopatch-", dir=tmp_root)
    except OSError as exc:
        where = tmp_root or tempfile.gettempdir()
        raise known_os_failure(f"could not create a temporary folder in '{where}'", exc) from exc


def _write_lock_reason(admin_dir: GitDirPath, reason: str) -> None:
    """Set the worktree's lock reason: the ``locked`` file of its private
    folder, which ``git worktree lock --reason`` writes and ``git worktree
    list``/``prune`` read (gitrepository-layout(5), ``worktrees/<id>/locked``)."""
    replace_admin_file(os.path.join(admin_dir, "locked"), reason.encode("utf-8"))


def _empty_container(container: str, worktree: str) -> bool:
    """Empty the folder holding a pooled worktree of everything but the
    worktree (what a command wrote in ``..``); False if that fails."""
    name = os.path.basename(worktree)
    try:
        for entry in os.listdir(container):
            if entry == name:
                continue
            path = os.path.join(container, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        return os.listdir(container) == [name]
    except OSError as exc:
        log.debug("cannot empty '%s': %s", container, exc)
        return False


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
    """

    def __init__(
        self,
        env: Mapping[str, str],
        store: IsolationStore | None = None,
        *,
        max_worktrees: int = DEFAULT_MAX_WORKTREES,
        warn: Callable[[str], None] | None = None,
        pool: int = 0,
        progress: bool = False,
    ) -> None:
        self.env = dict(env)
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
        tmp_root: str | None = None,
        worktree_root: str | None = None,
    ) -> Isolation:
        """A detached, locked worktree at ``base`` for one run: claimed from
        the pool (:meth:`_claim`) when one waits there, else made with
        ``git worktree add`` as ``<container>/<name>``.

        The run's private folder (``tmpdir``) is made with mode 0700 under
        ``tmp_root`` (default: ``$TMPDIR``); the worktree in a folder of its
        own where :func:`.placement.place_worktree` says: beside the
        checkout, or in ``worktree_root`` (``isopatch.tmpdir`` when set), or
        with a warning in ``tmp_root``.  The worktree is named after the
        user's top folder so that tools deriving a project name from it
        behave alike.

        Raises:
            IsopatchError: the folder or the worktree could not be made
                (codes of :data:`.errors.FAILURE_TABLE`), or
                ``too-many-worktrees`` (``max_worktrees``); nothing is left
                behind.
        """
        tmpdir = _make_private_folder(tmp_root)
        try:
            if self.pool:
                claimed = self._claim(repository, base, tmpdir, command)
                if claimed is not None:
                    return claimed
            container = place_worktree(
                repository.top,
                fallback_root=tmp_root or tempfile.gettempdir(),
                configured_root=worktree_root,
                warn=self.warn,
            ).container
        except BaseException:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        try:
            return self._add(repository, base, tmpdir, container, command, tmp_root)
        except BaseException:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise

    def _add(
        self,
        repository: UserRepository,
        base: CommitId,
        tmpdir: str,
        container: str,
        command: list[str],
        tmp_root: str | None,
    ) -> Isolation:
        """``git worktree add`` in ``container``; on failure ``container``
        is deleted."""
        path = os.path.join(container, _worktree_name(repository))
        record = WorktreeRecord.for_this_process(tmpdir=container, base=base, command=command)
        with worktree_admin_lock(repository.common_dir):
            try:
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
                    failure = self._no_space(repository, base, path, tmp_root, failure)
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
            self._remove_worktree(repository, worktree, None)
            remove_tree(container, warn=self.warn)
            raise
        return Isolation(
            tmpdir=tmpdir,
            worktree=worktree,
            admin_dir=admin_dir,
            repository=repository,
            base=base,
            record=record,
            container=container,
            poolable=poolable,
        )

    def _no_space(
        self,
        repository: UserRepository,
        base: CommitId,
        path: str,
        tmp_root: str | None,
        failure: IsopatchError,
    ) -> IsopatchError:
        """A failed checkout (git: "unable to write file", without a reason)
        becomes ``no-space`` when the checkout needs more room or more
        files than the file system under ``tmp_root`` offers (statvfs(3));
        else ``failure`` as it was."""
        try:
            fs = os.statvfs(tmp_root or tempfile.gettempdir())
        except OSError:
            return failure
        block = fs.f_frsize or fs.f_bsize or 4096
        match checkout_size(repository.git_dir, base, block=block, env=self.env):
            case Ok((needed, files)):
                pass
            case Err():
                return failure
        free = fs.f_bavail * block
        if needed > free:
            why = f"the checkout needs {needed} bytes, {free} are free"
        elif fs.f_files and files > fs.f_favail:
            why = f"the checkout needs {files} files, {fs.f_favail} inodes are free"
        else:
            return failure
        return IsopatchError(
            "no-space",
            f"could not create worktree at '{path}': No space left on device ({why})",
            hint=f"git said: {failure.message.split(': ', 1)[-1]}",
        )

    def _pooled(self, repository: UserRepository) -> list[tuple[WorktreePath, GitDirPath]]:
        """The worktrees waiting in the pool of ``repository``, from their
        private folders alone (no git call): our record says pooled, the
        ``locked`` file holds the pool's reason, the folder exists.  The
        caller holds the worktree lock."""
        found = []
        for top, admin_dir in worktree_admin_dirs(repository.common_dir).items():
            record = self.store.load(admin_dir)
            if record is None or not record.pooled:
                continue
            try:
                locked = read_admin_file(os.path.join(admin_dir, "locked"))
                reason = locked.decode("utf-8", "surrogateescape")
            except OSError:
                continue
            if reason == POOL_LOCK_REASON and os.path.isdir(top) and not os.path.islink(top):
                found.append((WorktreePath(top), admin_dir))
        return found

    def _claim(
        self, repository: UserRepository, base: CommitId, tmpdir: str, command: list[str]
    ) -> Isolation | None:
        """Claim a pooled worktree and bring it to ``base``; ``None`` when
        none waits (or the one claimed could not be brought back, and was
        removed).

        The claim is atomic: under the worktree lock, the claimant writes its
        own record and lock reason over the pool's, so that no other run can
        see it as pooled any more; a run that cannot take the lock claims
        nothing.  From then on the worktree is this run's (``running``; if
        the run dies, ``orphaned``, which ``prune`` clears).  The refresh
        itself runs outside the lock (:func:`..git.refresh.refresh_worktree`);
        a worktree it cannot vouch for is removed, never used.
        """
        with worktree_admin_lock(repository.common_dir) as locked:
            if not locked:
                return None
            pooled = self._pooled(repository)
            if not pooled:
                return None
            worktree, admin_dir = pooled[0]
            container = os.path.dirname(worktree)
            record = WorktreeRecord.for_this_process(tmpdir=container, base=base, command=command)
            try:
                self.store.save(admin_dir, record)
                _write_lock_reason(admin_dir, record.lock_reason())
            except OSError as exc:
                log.debug("could not claim pooled worktree '%s': %s", worktree, exc)
                return None
        isolation = Isolation(
            tmpdir=tmpdir,
            worktree=worktree,
            admin_dir=admin_dir,
            repository=repository,
            base=base,
            record=record,
            container=container,
            poolable=True,
        )
        from ..git.refresh import refresh_worktree  # only with a pool

        refreshed = refresh_worktree(worktree, admin_dir, base, env=self.env)
        if isinstance(refreshed, Ok) and _empty_container(container, worktree):
            return isolation
        if isinstance(refreshed, Err):
            log.debug("pooled worktree '%s' not used: %s", worktree, refreshed.error.message())
        self.remove(isolation)
        return None

    def release(self, isolation: Isolation) -> bool:
        """After a run: return the worktree to the pool when there is room
        (fewer than ``pool`` wait there), else :meth:`remove` it.

        Returning it: ``HEAD`` is detached (a pooled worktree never holds a
        branch the user may want to check out elsewhere), the record says
        pooled and the ``locked`` file holds :data:`.store.POOL_LOCK_REASON`
        (so ``git worktree prune`` leaves it alone), record first: a run
        that dies between the two leaves an orphan, never a pooled
        worktree that is not clean.  What the command left in it is cleared
        by the next claim.  Best effort, never raises.

        Returns:
            True when the worktree is pooled or gone.
        """
        if self.pool and isolation.poolable and isolation.container != isolation.tmpdir:
            try:
                if self._return_to_pool(isolation):
                    return True
            except Exception as exc:  # clean-up never raises
                log.debug("could not return '%s' to the pool: %s", isolation.worktree, exc)
        return self.remove(isolation)

    def _return_to_pool(self, isolation: Isolation) -> bool:
        worktree, admin_dir = isolation.worktree, isolation.admin_dir
        if os.path.islink(worktree) or not os.path.isdir(worktree):
            return False
        match worktree_admin_dir(worktree):
            case Ok(pointer) if os.path.realpath(pointer) == os.path.realpath(admin_dir):
                pass
            case _:
                return False
        with worktree_admin_lock(isolation.repository.common_dir) as locked:
            if not locked or len(self._pooled(isolation.repository)) >= self.pool:
                return False
            replace_admin_file(os.path.join(admin_dir, "HEAD"), f"{isolation.base}\n".encode())
            isolation.record.pooled = True
            self.store.save(admin_dir, isolation.record)
            _write_lock_reason(admin_dir, POOL_LOCK_REASON)
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

    def _remove_worktree(
        self, repository: UserRepository, worktree: WorktreePath, admin_dir: GitDirPath | None
    ) -> str | None:
        """Remove ``worktree`` and its registration ``admin_dir`` (when
        known); return ``None`` when both are gone, else why not."""
        failure = None
        with worktree_admin_lock(repository.common_dir):
            match remove_worktree(repository.git_dir, worktree, env=self.env):
                case Ok():
                    pass
                case Err(error):
                    failure = error.message()
                    log.debug("git worktree remove failed: %s", failure)
                    remove_tree(worktree, warn=log.debug)
                    if admin_dir is not None and not os.path.lexists(worktree):
                        _delete_registration(repository, admin_dir)
            match list_worktrees(repository.git_dir, env=self.env):
                case Ok(records):
                    real = os.path.realpath(worktree)
                    listed = any(os.path.realpath(r.path) == real for r in records)
                case Err(error):
                    return f"cannot list worktrees: {error.message()}"
        if listed or (admin_dir is not None and os.path.lexists(admin_dir)):
            return failure or "it is still registered"
        if os.path.lexists(worktree):  # git deletes the registration even then
            return failure or "its folder is still there"
        return None

    def remove(self, isolation: Isolation) -> bool:
        """Remove the worktree: ``git worktree remove --force --force``
        (which also takes a locked worktree, one with untracked or ignored
        files, and one with initialized submodules); if git fails, delete
        the folder, then its registration
        ``$GIT_COMMON_DIR/worktrees/<id>`` as ``git worktree prune`` would
        for it.  Never a global ``git worktree prune``: that would also drop
        the user's own stale registrations (a worktree on a drive that is
        not mounted), which are theirs to prune.  Last, check that
        ``git worktree list --porcelain -z`` no longer shows it.

        Best effort (design: "Clean-up ... logs and never raises"): a
        failure is logged as a warning.  The temporary folder itself stays:
        it holds the patch.

        Returns:
            True when the worktree's folder and its registration are gone.
        """
        if not made_by_isopatch(isolation.worktree, isolation.holder):
            self.warn(f"not removing worktree '{isolation.worktree}': git-isopatch did not make it")
            return False
        mounted = mount_points_under(isolation.worktree)
        if mounted:
            self.warn(
                f"not removing worktree '{isolation.worktree}': "
                f"'{mounted[0]}' is a mount point in it"
            )
            return False
        try:
            reason = self._remove_worktree(
                isolation.repository, isolation.worktree, isolation.admin_dir
            )
        except Exception as exc:  # clean-up never raises
            reason = str(exc)
        if reason is not None:
            log.warning("could not remove worktree '%s': %s", isolation.worktree, reason)
            return False
        if isolation.holder != isolation.tmpdir:  # a folder that held the worktree alone
            remove_tree(isolation.holder, warn=self.warn)
        return True

    def keep(self, isolation: Isolation) -> None:
        """Keep the worktree for the user: mark it kept in the store and
        unlock it, so that ``git worktree remove`` works on it.  Best effort;
        nothing to do once the registration is gone (a removal that deleted
        it but not the whole folder)."""
        if not os.path.isdir(isolation.admin_dir):
            return
        isolation.record.kept = True
        try:
            self.store.save(isolation.admin_dir, isolation.record)
        except OSError as exc:
            log.warning("could not record kept worktree '%s': %s", isolation.worktree, exc)
        with worktree_admin_lock(isolation.repository.common_dir):
            match unlock_worktree(isolation.repository.git_dir, isolation.worktree, env=self.env):
                case Err(error):
                    log.warning(
                        "could not unlock worktree '%s': %s", isolation.worktree, error.message()
                    )
                case Ok():
                    pass


def _our_folder(worktree: OwnedWorktree) -> str | None:
    """The folder git-isopatch made for ``worktree`` (``<name>.isopatch-*``
    beside the checkout, or ``git-isopatch-*``), when its path proves it
    (:func:`.placement.made_by_isopatch`), else ``None``."""
    if made_by_isopatch(worktree.path, worktree.container):
        return os.path.dirname(os.path.normpath(worktree.path))
    return None


def _mend_our_commondirs(repository: UserRepository, store: IsolationStore) -> None:
    """Point ``commondir`` of each of our registrations back at the
    repository (:func:`.git.admin_files.reset_commondir`) where a command
    rewrote it: one that leads nowhere has ``git worktree list`` fail in
    the whole repository, so nothing could be listed or pruned."""
    folder = os.path.join(repository.common_dir, "worktrees")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        admin_dir = GitDirPath(os.path.join(folder, name))
        if store.load(admin_dir) is not None:
            with contextlib.suppress(OSError):
                reset_commondir(admin_dir)


def _point_dotgit_back(worktree: WorktreePath, admin_dir: GitDirPath) -> bool:
    """Make ``<worktree>/.git`` name ``admin_dir`` again, as ``git worktree
    repair`` would after the repository was moved, for this one worktree of
    ours and only when ``admin_dir``'s ``gitdir`` leads to it.

    ``git worktree repair`` itself is never run: it follows a ``.git`` that
    names another registration (a command can write one) and writes there,
    and it mends every worktree of the repository, writing a ``.git`` into
    whatever folder a ``gitdir`` names.  The ``.git`` here is replaced by
    rename (:func:`.git.admin_files.replace_admin_file`), never written
    through.

    Returns:
        True when ``.git`` now names ``admin_dir``.
    """
    dotgit = os.path.join(worktree, ".git")
    if not pointer_leads_to(admin_dir, "gitdir", dotgit):
        return False
    if os.path.lexists(dotgit) and not os.path.isfile(dotgit) or os.path.islink(dotgit):
        return False
    try:
        replace_admin_file(dotgit, f"gitdir: {admin_dir}\n".encode())
    except OSError:
        return False
    return True


def discard_or_why(
    repository: UserRepository, worktree: OwnedWorktree, *, env: Mapping[str, str]
) -> str | None:
    """Remove one of our worktrees, kept or orphaned, the folder made for it
    and its run's private ``git-isopatch-*`` folder (its patch and output).

    Only a worktree whose path proves git-isopatch made it
    (:func:`.placement.made_by_isopatch`) is touched, and none with a mount
    point in it (:func:`.mounts.mount_points_under`): removing it would
    delete what is mounted.  ``git worktree remove --force --force`` removes it (locked or not, even
    when its folder is gone).  When git refuses a worktree whose folder is
    there, the repository was likely moved (``mv repo moved``: the
    worktree's ``.git`` file still names the old place, and git says it "is
    not a .git file"): its ``.git`` is pointed back at its registration
    (:func:`_point_dotgit_back`, what ``git worktree repair`` does for it),
    and the removal is tried again.
    Should git fail still, what is ours is deleted by hand: the worktree's
    folder when it is right inside its ``git-isopatch-*`` folder, then, once
    the folder is gone, its private folder (which holds our record), as
    ``git worktree prune`` would, without pruning anyone else's.  The
    caller holds the worktree lock (:func:`worktree_admin_lock`).

    Returns:
        ``None`` when it is gone, else why not (one line, for an
        ``error:``).
    """
    path = WorktreePath(worktree.path)
    admin_dir = worktree.admin_dir
    folder = _our_folder(worktree)
    if folder is None:
        return "git-isopatch did not make it (it is not in a folder git-isopatch made)"
    mounted = mount_points_under(path) if os.path.lexists(path) else []
    if mounted:
        return f"'{mounted[0]}' is a mount point in it"
    if admin_dir and os.path.isdir(admin_dir):
        with contextlib.suppress(OSError):  # a command may have rewritten it
            reset_commondir(admin_dir)
    match remove_worktree(repository.git_dir, path, env=env):
        case Ok():
            failure = None
        case Err(error):
            failure = error.message()
    if (
        failure is not None
        and os.path.lexists(path)
        and admin_dir
        and os.path.isdir(admin_dir)
        and _point_dotgit_back(path, admin_dir)
    ):
        match remove_worktree(repository.git_dir, path, env=env):
            case Ok():
                failure = None
            case Err(error):
                failure = error.message()
    if failure is not None:
        log.debug("git worktree remove '%s' failed: %s", path, failure)
        if os.path.lexists(path):
            remove_tree(path, warn=log.debug)
        if os.path.lexists(path):
            return failure
        if admin_dir is not None and os.path.lexists(admin_dir):
            _delete_registration(repository, admin_dir)
            if os.path.lexists(admin_dir):
                return f"could not delete its registration '{admin_dir}'"
    for ours in (folder, worktree.tmpdir):
        # folder is proven ours (_our_folder); a run's private folder by its name
        if ours and (
            ours == folder or os.path.basename(os.path.normpath(ours)).startswith(TMP_PREFIX)
        ):
            if not remove_tree(ours, warn=log.warning) and ours == folder:
                return f"could not delete '{folder}'"
    return None


def discard(repository: UserRepository, worktree: OwnedWorktree, *, env: Mapping[str, str]) -> bool:
    """:func:`discard_or_why`, the reason logged as a warning.

    Returns:
        True when it is gone.
    """
    reason = discard_or_why(repository, worktree, env=env)
    if reason is not None:
        log.warning("could not remove worktree '%s': %s", worktree.path, reason)
    return reason is None


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune` did.

    Attributes:
        removed: the worktrees removed (or that would be, with ``dry_run``),
            oldest first.
        failed: the worktrees that could not be removed, each with why.
        here: the one that would have been removed but that the caller
            stands in (its shell would be left in a deleted folder), if any.
    """

    removed: list[OwnedWorktree]
    failed: list[tuple[OwnedWorktree, str]]
    here: OwnedWorktree | None = None


def prune(
    repository: UserRepository,
    store: IsolationStore,
    *,
    env: Mapping[str, str],
    expire: float | None = None,
    dry_run: bool = False,
) -> Pruned:
    """Remove our kept and orphaned worktrees (:func:`discard_or_why`);
    never a running or locked one, never the one the caller stands in
    (returned as :attr:`Pruned.here`), never one we did not make.

    Args:
        expire: remove only those made before this time (seconds since the
            epoch; ``git isopatch prune --expire <time>``); ``None`` for all.
        dry_run: remove nothing, report what would go.

    Returns:
        :class:`Pruned`: the worktrees removed (or that would be), oldest
        first, and those that could not be, with why.

    Raises:
        IsopatchError: git could not list the worktrees.
    """
    here = os.path.realpath(repository.top)
    with worktree_admin_lock(repository.common_dir):
        if not dry_run:
            _mend_our_commondirs(repository, store)
        prunable = [
            worktree
            for worktree in owned_worktrees(repository, store, env=env)
            if worktree.state in PRUNABLE_STATES
            and (expire is None or (worktree.created is not None and worktree.created <= expire))
        ]
        standing = next((w for w in prunable if os.path.realpath(w.path) == here), None)
        candidates = [w for w in prunable if os.path.realpath(w.path) != here]
        candidates.sort(key=lambda w: w.created or 0.0)
        if dry_run:
            return Pruned(candidates, [], standing)
        removed, failed = [], []
        for worktree in candidates:
            reason = discard_or_why(repository, worktree, env=env)
            if reason is None:
                removed.append(worktree)
            else:
                failed.append((worktree, reason))
        return Pruned(removed, failed, standing)


def make_room(
    repository: UserRepository,
    store: IsolationStore,
    *,
    env: Mapping[str, str],
    limit: int,
    warn: Callable[[str], None],
) -> None:
    """Keep fewer than ``limit`` of our worktrees before one more is added:
    remove pooled ones, then orphaned ones, oldest first, then the oldest
    kept ones (with a warning).  The caller holds the worktree lock.  ``limit`` 0 or less
    means no limit.

    Raises:
        IsopatchError: ``too-many-worktrees`` when the rest are running (or
            locked) and no room can be made.
    """
    if limit <= 0:
        return
    try:  # fewer linked worktrees of any owner than the limit: no need to ask git
        if len(os.listdir(os.path.join(repository.common_dir, "worktrees"))) < limit:
            return
    except OSError:
        return  # no linked worktree at all
    owned = owned_worktrees(repository, store, env=env)
    excess = len(owned) - limit + 1
    if excess <= 0:
        return
    here = os.path.realpath(repository.top)

    def oldest_first(state: str) -> list[OwnedWorktree]:
        found = [w for w in owned if w.state == state and os.path.realpath(w.path) != here]
        return sorted(found, key=lambda w: w.created or 0.0)

    for worktree in oldest_first(POOLED) + oldest_first(ORPHANED) + oldest_first(KEPT):
        if excess <= 0:
            break
        if discard(repository, worktree, env=env):
            excess -= 1
            if worktree.state == KEPT:
                warn(
                    f"removed the oldest kept worktree '{worktree.path}' "
                    f"(isopatch.maxWorktrees is {limit})"
                )
    if excess > 0:
        raise IsopatchError(
            "too-many-worktrees",
            f"{len(owned)} git-isopatch worktrees are in use in this repository "
            f"and isopatch.maxWorktrees is {limit}",
            hint="wait for a run to finish, or raise isopatch.maxWorktrees",
        )
