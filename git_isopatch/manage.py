"""``git isopatch list`` and ``git isopatch prune``: the worktrees
git-isopatch made for a repository (design: "Kept worktrees"), and the
result folders its runs left (design: "Placement").

The work is :mod:`.worktrees.inventory` (list) and
:mod:`.worktrees.removal` (prune); this opens the repository as
:func:`.capture.capture` does (:mod:`.errors`) and hands back what the CLI renders.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .errors import config_failure, open_repository
from .git.config import parse_expiry_date
from .git.result import Err, Ok
from .git.run import own_git_environment
from .settings import ConfigError, configured, configured_tmpdir
from .worktrees import results
from .worktrees.inventory import OwnedWorktree, owned_worktrees
from .worktrees.lock import AdminLock, admin_lock_seconds
from .worktrees.removal import Pruned, prune, prune_cache_layer_of
from .worktrees.results import ResultFolder
from .worktrees.store import GitMetadataStore


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
    sessions: bool = False,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Pruned:
    """Remove the kept and orphaned worktrees git-isopatch made for the
    repository at ``repo_path`` (:func:`.worktrees.removal.prune`).

    Args:
        expire: only those made before this time, as git's ``--expire``
            reads it (``2.weeks.ago``, ``yesterday``, ``now``...).
        sessions: the idle sessions too (another agent's included).
        dry_run: remove nothing; return what would be removed.

    Returns:
        :class:`.worktrees.removal.Pruned`: the worktrees removed, oldest
        first, and those that could not be removed, with why.

    Raises:
        ValueError: ``expire`` is not a time git understands.
        IsopatchError: not a git repository, or git could not list worktrees.
    """
    environ = os.environ if environ is None else environ
    env = own_git_environment(environ)
    cutoff = None if expire is None else _expiry(expire, env)
    repository = open_repository(repo_path, environ)
    lock = AdminLock(admin_lock_seconds(environ))
    store = GitMetadataStore()
    return prune(
        repository, store, env=env, expire=cutoff, sessions=sessions, dry_run=dry_run, lock=lock
    )


def end_session(repo_path: str, name: str, environ: Mapping[str, str] | None = None) -> bool:
    """End the session ``name`` of the repository at ``repo_path``
    (:func:`.worktrees.session_life.end_session`): nothing of it is left.

    Returns:
        False when there is no such session.
    Raises:
        IsopatchError: not a git repository, ``session-busy``, or it could
            not be removed.
    """
    from .worktrees.provider import WorktreeProvider
    from .worktrees.session_life import end_session as end

    environ = os.environ if environ is None else environ
    repository = open_repository(repo_path, environ)
    env = own_git_environment(environ)
    lock = AdminLock(admin_lock_seconds(environ))
    try:  # the base tree a session stood on stays as after a run
        kept = configured(repository, environ, "base_trees")
    except ConfigError as bad:
        raise config_failure(bad.message, hint=bad.hint, error=bad.error) from None
    provider = WorktreeProvider(env, max_worktrees=0, lock=lock, base_trees=kept)
    return end(provider, repository, name)


def session_names(repo_path: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The names of the sessions of the repository at ``repo_path``, sorted.

    Raises:
        IsopatchError: not a git repository.
    """
    from .worktrees.sessions import sessions

    environ = os.environ if environ is None else environ
    repository = open_repository(repo_path, environ)
    return sorted(session.record.name for session in sessions(repository, GitMetadataStore()))


def _expiry(expire: str, env: Mapping[str, str]) -> float:
    """``expire`` as git's ``--expire`` reads it, in seconds since the epoch.

    Raises:
        ValueError: not a time git understands.
    """
    match parse_expiry_date(expire, env):
        case Ok(seconds):
            return float(seconds)
        case Err(error):
            raise ValueError(error.message())


def prune_result_folders(
    repo_path: str = ".",
    *,
    expire: str | None = None,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
) -> list[ResultFolder]:
    """Remove the result folders of earlier runs of the repository at
    ``repo_path``: its ``git-isopatch-*`` folders under the temporary root
    (``isopatch.tmpdir``, else ``$TMPDIR``) that hold no worktree
    (:func:`.worktrees.results.expire`).

    Args:
        expire: only those last modified before this time, as git's
            ``--expire`` reads it; ``None``: two weeks ago, git's own
            default for ``gc.pruneExpire``.
        dry_run: remove nothing; return what would be removed.

    Returns:
        The folders removed, oldest first.

    Raises:
        ValueError: ``expire`` is not a time git understands.
        IsopatchError: not a git repository, or a bad ``isopatch.tmpdir``.
    """
    environ = os.environ if environ is None else environ
    env = own_git_environment(environ)
    cutoff = _expiry(results.DEFAULT_EXPIRE if expire is None else expire, env)
    repository = open_repository(repo_path, environ)
    # only isopatch.tmpdir is read: a bad value of another key is no error
    try:
        root = configured_tmpdir(repository, environ) or "/tmp"
    except ConfigError as bad:
        raise config_failure(bad.message, hint=bad.hint, error=bad.error) from None
    return results.expire(repository.common_dir, root, before=cutoff, dry_run=dry_run)


def prune_folders(
    repo_path: str = ".",
    *,
    expire: str | None = None,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """:func:`prune_result_folders`, then the sandbox's cache layer of the
    repository cleared (:func:`.worktrees.removal.prune_cache_layer_of`)
    unless a run uses it or, with ``expire``, one used it since: each
    folder removed (that would be, with ``dry_run``) with what it was.

    Raises:
        ValueError: ``expire`` is not a time git understands.
        IsopatchError: as :func:`prune_result_folders`.
    """
    environ = os.environ if environ is None else environ
    results = prune_result_folders(repo_path, expire=expire, dry_run=dry_run, environ=environ)
    cutoff = None if expire is None else _expiry(expire, own_git_environment(environ))
    repository = open_repository(repo_path, environ)
    caches = prune_cache_layer_of(repository, before=cutoff, dry_run=dry_run)
    return [(f.path, "result folder") for f in results] + [(p, "cache layer") for p in caches]
