"""The copy-on-write layers of the namespaces sandbox, on disk
(:mod:`.namespaces`): which folders get one, and what was written there.

An overlay cannot take a folder as its lower layer when another mount lies
beneath it: in the sandbox's user namespace every mount inherited from the
machine is locked to what it covers, and the kernel refuses to clone a
lower layer with locked mounts inside ("overlayfs: failed to clone
lowerpath", ``EINVAL``).  Any mount under ``/tmp`` (another program's, a
test's bind mount) would then make every sandboxed run fail at set-up, for
as long as it stays mounted.  So :func:`plan_layers` reads the mount table
and gives each copy-on-write folder that has a mount beneath it another
layer: a temporary folder becomes a private one, an overlay whose lower
layer holds hard links to its own files (``python /tmp/fix.py`` runs, its
writes discarded; splitting it as below would show ``/tmp`` read-only),
its subfolders on the way down to a mount private the same way, its other
subfolders overlays (a project or virtual environment under ``/tmp``
stays readable), another program's mount hidden; any other is split into
its subfolders, each its own overlay, down to the mounts (which are lower
layers of their own), its own files shown read-only on an empty tmpfs, one
by one (:data:`SPLIT`):
bound as it is, the folder would let a unix socket among them (a tmux
server's in the home) answer the command.

A layer is ``<layers>/<n>/upper`` (and ``work`` for an overlay) for the
n-th of :func:`plan_layers`; :func:`.layer_writes.layer_writes` lists what
a layer holds as paths under the folder it covers.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

from ..git.record import Record

#: A layer that is an overlay of its folder (reads go through to it).
OVERLAY = "overlay"
#: A layer that replaces its folder with a private one showing the
#: folder's own files copy-on-write (:func:`make_layers` links them).
PRIVATE = "private"
#: An overlay of a cache folder whose upper layer is kept for later runs
#: (:mod:`.cache_layer`): made and held elsewhere than the run's layers.
CACHE = "cache"
#: A folder split into its subfolders (a mount beneath it): an empty
#: read-only tmpfs showing its own entries as they were when the run
#: began (:attr:`Layer.entries`); nothing is written there.
SPLIT = "split"

#: At most this many layers come from splitting one folder with mounts
#: beneath it; the subfolders past that with no mount beneath are shown
#: read-only, through an overlay (a unix socket there must not answer).
MAX_SPLIT = 64


class Layer(Record):
    """One copy-on-write layer: the real ``folder`` it covers, its
    ``kind`` (:data:`OVERLAY`, :data:`PRIVATE`, :data:`CACHE` or
    :data:`SPLIT`), for :data:`CACHE` the folder ``kept`` that holds its
    ``upper`` and ``work``; for :data:`SPLIT` the folder's ``mode`` and
    ``entries``: ``(what, name, target)``, ``what`` one of ``folder`` (a
    mount point for a layer of its own), ``file``, ``overlaid`` (a
    subfolder past :data:`MAX_SPLIT` with no mount beneath, the i-th
    entry: an overlay of it, its ``upper`` and ``work`` in ``<here>/<i>``,
    remounted read-only) and ``link`` (to ``target``).  A unix socket, a
    FIFO, a device is left out, and one in a subfolder past the limit
    cannot be connected to through its overlay: bound, a socket would
    answer the command (a tmux server's in the home)."""

    folder: str
    kind: str = OVERLAY
    kept: str | None = None
    mode: int = 0o755
    entries: tuple[tuple[str, str, str], ...] = ()

    def arguments(self, here: str) -> list[str]:
        """bubblewrap's options mounting it, its ``upper`` and ``work`` in ``here``."""
        if self.kind != SPLIT:
            lower = os.path.join(here, "lower") if self.kind == PRIVATE else self.folder
            upper_dir, work_dir = os.path.join(here, "upper"), os.path.join(here, "work")
            return ["--overlay-src", lower, "--overlay", upper_dir, work_dir, self.folder]
        args = ["--perms", f"{self.mode:04o}", "--tmpfs", self.folder]
        for n, (what, name, target) in enumerate(self.entries):
            path = os.path.join(self.folder, name)
            if what == "folder":
                args += ["--dir", path]
            elif what == "link":
                args += ["--symlink", target, path]
            elif what == "overlaid":
                args += Layer(path).arguments(os.path.join(here, str(n)))
                args += ["--remount-ro", path]
            else:
                args += ["--ro-bind-try", path, path]
        return [*args, "--remount-ro", self.folder]


class WorktreeOverlay(Record):
    """A run's worktree as an overlay (design: procedure step 3): its
    ``lowers``, never written (bottom first: the base tree, then what
    git-isopatch put in before the command), every write of the command in
    ``upper`` (``work``: the kernel's own folder beside it, on the same
    file system), mounted at ``target``, where the worktree is placed."""

    target: str
    lowers: tuple[str, ...]
    upper: str
    work: str

    def arguments(self) -> list[str]:
        """bubblewrap's options mounting it (the last ``--overlay-src`` is
        the topmost lower layer)."""
        sources = [arg for lower in self.lowers for arg in ("--overlay-src", lower)]
        return [*sources, "--overlay", self.upper, self.work, self.target]


def inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or beneath it (both absolute, normalised)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _unescape(field: str) -> str:
    """A mountinfo path: ``\\040`` and the like are octal escapes."""
    if "\\" not in field:
        return field
    raw = field.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i : i + 1] == b"\\" and raw[i + 1 : i + 4].isdigit():
            out.append(int(raw[i + 1 : i + 4], 8))
            i += 4
        else:
            out += raw[i : i + 1]
            i += 1
    return out.decode("utf-8", "surrogateescape")


