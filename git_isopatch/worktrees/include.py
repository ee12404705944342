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

A copy never leads outside the worktree: a symbolic link inside a copied
folder that resolves outside the worktree (an absolute one, or one whose
``..`` climbs out) is replaced by a copy of what it points to; one that
points nowhere, or to something that is neither a file nor a folder, makes
the path unusable.

``.worktreeinclude`` is a tracked file, so it may come from someone else's
clone: an entry of it that cannot be used (refused, or failing to copy) is
skipped with a warning, never an error; the same for ``--link``, ``--copy``
and ``isopatch.*`` stops the run.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..errors import IsopatchError, classify, classify_os_error, known_os_failure
from ..git.metadata import git_metadata_dir
from ..git.record import Record
from ..git.repo import UserRepository, tracked_path_in_commit
from ..git.result import GitError
from ..git.types import CommitId, WorktreePath

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


class IncludeRequest(Record):
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


class Include(Record):
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
        try:
            path = _check(repository, request)
        except IsopatchError as refusal:
            _skip_or_raise(request.origin, refusal, warn)
            continue
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
        try:
            _check_on_disk(repository, request, path)
        except IsopatchError as refusal:
            _skip_or_raise(include.origin, refusal, warn)
            continue
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
    repository: UserRepository,
    commit: CommitId,
    includes: Sequence[Include],
    *,
    warn: Callable[[str], None],
) -> list[Include]:
    """Refuse includes that ``commit`` tracks (the worktree checks them out);
    a ``.worktreeinclude`` one is left out with a warning instead.

    Returns:
        ``includes`` without those left out.

    Raises:
        IsopatchError: ``bad-include-path`` naming the tracked path.
    """
    kept = []
    for include in includes:
        tracked = tracked_path_in_commit(repository.git_dir, commit, include.path)
        if tracked is not None:
            request = IncludeRequest(include.path, include.how, include.origin)
            where = "" if tracked == include.path else f" ('{tracked}' is)"
            refusal = _refuse(
                request,
                f"is tracked in the base commit{where}",
                hint="--link and --copy bring in files git does not track, such as ignored ones",
            )
            _skip_or_raise(include.origin, refusal, warn)
            continue
        kept.append(include)
    return kept


def _skip_or_raise(origin: str, refusal: IsopatchError, warn: Callable[[str], None]) -> None:
    """Raise ``refusal``, unless the path comes from ``.worktreeinclude``:
    then warn that it is skipped."""
    if origin != ".worktreeinclude":
        raise refusal
    warn(f"{refusal.message}; skipped")


def _copy(source: str, target: str, env: Mapping[str, str], *, dereference: bool = False) -> None:
    """``cp --reflink=auto -a -T source target`` (GNU coreutils: a reflink
    where the filesystem can, symbolic links copied as links, or with
    ``dereference`` as what they point to (``-L``), modes and times
    kept)."""
    try:
        done = subprocess.run(
            [
                "cp",
                "--reflink=auto",
                "-a",
                *(["-L"] if dereference else []),
                "-T",
                "--",
                source,
                target,
            ],
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


def _inside_real(path: str, folder: str) -> bool:
    return _inside(os.path.realpath(path), os.path.realpath(folder))


def _unlink_escapes(
    source: str, target: str, worktree: str, origin: str, shown: str, env: Mapping[str, str]
) -> None:
    """Replace each symbolic link under the copy ``target`` that resolves
    outside ``worktree`` with a copy of what the same link under
    ``source`` points to (``cp --reflink=auto -a -L``: no link is left in
    it).

    Raises:
        IsopatchError: ``bad-include-path`` for a link that points nowhere
            or to something that is neither a file nor a folder.
    """
    if os.path.islink(target):  # the path itself: _check_on_disk kept it inside
        links = [target]
    else:
        links = []
        for folder, dirs, files in os.walk(target):
            links += [
                os.path.join(folder, n)
                for n in dirs + files
                if os.path.islink(os.path.join(folder, n))
            ]
    for link in links:
        if _inside_real(link, worktree):
            continue
        original = os.path.join(source, os.path.relpath(link, target))
        pointed = os.path.realpath(original)
        name = os.path.join(shown, os.path.relpath(link, target))
        try:
            mode = os.stat(pointed).st_mode
        except OSError:
            mode = 0
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            what = "points nowhere" if mode == 0 else "points to neither a file nor a folder"
            raise IsopatchError(
                "bad-include-path",
                f"{origin} '{shown}': the symbolic link '{name}' leads outside the "
                f"worktree and {what}",
            )
        os.unlink(link)
        _copy(pointed, link, env, dereference=True)


def bring_in(
    repository: UserRepository,
    worktree: WorktreePath,
    includes: Sequence[Include],
    *,
    env: Mapping[str, str],
    warn: Callable[[str], None] | None = None,
) -> None:
    """Link or copy each of ``includes`` from the user's work tree into
    ``worktree``, making missing parent folders.  In a copy, a symbolic
    link that leads outside the worktree is replaced by a copy of what it
    points to (:func:`_unlink_escapes`).

    Args:
        env: environment for ``cp`` (``LC_ALL=C``: its messages are read).
        warn: called with the warning for a ``.worktreeinclude`` path that
            could not be copied (it is left out); default: raise as for the
            others.

    Raises:
        IsopatchError: a link or copy could not be made (``no-space``,
            ``permission-denied``, ``read-only``, ``copy-failed``,
            ``bad-include-path``...).
    """
    for include in includes:
        source = os.path.join(repository.top, include.path)
        target = os.path.join(worktree, include.path)
        try:
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
                _unlink_escapes(source, target, worktree, include.origin, include.path, env)
        except IsopatchError as failure:
            if warn is None or include.origin != ".worktreeinclude":
                raise
            if os.path.lexists(target) and not os.path.islink(target):
                shutil.rmtree(target, ignore_errors=True)
            elif os.path.lexists(target):
                os.unlink(target)
            _skip_or_raise(include.origin, failure, warn)
