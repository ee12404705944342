"""The cache layer (design: "Tool caches stay warm"): a sandboxed
command's writes to the user's cache folders, kept for the later
sandboxed runs of the same repository, never written to the real home.

Each cache folder that exists (:func:`.caches.kept_cache_folders`: the XDG
cache folder, npm's, pip's, pre-commit's, cargo's registry and git
checkouts) becomes an overlay whose lower layer is the real folder, read
only, and whose upper and work folders are kept in the repository's git
directory, ``$GIT_COMMON_DIR/isopatch/caches/<key>`` (:func:`cache_root`):
the next sandboxed run of the repository mounts the same upper layer and
reads what the earlier ones wrote; another repository has its own.  What
the command writes there is not discarded, so it is not an
``outside-write``.

One run at a time: overlayfs forbids two mounts sharing an upper folder.
A run takes the repository's cache lock (``flock`` of ``caches/lock``)
without waiting; one that cannot have it (another run of the repository
holds it) runs without the cache layer, its cache writes discarded as
before.

Bounded: once the run's namespaces are gone, what the layer holds is
measured; over the bound (``isopatch.cacheLimit``), or more than can be
measured (:data:`MEASURED_AT_MOST` entries, :data:`.untrusted.WALK_DEPTH`
deep, a folder it cannot open), the whole layer is cleared.  What it holds
is the command's: measured and removed without following a link, without
recursion (:func:`.untrusted.remove_tree`).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator, Mapping, Sequence

from .caches import kept_cache_folders
from .layers import CACHE, Layer, inside
from .untrusted import FOLDER, WALK_DEPTH, remove_tree

#: Where a repository's cache layer is kept, in its common git directory.
ROOT = os.path.join("isopatch", "caches")

#: The file of :func:`cache_root` whose ``flock`` a run holds while its
#: namespaces may mount the layer; its times say when it was last used.
LOCK_FILE = "lock"

#: Entries of the layer :func:`within_bound` looks at before it gives up.
MEASURED_AT_MOST = 200_000


def cache_root(common_dir: str) -> str:
    """The folder holding the cache layer of the repository whose common
    git directory is ``common_dir``."""
    return os.path.join(common_dir, ROOT)


def usable_folders(
    environ: Mapping[str, str],
    *,
    within: Sequence[str],
    apart_from: Sequence[str],
) -> tuple[str, ...]:
    """The cache folders of ``environ`` that get a cache layer, by real
    path: those that exist, inside one of the copy-on-write folders
    ``within`` (a write there is discarded without the layer), neither
    holding nor inside one of ``apart_from`` (the checkout, the git
    directory, the worktree, the really writable places), none inside
    another.  (One with a mount beneath is left out when the layers are
    planned: :meth:`.namespaces.NamespacePolicy.plan`.)"""
    outer = [os.path.realpath(p) for p in within]
    apart = [os.path.realpath(p) for p in apart_from]
    found: list[str] = []
    for path in kept_cache_folders(environ):
        real = os.path.realpath(path)
        if not os.path.isdir(real) or not any(inside(real, o) and real != o for o in outer):
            continue
        if any(inside(real, a) or inside(a, real) for a in apart):
            continue
        if real in found:
            continue
        found.append(real)
    return tuple(p for p in found if not any(o != p and inside(p, o) for o in found))


def _key(folder: str) -> str:
    """The name of ``folder``'s layer in :func:`cache_root`: the start of
    its SHA-256, by the interpreter's own module (``hashlib`` loads
    OpenSSL's, some 11 M instructions)."""
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:  # an interpreter built without it
            from hashlib import sha256
    return sha256(os.fsencode(folder)).hexdigest()[:16]


def _lock(root: str) -> int | None:
    """The lock of :func:`cache_root` ``root``, held (made if missing),
    or ``None``: it cannot be made, or another run holds it, or the file
    locked is no longer the lock (:func:`_tidy` removed it meanwhile)."""
    path = os.path.join(root, LOCK_FILE)
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path, flags, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held, named = os.fstat(fd), os.lstat(path)
        if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
            raise OSError(errno.ESTALE, "the lock was removed")
    except OSError:
        os.close(fd)
        return None
    return fd


def _tidy(root: str) -> None:
    """With the lock held: remove ``root`` (and the folder holding it,
    when empty) once it keeps no layer, so that runs that kept no cache
    leave nothing in the git directory."""
    if _layers_in(root):
        return
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(root, LOCK_FILE))
        os.rmdir(root)
        os.rmdir(os.path.dirname(root))


