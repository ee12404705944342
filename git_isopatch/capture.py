"""The procedure of the design, steps 1-7, as :func:`capture`.

``capture`` resolves the repository and base with pygit2, makes an ephemeral
worktree, runs the command there, writes what it changed as a binary patch,
and removes the worktree (or keeps it when asked, or when extraction failed).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import posixpath
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import IO, TYPE_CHECKING, Any

from .git.admin_files import read_pointers, restore_pointers
from .git.apply import apply_to_work_tree, diff_color
from .git.diff import (
    apply_size_warning,
    clear_hiding_flags,
    count_patch_files,
    diff_stat,
    mark_untracked_intent_to_add,
    quote_ambiguous_headers,
    unreadable_folder_warning,
    write_binary_diff,
)
from .git.ignored import WORKTREE_INCLUDE_FILE, worktree_include_paths
from .git.metadata import git_metadata_dir
from .git.repo import UserRepository, open_user_repository, resolve_commit
from .git.result import Err, GitError, GitResult, Ok
from .git.run import command_environment, own_git_environment
from .git.shared_state import SharedState, SharedWrite, describe_changes, read_shared_state
from .git.status import CheckoutState, changed_paths, read_checkout
from .git.submodule import Submodule, patch_stat, write_submodule_diff
from .git.types import CommitId, Ref
from .isolation import results
from .isolation.command import CommandOutcome, forward_signals, run_command
from .isolation.errors import (
    IsopatchError,
    classify,
    known_failure,
    known_os_failure,
)
from .isolation.include import (
    COPY,
    LINK,
    Include,
    IncludeRequest,
    bring_in,
    refuse_tracked,
    resolve_includes,
)
from .isolation.placement import enter_prefix
from .isolation.provider import Isolation, IsolationProvider, WorktreeProvider
from .isolation.submodules import populate as populate_submodules
from .isolation.submodules import warn_changed as warn_changed_submodules
from .request import CaptureRequest, conflicts
from .result import CaptureResult
from .settings import complete_request, default_tmpdir

if TYPE_CHECKING:  # loaded only by the runs that need them: a plain run starts faster
    from .isolation.sandbox import Sandbox

log = logging.getLogger("git_isopatch")

PATCH_NAME = "isopatch.patch"


#: Folders of installed dependencies that commands commonly need and git
#: does not track: npm, pnpm and yarn's ``node_modules``, a Python virtual
#: environment ``.venv``, Go, PHP and Ruby's ``vendor``.
DEPENDENCY_FOLDERS = ("node_modules", ".venv", "vendor")
#: Exit statuses for a program that was not found (127) or could not be
#: executed (126), as POSIX shells report it ("Command Search and
#: Execution") and npm, make and ``sh -c`` pass it on.
NOT_RUNNABLE = frozenset({126, 127})


def command_hints(
    command: Sequence[str], outcome: CommandOutcome, top: str, worktree: str, prefix: str = ""
) -> tuple[str, ...]:
    """Advice for a command that could not run a program (exit 126 or
    127; see :data:`NOT_RUNNABLE`), one line each:

    - the command's name holds a space and was not found: it is not run by
      a shell, so ``"ruff format src"`` is one program name;
    - a folder of :data:`DEPENDENCY_FOLDERS` is at the top of the user's
      checkout (``top``) but not in the ``worktree`` (git does not track it,
      and it was neither linked nor copied): ``--link``/``--copy`` it,
      named from the user's folder (``prefix``, ``/``-separated from the
      top, as :attr:`.git.repo.UserRepository.prefix`), since ``--link``
      paths are taken from there.

    Deciding on the exit status, never on timing, keeps the advice the same
    on a slow machine.
    """
    if outcome.exit_code not in NOT_RUNNABLE:
        return ()
    hints = []
    name = command[0] if command else ""
    if outcome.start_error is not None and " " in name:
        split = " ".join(shlex.quote(word) for word in name.split())
        hints.append(
            f"the command is run without a shell, so '{name}' is one program name; "
            f"split it (git isopatch -- {split}) or use sh -c {shlex.quote(name)}"
        )
        return tuple(hints)  # the name, not a missing dependency, is the trouble
    for folder in DEPENDENCY_FOLDERS:
        if os.path.isdir(os.path.join(top, folder)) and not os.path.lexists(
            os.path.join(worktree, folder)
        ):
            path = shlex.quote(posixpath.relpath(folder, prefix or "."))
            hints.append(
                f"'{folder}' of your checkout is not in the worktree; "
                f"bring it in with --link {path} (or --copy {path})"
            )
    return tuple(hints)


def _repository_error(error: GitError, default: str | None = None) -> IsopatchError:
    """git's or libgit2's refusal of the repository or the base, with git's
    advice as hints; ``default`` is the code when no specific row of the
    table classifies it (else ``git-failed``, or ``not-a-git-repository``
    for libgit2's own refusals)."""
    code = classify(error)
    if default is not None and code in (None, "git-failed"):
        code = default
    hint = "\n".join(error.hints) or None
    return IsopatchError(code or "not-a-git-repository", error.message(), hint=hint)


def open_repository(repo_path: str, environ: Mapping[str, str]) -> UserRepository:
    """Step 2, first half: the user's repository as git would find it.

    Raises:
        IsopatchError: ``not-a-git-repository`` or ``not-a-work-tree``.
    """
    match open_user_repository(repo_path, environ):
        case Ok(repository):
            return repository
        case Err(error):
            raise _repository_error(error)


def check_output_target(output: str, repository: UserRepository) -> None:
    """Refuse an ``-o`` target before anything is made (found by attacking
    it): the patch is written beside the target and renamed over it, which
    is right for a regular file or a new name, and wrong for anything else.

    Raises:
        IsopatchError: ``bad-output`` when ``output`` is git metadata
            (``-o .git/config`` would break the repository; a work tree
            inside a bare repository's folder is not metadata, see
            :func:`.git.metadata.git_metadata_dir`), or is an existing
            folder, symbolic link, FIFO or device;
            ``no-such-file``/``not-a-directory`` when its folder is missing
            or is not a folder.
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
    if mode is not None and not stat.S_ISREG(mode):
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
            raise _repository_error(error, "unknown-revision")


def _open_private(path: str) -> IO[bytes]:
    """Create ``path`` with mode 0600 (it must not exist) for writing bytes."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


def _umask() -> int:
    """The process's umask: ``Umask:`` of ``/proc/self/status`` (Linux 4.7),
    else set and restored (not thread-safe, hence the second choice)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _output_mode(output: str) -> int:
    """The mode an ``-o`` file gets: what ``--stdout > FILE`` would leave,
    the existing file's permission bits when it replaces one, else 0666
    less the umask.  (The run's private files stay 0600.)"""
    try:
        return stat.S_IMODE(os.stat(output).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _open_patch_file(folder: str) -> tuple[IO[bytes], str]:
    """Create the patch file in the run's private ``folder``: ``isopatch.patch``
    (mode 0600), or, when the command put something of its own under that
    name (it can guess the folder: it is the worktree's parent), a fresh
    ``isopatch-<random>.patch`` beside it; the command's file is left alone.

    Returns:
        the open file and its path.
    Raises:
        OSError: the folder cannot be written (no space, gone).
    """
    path = os.path.join(folder, PATCH_NAME)
    try:
        return _open_private(path), path
    except FileExistsError:
        pass
    fd, path = tempfile.mkstemp(prefix="isopatch-", suffix=".patch", dir=folder)
    return os.fdopen(fd, "wb"), path


def _extract_patch(
    isolation: Isolation,
    env: Mapping[str, str],
    output: str | None,
    exclude: Sequence[str] = (),
    submodules: Sequence[Submodule] = (),
    warn: Callable[[str], None] = log.warning,
    confine: Callable[[], None] | None = None,
) -> str:
    """Steps 5: intent-to-add, then the binary diff into a 0600 file.

    With ``output``, the patch is written beside it and renamed over it, so a
    failure never leaves a half-written file there.  ``exclude`` (paths from
    the top: the linked and copied ones) never enters the patch.  With
    ``confine`` (the command's sandbox), git runs confined as the command
    did: it runs what the worktree names (a nested repository's filter, its
    attributes), which the command wrote.  The changes inside each of
    ``submodules`` (populated by ``--recurse-submodules``) follow the
    superproject's, their paths from the top
    (:func:`.git.submodule.write_submodule_diff`); their gitlinks are left
    out.

    Returns:
        the patch path.
    Raises:
        IsopatchError: a classified git or OS failure.
    """
    worktree = isolation.worktree
    if os.path.islink(worktree) or not os.path.isdir(worktree):
        raise IsopatchError(
            "worktree-gone", f"the command removed or replaced its worktree '{worktree}'"
        )
    try:
        return _write_patch(isolation, env, output, exclude, confine, warn, submodules)
    except subprocess.SubprocessError as exc:  # only a confine that failed raises it
        from .isolation.sandbox import UNAVAILABLE

        raise IsopatchError(
            UNAVAILABLE, f"--sandbox is not available: could not confine git: {exc}"
        ) from None


def _write_patch(
    isolation: Isolation,
    env: Mapping[str, str],
    output: str | None,
    exclude: Sequence[str],
    confine: Callable[[], None] | None,
    warn: Callable[[str], None],
    submodules: Sequence[Submodule] = (),
) -> str:
    worktree = isolation.worktree
    git_dir = isolation.admin_dir
    unreadable: list[str] = []
    nested: list[str] = []
    exclude = [*exclude, *(submodule.path for submodule in submodules)]
    match clear_hiding_flags(worktree, git_dir=git_dir, env=env, preexec_fn=confine):
        case Err(error):
            raise known_failure(f"could not read the index of '{worktree}'", error)
        case Ok(tracked):
            pass
    match mark_untracked_intent_to_add(
        worktree,
        git_dir=git_dir,
        env=env,
        exclude=exclude,
        unreadable=unreadable,
        preexec_fn=confine,
        nested=nested,
        tracked=tracked,
    ):
        case Err(error):
            raise known_failure(f"could not mark new files intent-to-add in '{worktree}'", error)
        case Ok():
            pass
    for said in unreadable:
        warn(unreadable_folder_warning(said))
    for path in nested:
        warn(
            f"'{path}' is a repository the command made: the patch holds its commit "
            "(a gitlink), not its files"
        )
    target = output if output is not None else os.path.join(isolation.tmpdir, PATCH_NAME)
    try:
        if output is not None:
            handle = tempfile.NamedTemporaryFile(
                dir=os.path.dirname(output) or ".",
                prefix=".isopatch-",
                suffix=".tmp",
                delete=False,
            )
        else:
            handle, target = _open_patch_file(isolation.tmpdir)
    except OSError as exc:
        raise known_os_failure(f"could not write patch '{target}'", exc) from exc
    written = handle.name if output is not None else target
    try:
        with handle:
            match write_binary_diff(
                worktree,
                isolation.base,
                handle,
                git_dir=git_dir,
                env=env,
                exclude=exclude,
                preexec_fn=confine,
            ):
                case Err(error):
                    raise known_failure(f"could not write patch '{target}'", error)
                case Ok():
                    pass
            for submodule in submodules:
                match write_submodule_diff(
                    worktree, submodule, handle, env=env, preexec_fn=confine
                ):
                    case Err(error):
                        raise known_failure(
                            f"could not write patch '{target}' (submodule '{submodule.path}')",
                            error,
                        )
                    case Ok():
                        pass
        quote_ambiguous_headers(written)
        if output is not None:
            os.chmod(written, _output_mode(output))
            os.replace(written, output)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(written)
        raise known_os_failure(f"could not write patch '{target}'", exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(written)
        raise
    return target


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
) -> CommitId:
    """``--include-uncommitted``: a commit of the work tree as it is, on top
    of ``HEAD`` (or parentless on an unborn branch); nothing of the user's
    is written (:func:`.git.snapshot.snapshot_work_tree`).  With ``staged``
    (``--staged``), a commit of the index as it is, what ``git commit``
    would commit (:func:`.git.snapshot.snapshot_index`).  ``index_file``:
    the user's index (:func:`.git.snapshot.user_index_file`).

    Raises:
        IsopatchError: a classified failure (no space, permission...).
    """
    try:
        head: CommitId | None = resolve_base(repository, "HEAD", env)
    except IsopatchError as failure:
        if failure.code != "unborn-head":
            raise
        head = None
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
            return commit
        case Err(error):
            what = "the index" if staged else "the work tree"
            raise known_failure(f"could not snapshot {what}", error)


#: Fields of a sequence type, which the API also takes as lists.
_TUPLE_FIELDS = frozenset(
    {"command", "link", "copy", "configured_links", "configured_copies", "allow_write"}
)


def capture(
    command: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    provider: IsolationProvider | None = None,
    warn: Callable[[str], None] | None = None,
    **options: Any,
) -> CaptureResult:
    """Run ``command`` in an ephemeral worktree and capture its changes: the
    convenience form of :func:`run`.

    ``options`` are the fields of :class:`~git_isopatch.request.CaptureRequest`
    by name (``base="main"``, ``repo_path="."``, ``link=["node_modules"]``,
    ``include_uncommitted=True``, ``keep=True``, ``timeout=30``...); lists
    are taken for its tuples.  ``environ``, ``provider`` and ``warn`` are as
    for :func:`run`.

    Raises:
        TypeError: an option that is not a field of the request.
        ValueError, IsopatchError: as :func:`run`.
    """
    names = {field.name for field in fields(CaptureRequest)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise TypeError(f"capture() got unexpected keyword arguments: {', '.join(unknown)}")
    options = {
        name: tuple(value) if name in _TUPLE_FIELDS and value is not None else value
        for name, value in options.items()
    }
    request = CaptureRequest(command=tuple(command), **options)
    return run(request, environ=environ, provider=provider, warn=warn)


def run(
    request: CaptureRequest,
    *,
    environ: Mapping[str, str] | None = None,
    provider: IsolationProvider | None = None,
    warn: Callable[[str], None] | None = None,
) -> CaptureResult:
    """The procedure (design: "The procedure"): run ``request.command`` in an
    ephemeral worktree at ``request.base`` and capture its changes.

    Args:
        request: what to run and how; fields left ``None`` are completed from
            ``isopatch.*`` configuration (:func:`.settings.complete_request`).
        environ: the environment to resolve the repository from and to give
            the command (default ``os.environ``); git's repository variables
            are removed before the command sees it.
        provider: the isolation provider (default :class:`WorktreeProvider`
            with ``isopatch.maxWorktrees``).
        warn: called with each one-line warning (a linked or copied path
            that does not exist, a kept worktree removed at
            ``isopatch.maxWorktrees``, ``allow_write``/``allow_network``
            given without a sandbox); default: the ``git_isopatch`` logger.

    Returns:
        A :class:`CaptureResult`.  When extraction fails, ``error`` and
        ``error_code`` are set, ``patch_path`` is ``None`` and the worktree is
        kept (``worktree_path``).  Linked and copied paths are never in the
        patch.

    Raises:
        ValueError: the request holds a combination that cannot go together
            (:func:`.request.conflicts`: an empty command,
            ``include_uncommitted`` with a ``base`` other than ``HEAD``...).
        IsopatchError: the path is not in a work tree, a configuration
            value is bad (``bad-config``), the base does not resolve, a
            linked or copied path leaves the work tree or is tracked
            (``bad-include-path``), every worktree ``isopatch.maxWorktrees``
            allows is running (``too-many-worktrees``), the worktree could
            not be made, the sandbox is not available here
            (``sandbox-unavailable``) or an ``allow_write`` path does not
            exist; no worktree was created.
    """
    problem = conflicts(request)
    if problem is not None:
        raise ValueError(problem)
    environ = os.environ if environ is None else environ
    warn = warn or log.warning
    if request.output is not None:
        request = replace(
            request, output=os.path.abspath(os.path.join(request.repo_path, request.output))
        )
    repository = open_repository(request.repo_path, environ)
    if request.output is not None:
        check_output_target(request.output, repository)
    if request.allow_write is not None:
        paths = (os.path.abspath(os.path.join(request.repo_path, p)) for p in request.allow_write)
        request = replace(request, allow_write=tuple(paths))
    # the flags, not the configuration's keys (there for sandboxed runs)
    loosened = [
        name
        for name, given in (
            ("--allow-write", request.allow_write),
            ("--allow-network", request.allow_network),
        )
        if given
    ]
    request = complete_request(request, repository, environ)
    if not request.sandbox:
        for name in loosened:
            warn(f"{name} has no effect without --sandbox")
    confinement = _sandbox_request(request)
    tmp_root = request.tmpdir or "/tmp"
    # isopatch.tmpdir (or the caller's tmpdir) places the worktree too;
    # $TMPDIR alone holds only the private folder (design: Placement)
    worktree_root = tmp_root if tmp_root != default_tmpdir(environ) else None
    snapshot = request.include_uncommitted or request.staged
    commit = None if snapshot else resolve_base(repository, request.base, environ)
    git_env = own_git_environment(environ)
    includes = resolve_includes(
        repository, include_requests(repository, request, env=git_env), warn=warn
    )
    if commit is None:
        from .git.snapshot import user_index_file

        index_file = user_index_file(repository.git_dir, repository.top, environ)
        if environ.get("GIT_INDEX_FILE"):
            _check_named_index(index_file)
        commit = snapshot_base(
            repository, git_env, tmp_root, staged=request.staged, index_file=index_file
        )
    includes = refuse_tracked(repository, commit, includes, warn=warn)
    provider = provider or WorktreeProvider(
        git_env,
        max_worktrees=request.max_worktrees or 0,
        warn=warn,
        pool=request.pool or 0,
        progress=request.progress,
    )
    state: dict[str, int | None] = {"received": None}
    with forward_signals(state):
        isolation = provider.create(
            repository,
            commit,
            command=list(request.command),
            tmp_root=tmp_root,
            worktree_root=worktree_root,
        )
        results.mark(isolation.tmpdir, repository.common_dir)
        try:
            if request.include_uncommitted:
                _check_out_present_skipped(isolation, provider, git_env)
            submodules = (
                _populate_submodules(isolation, provider, git_env)
                if request.recurse_submodules
                else ()
            )
            result = _run_and_extract(
                isolation,
                provider,
                request,
                git_env,
                state,
                environ=environ,
                includes=includes,
                sandbox=confinement,
                submodules=submodules,
                warn=warn,
            )
        except BaseException:  # the worktree is gone, or kept and reported
            results.discard(isolation.tmpdir)
            raise
    if not _reports_inside(result, result.tmpdir):  # -o without captured output
        results.discard(result.tmpdir)
    results.expire_automatically(repository.common_dir, tmp_root)
    return result


def _reports_inside(result: CaptureResult, folder: str) -> bool:
    """A path the result reports (patch, captured output, kept worktree) is
    in ``folder``."""
    reported = (result.patch_path, result.stdout, result.stderr, result.worktree_path)
    prefix = os.path.join(folder, "")
    return any(path is not None and path.startswith(prefix) for path in reported)


def _populate_submodules(
    isolation: Isolation, provider: IsolationProvider, env: Mapping[str, str]
) -> tuple[Submodule, ...]:
    """``--recurse-submodules``: the submodules the user has checked out,
    populated from the user's own repositories
    (:func:`.isolation.submodules.populate`).  On failure the worktree is
    removed.

    Raises:
        IsopatchError: a classified git failure.
    """
    try:
        return populate_submodules(
            isolation.worktree, isolation.admin_dir, isolation.repository.top, env=env
        )
    except BaseException:
        if provider.remove(isolation):
            shutil.rmtree(isolation.tmpdir, ignore_errors=True)
        raise


def _check_out_present_skipped(
    isolation: Isolation, provider: IsolationProvider, env: Mapping[str, str]
) -> None:
    """``--include-uncommitted`` in a sparse checkout: the files of the
    snapshot that the sparse patterns leave out but the user has are
    checked out (:func:`.git.sparse.check_out_present_skipped`).  On failure
    the worktree is removed.

    Raises:
        IsopatchError: a classified git failure.
    """
    try:
        from .git.sparse import check_out_present_skipped

        match check_out_present_skipped(
            isolation.worktree,
            git_dir=isolation.admin_dir,
            source_top=isolation.repository.top,
            env=env,
        ):
            case Err(error):
                raise known_failure(f"could not check out '{isolation.worktree}'", error)
            case Ok():
                pass
    except BaseException:
        if provider.remove(isolation):
            shutil.rmtree(isolation.tmpdir, ignore_errors=True)
        raise


def _run_and_extract(
    isolation: Isolation,
    provider: IsolationProvider,
    request: CaptureRequest,
    git_env: Mapping[str, str],
    state: dict[str, int | None],
    *,
    environ: Mapping[str, str],
    includes: Sequence[Include] = (),
    sandbox: SandboxRequest | None = None,
    submodules: Sequence[Submodule] = (),
    warn: Callable[[str], None] = log.warning,
) -> CaptureResult:
    """:func:`_confined_run_and_extract` with the sandbox (when asked)
    alive from the command to the end of the extraction, then closed and
    its ``TMPDIR`` removed; ``submodules``: those populated."""
    with contextlib.ExitStack() as confinement:
        return _confined_run_and_extract(
            isolation,
            provider,
            request,
            git_env,
            state,
            confinement,
            environ=environ,
            includes=includes,
            sandbox=sandbox,
            submodules=submodules,
            warn=warn,
        )


def _confined_run_and_extract(
    isolation: Isolation,
    provider: IsolationProvider,
    request: CaptureRequest,
    git_env: Mapping[str, str],
    state: dict[str, int | None],
    confinement: contextlib.ExitStack,
    *,
    environ: Mapping[str, str],
    includes: Sequence[Include] = (),
    sandbox: SandboxRequest | None = None,
    submodules: Sequence[Submodule] = (),
    warn: Callable[[str], None] = log.warning,
) -> CaptureResult:
    """Steps 4-7 on a made worktree for a completed ``request`` (after
    linking and copying ``includes`` into it; ``submodules``: those
    populated); the worktree never outlives an error unless it is kept and
    reported.  A submodule whose changes are not in the patch is named by
    ``warn``."""
    timeout = request.timeout or None
    stdout_path = stderr_path = None
    repository = isolation.repository
    before = read_shared_state(repository.git_dir, repository.common_dir, env=git_env)
    try:
        bring_in(isolation.repository, isolation.worktree, includes, env=git_env, warn=warn)
        cwd = enter_prefix(isolation.worktree, repository.prefix)
        # under --sandbox the checkout cannot change through the command
        checkout_before = (
            read_checkout(repository.git_dir, repository.top, env=git_env)
            if sandbox is None
            else None
        )
        with contextlib.ExitStack() as files:
            stdout: int | IO[bytes] | None = request.command_stdout
            stderr: IO[bytes] | None = None
            if request.capture_output:
                stdout_path = os.path.join(isolation.tmpdir, "stdout")
                stderr_path = os.path.join(isolation.tmpdir, "stderr")
                stdout = files.enter_context(_open_private(stdout_path))
                stderr = files.enter_context(_open_private(stderr_path))
            env = command_environment(environ)
            box = None
            if sandbox is not None:
                box = confinement.enter_context(_sandboxed(isolation, sandbox, env, stdout, stderr))
            pointers = read_pointers(isolation.admin_dir)
            outcome = run_command(
                request.command,
                cwd=cwd,
                env=env,
                stdout=stdout,
                stderr=stderr,
                timeout=timeout,
                signal_state=state,
                sandbox=box,
            )
    except OSError as exc:  # the folder or the output files cannot be made
        if provider.remove(isolation):
            shutil.rmtree(isolation.tmpdir, ignore_errors=True)
        where = exc.filename or isolation.tmpdir
        raise known_os_failure(f"could not create '{where}'", exc) from exc
    except IsopatchError:
        if provider.remove(isolation):
            shutil.rmtree(isolation.tmpdir, ignore_errors=True)
        raise
    except BaseException:
        provider.remove(isolation)
        raise
    _restore_pointers(isolation, pointers, warn)
    hints = command_hints(
        request.command, outcome, repository.top, isolation.worktree, repository.prefix
    )
    finish = functools.partial(
        _result,
        isolation,
        outcome,
        state,
        stdout_path,
        stderr_path,
        timeout=timeout,
        shared_writes=_shared_writes(before, repository, git_env),
        hints=hints,
        checkout_changes=_checkout_changes(checkout_before, isolation, git_env),
    )
    warn_changed_submodules(
        isolation.worktree,
        isolation.admin_dir,
        populated=submodules,
        env=git_env,
        warn=warn,
        preexec_fn=box.confine if box is not None else None,
    )
    excluded = [i.path for i in includes]
    diffstat = None
    try:
        patch = _extract_patch(
            isolation,
            git_env,
            request.output,
            excluded,
            submodules=submodules,
            warn=warn,
            confine=box.confine if box is not None else None,
        )
        files = count_patch_files(patch)
        too_large = apply_size_warning(os.path.getsize(patch))
        if too_large is not None:
            warn(too_large)
        if request.diffstat and files:
            confine = box.confine if box is not None else None
            diffstat = (
                _diffstat(isolation, request, git_env, excluded, confine)
                if not submodules
                else _submodule_patch_stat(patch, git_env)
            )
    except IsopatchError as failure:
        provider.keep(isolation)
        return finish(worktree=isolation.worktree, error=failure)
    except BaseException:
        provider.keep(isolation)
        raise
    if request.keep:
        provider.keep(isolation)
        kept = isolation.worktree
    else:
        kept = None
        # A process the sandboxed command left behind (setsid) can still
        # write in this worktree and its private folder: never use it again.
        released = isolation if box is None else replace(isolation, poolable=False)
        if not provider.release(released):  # reported as kept, unlocked for the user
            provider.keep(isolation)
            kept = isolation.worktree
    if not files and _left_out_uncommitted(request, checkout_before):
        hints = (*hints, UNCOMMITTED_HINT)
    result = finish(worktree=kept, patch=patch, files=files, diffstat=diffstat, hints=hints)
    if not request.apply:
        return result
    if files and result.exit_code == 0:
        return _apply(result, repository, git_env)
    return replace(result, applied=False)


def _restore_pointers(
    isolation: Isolation, pointers: dict[str, bytes | None], warn: Callable[[str], None]
) -> None:
    """Put back the worktree's ``commondir`` and ``gitdir`` if the command
    rewrote them (:func:`.git.admin_files.restore_pointers`), before any
    git runs there again, and say so: the private folder is the command's
    to write, even under ``--sandbox``, and a ``commondir`` leading
    elsewhere would have git read another configuration and break ``git
    worktree list`` in the user's repository."""
    try:
        changed = restore_pointers(isolation.admin_dir, pointers)
    except OSError as exc:
        warn(f"could not put back the worktree's '{isolation.admin_dir}': {exc.strerror or exc}")
        return
    for name in changed:
        warn(f"the command rewrote '{os.path.join(isolation.admin_dir, name)}'; put back")


#: Said when a run from ``HEAD`` changed nothing while the user's work
#: tree has changes of its own, which the worktree does not hold.
UNCOMMITTED_HINT = (
    "your uncommitted changes are not in the worktree, which starts from HEAD; "
    "--include-uncommitted starts from them"
)


def _left_out_uncommitted(
    request: CaptureRequest, checkout: GitResult[CheckoutState] | None
) -> bool:
    """The run started from ``HEAD`` (no snapshot) while the user's work
    tree, as the look before the command saw it, had changes (``None``:
    not looked at, under ``--sandbox``; an ``Err``: the look failed)."""
    if not request.from_head_alone:
        return False
    match checkout:
        case Ok(state):
            return bool(state.entries)
    return False


def _submodule_patch_stat(patch: str, env: Mapping[str, str]) -> bytes | None:
    """The diffstat of a patch holding submodule files
    (:func:`.git.submodule.patch_stat`), or ``None`` when git cannot show
    it (logged at debug level)."""
    match patch_stat(patch, env=env):
        case Ok(output):
            return output
        case Err(error):
            log.debug("no diffstat: %s", error.message())
            return None


def _diffstat(
    isolation: Isolation,
    request: CaptureRequest,
    env: Mapping[str, str],
    exclude: Sequence[str],
    confine: Callable[[], None] | None = None,
) -> bytes | None:
    """The diffstat of the patch just written, coloured as git colours a
    diff for where it goes (``request.terminal_columns``); ``None`` when git
    cannot show it: the patch is there, and the run does not fail for a
    summary (the failure is logged at debug level)."""
    terminal = request.terminal_columns is not None
    color = diff_color(isolation.repository.git_dir, to_terminal=terminal, env=env)
    try:
        shown = diff_stat(
            isolation.worktree,
            isolation.base,
            git_dir=isolation.admin_dir,
            env=env,
            exclude=exclude,
            color=color,
            width=request.terminal_columns,
            preexec_fn=confine,
        )
    except subprocess.SubprocessError as exc:  # the sandbox could not confine git
        log.debug("no diffstat: %s", exc)
        return None
    match shown:
        case Ok(output):
            return output
        case Err(error):
            log.debug("no diffstat: %s", error.message())
            return None


def _apply(
    result: CaptureResult, repository: UserRepository, env: Mapping[str, str]
) -> CaptureResult:
    """``--apply``: the patch into the user's work tree as it is now, all or
    nothing (:func:`.git.apply.apply_to_work_tree`); when it does not apply,
    the result says ``apply-failed`` and keeps the patch."""
    assert result.patch_path is not None
    match apply_to_work_tree(repository.git_dir, repository.top, result.patch_path, env=env):
        case Ok():
            return replace(result, applied=True)
        case Err(error):
            lines = [
                line.removeprefix("error: ").removeprefix("fatal: ")
                for line in error.stderr.decode("utf-8", "replace").splitlines()
                if line.strip()
            ]
            reason = "; ".join(lines) or error.message()
            return replace(
                result,
                applied=False,
                error=f"the patch does not apply to the work tree as it is now: {reason}",
                error_code="apply-failed",
            )


def _checkout_changes(
    before: GitResult[CheckoutState] | None, isolation: Isolation, env: Mapping[str, str]
) -> tuple[str, ...]:
    """The paths of the user's work tree that changed since ``before``
    (:mod:`.git.status`), leaving out git-isopatch's own folders where they
    lie inside it (``isopatch.tmpdir`` inside the work tree); empty when
    either look fails or none was taken (``None``: ``--sandbox``)."""
    match before:
        case Ok(old):
            pass
        case _:
            return ()
    repository = isolation.repository
    match read_checkout(repository.git_dir, repository.top, env=env):
        case Ok(new):
            pass
        case Err():
            return ()
    top = os.path.realpath(repository.top)
    ours = []
    for folder in (isolation.tmpdir, isolation.container):
        relative = os.path.relpath(os.path.realpath(folder), top)
        if relative != ".." and not relative.startswith("../"):
            ours.append(os.fsencode(relative))
    return tuple(os.fsdecode(p) for p in changed_paths(old, new, ignore=ours))


@dataclass(frozen=True)
class SandboxRequest:
    """The sandbox of one run, checked before anything is made.

    Attributes:
        allow_write: absolute paths, each existing, the command may write.
        allow_network: keep the network.
        abi: the Landlock ABI :func:`.isolation.sandbox.check_available` found.
    """

    allow_write: tuple[str, ...]
    allow_network: bool
    abi: int


def _sandbox_request(request: CaptureRequest) -> SandboxRequest | None:
    """``None`` without the sandbox; otherwise check, before anything is
    made, that every writable path of the completed ``request`` exists and
    that the kernel can enforce the sandbox.

    Raises:
        IsopatchError: ``no-such-file`` (and the like) for a path,
            ``sandbox-unavailable``.
    """
    if not request.sandbox:
        return None
    paths = request.allow_write or ()
    for path in paths:
        try:
            os.stat(path)
        except OSError as exc:
            raise known_os_failure(f"cannot allow writes to '{path}'", exc) from exc
    allow_network = bool(request.allow_network)
    from .isolation.sandbox import check_available

    abi = check_available(allow_network=allow_network)
    return SandboxRequest(paths, allow_network, abi)


def _fileno(stream: int | IO[bytes] | None, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


@contextlib.contextmanager
def _sandboxed(
    isolation: Isolation,
    request: SandboxRequest,
    env: dict[str, str],
    stdout: int | IO[bytes] | None,
    stderr: int | IO[bytes] | None,
) -> Iterator[Sandbox]:
    """The sandbox for the command of ``isolation``: a private ``TMPDIR``
    (set in ``env``, removed afterwards) in the run's private folder, and the
    ruleset; the files behind the command's stdout and stderr stay writable.

    Raises:
        IsopatchError: ``sandbox-unavailable``.
        OSError: the private ``TMPDIR`` cannot be made.
    """
    from .isolation.sandbox import SandboxPolicy, prepare

    private_tmp = tempfile.mkdtemp(prefix="tmp-", dir=isolation.tmpdir)
    try:
        env["TMPDIR"] = private_tmp
        policy = SandboxPolicy(
            worktree=isolation.worktree,
            admin_dir=isolation.admin_dir,
            common_dir=isolation.repository.common_dir,
            tmpdir=private_tmp,
            allow_write=request.allow_write,
            allow_network=request.allow_network,
        )
        box = prepare(policy, abi=request.abi, streams=[_fileno(stdout, 1), _fileno(stderr, 2)])
        try:
            yield box
        finally:
            box.close()
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)


def _shared_writes(
    before: GitResult[SharedState], repository: UserRepository, env: Mapping[str, str]
) -> tuple[SharedWrite, ...]:
    """What changed in the refs and configuration the worktree shares with
    the user's repository since ``before`` (empty when either look fails)."""
    match before:
        case Ok(old):
            pass
        case Err():
            return ()
    match read_shared_state(repository.git_dir, repository.common_dir, env=env):
        case Ok(new):
            return tuple(describe_changes(old, new))
        case Err():
            return ()


def _result(
    isolation: Isolation,
    outcome: CommandOutcome,
    state: dict[str, int | None],
    stdout_path: str | None,
    stderr_path: str | None,
    *,
    worktree: str | None,
    patch: str | None = None,
    files: int | None = None,
    error: IsopatchError | None = None,
    timeout: float | None = None,
    shared_writes: tuple[SharedWrite, ...] = (),
    hints: tuple[str, ...] = (),
    diffstat: bytes | None = None,
    checkout_changes: tuple[str, ...] = (),
) -> CaptureResult:
    received = state.get("received")
    exit_code = 128 + received if received is not None else outcome.exit_code
    return CaptureResult(
        base=isolation.base,
        exit_code=exit_code,
        patch_path=patch,
        files=files,
        stdout=stdout_path,
        stderr=stderr_path,
        worktree_path=worktree,
        tmpdir=isolation.tmpdir,
        error=error.message if error else None,
        error_code=error.code if error else None,
        timed_out=outcome.timed_out,
        signal=received,
        command_error=outcome.start_error,
        timeout=timeout,
        shared_writes=shared_writes,
        hints=hints,
        top=isolation.repository.top,
        diffstat=diffstat,
        checkout_changes=checkout_changes,
    )
