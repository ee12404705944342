"""Repository and ref look-ups with pygit2 (design: procedure step 2).

Nothing here writes anything: it opens the user's repository the way git
would find it, checks that there is a work tree, and resolves a revision to a
full commit id.  pygit2 (libgit2) answers first, as it is fast; where it
fails (an extension libgit2 does not know, such as ``extensions.partialClone``;
a revision form it lacks, such as ``@{push}``; a short id it calls ambiguous
where git disambiguates a commit-ish; a repository another user owns, which
``safe.directory`` in ``git -c`` or the global configuration may allow) git
itself is asked (``git rev-parse``) and its answer followed, including its
refusal, passed on in its own words (:meth:`GitError.refusal`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping

from .library import load_pygit2
from .record import Record
from .result import Err, GitError, GitResult, Ok
from .run import own_git_environment, run_git
from .types import CommitId, GitDirPath, Ref, RepoPath, posix_prefix

pygit2 = load_pygit2()


class UserRepository(Record):
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


def _why_no_folder(path: str) -> str:
    """Why ``git -C <path>`` cannot change there, in the system's words:
    what ``stat`` says, else that it is no folder."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return os.strerror(errno.ENOTDIR)


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
        return _error(f"cannot change to '{path}': {_why_no_folder(path)}")
    path = os.path.abspath(path)
    env_git_dir = environ.get("GIT_DIR")
    try:
        if env_git_dir:
            git_dir = os.path.join(path, env_git_dir)
            repo = pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        else:
            found = pygit2.discover_repository(path)
            if found is None:
                return _ask_git(path, environ)
            git_dir = found
            repo = pygit2.Repository(git_dir)
    except pygit2.GitError as exc:
        # libgit2 reads the repository's config file when it opens it:
        # "<dir>: failed to parse config file: <what> (in <file>:<line>)"
        _, parse_error, detail = str(exc).partition("failed to parse config file: ")
        if parse_error:
            return _error(f"bad config file: {detail}")
        # and everything else libgit2 refuses, such as an object format it
        # is not built for (SHA-256): git's own answer
        return _ask_git(path, environ)
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


def _discovery_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """:func:`own_git_environment` plus the variables that tell git where
    the repository is (``GIT_DIR``, ``GIT_WORK_TREE``), which the user's
    repository is found by."""
    env = own_git_environment(environ)
    env.update({k: environ[k] for k in ("GIT_DIR", "GIT_WORK_TREE") if environ.get(k)})
    return env


def _ask_git(path: str, environ: Mapping[str, str]) -> GitResult[UserRepository]:
    """:func:`open_user_repository` when libgit2 could not: git's own
    answer (``git rev-parse`` in ``path``), or git's refusal."""
    asked = run_git(
        [
            "-C",
            path,
            "rev-parse",
            "--absolute-git-dir",
            "--git-common-dir",
            "--show-toplevel",
            "--show-prefix",
        ],
        env=_discovery_environment(environ),
    )
    match asked:
        case Err(error):
            if error.returncode is None:
                return asked
            return Err(GitError.refusal(error.args, error.returncode, error.stderr))
        case Ok(output):
            pass
    lines = os.fsdecode(output).split("\n")
    if len(lines) < 4:  # a path with a newline; git's output cannot be split
        return _error("not a git repository (or any of the parent directories): .git")
    git_dir, common_dir, top, prefix = lines[:4]
    return Ok(
        UserRepository(
            top=RepoPath(os.path.normpath(top)),
            git_dir=GitDirPath(os.path.normpath(git_dir)),
            common_dir=GitDirPath(os.path.normpath(os.path.join(path, common_dir))),
            prefix=prefix.rstrip("/"),
        )
    )


def _open(git_dir: str) -> pygit2.Repository | None:
    """The repository at ``git_dir`` through libgit2, or ``None`` when
    libgit2 refuses it (then git is asked instead)."""
    try:
        return pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError:
        return None