class Held:
    """The cache layers of one run (:func:`held`) and the lock that holds them.

    Attributes:
        layers: the run's :data:`.layers.CACHE` layers; none when another
            run holds them (or the root cannot be written).
    """

    def __init__(self, root: str, fd: int | None, layers: tuple[Layer, ...], limit: int) -> None:
        self.layers = layers
        self._root, self._fd, self._limit = root, fd, limit
        self._settled = fd is None

    def settle(self) -> None:
        """Once the run's namespaces hold no process (their mounts may
        still be going): clear the layer when it holds more than the limit
        (0: no bound) or more than can be measured, remove a folder's layer
        that holds nothing.  The lock stays held until :func:`held` ends,
        so that no other run mounts the layer before those mounts are gone."""
        if self._settled:
            return
        self._settled = True
        assert self._fd is not None
        try:
            if self._limit > 0 and not within_bound(self._root, self._limit):
                _clear(self._root)
            _drop_empty(self.layers)
            os.utime(self._fd)
            _tidy(self._root)
        except OSError:
            pass


@contextlib.contextmanager
def held(root: str, folders: Sequence[str], limit: int) -> Iterator[Held]:
    """The cache layers of ``folders`` kept in ``root``, for one run
    (:class:`Held`).  On leaving (the run's namespaces gone), the layer is
    settled (:meth:`Held.settle`) if it was not yet, and the lock let go."""
    fd = _lock(root) if folders else None
    if fd is None:
        yield Held(root, None, (), limit)
        return
    hold = Held(root, fd, (), limit)
    try:
        for folder in folders:
            kept = os.path.join(root, _key(folder))
            with contextlib.suppress(OSError):
                for part in ("upper", "work"):
                    os.makedirs(os.path.join(kept, part), mode=0o700, exist_ok=True)
                hold.layers += (Layer(folder, CACHE, kept),)
        yield hold
    finally:
        try:
            hold.settle()
        finally:
            os.close(fd)


def _drop_empty(layers: Sequence[Layer]) -> None:
    """Remove the layers that hold nothing: a run that wrote no cache
    leaves nothing behind."""
    for layer in layers:
        assert layer.kept is not None
        try:
            empty = not os.listdir(os.path.join(layer.kept, "upper"))
        except OSError:
            continue
        if empty:
            remove_tree(layer.kept)


def _layers_in(root: str) -> list[str]:
    """The names of the layers kept in ``root`` (every entry but the lock)."""
    try:
        with os.scandir(root) as entries:
            return sorted(e.name for e in entries if e.name != LOCK_FILE)
    except OSError:
        return []


def _clear(root: str) -> list[str]:
    """Remove every layer kept in ``root``; the paths removed."""
    removed = []
    for name in _layers_in(root):
        path = os.path.join(root, name)
        if remove_tree(path):
            removed.append(path)
    return removed


def _listed(fd: int) -> list[tuple[str, os.stat_result]]:
    """The entries of the folder ``fd``, each with its ``lstat``.

    Raises:
        OSError: the folder cannot be read.
    """
    with os.scandir(fd) as entries:
        return [(e.name, e.stat(follow_symlinks=False)) for e in entries]


def within_bound(root: str, limit: int) -> bool:
    """The upper folders of the layers kept in ``root`` take at most
    ``limit`` bytes on disk, all seen: at most :data:`MEASURED_AT_MOST`
    entries, :data:`.untrusted.WALK_DEPTH` folders deep, each folder
    opened (never through a link, never blocking)."""
    total = seen = 0
    for name in _layers_in(root):
        frames: list[tuple[int, list[tuple[str, os.stat_result]]]] = []
        try:
            fd = os.open(os.path.join(root, name, "upper"), FOLDER)
            frames.append((fd, []))
            frames[-1] = (fd, _listed(fd))
            while frames:
                fd, entries = frames[-1]
                if not entries:
                    os.close(frames.pop()[0])
                    continue
                entry, st = entries.pop()
                total, seen = total + st.st_blocks * 512, seen + 1
                if total > limit or seen > MEASURED_AT_MOST:
                    return False
                if stat.S_ISDIR(st.st_mode):
                    if len(frames) >= WALK_DEPTH:
                        return False
                    inner = os.open(entry, FOLDER, dir_fd=fd)
                    frames.append((inner, []))
                    frames[-1] = (inner, _listed(inner))
        except OSError as exc:
            if exc.errno != errno.ENOENT or frames:
                return False
        finally:
            for fd, _ in frames:
                os.close(fd)
    return True


def prune(root: str, *, before: float | None = None, dry_run: bool = False) -> list[str]:
    """Clear the cache layer kept in ``root`` unless a run holds it, or
    (with ``before``, seconds since the epoch) it was used since; the
    paths of the layers removed (that would be, with ``dry_run``)."""
    fd = _lock(root) if os.path.isdir(root) else None
    if fd is None:
        return []
    try:
        if before is not None and os.fstat(fd).st_mtime >= before:
            return []
        if dry_run:
            return [os.path.join(root, name) for name in _layers_in(root)]
        removed = _clear(root)
        _tidy(root)
        return removed
    finally:
        os.close(fd)
