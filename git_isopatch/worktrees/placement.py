"""Where a worktree of git-isopatch lives (design: Placement).

Formatters and linters look for their configuration upwards from where they
run (ruff, prettier, ``.editorconfig``, eslint, cargo's
``.cargo/config.toml``).  A worktree in ``$TMPDIR`` sees ``/tmp``'s
configuration instead of the checkout's, and a file another local user
plants in a world-writable ``/tmp`` applies to every run.  So the worktree
is placed beside the checkout: ``<parent of the top>/<name of the top>.
isopatch-XXXXXXXX/<name of the top>``, a ``mkdtemp`` folder (mode 0700)
holding only the worktree, so the folders above the worktree are the
checkout's own.  Its ``XXXXXXXX`` is, when that folder is free, the same
for every run of the checkout (:func:`_same_each_run`): tools that key
their caches by a file's path (black's) find them warm on the next run.
Its name starts with no dot, as worktree tools name a
visible sibling (``../<repo>.<branch>``): tools that take a dot segment of
an absolute path for a hidden file refuse to serve or read what lies below
one (express's ``res.sendFile`` answers 404 there).  Folders of older
versions, ``.git-isopatch-XXXXXXXX``, are still recognised as ours.

Where that folder cannot be made (the parent is read-only, full, not ours to
write, or the checkout is ``/``), the worktree goes to the fall-back folder
(``$TMPDIR``) with a warning.  An explicitly configured ``isopatch.tmpdir``
is a deliberate choice of place (a tmpfs, for speed): the worktree goes
there, with no warning.

The folder name proves the worktree is ours: :func:`made_by_isopatch`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import IsopatchError, known_os_failure
from ..git.admin_files import dotgit_target
from ..git.record import Record
from ..git.temporary import make_folder
from .deletion import delete_tree
from .mounts import mount_points_under

if TYPE_CHECKING:
    from ..git.shared_state import SharedWrite

#: Suffix of the name of the checkout that names the folder beside it that
#: holds a worktree (``<name>.isopatch-XXXXXXXX``).
BESIDE_SUFFIX = ".isopatch-"
#: Longest name of the checkout's folder that names that folder (``mkdtemp``
#: adds 18 characters; a file name holds 255 bytes); a longer one, or a
#: hidden one (see :func:`worktree_name`), gives way to ``worktree``.
_LONGEST_NAME = 200
#: Prefix of a folder under ``$TMPDIR`` or ``isopatch.tmpdir`` (the run's
#: private folder, or a worktree's folder there).
TMP_PREFIX = "git-isopatch-"

#: Names of the folders :func:`place_worktree` makes (``mkdtemp`` adds
#: eight characters of ``[a-z0-9_]``): in a temporary root (and, made by
#: older versions, beside the checkout with a dot) ...
_TMP_CONTAINER_NAME = re.compile(r"\A\.?git-isopatch-[a-z0-9_]{8}\Z")
#: ... and beside the checkout, after the name of the worktree it holds
#: (or ``worktree``, for a name too long).
_BESIDE_CONTAINER_NAME = re.compile(r"\A(.+)\.isopatch-[a-z0-9_]{8}\Z", re.DOTALL)


def _container_name_fits(container: str, worktree: str) -> bool:
    """True when ``container`` is a name :func:`place_worktree` gives the
    folder of a worktree named ``worktree``."""
    if _TMP_CONTAINER_NAME.match(container):
        return True
    beside = _BESIDE_CONTAINER_NAME.match(container)
    return beside is not None and beside.group(1) in (worktree, "worktree")


class WorktreePlace(Record):
    """A new, empty folder that will hold one worktree.

    Attributes:
        container: the ``mkdtemp`` folder (mode 0700) made for it; nothing
            but the worktree goes there.
        worktree: the path for ``git worktree add``:
            ``<container>/<name of the user's top folder>`` (tools that take
            a project name from the folder name behave alike).
        beside_checkout: True when ``container`` is beside the checkout's
            top folder (the configuration context is the checkout's).
    """

    container: str
    worktree: str
    beside_checkout: bool


def worktree_name(top: str) -> str:
    """The worktree's folder name: the name of the user's top folder (or
    ``worktree`` for ``/`` or a hidden name)."""
    name = os.path.basename(top.rstrip(os.sep))
    return name if name and not name.startswith(".") else "worktree"


def place_worktree(
    top: str,
    *,
    fallback_root: str,
    configured_root: str | None = None,
    warn: Callable[[str], None],
    same_each_run: bool = True,
) -> WorktreePlace:
    """Make the folder for a new worktree of the checkout whose top folder
    is ``top``; the one place where git-isopatch (and its pool of warm
    worktrees) decides where worktrees live.

    Args:
        top: the user's top folder (absolute).
        fallback_root: where to go when the place beside the checkout cannot
            be written (``$TMPDIR``, else ``/tmp``).
        configured_root: ``isopatch.tmpdir`` when the user set it: the
            worktree goes there and nowhere else.
        warn: called with the one-line warning of a fall-back.
        same_each_run: beside the checkout, try the folder every run of it
            tries first (:func:`_same_each_run`); else a new one.

    Returns:
        The :class:`WorktreePlace`; the caller removes ``container`` with
        the worktree.

    Raises:
        IsopatchError: the folder could not be made in ``configured_root``,
            or neither beside the checkout nor in ``fallback_root``
            (classified: ``no-space``, ``read-only``, ``permission-denied``...).
    """
    name = worktree_name(top)
    if configured_root is not None:
        container = _make(configured_root)
        return WorktreePlace(container, os.path.join(container, name), False)
    top = os.path.abspath(top)
    parent = os.path.dirname(top.rstrip(os.sep)) or os.sep
    if top.rstrip(os.sep) == "":
        reason = "it is the root folder"
    else:
        try:
            named = _beside_name(name)
            same = _same_each_run(top, parent, named) if same_each_run else None
            container = same or make_folder(parent, named + BESIDE_SUFFIX)
        except OSError as exc:
            reason = f"'{parent}': {exc.strerror or exc}"
        else:
            return WorktreePlace(container, os.path.join(container, name), True)
    container = _make(fallback_root)
    warn(
        f"cannot place the worktree beside '{top}' ({reason}); using '{container}', "
        "where configuration files above the checkout do not apply"
    )
    return WorktreePlace(container, os.path.join(container, name), False)


def _beside_name(name: str) -> str:
    """What names the folder beside the checkout for a worktree ``name``."""
    return name if len(os.fsencode(name)) <= _LONGEST_NAME else "worktree"


def _same_each_run(top: str, parent: str, named: str) -> str | None:
    """The folder beside the checkout ``top`` that every run of it tries
    first, made (mode 0700), or ``None`` when it is taken (another run's, a
    kept worktree's, anything already there: ``mkdir`` never reuses it).

    Raises:
        OSError: it cannot be made in ``parent``.
    """
    digest = 0x811C9DC5  # FNV-1a, 32 bits: no hashlib to load in a plain run
    for byte in os.fsencode(top):
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    suffix = f"{digest:08x}"
    path = os.path.join(parent, named + BESIDE_SUFFIX + suffix)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return None
    return path


def forget_left_beside(top: str, common_dir: str, before: float) -> None:
    """Delete the folders beside the checkout ``top`` that
    :func:`place_worktree` made, last changed before ``before``, that hold
    nothing or only what a run killed while it registered its worktree
    left (:func:`_forget_half_registered`): a run killed while it waited
    for the worktree lock left an empty one, and the one every run tries
    first (:func:`_same_each_run`) stayed taken for good.  A run waiting
    for the lock made its own after ``before``, the caller holding the lock
    (which every registration holds) for less than that wait."""
    top = os.path.abspath(top).rstrip(os.sep)
    name = worktree_name(top)
    prefix = _beside_name(name) + BESIDE_SUFFIX
    try:
        entries = [
            e for e in os.scandir(os.path.dirname(top) or os.sep) if e.name.startswith(prefix)
        ]
    except OSError:
        return
    worktrees = os.path.join(os.path.realpath(common_dir), "worktrees")
    for entry in entries:
        with contextlib.suppress(OSError):
            found = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(found.st_mode) and found.st_mtime < before:
                if _BESIDE_CONTAINER_NAME.match(entry.name):
                    _forget_half_registered(entry.path, name, worktrees)
                    os.rmdir(entry.path)  # only when empty


def _forget_half_registered(container: str, name: str, worktrees: str) -> None:
    """Delete the worktree folder ``<container>/<name>`` when it holds
    nothing or only a ``.git`` file naming a registration absent from
    ``worktrees`` (the real path of ``$GIT_COMMON_DIR/worktrees``): what
    :func:`.registration.register_detached` writes before it moves the
    registration in, left by a run killed in between.  Anything else, or
    another file system below, stays.

    Raises:
        OSError: it could not be read or deleted.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(container, flags)
    try:
        if os.listdir(fd) != [name]:
            return
        inner = os.open(name, flags, dir_fd=fd)
        try:
            if os.fstat(inner).st_dev != os.fstat(fd).st_dev:
                return
            left = os.listdir(inner)
            if left == [".git"] and not _names_a_registration(inner, worktrees):
                os.unlink(".git", dir_fd=inner)
            elif left:
                return
        finally:
            os.close(inner)
        os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def _names_a_registration(folder: int, worktrees: str) -> bool:
    """False only when the ``.git`` of the open folder ``folder`` is a
    regular file ``gitdir: <worktrees>/<name>`` and nothing lies there."""
    fd = os.open(".git", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        text = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    named = os.fsdecode(text.removeprefix(b"gitdir: ").removesuffix(b"\n"))
    if not text.startswith(b"gitdir: ") or os.path.dirname(named) != worktrees:
        return True
    return os.path.basename(named) in ("", ".", "..") or os.path.lexists(named)


def _make(root: str) -> str:
    try:
        return make_folder(root, TMP_PREFIX)
    except OSError as exc:
        raise known_os_failure(f"could not create a temporary folder in '{root}'", exc) from exc


#: The folder of the common git directory that holds the base trees.
BASE_TREES_FOLDER = "isopatch"
#: The folder of a run's private folder (or of a session's, kept) that
#: holds its layer over a base tree (:mod:`.run_layer`).
LAYER_FOLDER = "worktree-layer"


def base_tree_now(common_dir: str, path: str, admin_dir: str) -> str:
    """Where the base tree that git registered at ``path`` (private folder
    ``admin_dir``) lies now: there, when its ``.git`` names ``admin_dir``
    back (no command writes a base tree); else, when the repository was
    moved or copied with its git directory (``mv repo moved``, ``cp -a``:
    the registration still names the old place, where the original's own
    may lie), in the same folders of this common git directory; else, when
    the folder is gone, ``path``.  A folder at ``path`` that names another
    private folder is never this one's: not run over, not removed."""
    if os.path.isdir(path) and dotgit_target(path) == os.path.realpath(admin_dir):
        return path
    folder, name = os.path.split(os.path.normpath(path))
    moved = os.path.join(common_dir, BASE_TREES_FOLDER, os.path.basename(folder), name)
    return moved if os.path.isdir(moved) or os.path.lexists(path) else path


def made_by_isopatch(worktree: str, container: str | None) -> bool:
    """True when ``worktree`` lies right in a folder that
    :func:`place_worktree` made and that the worktree's record names
    (``container``; ``None`` when there is no record, as for a run that has
    not written one yet: then the folder name alone decides).

    A record is a file any process can write into any worktree's private
    folder; a user's own worktree is never in a ``<name>.isopatch-*`` (or,
    made by older versions, ``.git-isopatch-*``) or ``git-isopatch-*`` folder,
    so a forged record cannot make git-isopatch remove it.  Neither the
    folder nor the worktree may be a symbolic link (a command can plant a
    link named like our folder that leads to any folder of the user's).
    """
    folder = os.path.dirname(os.path.normpath(worktree))
    if not _container_name_fits(
        os.path.basename(folder), os.path.basename(os.path.normpath(worktree))
    ):
        return False
    if container is not None and os.path.normpath(container) != folder:
        return False
    real = os.path.join(
        os.path.realpath(os.path.dirname(folder)),
        os.path.basename(folder),
        os.path.basename(os.path.normpath(worktree)),
    )
    return not os.path.lexists(worktree) or os.path.realpath(worktree) == real


def not_other_runs(writes: Sequence[SharedWrite]) -> tuple[SharedWrite, ...]:
    """``writes`` without the worktree registrations of git-isopatch's own
    worktrees (:func:`made_by_isopatch`): another run on the same
    repository adds, pools and removes its worktree while this one's
    command runs, and naming those as the command's doing would send the
    user to remove a worktree another run is using.  A command that makes
    a worktree named like ours unconfined is not told apart; under the
    sandbox its registration is discarded anyway."""
    return tuple(w for w in writes if w.where is None or not made_by_isopatch(w.where, None))


def remove_tree(folder: str, *, warn: Callable[[str], None]) -> bool:
    """Delete ``folder`` and everything in it by file descriptor
    (:func:`.deletion.delete_tree`), unless something is mounted at or
    below it (then nothing is deleted and ``warn`` says why).  Never
    raises.

    Returns:
        True when ``folder`` is gone.
    """
    mounted = mount_points_under(folder)
    if mounted:
        warn(f"not removing '{folder}': '{mounted[0]}' is a mount point")
        return False
    return delete_tree(folder) is None


def enter_prefix(worktree: str, prefix: str) -> str:
    """The folder of ``worktree`` that mirrors the caller's folder
    ``prefix`` (``/``-separated from the top, ``""`` for the top), made
    where missing; never through a symbolic link.

    Each component is opened with ``O_NOFOLLOW | O_DIRECTORY`` from the one
    before (made with ``mkdirat`` when missing), as git itself refuses a
    pathspec "beyond a symbolic link"; last, the folder's real path must lie
    in the worktree's.

    Returns:
        The folder's path, ``<worktree>/<prefix>``.

    Raises:
        IsopatchError: ``prefix-not-a-folder`` when a component is a
            symbolic link or not a folder in the worktree (at the base);
            a classified OS failure when a folder cannot be made.
    """
    parts = [p for p in prefix.split("/") if p]
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(worktree, flags)
    try:
        for index, part in enumerate(parts):
            if part in (".", ".."):
                raise ValueError(f"prefix '{prefix}' is not normalised")
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise known_os_failure(
                    f"could not create '{os.path.join(worktree, *parts[: index + 1])}'", exc
                ) from exc
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                shown = "/".join(parts[: index + 1])
                try:
                    link = stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
                except OSError:
                    link = False
                kind = "a symbolic link" if link else "not a folder"
                raise IsopatchError(
                    "prefix-not-a-folder",
                    f"'{shown}' is {kind} at the base; refusing to run the command there",
                    hint="run it from a folder that is a folder at the base, "
                    "or from the top of the work tree",
                ) from exc
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    folder = os.path.join(worktree, *parts)
    real_top = os.path.realpath(worktree)
    real = os.path.realpath(folder)
    if real != real_top and not real.startswith(real_top.rstrip(os.sep) + os.sep):
        raise IsopatchError(
            "prefix-not-a-folder", f"'{prefix}' leads outside the worktree; refusing to run there"
        )
    return folder