def resolve_commit(
    repository: UserRepository, revision: Ref, *, env: Mapping[str, str] | None = None
) -> GitResult[CommitId]:
    """Resolve ``revision`` to the full id of the commit it names.

    Tags are peeled; a revision naming a tree or blob is refused.  Where
    libgit2 cannot resolve it, git does (:func:`_resolve_with_git`): a short
    id is then disambiguated as a commit-ish, as ``git worktree add`` does.

    Args:
        env: the environment for git's own calls (default: this process's,
            through :func:`own_git_environment`); it carries ``git -c``
            settings such as ``safe.directory``.

    Returns:
        ``Ok(CommitId)``, or ``Err`` whose ``reason`` is ``"unknown revision
        'X'"`` (git's "ambiguous argument 'X': unknown revision or path not in
        the working tree." without the part about paths, which a base never
        is, and without the full stop, as git's CodingGuidelines ask),
        ``"'X' is not a commit"``, for ``HEAD`` on a branch with no commits
        yet ``"unborn HEAD: 'HEAD' has no commits yet"``, or git's own
        refusal (:meth:`GitError.refusal`: "no upstream configured for branch
        'main'", "short object ID 1234 is ambiguous" with git's candidates as
        ``hints``).
    """
    repo = _open(repository.git_dir)
    if repo is not None:
        try:
            if revision == "HEAD" and repo.head_is_unborn:
                return _error(f"unborn HEAD: '{revision}' has no commits yet")
            target = repo.revparse_single(str(revision))
        except (KeyError, ValueError, pygit2.GitError):
            target = None
        if target is not None:
            try:
                return Ok(CommitId(str(target.peel(pygit2.Commit).id)))
            except (ValueError, pygit2.GitError, pygit2.InvalidSpecError):
                return _error(f"'{revision}' is not a commit")
    return _resolve_with_git(
        repository, revision, own_git_environment(os.environ) if env is None else env
    )


def _resolve_with_git(
    repository: UserRepository, revision: Ref, env: Mapping[str, str]
) -> GitResult[CommitId]:
    """:func:`resolve_commit` by git: ``rev-parse --verify <rev>^{commit}``
    (a short id read as a commit-ish); else ``<rev>`` alone, peeled (the
    ``:/<text>`` form takes no suffix); else git's own refusal of ``<rev>``.
    """

    def rev_parse(*args: str) -> GitResult[bytes]:
        return run_git(["--git-dir", repository.git_dir, "rev-parse", *args], env=env)

    if not revision.startswith(":/"):
        match rev_parse("--verify", "--quiet", f"{revision}^{{commit}}"):
            case Ok(output):
                return Ok(CommitId(output.decode().strip()))
    match rev_parse("--verify", str(revision)):
        case Ok(output):
            named = output.decode().strip()
            match rev_parse("--verify", "--quiet", f"{named}^{{commit}}"):
                case Ok(output):
                    return Ok(CommitId(output.decode().strip()))
            return _error(f"'{revision}' is not a commit")
        case Err(error) if error.returncode is not None:
            refusal = GitError.refusal(error.args, error.returncode, error.stderr)
            if revision == "HEAD" and _head_is_unborn(repository, env):
                return _error(f"unborn HEAD: '{revision}' has no commits yet")
            if refusal.reason == "Needed a single revision":  # git names nothing
                return _error(f"unknown revision '{revision}'")
            return Err(refusal)
        case Err() as failed:
            return failed


def _head_is_unborn(repository: UserRepository, env: Mapping[str, str]) -> bool:
    """``HEAD`` names a branch that has no commit yet (git's "unborn")."""
    match run_git(["--git-dir", repository.git_dir, "symbolic-ref", "--quiet", "HEAD"], env=env):
        case Ok(output):
            name = output.decode().strip()
            return isinstance(
                run_git(
                    ["--git-dir", repository.git_dir, "rev-parse", "--verify", "--quiet", name],
                    env=env,
                ),
                Err,
            )
    return False


def tracked_path_in_commit(
    git_dir: GitDirPath, commit: CommitId, path: str, *, env: Mapping[str, str] | None = None
) -> str | None:
    """The path of ``commit``'s tree that is in the way of an untracked
    ``path``: ``path`` itself when the tree has it (a file, a symbolic link,
    a gitlink or a folder), or the first of its parent folders that the tree
    holds as something other than a folder; ``None`` when the tree has
    neither, so ``path`` is not tracked there.

    Args:
        git_dir: the repository's git directory.
        commit: a full commit id of that repository.
        path: relative to the top, ``/``-separated, normalised.
        env: the environment for git, asked (``git cat-file -t
            <commit>:<path>``) when libgit2 cannot open the repository;
            default: this process's.
    """
    parts = path.split("/")
    repo = _open(git_dir)
    if repo is None:
        env = own_git_environment(os.environ) if env is None else env
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            match run_git(["--git-dir", git_dir, "cat-file", "-t", f"{commit}:{prefix}"], env=env):
                case Ok(kind):
                    if end == len(parts) or kind.strip() != b"tree":
                        return prefix
                case Err():
                    return None
        return None
    tree = repo[commit].peel(pygit2.Tree)
    for end in range(1, len(parts) + 1):
        prefix = "/".join(parts[:end])
        try:
            entry = tree[prefix]
        except KeyError:
            return None
        if end == len(parts) or entry.type_str != "tree":
            return prefix
    return None