#: The file systems overlayfs takes no upper layer on (it needs xattrs,
#: ``O_TMPFILE``, no remote revalidation): an overlay itself (a container's
#: image), FUSE (``fuse``, ``fuse.sshfs``, ``fuseblk``), network ones.
_NO_UPPER = ("overlay", "fuse", "nfs", "cifs", "smb", "9p", "afs", "ceph")


def holds_upper_layer(folder: str) -> bool:
    """``folder`` lies on a file system overlayfs can keep an upper layer
    on, by the type ``/proc/self/mountinfo`` gives the mount holding it;
    True when that cannot be read (the mount then says)."""
    real, holding, kind = os.path.realpath(folder), "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
            for line in table:
                fields = line.split()
                point = _unescape(fields[4])
                if inside(real, point) and len(point) >= len(holding):  # the last one mounted
                    holding, kind = point, fields[fields.index("-") + 1]
    except (OSError, ValueError, IndexError):
        return True
    return not kind.startswith(_NO_UPPER)


def mount_points() -> tuple[str, ...]:
    """Every mount point of this process's mount namespace (proc(5),
    ``/proc/self/mountinfo``, field 5); empty when it cannot be read."""
    return MountTable().points


def overlaid_folders(plan: Iterable[Layer]) -> Iterator[str]:
    """The folders the layers of ``plan`` overlay: bubblewrap's set-up
    fails when one of them is gone."""
    for layer in plan:
        if layer.kind == OVERLAY:
            yield layer.folder
        elif layer.kind == SPLIT:
            for what, name, _ in layer.entries:
                if what == "overlaid":
                    yield os.path.join(layer.folder, name)


class MountTable:
    """The mount points of this process's mount namespace, read once
    (:attr:`points`), and whether a mount was made or removed there since
    (:meth:`moved`): ``/proc/self/mountinfo`` stays open, and the kernel
    marks it (``POLLPRI``, proc(5)) at every change of the table, even one
    undone before it is looked at again."""

    def __init__(self) -> None:
        self._file: BinaryIO | None = None
        self._moved = False
        try:
            self._file = open("/proc/self/mountinfo", "rb", buffering=0)  # noqa: SIM115
            data = self._file.read()
        except OSError:
            self.points: tuple[str, ...] = ()
            return
        text = data.decode("utf-8", "surrogateescape")
        lines = [line for line in text.splitlines() if line.count(" ") >= 4]
        self.points = tuple(_unescape(line.split(" ")[4]) for line in lines)

    def moved(self) -> bool:
        """A mount was made or removed since the table was read (and stays
        so); ``False`` where that cannot be known."""
        if not self._moved and self._file is not None and not self._file.closed:
            poller = select.poll()
            poller.register(self._file.fileno(), select.POLLPRI)
            with contextlib.suppress(OSError):
                self._moved = bool(poller.poll(0))
        return self._moved

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _beneath(folder: str, mounts: Iterable[str]) -> list[str]:
    return [m for m in mounts if m != folder and inside(m, folder)]


