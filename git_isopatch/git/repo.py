"""Repository and ref look-ups with pygit2 (design: procedure step 2).

Nothing here runs git or writes anything: it opens the user's repository the
way git would find it, checks that there is a work tree, and resolves a
revision to a full commit id.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import pygit2

from .result import Err, GitError, GitResult, Ok
from .types import CommitId, GitDirPath, Ref, RepoPath, posix_prefix


@dataclass(frozen=True)
class UserRepository:
    """Where the user's repository is, as git would find it.

    Attributes:
        top: top folder of the user's work tree.
        git_dir: the work tree's git directory (``.git``, or
            ``.git/worktrees/<id>`` when the user stands in a linked worktree).
        common_dir: the repository's common git directory (holds refs,
            objects and ``worktrees/``).
        prefix: the caller's folder relative to ``top`` (``""`` at the top),
            with ``/`` separators, as ``git rev-parse --show-prefix``.
    """

    top: RepoPath
    git_dir: GitDirPath
    common_dir: GitDirPath
    prefix: str


def _error(reason: str) -> Err:
    return Err(GitError(reason=reason))


def _read_common_dir(git_dir: str) -> str:
    """``<git_dir>/commondir`` resolved (linked worktrees), else ``git_dir``."""
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common = handle.read().strip()
    except FileNotFoundError:
        return git_dir
    return os.path.normpath(os.path.join(git_dir, common))


def _config_bool(repo: pygit2.Repository, key: str) -> bool:
    """``key`` of the repository's configuration as a boolean (false when
    unset or not a boolean)."""
    try:
        return bool(repo.config.get_bool(key))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def open_user_repository(path: str, environ: Mapping[str, str]) -> GitResult[UserRepository]:
    """Find the repository that ``git -C <path>`` would act on.

    ``GIT_DIR`` and ``GIT_WORK_TREE`` in ``environ`` are honoured the way git
    honours them (git(1), ENVIRONMENT; they are exported to hooks and to
    ``!`` aliases): relative values are taken from ``path``; ``GIT_WORK_TREE``
    names the top of the work tree, with or without ``GIT_DIR``; with
    ``GIT_DIR`` and neither ``GIT_WORK_TREE`` nor ``core.worktree``, ``path``
    is the top, and a ``core.bare`` repository has no work tree.
    ``GIT_PREFIX`` is not read: like every git command in a ``!`` alias,
    git-isopatch acts on its own working folder.

    Returns:
        ``Ok(UserRepository)``, or ``Err`` whose ``reason`` is one of
        ``"cannot change to '<path>'"``, ``"not a git repository (or any of
        the parent directories): .git"``, ``"this operation must be run in a
        work tree"``, or ``"bad config file: <libgit2's reason>"`` when the
        repository's configuration cannot be parsed.
    """
    if not os.path.isdir(path):
        return _error(f"cannot change to '{path}': No such file or directory")
    path = os.path.abspath(path)
    env_git_dir = environ.get("GIT_DIR")
    try:
        if env_git_dir:
            git_dir = os.path.join(path, env_git_dir)
            repo = pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        else:
            found = pygit2.discover_repository(path)
            if found is None:
                return _error("not a git repository (or any of the parent directories): .git")
            git_dir = found
            repo = pygit2.Repository(git_dir)
    except pygit2.GitError as exc:
        # libgit2 reads the repository's config file when it opens it:
        # "<dir>: failed to parse config file: <what> (in <file>:<line>)"
        _, parse_error, detail = str(exc).partition("failed to parse config file: ")
        if parse_error:
            return _error(f"bad config file: {detail}")
        _, unknown_format, object_format = str(exc).partition("unknown object format ")
        if unknown_format:  # pygit2's libgit2 is built for SHA-1 only
            return _error(f"unsupported repository: object format {object_format} is not supported")
        return _error("not a git repository (or any of the parent directories): .git")
    git_dir = os.path.normpath(os.path.abspath(git_dir))
    env_work_tree = environ.get("GIT_WORK_TREE")
    if env_work_tree:
        top = os.path.join(path, env_work_tree)
    elif env_git_dir:
        # git(1), GIT_DIR: without GIT_WORK_TREE or core.worktree the current
        # folder is the top of the work tree, unless core.bare says none.
        if _config_bool(repo, "core.bare"):
            return _error("this operation must be run in a work tree")
        top = repo.workdir if "core.worktree" in repo.config and repo.workdir else path
    else:
        if repo.is_bare or repo.workdir is None:
            return _error("this operation must be run in a work tree")
        top = repo.workdir
    top = os.path.normpath(os.path.abspath(top))
    if not _inside(path, top) or _inside(path, git_dir):
        return _error("this operation must be run in a work tree")
    prefix = posix_prefix(os.path.relpath(os.path.realpath(path), os.path.realpath(top)))
    return Ok(
        UserRepository(
            top=RepoPath(top),
            git_dir=GitDirPath(git_dir),
            common_dir=GitDirPath(_read_common_dir(git_dir)),
            prefix=prefix,
        )
    )


def resolve_commit(repository: UserRepository, revision: Ref) -> GitResult[CommitId]:
    """Resolve ``revision`` to the full id of the commit it names.

    Tags are peeled; a revision naming a tree or blob is refused.

    Returns:
        ``Ok(CommitId)``, or ``Err`` whose ``reason`` is ``"unknown revision
        'X'"`` (git's "ambiguous argument 'X': unknown revision or path not in
        the working tree." without the part about paths, which a base never
        is, and without the full stop, as git's CodingGuidelines ask),
        ``"'X' is not a commit"``, or, for ``HEAD`` on a branch with no
        commits yet, ``"unborn HEAD: 'HEAD' has no commits yet"``.
    """
    try:
        repo = pygit2.Repository(repository.git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        if revision == "HEAD" and repo.head_is_unborn:
            return _error(f"unborn HEAD: '{revision}' has no commits yet")
        target = repo.revparse_single(str(revision))
    except (KeyError, ValueError, pygit2.GitError):
        return _error(f"unknown revision '{revision}'")
    try:
        commit = target.peel(pygit2.Commit)
    except (ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return _error(f"'{revision}' is not a commit")
    return Ok(CommitId(str(commit.id)))


def tracked_path_in_commit(git_dir: GitDirPath, commit: CommitId, path: str) -> str | None:
    """The path of ``commit``'s tree that is in the way of an untracked
    ``path``: ``path`` itself when the tree has it (a file, a symbolic link,
    a gitlink or a folder), or the first of its parent folders that the tree
    holds as something other than a folder; ``None`` when the tree has
    neither, so ``path`` is not tracked there.

    Args:
        git_dir: the repository's git directory.
        commit: a full commit id of that repository.
        path: relative to the top, ``/``-separated, normalised.
    """
    repo = pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    tree = repo[commit].peel(pygit2.Tree)
    parts = path.split("/")
    for end in range(1, len(parts) + 1):
        prefix = "/".join(parts[:end])
        try:
            entry = tree[prefix]
        except KeyError:
            return None
        if end == len(parts) or entry.type_str != "tree":
            return prefix
    return None
