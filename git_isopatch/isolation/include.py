"""Files git does not track, brought into the worktree: ``--link``,
``--copy``, ``isopatch.link``, ``isopatch.copy`` and ``.worktreeinclude``.

A fresh worktree has no ``node_modules``, ``.env`` or local configuration,
so a command that needs them fails there.  Each requested path of the
user's work tree is either *linked* (a symbolic link to the original:
instant, and writes go through to the original) or *copied* (``cp
--reflink=auto -a``: a reflink where the filesystem supports it, else a
plain copy; nothing inside it is left out).

Every path must stay inside the user's work tree: absolute paths, ``..``
that climbs out, paths in a ``.git`` folder, and paths whose symbolic links
resolve outside are refused before anything is created.  A path tracked in
the base commit is refused too: the worktree already has it, and a link or
copy over it would show in the patch as the command's change.  A path that
does not exist is skipped with a warning.  The paths are handed to the patch
extraction as exclusions, so they never appear in the patch, whatever
``.gitignore`` says.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..git.metadata import git_metadata_dir
from ..git.repo import UserRepository, tracked_path_in_commit
from ..git.result import GitError
from ..git.types import CommitId, WorktreePath
from .errors import IsopatchError, classify, classify_os_error, known_os_failure

LINK = "link"
COPY = "copy"
_DONE = {LINK: "linked", COPY: "copied"}

#: Where a request came from, weakest first: for one path, a stronger origin
#: decides between linking and copying.
ORIGIN_RANK = {
    ".worktreeinclude": 0,
    "isopatch.link": 1,
    "isopatch.copy": 1,
    "--link": 2,
    "--copy": 2,
}


@dataclass(frozen=True)
class IncludeRequest:
    """One path to link or copy, as it was asked for.

    Attributes:
        path: as written (relative to ``base_prefix``).
        how: :data:`LINK` or :data:`COPY`.
        origin: ``--link``, ``--copy``, ``isopatch.link``, ``isopatch.copy``
            or ``.worktreeinclude`` (used in messages).
        base_prefix: the folder ``path`` is relative to, from the top of the
            work tree (``""`` for the top; the caller's folder for options
            given on the command line, as git takes paths).
    """

    path: str
    how: str
    origin: str
    base_prefix: str = ""


@dataclass(frozen=True)
class Include:
    """A checked path to bring into the worktree.

    Attributes:
        path: relative to the top of the work tree, ``/``-separated, normalised.
        how: :data:`LINK` or :data:`COPY`.
        origin: where it was asked for.
    """

    path: str
    how: str
    origin: str


def _refuse(request: IncludeRequest, why: str, hint: str | None = None) -> IsopatchError:
    return IsopatchError("bad-include-path", f"{request.origin} '{request.path}' {why}", hint=hint)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _check(repository: UserRepository, request: IncludeRequest) -> str:
    """The request's path relative to the top, or :class:`IsopatchError`
    when it leaves the work tree (lexically)."""
    text = request.path
    if not text:
        raise _refuse(request, "is empty")
    if "\0" in text:
        raise _refuse(request, "holds a NUL byte")
    if posixpath.isabs(text):
        raise _refuse(request, "is outside the repository (an absolute path)")
    path = posixpath.normpath(posixpath.join(request.base_prefix, text.rstrip("/")))
    if path == ".":
        raise _refuse(request, "is the whole work tree")
    if path == ".." or path.startswith("../"):
        raise _refuse(request, "is outside the repository")
    if ".git" in path.split("/"):
        raise _refuse(request, "is inside a git directory")
    return path


def _check_on_disk(repository: UserRepository, request: IncludeRequest, path: str) -> None:
    """Refuse a path whose symbolic links lead out of the work tree or into
    git metadata (:func:`..git.metadata.git_metadata_dir`: a work tree
    inside a bare repository's folder is not)."""
    top = os.path.realpath(repository.top)
    real = os.path.realpath(os.path.join(repository.top, path))
    if not _inside(real, top) or real == top:
        raise _refuse(request, f"resolves to '{real}', outside the repository")
    if git_metadata_dir(repository, real) is not None:
        raise _refuse(request, f"resolves to '{real}', inside the git directory")


def _parents(path: str) -> Iterable[str]:
    parts = path.split("/")
    for end in range(1, len(parts)):
        yield "/".join(parts[:end])


def resolve_includes(
    repository: UserRepository,
    requests: Sequence[IncludeRequest],
    *,
    warn: Callable[[str], None],
) -> list[Include]:
    """Check ``requests`` and return the paths to bring in, sorted.

    A path asked for twice is brought in once; between a link and a copy of
    one path the stronger origin decides (:data:`ORIGIN_RANK`: the command
    line, then configuration, then ``.worktreeinclude``).  A path inside
    another one is left out (it comes with it; a warning says so when one is
    a link and the other a copy).  A path that does not exist is left out
    with a warning.  Nothing is created.

    Raises:
        IsopatchError: ``bad-include-path`` for a path that leaves the work
            tree, or that is both linked and copied from one origin rank.
    """
    chosen: dict[str, tuple[Include, int]] = {}
    for request in requests:
        path = _check(repository, request)
        rank = ORIGIN_RANK.get(request.origin, 2)
        include = Include(path=path, how=request.how, origin=request.origin)
        previous = chosen.get(path)
        if previous is not None:
            old, old_rank = previous
            if old.how != include.how and old_rank == rank:
                raise _refuse(
                    request, f"is both linked and copied ({old.origin}, {request.origin})"
                )
            if old_rank >= rank:
                continue
        chosen[path] = (include, rank)
    kept: list[Include] = []
    for path in sorted(chosen):
        include, _ = chosen[path]
        request = IncludeRequest(include.path, include.how, include.origin)
        if not os.path.lexists(os.path.join(repository.top, path)):
            warn(f"{include.origin} '{path}' does not exist; not {_DONE[include.how]}")
            continue
        _check_on_disk(repository, request, path)
        kept.append(include)
    present = {include.path: include for include in kept}
    result = []
    for include in kept:
        outer = next((present[p] for p in _parents(include.path) if p in present), None)
        if outer is None:
            result.append(include)
        elif outer.how != include.how:
            warn(
                f"{include.origin} '{include.path}' is inside {_DONE[outer.how]} "
                f"'{outer.path}'; not {_DONE[include.how]} on its own"
            )
    return result


def refuse_tracked(
    repository: UserRepository, commit: CommitId, includes: Sequence[Include]
) -> None:
    """Refuse includes that ``commit`` tracks (the worktree checks them out).

    Raises:
        IsopatchError: ``bad-include-path`` naming the tracked path.
    """
    for include in includes:
        tracked = tracked_path_in_commit(repository.git_dir, commit, include.path)
        if tracked is not None:
            request = IncludeRequest(include.path, include.how, include.origin)
            where = "" if tracked == include.path else f" ('{tracked}' is)"
            raise _refuse(
                request,
                f"is tracked in the base commit{where}",
                hint="--link and --copy bring in files git does not track, such as ignored ones",
            )


def _copy(source: str, target: str, env: Mapping[str, str]) -> None:
    """``cp --reflink=auto -a -T source target`` (GNU coreutils: a reflink
    where the filesystem can, symbolic links copied as links, modes and
    times kept)."""
    try:
        done = subprocess.run(
            ["cp", "--reflink=auto", "-a", "-T", "--", source, target],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
    except OSError as exc:
        code = classify_os_error(exc)
        raise IsopatchError(
            code or "copy-failed", f"could not copy '{source}': cannot run cp: {exc.strerror}"
        ) from exc
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        error = GitError(stderr=done.stderr, reason=lines[-1] if lines else "cp failed")
        message = lines[-1] if lines else f"cp exited with status {done.returncode}"
        raise IsopatchError(
            classify(error) or "copy-failed", f"could not copy '{source}': {message}"
        )


def bring_in(
    repository: UserRepository,
    worktree: WorktreePath,
    includes: Sequence[Include],
    *,
    env: Mapping[str, str],
) -> None:
    """Link or copy each of ``includes`` from the user's work tree into
    ``worktree``, making missing parent folders.

    Args:
        env: environment for ``cp`` (``LC_ALL=C``: its messages are read).

    Raises:
        IsopatchError: a link or copy could not be made (``no-space``,
            ``permission-denied``, ``read-only``, ``copy-failed``...).
    """
    for include in includes:
        source = os.path.join(repository.top, include.path)
        target = os.path.join(worktree, include.path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if include.how == LINK:
                os.symlink(source, target)
        except OSError as exc:
            raise known_os_failure(
                f"could not {include.how} '{include.path}' into '{worktree}'", exc
            ) from exc
        if include.how == COPY:
            _copy(source, target, env)
