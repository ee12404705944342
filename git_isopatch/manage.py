"""``git isopatch list`` and ``git isopatch prune``: the worktrees
git-isopatch made for a repository (design: "Kept worktrees").

The work is :mod:`.isolation.inventory` (list) and
:mod:`.isolation.provider` (prune); this opens the repository as
:func:`.capture.capture` does and hands back what the CLI renders.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .capture import open_repository
from .git.config import parse_expiry_date
from .git.result import Err, Ok
from .git.run import own_git_environment
from .isolation.inventory import OwnedWorktree, owned_worktrees
from .isolation.provider import Pruned, prune
from .isolation.store import GitMetadataStore


def list_worktrees(
    repo_path: str = ".", environ: Mapping[str, str] | None = None
) -> list[OwnedWorktree]:
    """Every worktree git-isopatch made for the repository at ``repo_path``
    (running, kept, orphaned or locked), oldest first.

    Raises:
        IsopatchError: not a git repository, or git could not list worktrees.
    """
    environ = os.environ if environ is None else environ
    repository = open_repository(repo_path, environ)
    env = own_git_environment(environ)
    return owned_worktrees(repository, GitMetadataStore(), env=env)


def prune_worktrees(
    repo_path: str = ".",
    *,
    expire: str | None = None,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Pruned:
    """Remove the kept and orphaned worktrees git-isopatch made for the
    repository at ``repo_path`` (:func:`.isolation.provider.prune`).

    Args:
        expire: only those made before this time, as git's ``--expire``
            reads it (``2.weeks.ago``, ``yesterday``, ``now``...).
        dry_run: remove nothing; return what would be removed.

    Returns:
        :class:`.isolation.provider.Pruned`: the worktrees removed, oldest
        first, and those that could not be removed, with why.

    Raises:
        ValueError: ``expire`` is not a time git understands.
        IsopatchError: not a git repository, or git could not list worktrees.
    """
    environ = os.environ if environ is None else environ
    env = own_git_environment(environ)
    cutoff: float | None = None
    if expire is not None:
        match parse_expiry_date(expire, env):
            case Ok(seconds):
                cutoff = float(seconds)
            case Err(error):
                raise ValueError(error.message())
    repository = open_repository(repo_path, environ)
    return prune(repository, GitMetadataStore(), env=env, expire=cutoff, dry_run=dry_run)
