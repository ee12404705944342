"""The life cycle of a run's worktree as one context manager.

:func:`worktree_for_run` gets a worktree (:meth:`.provider.WorktreeProvider.create`:
claimed from the pool or made) and, when the run leaves it, gives it back
as the run settled it: to the pool, kept for the user, or removed (the one
removal, :func:`.removal.remove_ours`).  The caller cannot forget the second
half (pre-commit's ``staged_files_only``).

Design: procedure steps 3 and 7.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from ..git.repo import UserRepository
from ..git.types import CommitId, WorktreePath
from . import kept
from .provider import Isolation, WorktreeProvider
from .results import PrivateFolder


class Lease:
    """A run's hold on its worktree, inside :func:`worktree_for_run`.

    Attributes:
        isolation: the worktree.
        kept: once given back, its path when it was kept for the user
            (``--keep``, a failed extraction, or it could not be given
            back), else ``None``.
    """

    def __init__(self, isolation: Isolation) -> None:
        self.isolation = isolation
        self.kept: WorktreePath | None = None
        self._keep_on_failure = False
        self._keep = False
        self._poolable = True

    def keep_on_failure(self) -> None:
        """From now on, a failure keeps the worktree for inspection
        instead of removing it (extraction: the user will want to look)."""
        self._keep_on_failure = True

    def guard(self, files: Mapping[str, bytes | None]) -> None:
        """Put ``files`` (absolute path -> content, :func:`.kept.snapshot_submodules`)
        right too if the worktree is kept."""
        admin_files = {**(self.isolation.admin_files or {}), **files}
        self.isolation = self.isolation._replace(admin_files=admin_files)

    def guard_index(self) -> None:
        """Copy the index as it is now, git-isopatch's own, to put it back
        if the worktree is kept (:func:`.kept.keep_index`)."""
        isolation = self.isolation
        copy = kept.keep_index(isolation.admin_dir, isolation.private_dir)
        self.isolation = isolation._replace(index_copy=copy)

    def keep_answer(self, conversions: bytes | None) -> None:
        """Keep ``conversions``, the reading look's answer
        (:mod:`.conversions`), with the worktree if it returns to the
        pool; ``None``: none is kept."""
        self.isolation = self.isolation._replace(conversions=conversions)

    def settle(self, *, keep: bool, poolable: bool) -> None:
        """How to give the worktree back when the run leaves it: ``keep``
        it for the user, or return it to the pool (only when ``poolable``:
        a process the sandboxed command left behind can still write in
        it) or remove it."""
        self._keep, self._poolable = keep, poolable


@contextlib.contextmanager
def worktree_for_run(
    provider: WorktreeProvider,
    repository: UserRepository,
    base: CommitId,
    *,
    command: list[str],
    private: PrivateFolder,
    tmp_root: str | None,
    worktree_root: str | None,
) -> Iterator[Lease]:
    """Steps 3 and 7 of the procedure as one life cycle: a worktree at
    ``base`` (:meth:`WorktreeProvider.create`; then the run's ``private``
    folder is marked) held for the body, then given
    back as the body settled it (:meth:`Lease.settle`): kept, pooled, or
    removed; when it cannot go back it is kept and unlocked for the user.
    On an error it is removed, or kept after :meth:`Lease.keep_on_failure`.

    Raises:
        IsopatchError: as :meth:`WorktreeProvider.create`.
    """
    isolation = provider.create(
        repository,
        base,
        command=command,
        private_dir=private.path,
        tmp_root=tmp_root,
        worktree_root=worktree_root,
    )
    private.mark()
    lease = Lease(isolation)
    try:
        try:
            yield lease
        except BaseException:
            if lease._keep_on_failure:
                provider.keep(lease.isolation)
            else:
                provider.remove(lease.isolation)
            raise
        isolation = lease.isolation
        if not lease._keep:
            released = isolation if lease._poolable else isolation._replace(poolable=False)
            if provider.release(released):
                return
        provider.keep(isolation)  # reported as kept, unlocked for the user
        lease.kept = isolation.worktree
    finally:
        kept.drop_index(lease.isolation.index_copy)  # put back, or not needed
