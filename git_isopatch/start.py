"""Steps 1 and 2 of the procedure: everything checked before anything exists.

:func:`check` turns a :class:`~git_isopatch.request.CaptureRequest` into one
frozen :class:`Start`: the request resolved against the flags, the
``isopatch.*`` configuration and the defaults (no field left to complete),
the user's repository, the commit to start from (a snapshot commit for
``--include-uncommitted``/``--staged``), the paths to bring in and the
confinement plan.  When any of it fails, nothing has been made.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .errors import (
    IsopatchError,
    config_failure,
    known_failure,
    known_os_failure,
    open_repository,
    repository_failure,
)
from .git.ignored import WORKTREE_INCLUDE_FILE, worktree_include_paths
from .git.metadata import git_metadata_dir
from .git.repo import UserRepository, resolve_commit
from .git.result import Err, Ok
from .git.run import own_git_environment
from .git.types import CommitId, Ref
from .request import CaptureRequest, conflicts
from .sandbox import plan as sandbox_plan
from .sandbox.limits import Limits
from .sandbox.plan import CacheSettings, ConfinementPlan
from .settings import AUTO, ConfigError, complete_request, default_tmpdir
from .values import Start
from .worktrees.include import COPY, LINK, IncludeRequest, refuse_tracked, resolve_includes

if TYPE_CHECKING:
    from .worktrees.sessions import SessionRecord

#: The error-code of a sandbox the machine cannot give
#: (:func:`.sandbox.plan.plan`).
SANDBOX_UNAVAILABLE = "sandbox-unavailable"


def _confinement(
    request: CaptureRequest, work_tree: str, warn: Callable[[str], None]
) -> tuple[ConfinementPlan, bool]:
    """The confinement plan of ``request`` (completed), and whether it is
    confined by ``auto``: where the machine cannot confine, ``auto`` goes
    on unconfined with one warning, ``True`` fails.

    Raises:
        IsopatchError: ``sandbox-unavailable`` (``True`` only), or a path
            of ``allow_write`` that cannot be had.
    """
    allow_write, allow_network = request.allow_write or (), bool(request.allow_network)
    if request.sandbox != AUTO:
        plan = sandbox_plan.plan(bool(request.sandbox), allow_write, allow_network, work_tree)
        return plan, False
    try:
        return sandbox_plan.plan(True, allow_write, allow_network, work_tree), True
    except IsopatchError as failure:
        if failure.code != SANDBOX_UNAVAILABLE:
            raise
        why = failure.message.removeprefix("--sandbox is not available: ")
        warn(
            f"no sandbox here, the command runs unconfined: {why} "
            "(isopatch.sandbox=false: unconfined without this warning)"
        )
        return sandbox_plan.UNCONFINED, False


def _warn_loosened(
    loosened: list[str],
    request: CaptureRequest,
    sandbox: ConfinementPlan,
    warn: Callable[[str], None],
) -> None:
    """Each loosening flag given has no effect unconfined: say so."""
    if not sandbox.confined:
        for name in loosened:  # AUTO: unconfined by the fallback, not by choice
            why = ": no sandbox here" if request.sandbox == AUTO else " without --sandbox"
            warn(f"{name} has no effect{why}")


def _bounded(sandbox: ConfinementPlan, request: CaptureRequest) -> ConfinementPlan:
    """``sandbox`` with the bounds and the cache layer ``request`` asks for."""
    bounds = Limits(request.max_processes or 0, request.max_memory or 0)
    cache = CacheSettings(bool(request.cache), request.cache_limit or 0)
    return sandbox._replace(limits=bounds, cache=cache)


def check(
    request: CaptureRequest, environ: Mapping[str, str], warn: Callable[[str], None]
) -> Start:
    """Steps 1-2: resolve and check ``request`` (fields left ``None`` come
    from ``isopatch.*`` configuration, :func:`.settings.complete_request`).

    Raises:
        ValueError: options that cannot go together (:func:`.request.conflicts`,
            :class:`.request.UsageConflict`).
        IsopatchError: see :func:`git_isopatch.capture.run`; nothing exists yet.
    """
    if (problem := conflicts(request)) is not None:
        raise ValueError(problem)
    request = _absolute_paths(request)
    repository = open_repository(request.repo_path, environ)
    request, session = _existing_session(repository, request)
    output_folder = output_identity = None
    if request.output is not None:
        output_folder, output_identity = check_output_target(request.output, repository)
    loosened = _loosening_flags(request)
    configured_writes = request.allow_write is None
    try:
        request = complete_request(request, repository, environ)
    except ConfigError as bad:
        raise config_failure(bad.message, hint=bad.hint, error=bad.error) from None
    if configured_writes:
        request = _existing_allowed_writes(request, warn)
    sandbox, by_default = _confinement(request, repository.top, warn)
    sandbox = _bounded(sandbox, request) if sandbox.confined else sandbox
    _warn_loosened(loosened, request, sandbox, warn)
    tmp_root = request.tmpdir or "/tmp"
    commit = _start_commit(repository, request, environ, session)  # None: a snapshot's
    git_env = own_git_environment(environ)
    requested = include_requests(repository, request, env=git_env)
    includes = resolve_includes(repository, requested, warn=warn)
    user_head = user_index = None
    if commit is None:
        commit, user_head, user_index = _snapshot(repository, request, environ, git_env, tmp_root)
    includes = refuse_tracked(repository, commit, includes, warn=warn)
    return Start(
        command=tuple(request.command),
        repository=repository,
        commit=commit,
        tree_commit=user_head or commit,  # a snapshot goes over its parent's base tree
        includes=tuple(includes),
        sandbox=sandbox,
        sandboxed_by_default=by_default,
        sandbox_unavailable=request.sandbox == AUTO and not sandbox.confined,
        environ=environ,
        git_env=git_env,
        output=request.output,
        output_folder=output_folder,
        output_identity=output_identity,
        timeout=request.timeout or None,
        tmp_root=tmp_root,
        # isopatch.tmpdir (or the caller's tmpdir) places the worktree too;
        # $TMPDIR alone holds only the private folder (design: Placement)
        worktree_root=tmp_root if tmp_root != default_tmpdir(environ) else None,
        keep=bool(request.keep),
        pool=max(0, request.pool or 0),
        max_worktrees=request.max_worktrees or 0,
        base_trees=max(0, request.base_trees or 0),
        recurse_submodules=bool(request.recurse_submodules),
        include_uncommitted=request.include_uncommitted,
        staged=request.staged,
        from_head_alone=request.from_head_alone,
        capture_output=request.capture_output,
        command_stdout=request.command_stdout,
        apply=request.apply,
        progress=request.progress,
        diffstat=request.diffstat,
        informational_hints=request.informational_hints,
        terminal_columns=request.terminal_columns,
        user_head=user_head,
        user_index=user_index,
        session=request.session,
    )


def _existing_session(
    repository: UserRepository, request: CaptureRequest
) -> tuple[CaptureRequest, SessionRecord | None]:
    """:func:`.session_start.existing_session`, loaded for a session's run alone."""
    if not request.session:
        return request, None
    from .session_start import existing_session

    return existing_session(repository, request)