def _covering(folder: str, mounts: Sequence[str], plan: _Plan, found: list[Layer]) -> None:
    """The layers of ``folder``: an overlay when no mount lies beneath it,
    else a private one (a scratch folder; then the copy-on-write folders
    inside it get layers of their own above it), else those of its
    subfolders, its own files staying read-only."""
    below = _beneath(folder, mounts)
    if not below:
        found.append(Layer(folder))
        return
    if folder in plan.scratch:
        _private(folder, below, plan, found)
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
        mode = stat.S_IMODE(os.stat(folder).st_mode)
    except OSError:
        return
    shown: list[tuple[str, str, str]] = []
    found.append(Layer(folder, SPLIT))
    at = len(found) - 1
    for entry in entries:
        try:
            kind = stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
            target = os.readlink(entry.path) if kind == stat.S_IFLNK else ""
        except OSError:
            continue
        if kind == stat.S_IFDIR and (len(found) < MAX_SPLIT or _beneath(entry.path, below)):
            shown.append(("folder", entry.name, ""))
            _covering(entry.path, below, plan, found)
        elif kind == stat.S_IFDIR:
            shown.append(("overlaid", entry.name, ""))
        elif kind in (stat.S_IFREG, stat.S_IFLNK):
            shown.append(("file" if kind == stat.S_IFREG else "link", entry.name, target))
    found[at] = Layer(folder, SPLIT, mode=mode, entries=tuple(shown))


def _private(folder: str, below: Sequence[str], plan: _Plan, found: list[Layer]) -> None:
    """The layers of a temporary ``folder`` with ``below`` beneath it: a
    private one, then its subfolders on the way down to a mount (none of
    the copy-on-write folders) the same way, then the copy-on-write
    folders inside it and its other subfolders, each an overlay."""
    found.append(Layer(folder, PRIVATE))
    nested = sorted(
        {
            c
            for c in (_child(folder, m) for m in below)
            if c not in plan.folders and _beneath(c, below)
        }
    )
    inner = [
        f
        for f in plan.folders
        if f != folder and inside(f, folder) and not any(inside(f, c) for c in nested)
    ]
    found += _holding_subfolders(folder, below, inner)
    for child in nested:
        if os.path.isdir(child) and not os.path.islink(child):
            _private(child, _beneath(child, below), plan, found)
    found += _outermost(inner, below, plan)
    found += _readable_subfolders(folder, below, [*inner, *nested], plan.wanted)


def _holding_subfolders(folder: str, mounts: Sequence[str], taken: Sequence[str]) -> list[Layer]:
    """Overlays above a private temporary ``folder`` for its subfolders
    that hold one of the folders ``taken`` (a checkout straight in ``/tmp``
    holds its git directory), each with no mount beneath: the checkout's own
    files (its virtual environment) stay readable, whatever the number of
    other subfolders; the layers of ``taken`` come after, above them."""
    layers: list[Layer] = []
    for path in sorted({_child(folder, t) for t in taken}):
        if os.path.isdir(path) and not any(inside(m, path) for m in mounts):
            if not any(inside(path, t) for t in taken):
                layers.append(Layer(path))
    return layers


def _child(folder: str, path: str) -> str:
    """The subfolder of ``folder`` that ``path`` (beneath it) lies in."""
    rest = path[len(folder.rstrip("/")) + 1 :]
    return os.path.join(folder, rest.split("/", 1)[0])


def _readable_subfolders(
    folder: str, mounts: Sequence[str], taken: Sequence[str], wanted: Sequence[str]
) -> list[Layer]:
    """Overlays above a private temporary ``folder`` for its subfolders
    that hold no mount and none of the folders ``taken`` (those have
    layers of their own), at most :data:`MAX_SPLIT`: a project or a
    virtual environment under ``/tmp`` stays readable (and copy-on-write)
    while another program's mount lies elsewhere under it.  Those holding
    one of the paths ``wanted`` (the command's ``PATH``) come first, so
    that a ``/tmp`` crowded with other folders never hides the tools."""
    try:
        entries = sorted(
            os.scandir(folder),
            key=lambda e: (not any(inside(w, e.path) for w in wanted), e.name),
        )
    except OSError:
        return []
    layers: list[Layer] = []
    for entry in entries:
        if len(layers) >= MAX_SPLIT:
            break
        path = entry.path
        if not entry.is_dir(follow_symlinks=False):
            continue
        if any(inside(m, path) for m in mounts) or any(
            inside(t, path) or inside(path, t) for t in taken
        ):
            continue
        layers.append(Layer(path))
    return layers


