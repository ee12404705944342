"""What a copy-on-write layer of the sandbox holds (:mod:`.layers`), as
paths under the folder it covers: :func:`layer_writes`, the command's
writes outside its worktree, which git-isopatch names and discards.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import os
import stat

from .layers import CACHE, OVERLAY, SPLIT


def is_opaque(path: str) -> bool:
    """An overlay's folder that hides the layers below it (overlayfs(5):
    ``user.overlay.opaque``, ``trusted.overlay.opaque`` as root)."""
    for name in ("user.overlay.opaque", "trusted.overlay.opaque"):
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def is_whiteout(st: os.stat_result) -> bool:
    """An overlay's record of a removal: a character device 0/0."""
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


#: Entries of one layer :func:`layer_writes` looks at before it stops.
LISTED_AT_MOST = 100_000


class _Folder:
    """A folder of a layer :func:`layer_writes` is in: where it is, its
    entries left, where its own path goes in the listing, what it is (and
    was, in the lower folder), and whether something below it was named.
    A plain class: a dataclass compiles its methods as the module loads."""

    __slots__ = ("relative", "entries", "position", "st", "old", "path", "named")

    def __init__(
        self,
        relative: str,
        entries: list[os.DirEntry[str]],
        position: int = 0,
        st: os.stat_result | None = None,
        old: os.stat_result | None = None,
        path: str = "",
    ) -> None:
        self.relative, self.entries, self.position = relative, entries, position
        self.st, self.old, self.path = st, old, path
        self.named = False


def _listed(here: str) -> list[os.DirEntry[str]]:
    """The entries of the folder ``here``, by name, reversed (popped in order)."""
    try:
        with os.scandir(here) as entries:
            return sorted(entries, key=lambda e: e.name, reverse=True)
    except OSError:
        return []


def layer_writes(layer_upper: str, lower: str, kind: str = OVERLAY) -> list[str]:
    """The paths (under ``lower``) a layer holds a change for: every file,
    link, whiteout (a removal) and new or opaque folder, and, for an
    overlay, every copied-up folder whose type, mode, owner or times
    changed and that holds no change below it (a folder copied up only
    because something inside it was written is not named).  In a
    :data:`PRIVATE` layer a folder that exists in ``lower`` is not named
    (bubblewrap makes the mount points of the places bound inside).

    The layer is the command's: walked without recursion, never through a
    link, at most :data:`LISTED_AT_MOST` entries (a path too long to reach
    ends the walk there); never raises for what it holds.  A
    :data:`CACHE` layer is kept, not discarded: nothing is listed."""
    if kind in (CACHE, SPLIT):
        return []
    found: list[str] = []
    stack = [_Folder("", _listed(layer_upper))]
    seen = 0
    while stack:
        folder = stack[-1]
        if folder.entries and seen < LISTED_AT_MOST:
            entry = folder.entries.pop()
            seen += 1
            relative = os.path.join(folder.relative, entry.name) if folder.relative else entry.name
            real = os.path.join(lower, relative)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                found.append(real)
                folder.named = True
                continue
            try:
                old = os.lstat(real)
            except OSError:
                old = None
            inner = _Folder(relative, _listed(entry.path), len(found), st, old, entry.path)
            stack.append(inner)
            continue
        stack.pop()
        if not stack:
            break
        changed = _folder_changed(folder, kind)
        if changed:
            found.insert(folder.position, os.path.join(lower, folder.relative))
        stack[-1].named = stack[-1].named or folder.named or changed
    return found


def _folder_changed(folder: _Folder, kind: str) -> bool:
    """A folder of a layer is named: new, of another type, or (in an
    overlay) opaque, of another mode or owner, or of other times while
    nothing below it was named."""
    old, st = folder.old, folder.st
    if old is None or not stat.S_ISDIR(old.st_mode):
        return True
    if kind != OVERLAY or st is None:
        return False
    return (
        is_opaque(folder.path)
        or (st.st_mode, st.st_uid, st.st_gid) != (old.st_mode, old.st_uid, old.st_gid)
        or (not folder.named and int(st.st_mtime) != int(old.st_mtime))
    )