def _start_commit(
    repository: UserRepository,
    request: CaptureRequest,
    environ: Mapping[str, str],
    session: SessionRecord | None,
) -> CommitId | None:
    """The commit the run starts at: an existing ``session``'s base, the
    base resolved, or ``None`` for a snapshot (``--staged``,
    ``--include-uncommitted``), made once the includes are checked."""
    if session is not None:
        from .session_start import session_base

        return session_base(request, session, lambda rev: resolve_base(repository, rev, environ))
    if request.include_uncommitted or request.staged:
        return None
    return resolve_base(repository, request.base, environ)


def _loosening_flags(request: CaptureRequest) -> list[str]:
    """The options given that loosen the sandbox: the flags, not the
    configuration's keys (those are there for sandboxed runs)."""
    given = (("--allow-write", request.allow_write), ("--allow-network", request.allow_network))
    return [name for name, value in given if value]


def _existing_allowed_writes(
    request: CaptureRequest, warn: Callable[[str], None]
) -> CaptureRequest:
    """``isopatch.allowWrite`` without the paths that do not exist, each
    skipped with a warning (when a sandbox may be asked for): a policy in
    the global configuration names folders not every machine or
    repository has.  A ``--allow-write`` that names nothing stays fatal
    (:func:`.sandbox.plan.plan`)."""
    kept = []
    for path in request.allow_write or ():
        if os.path.lexists(path):
            kept.append(path)
        elif request.sandbox is not False:
            warn(f"isopatch.allowWrite: '{path}' does not exist; skipped")
    return request._replace(allow_write=tuple(kept))


