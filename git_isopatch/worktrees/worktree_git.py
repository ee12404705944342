"""git-isopatch's own git calls inside a run's worktree, bound to it.

:class:`WorktreeGit` is the git layer bound to one worktree (its folder,
its private git directory, the environment) and to the run's
:class:`..sandbox.confinement.Confinement`: after the command ran, git runs what the
worktree names (a filter, a nested repository's attributes), which the
command wrote, so it runs where the command ran: inside its namespaces
under the sandbox.  No caller passes the git directory, the environment
or the confinement around (git-revise's ``Index.git()``: the repository's
wrapper bound to one index).  The git layer sees only where git runs (a
:class:`..git.process.Spawn`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from ..git import diff, index_flags, intent_to_add
from ..git import submodule as git_submodule
from ..git.files import HOST_FILES, WorktreeFiles
from ..git.record import Record
from ..git.result import GitResult
from ..git.submodule import Submodule
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..sandbox.confinement import Confinement
from .fidelity import settle_attributes
from .submodules import warn_changed


class WorktreeGit(Record):
    """git in ``worktree`` (private git directory ``admin_dir``) with
    ``env``, where ``confinement`` runs it; ``attributes_file``: the
    worktree's own attributes file (a relative ``core.attributesFile``,
    :func:`..git.attributes.own_attributes_file`), which counts as a
    ``.gitattributes``.  Its methods raise ``subprocess.SubprocessError``
    when the confinement could not be had (git did not run)."""

    worktree: WorktreePath
    admin_dir: GitDirPath
    env: Mapping[str, str]
    confinement: Confinement
    files: WorktreeFiles = HOST_FILES
    attributes_file: bytes | None = None

    def _bound(self, paths: diff.Paths = diff.EVERY_PATH) -> dict[str, Any]:
        """The git directory, environment and confinement of a look at
        ``paths`` (in the index they name, :meth:`.git.diff.Paths.environment`)."""
        env = paths.environment(self.confinement.objects(self.env))
        return {"git_dir": self.admin_dir, "env": env, "spawn": self.confinement.spawn}

    def planted(self) -> list[str]:
        """What the command left in the git directory, as git would see it,
        that no git may open (:meth:`..sandbox.confinement.Confinement.planted`)."""
        return self.confinement.planted(self.admin_dir, self.env)

    def clear_hiding_flags(
        self, base: CommitId, paths: diff.Paths
    ) -> GitResult[index_flags.Listed]:
        """:func:`.git.index_flags.clear_hiding_flags`: the tracked paths
        (of ``paths.only``: :func:`.git.diff.only_pathspecs`).  Unconfined,
        the index is read in process (the object ids of ``base``'s size):
        what the command left is read under its rights anyway, and a git
        process is spared.  Confined, the same ``git ls-files`` lists the
        new files too when ``paths`` leaves nothing out (its pathspecs are
        then the listing's): the index is read once, not twice.  The
        index of the compared paths (``paths.index``,
        :func:`.compared_index.compared_index`) is ours: read in process,
        and no git runs when every compared path is tracked."""
        hash_size = None if self.confinement.confined else len(base) // 2
        return index_flags.clear_hiding_flags(
            self.worktree,
            hash_size=hash_size,
            paths=paths,
            files=self.files,
            own_index=None if paths.index is None else len(base) // 2,
            **self._bound(paths),
        )

    def mark_untracked_intent_to_add(
        self,
        *,
        paths: diff.Paths,
        listed: index_flags.Listed,
        found: intent_to_add.Found,
    ) -> GitResult[int]:
        """:func:`.git.intent_to_add.mark_untracked_intent_to_add`; ``found``
        names the worktree's own attributes file too."""
        found.attributes_file = self.attributes_file
        return intent_to_add.mark_untracked_intent_to_add(
            self.worktree,
            paths=paths,
            listed=listed,
            found=found,
            files=self.files,
            **self._bound(paths),
        )

    def still_checked_out(self, submodules: Sequence[Submodule]) -> GitResult[list[Submodule]]:
        """:func:`.git.submodule.still_checked_out`: the ``submodules`` the
        command did not remove."""
        return git_submodule.still_checked_out(
            self.worktree, submodules=submodules, **self._bound()
        )

    def settle_attributes(
        self,
        base: CommitId,
        attributes: Sequence[bytes],
        *,
        info_changed: bool,
        paths: diff.Paths = diff.EVERY_PATH,
    ) -> bool:
        """:func:`.fidelity.settle_attributes` (never raises but for the
        confinement): whether the attributes changed, ``attributes`` read
        in the index of ``paths``."""
        return settle_attributes(
            self.worktree,
            self.admin_dir,
            base,
            attributes,
            env=paths.environment(self.env),
            info_changed=info_changed,
            spawn=self.confinement.spawn,
        )

    def write_binary_diff(
        self,
        base: CommitId,
        out: IO[bytes],
        *,
        paths: diff.Paths,
    ) -> GitResult[None]:
        """:func:`.git.diff.write_binary_diff`."""
        return diff.write_binary_diff(self.worktree, base, out, paths=paths, **self._bound(paths))

    def write_submodule_diff(self, submodule: Submodule, out: IO[bytes]) -> GitResult[None]:
        """:func:`.git.submodule.write_submodule_diff` (the submodule's own
        git directory)."""
        return git_submodule.write_submodule_diff(
            self.worktree, submodule, out, env=self.env, spawn=self.confinement.spawn
        )

    def diff_stat(
        self,
        base: CommitId,
        *,
        paths: diff.Paths,
        color: bool,
        width: int | None,
    ) -> GitResult[bytes]:
        """:func:`.git.diff.diff_stat`."""
        return diff.diff_stat(
            self.worktree, base, paths=paths, color=color, width=width, **self._bound(paths)
        )

    def snapshot(self, parent: CommitId, *, exclude: Sequence[str]) -> GitResult[CommitId]:
        """:func:`.git.snapshot.snapshot_worktree`: its objects where
        :attr:`env` says (a session's own store), not in the run's."""
        from ..git.snapshot import snapshot_worktree  # a session's alone

        return snapshot_worktree(
            self.worktree,
            self.admin_dir,
            parent,
            env=self.env,
            exclude=exclude,
            spawn=self.confinement.spawn,
        )

    def keep_objects(
        self, tips: Sequence[str], known: Sequence[CommitId], index: str | None
    ) -> GitResult[None]:
        """:func:`.git.keep_objects.pack_reachable` into the store :attr:`env`
        names (a session's own), not the run's."""
        from ..git.keep_objects import pack_reachable  # a session's alone

        return pack_reachable(
            self.admin_dir, tips, known, env=self.env, index=index, spawn=self.confinement.spawn
        )

    def write_commit_diff(self, old: CommitId, new: CommitId, out: IO[bytes]) -> GitResult[None]:
        """:func:`.git.diff.write_commit_diff`."""
        return diff.write_commit_diff(
            self.admin_dir, old, new, out, env=self.env, spawn=self.confinement.spawn
        )

    def warn_changed_submodules(
        self, populated: Sequence[Submodule], warn: Callable[[str], None]
    ) -> None:
        """:func:`.submodules.warn_changed` (never raises)."""
        warn_changed(
            self.worktree,
            self.admin_dir,
            populated=populated,
            env=self.env,
            warn=warn,
            spawn=self.confinement.spawn,
            files=self.files,
        )
