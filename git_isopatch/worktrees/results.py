"""The runs' private folders once their worktree is gone: result folders.

Each run makes a ``git-isopatch-*`` folder (mode 0700) under its temporary
root (``isopatch.tmpdir``, else ``$TMPDIR``, else ``/tmp``) for the patch and
the command's captured output.  A run leaves it only when someone will read
it; the ones left behind expire the way ``git gc --auto`` expires loose
objects: at most once a day per repository, a run removes its repository's
result folders older than two weeks (git's own ``gc.pruneExpire`` default),
and ``git isopatch prune`` removes them on demand.

To know which folders are whose, a run writes :data:`MARKER` into its
folder, naming the repository's common git directory.  The marker is
trusted for nothing but this: a folder is removed only when it is a real
folder (not a symbolic link) named ``git-isopatch-*``, owned by us, holds the
marker naming this repository, and holds no worktree (a subfolder with a
``.git``: kept, pooled and orphaned worktrees are ``prune``'s own business).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import time
from collections.abc import Iterable, Iterator
from typing import IO

from ..errors import known_os_failure
from ..git.record import Record
from ..git.temporary import make_folder
from ..logger import log
from .lock import LOCK_FILE

#: Prefix of every private folder a run makes (:func:`..git.temporary.make_folder`).
PRIVATE_PREFIX = "git-isopatch-"
#: File in a private folder naming the common git directory of its repository.
MARKER = ".isopatch-repository"
#: File in the common git directory whose modification time says when
#: result folders were last expired automatically: git-isopatch's worktree
#: lock, which every run opens anyway, so that no other file is added to
#: the user's git directory.
STAMP = LOCK_FILE
#: Seconds between two automatic expiries for one repository.
AUTO_INTERVAL = 24 * 3600
#: Age after which a result folder expires: git's own two weeks
#: (git-gc(1), ``gc.pruneExpire`` default ``2.weeks.ago``).
DEFAULT_EXPIRE = "2.weeks.ago"
DEFAULT_EXPIRE_SECONDS = 14 * 24 * 3600


class ResultFolder(Record):
    """A private folder of an earlier run of this repository.

    Attributes:
        path: the folder.
        modified: its last modification, in seconds since the epoch.
    """

    path: str
    modified: float


def mark(tmpdir: str, common_dir: str) -> bool:
    """Write :data:`MARKER` into the run's private folder ``tmpdir``, naming
    ``common_dir``.  Best effort: an unmarked folder is never removed by
    :func:`discard` or :func:`expire`, which is the safe side."""
    path = os.path.join(tmpdir, MARKER)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.fsencode(os.path.realpath(common_dir)) + b"\n")
    except OSError as exc:
        log.debug("could not mark '%s': %s", tmpdir, exc)
        return False
    return True


def hold(folder: str) -> int | None:
    """A descriptor of ``folder`` holding a shared ``flock`` on it, for as
    long as it stays open (a run's life; never inherited by the command):
    :func:`expire` leaves the folder of a run still running alone, as its
    patch and output are yet to be written.  ``None`` when it cannot be
    had (best effort: such a folder can expire under ``--expire now``)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def _in_use(folder: str) -> bool:
    """A run holds ``folder`` (:func:`hold`), or it cannot be opened to tell."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


class PrivateFolder:
    """A run's private folder (``path``), made by :func:`private_folder`.

    It is marked (:func:`mark`) once the worktree exists
    (:func:`.lifecycle.worktree_for_run`), so that the worktree's own files
    come first where inodes are few; until then a failure deletes it
    outright, after that only as a marked result folder (:func:`discard`).
    """

    def __init__(self, path: str, common_dir: str) -> None:
        self.path = path
        self.common_dir = common_dir
        self.marked = False
        self.held: int | None = None

    def mark(self) -> None:
        """:func:`mark` it for its repository (best effort)."""
        self.marked = mark(self.path, self.common_dir)

    def settle(self, reported: Iterable[str | None]) -> None:
        """:func:`settle` it; once it is gone, let go of its hold (the
        folder's last reference: its blocks are freed now, not as this
        process ends)."""
        settle(self.path, reported)
        if self.held is not None and not os.path.lexists(self.path):
            os.close(self.held)
            self.held = None


@contextlib.contextmanager
def private_folder(root: str, common_dir: str) -> Iterator[PrivateFolder]:
    """The one owner of a run's private folder: made (``mkdtemp``, mode
    0700, under ``root``) and held (:func:`hold`) on entry, marked (:meth:`PrivateFolder.mark`)
    once the worktree exists, discarded when the run fails; on success the
    run settles it (:func:`settle`), and what is left expires
    (:func:`expire_automatically`).

    Raises:
        IsopatchError: the folder could not be made.
    """
    try:
        path = make_folder(root, PRIVATE_PREFIX)
    except OSError as exc:
        raise known_os_failure(f"could not create a temporary folder in '{root}'", exc) from exc
    folder = PrivateFolder(path, common_dir)
    folder.held = hold(path)  # held, and left open, until the run settles it or this process ends
    try:
        yield folder
    except BaseException:  # the worktree is gone, or kept and reported
        if folder.marked:
            discard(path)
        else:  # nothing but what this run made is in it yet
            shutil.rmtree(path, ignore_errors=True)
        raise


def open_private(path: str) -> IO[bytes]:
    """Create ``path`` with mode 0600 (it must not exist) for writing bytes."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


#: How much of the end of the command's captured stdout and stderr the
#: result carries inline (``stdout-text``, ``stderr-text``), in bytes.
OUTPUT_TAIL = 16 * 1024
#: A cut tail starts after its first newline when that is this near its start.
_LINE_START = 4096