def _absolute_paths(request: CaptureRequest) -> CaptureRequest:
    """``-o`` and ``--allow-write`` taken from ``request.repo_path``, as
    git takes paths on the command line.

    Raises:
        IsopatchError: ``empty-path``: an empty ``--allow-write`` (an unset
            variable) would make the whole folder writable.
    """
    if request.output is not None:
        output = os.path.abspath(os.path.join(request.repo_path, request.output))
        request = request._replace(output=output)
    if request.allow_write is not None:
        if any(path == "" for path in request.allow_write):
            raise IsopatchError(
                "empty-path",
                "--allow-write needs a path, not an empty value",
                hint='an unset variable in --allow-write "$DIR" gives an empty one',
            )
        paths = (os.path.abspath(os.path.join(request.repo_path, p)) for p in request.allow_write)
        request = request._replace(allow_write=tuple(paths))
    return request


def _snapshot(
    repository: UserRepository,
    request: CaptureRequest,
    environ: Mapping[str, str],
    git_env: Mapping[str, str],
    tmp_root: str,
) -> tuple[CommitId, CommitId | None, str]:
    """The snapshot commit ``--include-uncommitted``/``--staged`` start from,
    of the index ``GIT_INDEX_FILE`` names (checked) or the user's own; the
    user's ``HEAD`` commit it sits on (``None``: unborn) and that index."""
    from .git.snapshot import user_index_file

    index_file = user_index_file(repository.git_dir, repository.top, environ)
    if environ.get("GIT_INDEX_FILE"):
        _check_named_index(index_file)
    commit, head = snapshot_base(
        repository, git_env, tmp_root, staged=request.staged, index_file=index_file
    )
    return commit, head, index_file


def check_output_target(
    output: str, repository: UserRepository
) -> tuple[str, tuple[int, int, int, int] | None]:
    """Refuse an ``-o`` target before anything is made (found by attacking
    it): the patch is written beside the target and renamed over it, which
    is right for a regular file or a new name.  What a shell redirect
    writes into as it is, a character device (``/dev/null``, a terminal)
    or a FIFO, is taken too: the patch is copied into it, and only into the
    very file found now (its device and inode).

    Raises:
        IsopatchError: ``bad-output`` when ``output`` is git metadata
            (``-o .git/config`` would break the repository; a work tree
            inside a bare repository's folder is not metadata, see
            :func:`.git.metadata.git_metadata_dir`), or is an existing
            folder, symbolic link, socket or block device;
            ``no-such-file``/``not-a-directory`` when its folder is missing
            or is not a folder.
    Returns:
        the real path of the folder ``output`` goes into, and the device,
        inode, kind and device number of a character device or FIFO found
        there (else ``None``).
    """
    if git_metadata_dir(repository, output) is not None:
        raise IsopatchError(
            "bad-output", f"refusing to write the patch into the git directory: '{output}'"
        )
    try:
        mode = os.lstat(output).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise known_os_failure(f"could not write patch '{output}'", exc) from exc
    if mode is not None and stat.S_ISDIR(mode):
        raise IsopatchError("is-a-directory", f"could not write patch '{output}': Is a directory")
    identity = None
    if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        found = os.lstat(output)  # an inode number may be used again: the kind too
        identity = (found.st_dev, found.st_ino, stat.S_IFMT(found.st_mode), found.st_rdev)
    elif mode is not None and not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise IsopatchError("bad-output", f"refusing to replace '{output}': it is {kind}")
    folder = os.path.dirname(output)
    if not os.path.isdir(folder):
        if os.path.lexists(folder):
            raise IsopatchError(
                "not-a-directory", f"could not write patch '{output}': Not a directory"
            )
        raise IsopatchError(
            "no-such-file", f"could not write patch '{output}': No such file or directory"
        )
    return os.path.realpath(folder), identity


def resolve_base(
    repository: UserRepository, base: str, environ: Mapping[str, str] | None = None
) -> CommitId:
    """Step 2, second half: the base revision as a full commit id.

    ``environ`` (default ``os.environ``) carries ``git -c`` settings for
    git, asked where libgit2 cannot resolve the base.

    Raises:
        IsopatchError: ``unknown-revision``, ``ambiguous-revision`` (git's
            candidates as hints) or ``unborn-head``.
    """
    environ = os.environ if environ is None else environ
    try:
        ref = Ref(base)
    except ValueError as exc:  # the reason quotes the value with its escapes
        raise IsopatchError("unknown-revision", f"invalid base: {exc}") from exc
    match resolve_commit(repository, ref, env=own_git_environment(environ)):
        case Ok(commit):
            return commit
        case Err(error):
            raise repository_failure(error, "unknown-revision")


