"""A run's hold on its worktree (:class:`Lease`), inside the life cycle
(:func:`.lifecycle.worktree_for_run`, :func:`.session_life.session_for_run`):
what the run says of how to give the worktree back."""

from __future__ import annotations

from collections.abc import Mapping

from ..git.types import CommitId, WorktreePath
from . import kept
from .isolation import Isolation


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
        self.state: CommitId | None = None
        self.session_patch: str | None = None
        self.broken: str | None = None

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
        if the worktree is kept (:func:`.kept.keep_index`).  Over a base
        tree, while the index is still the copy of the base tree's made for
        the run, the base tree's own index stands for it: a file no command
        can write, pinned for as long as the run, and no second copy of an
        index that grows with the repository."""
        isolation = self.isolation
        layer = isolation.layer
        if layer is not None and layer.index_is_base_trees(isolation.admin_dir, isolation.base):
            copy: str | None = layer.base_tree_index
        else:
            copy = kept.keep_index(isolation.admin_dir, isolation.private_dir)
        self.isolation = isolation._replace(index_copy=copy)

    def keep_answer(self, conversions: bytes | None) -> None:
        """Keep ``conversions``, the reading look's answer
        (:mod:`.conversions`), with the worktree if it returns to the
        pool; ``None``: none is kept."""
        self.isolation = self.isolation._replace(conversions=conversions)

    def session_state(self, state: CommitId | None, patch: str | None) -> None:
        """The session's state after this step (a commit in its own object
        store) and its whole change (``patch``), kept when the step ends;
        ``None``: the step left none (its patch could not be taken), and
        the session stays at its last state."""
        self.state, self.session_patch = state, patch

    def session_broken(self, why: str) -> None:
        """The session's state after this step could not be recorded
        (``why``): its worktree no longer matches its last state, so the
        session is left broken when the step ends."""
        self.broken = why

    def settle(self, *, keep: bool, poolable: bool) -> None:
        """How to give the worktree back when the run leaves it: ``keep``
        it for the user, or return it to the pool (only when ``poolable``:
        a process the sandboxed command left behind can still write in
        it) or remove it."""
        self._keep, self._poolable = keep, poolable