class _Plan(Record):
    folders: tuple[str, ...]
    scratch: frozenset[str]
    wanted: tuple[str, ...]


def _outermost(folders: Sequence[str], mounts: Sequence[str], plan: _Plan) -> list[Layer]:
    kept = [p for p in folders if not any(inside(p, o) for o in folders if o != p)]
    found: list[Layer] = []
    for folder in sorted(kept, key=lambda p: (p.count("/"), p)):
        _covering(folder, mounts, plan, found)
    return found


def plan_layers(
    copy_on_write: Sequence[str],
    scratch: Sequence[str],
    mounts: Sequence[str],
    wanted: Sequence[str] = (),
) -> tuple[Layer, ...]:
    """The layers for ``copy_on_write`` folders: real paths of existing
    folders, none inside another, never ``/``, outermost first; a folder
    with one of ``mounts`` beneath it is :data:`PRIVATE` when it is one of
    ``scratch`` (temporary folders: nothing there needs reading), else
    split into its subfolders (see the module's words); the subfolders
    holding one of the paths ``wanted`` stay readable first."""
    folders: list[str] = []
    for path in copy_on_write:
        real = os.path.realpath(path)
        if real != "/" and os.path.isdir(real) and real not in folders:
            folders.append(real)
    plan = _Plan(
        tuple(folders),
        frozenset(os.path.realpath(p) for p in scratch),
        tuple(os.path.realpath(p) for p in wanted if os.path.isabs(p)),
    )
    return tuple(_outermost(folders, mounts, plan))


def make_layers(layers: Sequence[Layer], root: str) -> None:
    """Make ``<root>/<n>/upper`` (and ``work`` for an overlay, ``lower``
    too for a private folder, holding its files; for a split
    folder, ``<root>/<n>/<i>/upper`` and ``work`` for its ``overlaid``
    i-th entry), mode 0700; a :data:`CACHE` layer's are made where it is
    kept."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    for index, layer in enumerate(layers):
        places = [(os.path.join(root, str(index)), layer.kind)]
        if layer.kind == SPLIT:
            places = [
                (os.path.join(root, str(index), str(n)), OVERLAY)
                for n, (what, _, _) in enumerate(layer.entries)
                if what == "overlaid"
            ]
        for place, kind in places:
            if kind != CACHE:
                for part in ("upper", "work") if kind == OVERLAY else ("lower", "upper", "work"):
                    os.makedirs(os.path.join(place, part), mode=0o700, exist_ok=True)
            if kind == PRIVATE:
                _link_files(layer.folder, os.path.join(place, "lower"))


def _link_files(folder: str, lower: str) -> None:
    """Hard links in ``lower`` to the files of ``folder`` itself, copies of
    its symbolic links: the lower layer of a private temporary folder,
    showing them copy-on-write (``python /tmp/fix.py`` runs) where the
    kernel refuses the folder as a lower layer.  A file on another file
    system than ``lower`` or that the user may not link
    (``fs.protected_hardlinks``) is left out, and so is anything else (a
    unix socket, a FIFO, a device): bound, a socket would answer.  Each
    link changes the file's ctime, as ``ln`` does."""
    try:
        with os.scandir(folder) as listed:
            entries = list(listed)
    except OSError:
        return
    for entry in entries:
        to = os.path.join(lower, entry.name)
        try:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), to)
            elif entry.is_file(follow_symlinks=False):
                os.link(entry.path, to, follow_symlinks=False)
                if not stat.S_ISREG(os.lstat(to).st_mode):  # replaced since it was listed
                    os.unlink(to)
        except OSError as error:
            if error.errno == errno.EXDEV:
                return


def upper(root: str, index: int, layer: Layer | None = None) -> str:
    """The folder holding what was written in the ``index``-th layer
    (``layer``, when it is a :data:`CACHE` one: where it is kept)."""
    return os.path.join(here(root, index, layer), "upper")


def here(root: str, index: int, layer: Layer | None = None) -> str:
    """The folder holding the ``upper`` and ``work`` of the ``index``-th layer."""
    if layer is not None and layer.kept is not None:
        return layer.kept
    return os.path.join(root, str(index))
