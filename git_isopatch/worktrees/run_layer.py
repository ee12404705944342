"""A sandboxed run's worktree over its base tree (design: procedure steps
3 and 7): what the run adds to the base tree, made when the run starts and
discarded when it ends.

The worktree the command sees is an overlay (:class:`..sandbox.layers.WorktreeOverlay`)
mounted where the worktree is placed (beside the checkout): its lower
layers are the base tree (:mod:`.base_trees`), never written, and above it
the worktree's own folder on disk, the *start layer*, holding what
git-isopatch puts in before the command (the ``.git`` file naming the
run's private git folder; with ``--include-uncommitted`` or ``--staged``,
the files of the snapshot that differ from the base tree's commit and
whiteouts for those it removes; linked and copied paths, populated
submodules); every write of the command lands in the *upper* layer, in the
run's private folder.  Nothing is reset after a run and nothing needs
proving: the upper layer is discarded, the start layer removed with the
worktree's registration.

The run's own index starts as a copy of the base tree's: the overlay gives
each file of the base tree the stat data the base tree's index holds, so
``git status`` inside is clean without reading a file.  A snapshot's
difference is checked out into the start layer by a two-way merge from
the base tree's commit (``git read-tree -m -u``), which writes and stats
only what differs.

A kept worktree (``--keep``, a failed extraction) is a real folder once the
run ends: :func:`materialise` writes the base tree's files, then the start
and upper layers over them, into the worktree's folder.

Design: procedure steps 3 and 7.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping

from ..errors import IsopatchError, known_failure, known_os_failure
from ..git.admin_files import copy_admin_file, read_admin_file
from ..git.attributes import is_attributes_file
from ..git.files import WorktreeFiles
from ..git.index_entries import changed_entries, leading_folders
from ..git.record import Record
from ..git.result import Err
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..sandbox.layer_writes import is_opaque, is_whiteout
from ..sandbox.layers import WorktreeOverlay
from ..sandbox.touched import Touched, touched_paths
from .base_look import look_of
from .base_trees import Pin
from .deletion import delete_tree
from .placement import LAYER_FOLDER

#: What the start layer holds for a removal (overlayfs(5)): a character
#: device 0/0, which anyone may make.
WHITEOUT = stat.S_IFCHR


class Looked(Record):
    """What the patch over a base tree compares (:meth:`RunLayer.compared`).

    Attributes:
        paths: the paths to compare; ``None``: every path.
        attributes: the layer holds a ``.gitattributes``: every file is
            compared again, its content read (a conversion may now apply).
    """

    paths: list[bytes] | None
    attributes: bool = False


class RunLayer(Record):
    """A run's worktree over its base tree: a value a caller can keep
    across several commands.

    Attributes:
        pin: the base tree, pinned for as long as the run holds it.
        overlay: the mount (its lowers: the base tree, then the start
            layer, the worktree's own folder; its upper and work folders in
            the run's private folder).
        index: ``(inode, size, modification time, change time)`` of the
            run's index as git-isopatch left it before the command: the
            same afterwards, the command did not change it (it can write
            the file in place and set its times back, but never its change
            time).
        started: the paths where the run's index differs from the base
            tree's before the command: the snapshot's difference; for a
            session's later step, what its earlier steps (and snapshot)
            left in its index and its layer
            (:func:`.session_layer.layer_again`); ``None``: not known.
    """

    pin: Pin
    overlay: WorktreeOverlay
    index: tuple[int, int, int, int] | None
    started: frozenset[bytes] | None = frozenset()

    @property
    def base_tree(self) -> WorktreePath:
        return self.pin.tree.path

    @property
    def start(self) -> str:
        """The start layer: the worktree's own folder on disk."""
        return self.overlay.target

    def locate(self, path: bytes) -> str | None:
        """Where the worktree's ``path`` (from its top) lies on disk as the
        command left it, the layers resolved as the overlay resolves them
        (:func:`resolve`); ``None`` when it is not there.  The upper layer
        is the command's: nothing there is followed."""
        return resolve(path, (self.overlay.upper, self.start, self.base_tree))

    def locate_before(self, path: bytes) -> str | None:
        """The same, before the command: the start layer over the base
        tree, under what the upper layer held then (a session's earlier
        steps; a run's own is empty)."""
        return resolve(path, (self.overlay.upper, self.start, self.base_tree))

    def compared(self, admin_dir: GitDirPath, attributes_file: bytes | None = None) -> Looked:
        """The paths the patch needs to compare (design: procedure step 6):
        what the upper layer holds (:func:`..sandbox.touched.touched_paths`;
        a ``.git`` stands for its folder), the entries the command changed
        in the run's index (``admin_dir``; and those it started with) if it
        rewrote it, and the submodule holding any of them; at most
        :data:`MAX_COMPARED`, their folders past that.  ``None``: compare
        every path (the layer could not be listed whole, nor the index, or
        too many folders differ).

        The layer holding a ``.gitattributes`` or the worktree's own
        ``attributes_file`` (a relative ``core.attributesFile``; written,
        removed, ignored: git reads it all the same), or having held it
        before the command (:attr:`started`), is said too: any file may
        then convert anew, so every one is compared again."""
        touched = touched_paths(self.overlay.upper, (self.start, self.base_tree))
        held = (*touched.paths, *(self.started or ()))
        attributes = any(is_attributes_file(path, attributes_file) for path in held)
        return Looked(None if attributes else self._compared(admin_dir, touched), attributes)

    def _compared(self, admin_dir: GitDirPath, touched: Touched) -> list[bytes] | None:
        """:meth:`compared`'s paths, from what the layer holds (``touched``)."""
        tree = self.pin.tree
        look = look_of(tree.admin_dir, tree.record.commit)
        if not touched.complete or not look.known:
            return None
        paths = {dot_git_folder(path) for path in touched.paths}
        if not self.index_unchanged(admin_dir):
            changed = changed_entries(admin_dir, tree.admin_dir, len(tree.record.commit) // 2)
            if changed is None or self.started is None:
                return None
            paths |= changed | self.started
        links = set(look.gitlinks)
        for path in list(paths) if links else ():
            paths |= {folder for folder in leading_folders(path) if folder in links}
        return _at_most(sorted(paths - {b""}), MAX_COMPARED)

    @staticmethod
    def config_worktree(admin_dir: GitDirPath) -> bytes | None:
        """The run's own ``config.worktree`` now (``None``: none, or not a
        file): the command may set a conversion there."""
        try:
            return read_admin_file(os.path.join(admin_dir, "config.worktree"))
        except OSError:
            return None

    @property
    def base_tree_index(self) -> str:
        """The base tree's own index (never writable by a command)."""
        return os.path.join(self.pin.tree.admin_dir, "index")

    def index_is_base_trees(self, admin_dir: GitDirPath, commit: CommitId) -> bool:
        """The run's index (``admin_dir``) is still the copy of the base
        tree's that :func:`make_run_layer` made: the run is at the base
        tree's commit (no difference was checked out) and nothing rewrote
        the index since."""
        return commit == self.pin.tree.record.commit and self.index_unchanged(admin_dir)

    def index_unchanged(self, admin_dir: GitDirPath) -> bool:
        """The run's index is the one git-isopatch left (never rewritten)."""
        return self.index is not None and _identity(os.path.join(admin_dir, "index")) == self.index


def resolve(
    path: bytes, layers: tuple[str, ...], folders: dict[bytes, list[str]] | None = None
) -> str | None:
    """The file of ``layers`` (topmost first) that the overlay shows at
    ``path`` (from the top), resolved component by component as overlayfs
    does and never through a link: a whiteout, a file or an opaque folder
    of a layer hides what the layers below hold there; ``None`` when
    nothing is shown (a link on the way is no folder).  ``folders``: what
    :func:`_shown` found, kept for the next path: a folder is looked at once."""
    path = b"/".join(part for part in path.split(b"/") if part)
    known = {b"": list(layers)} if folders is None else folders
    for layer in _shown(path.rpartition(b"/")[0], known) if path else ():
        here = os.path.join(layer, os.fsdecode(path))
        with contextlib.suppress(OSError):
            return None if is_whiteout(os.lstat(here)) else here
    return None


def _shown(folder: bytes, known: dict[bytes, list[str]]) -> list[str]:
    """The layers that show ``folder`` (from the top), topmost first, to
    the first that hides those below; ``known``: those of the folders looked
    at (the top's: all), which gets those of ``folder`` and above it."""
    missing = []
    while folder not in known:
        missing.append(folder)
        folder = folder.rpartition(b"/")[0]
    live = known[folder]
    for folder in reversed(missing):
        shown = []
        for layer in live:
            here = os.path.join(layer, os.fsdecode(folder))
            try:
                info = os.lstat(here)
            except OSError:
                continue
            if is_whiteout(info) or not stat.S_ISDIR(info.st_mode):
                break
            shown.append(layer)
            if is_opaque(here):
                break
        live = known[folder] = shown
    return live


def refuse_prefix_over(layer: RunLayer, prefix: str) -> None:
    """Refuse to run where the caller's folder ``prefix`` (``/``-separated
    from the top) is a link or no folder in the worktree over the base
    tree, as :func:`.placement.enter_prefix` refuses in a worktree of its
    own (which then makes the missing folders, in the start layer).

    Raises:
        IsopatchError: ``prefix-not-a-folder``.
    """
    parts = [part for part in prefix.split("/") if part]
    for end in range(1, len(parts) + 1):
        shown = "/".join(parts[:end])
        found = layer.locate_before(shown.encode())
        if found is None:
            return  # made by enter_prefix, with what is below it
        info = os.lstat(found)
        if not stat.S_ISDIR(info.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
            raise IsopatchError(
                "prefix-not-a-folder",
                f"'{shown}' is {kind} at the base; refusing to run the command there",
                hint="run it from a folder that is a folder at the base, "
                "or from the top of the work tree",
            )


#: Paths the patch compares one by one at most (git matches each index
#: entry against each pathspec); past it, the folders holding them.
MAX_COMPARED = 256


def dot_git_folder(path: bytes) -> bytes:
    """A ``.git`` entry as the folder holding it (git never names ``.git``;
    what it says of one is found in its folder); the top's is none."""
    head, _, name = path.rpartition(b"/")
    return head if name == b".git" else path


def _at_most(paths: list[bytes], count: int) -> list[bytes] | None:
    """``paths`` (sorted), or, when more than ``count``, the folders
    holding them at the deepest level that makes at most ``count``;
    ``None`` when even the top-level ones are too many."""
    depth = max((path.count(b"/") for path in paths), default=0)
    while len(paths) > count:
        if depth == 0:
            return None
        paths = sorted({b"/".join(path.split(b"/")[:depth]) for path in paths})
        depth -= 1
    return paths


class LayerFiles(WorktreeFiles):
    """The files of a worktree over a base tree as the command left them,
    read through its layers (:func:`resolve`): the worktree itself exists
    only in the command's namespaces.  Paths outside it are read as they
    are."""

    def __init__(self, layer: RunLayer) -> None:
        self.layer = layer
        self.layers = (layer.overlay.upper, layer.start, layer.base_tree)
        self.folders = {b"": list(self.layers)}  # resolve's, for every path read

    def _relative(self, path: str) -> bytes | None:
        top = self.layer.start.rstrip("/") + "/"
        if path.rstrip("/") + "/" == top:
            return b""
        return os.fsencode(path[len(top) :]) if path.startswith(top) else None

    def lexists(self, path: str) -> bool:
        relative = self._relative(path)
        if relative is None:
            return super().lexists(path)
        return relative == b"" or resolve(relative, self.layers, self.folders) is not None

    def is_real_folder(self, path: str) -> bool:
        relative = self._relative(path)
        if relative is None:
            return super().is_real_folder(path)
        found = self.layers[0] if relative == b"" else resolve(relative, self.layers, self.folders)
        try:
            return found is not None and stat.S_ISDIR(os.lstat(found).st_mode)
        except OSError:
            return False

    def listdir(self, path: str) -> list[str]:
        relative = self._relative(path)
        if relative is None:
            return super().listdir(path)
        if not self.is_real_folder(path):
            return []
        names: set[str] = set()
        hidden: set[str] = set()
        for layer in self.layers:
            here = os.path.join(layer, os.fsdecode(relative))
            try:
                if not stat.S_ISDIR(os.lstat(here).st_mode):
                    break
                entries = os.listdir(here)
            except OSError:
                continue
            for name in entries:
                if name not in names and name not in hidden:
                    whiteout = is_whiteout(os.lstat(os.path.join(here, name)))
                    (hidden if whiteout else names).add(name)
            if is_opaque(here):
                break
        return sorted(names)


def _identity(path: str) -> tuple[int, int, int, int] | None:
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def make_run_layer(
    pin: Pin,
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    private_dir: str,
    commit: CommitId,
    *,
    env: Mapping[str, str],
) -> RunLayer:
    """The layer of a run registered at ``commit`` (``git worktree add
    --no-checkout``: ``worktree`` holds its ``.git`` file alone) over the
    base tree of ``pin``: the base tree's index copied as the run's, the
    difference of a snapshot ``commit`` checked out into the start layer,
    the upper layer made in ``private_dir``, with the mode git gave
    ``worktree`` (the overlay's top folder is the upper layer's).

    Raises:
        IsopatchError: a classified git or OS failure.
    """
    tree = pin.tree
    index = os.path.join(admin_dir, "index")
    try:
        copy_admin_file(os.path.join(tree.admin_dir, "index"), index)
        layer = os.path.join(private_dir, LAYER_FOLDER)
        upper, work = os.path.join(layer, "upper"), os.path.join(layer, "work")
        for folder in (layer, upper, work):
            os.mkdir(folder, 0o700)
        os.chmod(upper, stat.S_IMODE(os.stat(worktree).st_mode))
    except OSError as exc:
        raise known_os_failure(f"could not create '{exc.filename or index}'", exc) from exc
    started: frozenset[bytes] = frozenset()
    if commit != tree.record.commit:
        started = _start_difference(worktree, admin_dir, CommitId(tree.record.commit), commit, env)
    overlay = WorktreeOverlay(worktree, (tree.path, worktree), upper, work)
    return RunLayer(pin, overlay, _identity(index), started)


def _start_difference(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    tree_commit: CommitId,
    commit: CommitId,
    env: Mapping[str, str],
) -> frozenset[bytes]:
    """Check out into the start layer what ``commit`` changes from the
    base tree's ``tree_commit`` (``git read-tree -m -u``: the index is the
    base tree's, so only what differs is written and stated; a removal
    finds no file there), then a whiteout for each path it removes: the
    highest folder it empties, else the file; returns the paths that differ.

    Raises:
        IsopatchError: a classified git or OS failure.
    """
    from ..git.checkouts import read_tree_two_way, tree_difference  # not at the base tree's commit

    read = read_tree_two_way(admin_dir, worktree, tree_commit, commit, env=env)
    if isinstance(read, Err):
        raise known_failure(f"could not check out '{worktree}'", read.error)
    difference = tree_difference(admin_dir, tree_commit, commit, env=env)
    if isinstance(difference, Err):
        raise known_failure(f"could not read '{commit}'", difference.error)
    for path in difference.value.removed:
        target = os.path.join(worktree, os.fsdecode(path))
        try:
            if _under_start_entry(worktree, os.fsdecode(path)):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.mknod(target, WHITEOUT | 0o600, os.makedev(0, 0))
        except FileExistsError:
            continue
        except OSError as exc:
            raise known_os_failure(f"could not create '{target}'", exc) from exc
    return difference.value.paths


def _under_start_entry(worktree: str, path: str) -> bool:
    """The start layer already holds ``path``, or a file (not a folder) on
    the way to it, that hides the base tree's there."""
    parts = path.split("/")
    for end in range(1, len(parts) + 1):
        here = os.path.join(worktree, *parts[:end])
        try:
            found = os.lstat(here)
        except FileNotFoundError:
            return False
        if end == len(parts) or not stat.S_ISDIR(found.st_mode):
            return True
    return False


def discard(private_dir: str) -> None:
    """Remove the upper layer of the run whose private folder is
    ``private_dir`` (best effort; by file descriptor: the command wrote
    it)."""
    layer = os.path.join(private_dir, LAYER_FOLDER)
    if os.path.lexists(layer):
        delete_tree(layer)