def output_tail(path: str | None, limit: int = OUTPUT_TAIL) -> str | None:
    """The end of the captured output file ``path``: all of it when it
    holds at most ``limit`` bytes, else its last ``limit`` bytes from the
    start of a line (or of a character) on, as UTF-8 (a byte that is not
    UTF-8 replaced).  ``None`` when it is not a regular file that can be
    read: the command could have replaced it (read without following a
    link, without blocking)."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd)
        if not stat.S_ISREG(size.st_mode):
            return None
        start = max(0, size.st_size - limit)
        data = os.pread(fd, limit, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start:
        newline = data.find(b"\n", 0, _LINE_START)
        if 0 <= newline < len(data) - 1:
            data = data[newline + 1 :]
        else:  # not in the middle of a character
            data = data.lstrip(bytes(range(0x80, 0xC0)))
    return data.decode("utf-8", "replace")


def settle(path: str, reported: Iterable[str | None]) -> None:
    """After a run: discard its private folder ``path`` unless a path the
    result reports (patch, captured output, kept worktree) lies inside it
    (``-o`` without captured output leaves nothing).  A caller that
    consumed what was reported (the patch copied to stdout, applied, or
    nobody told) discards it with :func:`discard`."""
    prefix = os.path.join(path, "")
    if not any(p is not None and p.startswith(prefix) for p in reported):
        discard(path)


def _marked_for(folder: str) -> str | None:
    """The common dir the marker of ``folder`` names, or ``None`` when
    ``folder`` is not one of ours (a symbolic link, another owner's, no
    marker, or the marker is not a small regular file)."""
    try:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return None
        fd = os.open(os.path.join(folder, MARKER), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        content = handle.read(4097)
    if len(content) > 4096 or not content.endswith(b"\n"):
        return None
    return os.fsdecode(content[:-1])


def _holds_a_worktree(folder: str) -> bool:
    """A subfolder of ``folder`` has a ``.git`` (a worktree lives there), or
    ``folder`` cannot be read."""
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and os.path.lexists(
                    os.path.join(entry.path, ".git")
                ):
                    return True
    except OSError:
        return True
    return False


def discard(tmpdir: str) -> bool:
    """Delete a run's private folder ``tmpdir`` with all it holds (the
    patch, captured output): for a run whose results nobody will read
    (``-o``, ``--stdout``, ``--exit-code -q``, a patch applied with
    ``--apply``).  Only a folder named ``git-isopatch-*`` that holds our
    :data:`MARKER` and no worktree is deleted.  Never raises.

    Returns:
        True when the folder is gone.
    """
    if not os.path.basename(os.path.normpath(tmpdir)).startswith(PRIVATE_PREFIX):
        return False
    if not os.path.lexists(tmpdir):  # settled already (-o without captured output)
        return True
    if _marked_for(tmpdir) is None or _holds_a_worktree(tmpdir):
        log.debug("not deleting '%s': not a result folder of ours", tmpdir)
        return False
    shutil.rmtree(tmpdir, ignore_errors=True)
    return not os.path.lexists(tmpdir)


def result_folders(
    common_dir: str, root: str, *, before: float | None = None
) -> list[ResultFolder]:
    """The result folders under ``root`` of the repository whose common git
    directory is ``common_dir``, oldest first: ``git-isopatch-*`` folders
    of ours marked for it and holding no worktree (with ``before``: only
    those last modified before it, in seconds since the epoch).  An
    unreadable ``root`` has none."""
    mine = os.path.realpath(common_dir)
    found = []
    try:
        with os.scandir(root) as entries:
            candidates = [
                ResultFolder(entry.path, entry.stat(follow_symlinks=False).st_mtime)
                for entry in entries
                if entry.name.startswith(PRIVATE_PREFIX) and entry.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []
    for folder in candidates:
        if before is not None and folder.modified >= before:
            continue
        if _marked_for(folder.path) == mine and not _holds_a_worktree(folder.path):
            found.append(folder)
    return sorted(found, key=lambda folder: folder.modified)


def expire(
    common_dir: str, root: str, *, before: float, dry_run: bool = False
) -> list[ResultFolder]:
    """Remove the result folders of the repository (see
    :func:`result_folders`) last modified before ``before`` (seconds since
    the epoch), but for those a running run holds (:func:`hold`).  Never
    raises.

    Returns:
        The folders removed (or that would be, with ``dry_run``), oldest first.
    """
    old = [f for f in result_folders(common_dir, root, before=before) if not _in_use(f.path)]
    if dry_run:
        return old
    return [f for f in old if discard(f.path)]


def expire_automatically(common_dir: str, root: str, *, now: float | None = None) -> bool:
    """``git gc --auto`` for result folders: when the repository's
    :data:`STAMP` was last modified :data:`AUTO_INTERVAL` ago or more (or is
    missing), touch it and remove its result folders older than two weeks.  Nothing happens
    when the stamp cannot be written (a read-only repository), so that such
    a repository is not scanned on every run.  Never raises.

    Returns:
        True when it looked for expired folders.
    """
    now = time.time() if now is None else now
    stamp = os.path.join(common_dir, STAMP)
    try:
        if now - os.stat(stamp).st_mtime < AUTO_INTERVAL:
            return False
    except OSError:
        pass
    try:
        fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.utime(fd, (now, now))
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("no automatic expiry of result folders: %s", exc)
        return False
    try:
        expire(common_dir, root, before=now - DEFAULT_EXPIRE_SECONDS)
    except Exception as exc:  # clean-up never raises
        log.debug("automatic expiry of result folders failed: %s", exc)
    return True
