"""A kept worktree's administrative files, put right before the user gets
its path.

The worktree's private folder (``$GIT_COMMON_DIR/worktrees/<id>``) and its
``.git`` file are the command's to write, and a process it left behind may
still write them after the run put ``commondir`` and ``gitdir`` back
(:func:`.git.admin_files.restore_pointers`).  A ``commondir`` leading to
another repository, or a ``config.worktree`` (read with
``extensions.worktreeConfig``) naming a ``core.fsmonitor``, would run a
planted program on the user's next ``git status`` there.  So when the
worktree is handed over, each of :data:`GUARDED` is made again what
git-isopatch wrote (:func:`snapshot`, taken when the worktree was ready
for the command): a file that was not there is removed.

A populated submodule (``--recurse-submodules``) has its git directory in
the private folder too (``modules/<name>``), and its ``.git`` file in the
worktree: its ``config``, ``config.worktree``, hooks and ``.git`` file are
guarded the same way (:func:`snapshot_submodules`, taken once they are
populated), keyed by absolute path; a hook that was not there is removed.

What the command planted in the worktree itself is made inert too
(:func:`disarm`): its index goes back to the one git-isopatch made
(:func:`keep_index`, copied to the run's private folder, which a
sandboxed command cannot write, once the worktree is populated), so that
no gitlink the command added sends the user's ``git status`` into a
repository of its making; and each ``.git`` below the top that is not a
submodule git-isopatch populated has its name changed to
:data:`DISARMED`, so that git neither enters that repository nor reads
its configuration, filters or hooks.

Design: procedure step 7 ("or keep it").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence

from ..git.admin_files import copy_admin_file, read_admin_file, replace_admin_file
from ..git.quote import quoted
from ..sandbox.layers import inside
from .deletion import delete_tree

#: The files of the private folder that tell git where the repository is,
#: where the worktree is, the worktree's own configuration, and its
#: ``HEAD`` (detached as git-isopatch made it: a ``HEAD`` the command made
#: a symbolic ref to the user's checked-out branch would have the user's
#: ``git commit`` in the kept worktree move that branch under the checkout).
GUARDED = ("commondir", "gitdir", "config.worktree", "HEAD")

#: Names of the private folder kept as they are besides :data:`GUARDED` and
#: what ``git worktree add`` makes there: the submodules' git directories
#: (``--recurse-submodules``), the sparse checkout's ``info`` and the reflog.
#: Anything else is the command's (an operation "in progress": a
#: ``rebase-merge`` whose todo list's ``exec`` lines the user's ``git rebase
#: --continue`` would run, ``sequencer``, ``MERGE_HEAD``, bisect state,
#: per-worktree refs) and is removed (:func:`put_right`).
ADMIN_KEPT = frozenset({"modules", "info", "logs"})

#: The worktree's own ``.git`` file, which names its private folder.
DOTGIT = ".git"


def _paths(admin_dir: str, worktree: str) -> dict[str, str]:
    paths = {name: os.path.join(admin_dir, name) for name in GUARDED}
    # only into the worktree's own folder: never through a link the command
    # put in its place (to the user's checkout), never into a folder it deleted
    real = os.path.join(os.path.realpath(os.path.dirname(worktree)), os.path.basename(worktree))
    if (
        not os.path.islink(worktree)
        and os.path.isdir(worktree)
        and os.path.realpath(worktree) == real
    ):
        paths[DOTGIT] = os.path.join(worktree, DOTGIT)
    return paths


def _content(path: str) -> bytes | None:
    """``path``'s bytes as a regular file, ``None`` when absent.

    Raises:
        OSError: it is something else (a folder, a link, a FIFO).
    """
    try:
        return read_admin_file(path)
    except FileNotFoundError:
        return None


def snapshot(admin_dir: str, worktree: str) -> dict[str, bytes | None]:
    """What each guarded file holds now (``None``: absent or not a regular
    file, which git-isopatch never makes)."""
    taken: dict[str, bytes | None] = {}
    for name, path in _paths(admin_dir, worktree).items():
        try:
            taken[name] = _content(path)
        except OSError:
            taken[name] = None
    return taken


#: The files of a submodule's git directory that name programs git runs.
SUBMODULE_GUARDED = ("config", "config.worktree")


def _real_folder(path: str) -> bool:
    """``path`` is a folder reached through no symbolic link."""
    return (
        os.path.isdir(path)
        and not os.path.islink(path)
        and os.path.realpath(path) == os.path.abspath(path)
    )


def snapshot_submodules(
    admin_dir: str, worktree: str, submodules: Sequence[tuple[str, str]]
) -> dict[str, bytes | None]:
    """What guards each submodule, ``(path in the worktree, git
    directory)``: its :data:`SUBMODULE_GUARDED` files and hooks (every file
    of ``hooks``), and its ``.git`` file, keyed by absolute path; only a git
    directory inside ``admin_dir``."""
    taken: dict[str, bytes | None] = {}
    for path, git_dir in submodules:
        if not inside(os.path.realpath(git_dir), os.path.realpath(admin_dir)):
            continue
        names = [os.path.join(git_dir, name) for name in SUBMODULE_GUARDED]
        hooks = os.path.join(git_dir, "hooks")
        with contextlib.suppress(OSError):
            names += [e.path for e in os.scandir(hooks) if e.is_file(follow_symlinks=False)]
        taken[hooks + os.sep] = b""  # its hooks are exactly those recorded
        names.append(os.path.join(worktree, path, DOTGIT))
        for name in names:
            try:
                taken[name] = _content(name)
            except OSError:
                taken[name] = None
    return taken


def _put_right_submodules(
    admin_dir: str, worktree: str, made: Mapping[str, bytes | None]
) -> list[str]:
    """:func:`put_right` for :func:`snapshot_submodules`' files: each put
    back only into a real folder of the private folder or of the worktree
    (never through a link the command put in place of a folder), and a
    hook the command added removed."""
    changed = []
    roots = [os.path.realpath(admin_dir), os.path.realpath(worktree)]
    for path, expected in made.items():
        if not os.path.isabs(path):
            continue
        folder = os.path.dirname(path.rstrip(os.sep))
        if not any(inside(folder, root) for root in roots) or not _real_folder(folder):
            continue
        if path.endswith(os.sep):  # a hooks folder: remove what was added
            hooks = path.rstrip(os.sep)
            if os.path.lexists(hooks) and not _real_folder(hooks):
                _remove(hooks)  # a link to a folder of planted hooks
                changed.append(hooks)
            if not os.path.lexists(hooks):
                os.mkdir(hooks, 0o755)
            with contextlib.suppress(OSError):
                for entry in os.scandir(hooks):
                    if entry.path not in made:
                        _remove(entry.path)
                        changed.append(entry.path)
            continue
        with contextlib.suppress(OSError):
            if _content(path) == expected:
                continue
        _remove(path)
        if expected is not None:
            replace_admin_file(path, expected)
        changed.append(path)
    return changed


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        failure = delete_tree(path)
        if failure is not None:
            raise OSError(failure)
    elif os.path.lexists(path):
        os.unlink(path)


def _remove_extras(admin_dir: str) -> list[str]:
    """Remove from the private folder what neither ``git worktree add`` nor
    git-isopatch made there (:data:`ADMIN_KEPT`); the paths removed."""
    from ..git.refresh import admin_extras

    removed = []
    with contextlib.suppress(OSError):
        for name in admin_extras(admin_dir):
            if name not in ADMIN_KEPT and name not in GUARDED:
                path = os.path.join(admin_dir, name)
                _remove(path)
                removed.append(path)
    return removed


def put_right(
    admin_dir: str, worktree: str, made: Mapping[str, bytes | None], *, extras: bool = True
) -> list[str]:
    """Make each guarded file hold what :func:`snapshot` read into ``made``
    again: rewritten by rename (never through a link), or removed when it
    was not there; a name of ``made`` left out is left as it is.  With
    ``extras``, what is neither git's nor ours goes (:func:`_remove_extras`;
    a session keeps its operations in progress, its refs and its objects).

    Returns:
        The paths that were put right.

    Raises:
        OSError: one could not be.
    """
    removed = _remove_extras(admin_dir) if extras else []
    changed: list[str] = []
    for name, path in _paths(admin_dir, worktree).items():
        if name not in made:
            continue
        expected = made.get(name)
        try:
            if _content(path) == expected:
                continue
        except OSError:
            pass  # not a regular file: replaced below
        _remove(path)
        if expected is not None:
            replace_admin_file(path, expected)
        changed.append(path)
    return changed + _put_right_submodules(admin_dir, worktree, made) + removed


#: At most this many paths put right are named, one ``warning:`` each;
#: the rest are counted in one more (a command may leave thousands).
NAMED_AT_MOST = 10


def said_put_right(paths: list[str], warn: Callable[[str], None]) -> None:
    """Say which of ``paths`` (:func:`put_right`'s, those git reads first)
    the command had changed: at most :data:`NAMED_AT_MOST` by name, a
    folder put back standing for what it holds."""
    seen: set[str] = set()
    named = [path for path in paths if not _within(path, seen)]
    for path in named[:NAMED_AT_MOST]:
        warn(f"the command rewrote {quoted(path)}; put back")
    if len(named) > NAMED_AT_MOST:
        warn(f"the command rewrote {len(named) - NAMED_AT_MOST} more; put back")


def _within(path: str, seen: set[str]) -> bool:
    """Whether a folder of ``seen`` holds ``path``; ``path`` is seen then."""
    seen.add(path)
    parent = os.path.dirname(path)
    while parent and parent != os.path.dirname(parent):
        if parent in seen:
            return True
        parent = os.path.dirname(parent)
    return False


#: The name a planted repository's ``.git`` is given (:func:`disarm`).
DISARMED = ".git.isopatch-disarmed"
#: The copy of the worktree's index as git-isopatch made it, in the run's
#: private folder (:func:`keep_index`).
INDEX_COPY = "index.as-made"
#: At most this many entries of a kept worktree are looked at for a
#: planted repository.
WALK_LIMIT = 1_000_000


def keep_index(admin_dir: str, private_dir: str) -> str | None:
    """Copy the worktree's index as git-isopatch made it into the run's
    private folder; its path, or ``None`` when there is none to copy."""
    copy = os.path.join(private_dir, INDEX_COPY)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(copy)
        copy_admin_file(os.path.join(admin_dir, "index"), copy)
    except OSError:
        return None
    return copy


def drop_index(copy: str | None) -> None:
    """Remove :func:`keep_index`'s copy: the run has given its worktree
    back.  Only a copy of ours: a base tree's index standing for one
    (:meth:`.lease.Lease.guard_index`) stays."""
    if copy is not None and os.path.basename(copy) == INDEX_COPY:
        with contextlib.suppress(OSError):
            os.unlink(copy)


def _put_back_index(admin_dir: str, copy: str) -> None:
    """The index is :func:`keep_index`'s copy again (by rename: never
    through a link the command put in its place)."""
    index = os.path.join(admin_dir, "index")
    fresh = f"{index}.isopatch-{os.getpid()}"
    copy_admin_file(copy, fresh)
    os.replace(fresh, index)


def _planted(worktree: str, expected: set[str]) -> list[str]:
    """Every ``.git`` below the top of ``worktree`` (a folder, a file or a
    link) but those of ``expected``, found without following a link and
    without entering a ``.git``; at most :data:`WALK_LIMIT` entries."""
    found: list[str] = []
    folders, seen = [worktree], 0
    while folders and seen < WALK_LIMIT:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if entry.name == ".git":
                if folder != worktree and entry.path not in expected:
                    found.append(entry.path)
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
    return sorted(found)


def disarm(
    admin_dir: str, worktree: str, made: Mapping[str, bytes | None], index_copy: str | None
) -> list[str]:
    """Make what the command planted in the kept ``worktree`` inert: its
    index is git-isopatch's own again (``index_copy``), and each planted
    ``.git`` (not a populated submodule's, which ``made`` names) is renamed
    :data:`DISARMED`.

    Returns:
        The folders (from the top) whose repository was disarmed.

    Raises:
        OSError: the index could not be put back.
    """
    if index_copy is not None:
        _put_back_index(admin_dir, index_copy)
    if os.path.islink(worktree) or not os.path.isdir(worktree):
        return []
    expected = {path for path in made if os.path.isabs(path) and path.endswith(os.sep + DOTGIT)}
    disarmed = []
    for path in _planted(worktree, expected):
        target = os.path.join(os.path.dirname(path), DISARMED)
        while os.path.lexists(target):
            target += "~"
        with contextlib.suppress(OSError):
            os.rename(path, target)
            disarmed.append(os.path.relpath(os.path.dirname(path), worktree))
    return disarmed


def hand_over(
    admin_dir: str,
    worktree: str,
    made: Mapping[str, bytes | None],
    index_copy: str | None,
    warn: Callable[[str], None],
) -> None:
    """Make the kept worktree's ``commondir``, ``gitdir``,
    ``config.worktree`` and ``.git`` what git-isopatch wrote
    (:func:`put_right`) and what the command planted inert (:func:`disarm`),
    and say which the command had changed: a planted ``core.fsmonitor`` or
    a ``commondir`` leading elsewhere would run on the user's next ``git
    status`` there."""
    try:
        changed = put_right(admin_dir, worktree, made)
        disarmed = disarm(admin_dir, worktree, made, index_copy)
    except OSError as exc:
        warn(f"could not put back {quoted(admin_dir)}: {exc.strerror or exc}")
        return
    said_put_right(changed, warn)
    for folder in disarmed:
        warn(
            f"the command made a repository at {quoted(folder)} in the kept worktree: "
            f"its .git is renamed {DISARMED}, so that git there does not enter it"
        )
