"""A run's worktree as the life cycle holds it (:mod:`.provider`,
:mod:`.lifecycle`): the value the procedure's steps read.

"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..git.files import HOST_FILES, WorktreeFiles
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.types import CommitId, GitDirPath, WorktreePath
from .store import WorktreeRecord

if TYPE_CHECKING:  # a sandboxed run's alone: an unconfined one starts faster
    from .run_layer import RunLayer
    from .sessions import Step


class Isolation(Record):
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
        layer: over a base tree (a sandboxed run), the run's own layer
            (:mod:`.run_layer`): the worktree's folder is its start layer,
            the command sees the overlay; ``None``: a real worktree.
        settings: over a base tree, the worktree's settings as
            :func:`..git.pinned.read_settings` reads them, read once with the
            base tree's key (:attr:`.base_trees.BaseTrees.settings`) where
            every worktree reads the same; ``None``: not read.
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
    session: "Step | None" = None
    layer: "RunLayer | None" = None
    settings: Mapping[str, str | None] | None = None

    @property
    def files(self) -> WorktreeFiles:
        """How to read the worktree's files after the command: through its
        layers over a base tree (:class:`.run_layer.LayerFiles`), else as
        they are."""
        if self.layer is None:
            return HOST_FILES
        from .run_layer import LayerFiles

        return LayerFiles(self.layer)


class OverBaseTree(Record):
    """A run over the base tree of ``commit``; ``layer_in``: a folder of
    the one made for the worktree that keeps the run's layer (a
    session's, beyond the run), else the layer is in the run's private
    folder and goes with the run."""

    commit: CommitId
    layer_in: str | None = None