def include_requests(
    repository: UserRepository,
    request: CaptureRequest,
    *,
    env: Mapping[str, str],
) -> list[IncludeRequest]:
    """What to bring into the worktree, weakest origin first: the ignored
    files ``.worktreeinclude`` names (copied; unless
    ``request.worktree_include`` is false), ``isopatch.copy`` and
    ``isopatch.link`` (``request.configured_copies``/``configured_links``,
    completed), then ``request.link`` and ``request.copy`` (relative to the
    caller's folder, as git takes paths on the command line).

    Raises:
        IsopatchError: git could not list the ignored files.
    """
    requests: list[IncludeRequest] = []
    if request.worktree_include:
        match worktree_include_paths(repository.git_dir, repository.top, env=env):
            case Ok(paths):
                requests += [IncludeRequest(p, COPY, WORKTREE_INCLUDE_FILE) for p in paths]
            case Err(error):
                raise known_failure(f"could not read '{WORKTREE_INCLUDE_FILE}'", error)
    requests += [IncludeRequest(p, COPY, "isopatch.copy") for p in request.configured_copies or ()]
    requests += [IncludeRequest(p, LINK, "isopatch.link") for p in request.configured_links or ()]
    requests += [IncludeRequest(p, LINK, "--link", repository.prefix) for p in request.link]
    requests += [IncludeRequest(p, COPY, "--copy", repository.prefix) for p in request.copy]
    return requests


def _check_named_index(index_file: str) -> None:
    """``GIT_INDEX_FILE`` must name an index that exists as a regular file:
    git would read a missing one as an empty index (every file deleted) and
    block on a FIFO; a snapshot of either is not what the user meant.

    Raises:
        IsopatchError: ``bad-index``.
    """
    try:
        mode = os.stat(index_file).st_mode
    except OSError as exc:
        raise IsopatchError(
            "bad-index", f"GIT_INDEX_FILE names '{index_file}': {exc.strerror}"
        ) from exc
    if not stat.S_ISREG(mode):
        raise IsopatchError(
            "bad-index", f"GIT_INDEX_FILE names '{index_file}', which is not a regular file"
        )


def snapshot_base(
    repository: UserRepository,
    env: Mapping[str, str],
    tmp_root: str,
    *,
    staged: bool = False,
    index_file: str | None = None,
) -> tuple[CommitId, CommitId | None]:
    """``--include-uncommitted``: a commit of the work tree as it is, on top
    of ``HEAD`` (or parentless on an unborn branch); nothing of the user's
    is written (:func:`.git.snapshot.snapshot_work_tree`).  With ``staged``
    (``--staged``), a commit of the index as it is, what ``git commit``
    would commit (:func:`.git.snapshot.snapshot_index`).  ``index_file``:
    the user's index (:func:`.git.snapshot.user_index_file`).

    Returns:
        the snapshot commit, and its parent (``None`` on an unborn branch).
    Raises:
        IsopatchError: a classified failure (no space, permission...).
    """
    try:
        head: CommitId | None = resolve_base(repository, "HEAD", env)
    except IsopatchError as failure:
        if failure.code != "unborn-head":
            raise
        head = None
    import tempfile  # a snapshot's scratch index only

    try:
        scratch = tempfile.TemporaryDirectory(prefix="isopatch-index-", dir=tmp_root)
    except OSError as exc:
        raise known_os_failure(f"could not create a temporary folder in '{tmp_root}'", exc) from exc
    from .git.snapshot import snapshot_index, snapshot_work_tree

    with scratch as folder:
        if staged:
            result = snapshot_index(
                repository.git_dir, head, folder, env=env, index_file=index_file
            )
        else:
            result = snapshot_work_tree(
                repository.git_dir, repository.top, head, folder, env=env, index_file=index_file
            )
    match result:
        case Ok(commit):
            return commit, head
        case Err(error):
            what = "the index" if staged else "the work tree"
            raise known_failure(f"could not snapshot {what}", error)
