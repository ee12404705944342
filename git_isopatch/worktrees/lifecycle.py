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
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..git.repo import UserRepository
from ..git.types import CommitId
from . import kept
from .isolation import OverBaseTree
from .lease import Lease
from .provider import WorktreeProvider
from .results import PrivateFolder

if TYPE_CHECKING:  # a session's run alone loads its machinery
    from .sessions import SessionRun


@contextlib.contextmanager
def worktree_for_run(
    provider: WorktreeProvider,
    repository: UserRepository,
    base: CommitId,
    *,
    command: list[str],
    private: PrivateFolder,
    places: tuple[str | None, str | None],
    session: SessionRun | None = None,
    over: CommitId | None = None,
) -> Iterator[Lease]:
    """Steps 3 and 7 of the procedure as one life cycle: a worktree at
    ``base`` (over the base tree of ``over`` when given: a sandboxed run;
    :meth:`WorktreeProvider.create`; then the run's ``private``
    folder is marked) held for the body, then given
    back as the body settled it (:meth:`Lease.settle`): kept, pooled, or
    removed; when it cannot go back it is kept and unlocked for the user.
    On an error it is removed, or kept after :meth:`Lease.keep_on_failure`.

    ``places``: the temporary root and the configured worktree root
    (``isopatch.tmpdir``), as :meth:`WorktreeProvider.create` takes them.
    With ``session``, the worktree is that session's (:func:`.session_life.session_for_run`).

    Raises:
        IsopatchError: as :meth:`WorktreeProvider.create`.
    """
    if session is not None:
        from .session_life import session_for_run

        with session_for_run(
            provider,
            repository,
            base,
            session,
            command=command,
            private=private,
            places=places,
            over=over,
        ) as lease:
            yield lease
        return
    isolation = provider.create(
        repository,
        base,
        command=command,
        private_dir=private.path,
        tmp_root=places[0],
        worktree_root=places[1],
        over=None if over is None else OverBaseTree(over),
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
