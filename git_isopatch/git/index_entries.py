"""The entries of an index file, read in process (gitformat-index(5)).

Each entry's path and the bytes git keeps for it: the stat data (change
and modification times, device, inode, mode, owner, size), the object id
and the flags.  Git takes a file whose stat data matches its entry for
unchanged (what a claim's ``git read-tree`` and ``git status`` rely on),
so the same entry bytes stand for the same file on disk.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

from .admin_files import read_admin_file
from .types import GitDirPath

if TYPE_CHECKING:
    import mmap

    Buffer = bytes | mmap.mmap

#: The stat data before the object id: ten 32-bit numbers.
STAT_BYTES = 40
#: The entry's flags: extended flags follow (version 3 and later); the
#: length of its path (this mask: the path is longer, up to its NUL).
EXTENDED = 0x4000
NAME_MASK = 0xFFF
#: The entry's flags (gitformat-index(5)): assume-unchanged ("valid"); in
#: the extended flags of version 3 and later, skip-worktree.
_ASSUME_VALID = 0x8000
_STAGE = 0x3000
_SKIP_WORKTREE = 0x4000
#: The mode of a sparse index's directory entry.
SPARSE_DIRECTORY = 0o040000


#: The most bytes of a command's index (hostile input) read in process,
#: beyond twice the size of the index it is compared with: a bigger one (a
#: sparse file of gigabytes costs the command nothing) is not read.
GROWTH = 32 << 20


def read_index(git_dir: GitDirPath, limit: int = 1 << 34) -> bytes | None:
    """The bytes of ``git_dir``'s index; ``None`` when there is none, it
    is over ``limit`` bytes, or it is split (``core.splitIndex``: most
    entries are in a ``sharedindex.*`` file)."""
    try:
        if any(name.startswith("sharedindex.") for name in os.listdir(git_dir)):
            return None
        data = read_admin_file(os.path.join(git_dir, "index"), limit=limit + 1)
    except OSError:
        return None
    return None if len(data) > limit else data


def index_entries(git_dir: GitDirPath, hash_size: int) -> list[tuple[bytes, bytes]] | None:
    """``(path, entry bytes)`` of every entry of ``git_dir``'s index
    (versions 2 to 4), the entry bytes being all but the path; ``None``
    when :func:`read_index` has none or it cannot be read as one.
    ``hash_size``: the bytes of an object id (20, 32 for SHA-256)."""
    data = read_index(git_dir)
    return None if data is None else parse_entries(data, hash_size)


def changed_entries(
    git_dir: GitDirPath, other_dir: GitDirPath, hash_size: int
) -> set[bytes] | None:
    """The paths whose entry differs between the indexes of ``git_dir`` (a
    command's: read only up to twice ``other_dir``'s and :data:`GROWTH`)
    and ``other_dir`` but for the stat data (the object id, the mode, the
    flags, or the entry itself); ``None`` when either cannot be read."""
    data = read_index(other_dir)
    left = None if data is None else read_index(git_dir, 2 * len(data) + GROWTH)
    if data is None or left is None:
        return None
    mine, theirs = parse_entries(left, hash_size), parse_entries(data, hash_size)
    if mine is None or theirs is None:
        return None
    old = {path: meta[STAT_BYTES:] for path, meta in theirs}
    new = {path: meta[STAT_BYTES:] for path, meta in mine}
    return {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}


def parse_entries(
    data: bytes, hash_size: int, starts: list[int] | None = None
) -> list[tuple[bytes, bytes]] | None:
    """:func:`index_entries` of the index bytes ``data``; ``starts``, when
    given, gets where each entry starts in ``data``."""
    try:
        signature, version, count = struct.unpack_from(">4sII", data, 0)
        if signature != b"DIRC" or version not in (2, 3, 4):
            return None
        fixed = STAT_BYTES + hash_size + 2
        read = read_entries(data, 12, count, version, fixed, [] if starts is None else starts)
    except (struct.error, IndexError, ValueError):
        return None
    return None if read is None or read[1] > len(data) - hash_size else read[0]


def read_entries(
    data: Buffer, at: int, count: int, version: int, fixed: int, starts: list[int]
) -> tuple[list[tuple[bytes, bytes]], int] | None:
    """``(path, entry bytes)`` of ``count`` entries of the index bytes
    ``data`` from offset ``at`` on (version 4 from the first, at 12: each
    path is the difference from the one before), and where the next one
    starts; ``starts`` gets where each starts.  ``fixed``: the bytes of an
    entry's stat data, object id and flags.  ``None`` when an entry is not
    as ``version`` has it.

    Raises:
        struct.error, IndexError, ValueError: an entry runs past the end.
    """
    entries: list[tuple[bytes, bytes]] = []
    previous = b""
    for _ in range(count):
        start = at
        starts.append(start)
        (flags,) = struct.unpack_from(">H", data, at + fixed - 2)
        at += fixed
        if flags & EXTENDED:
            if version < 3:
                return None
            at += 2
        meta = data[start:at]
        if version == 4:
            strip, at = _varint(data, at)
            end = data.index(b"\0", at)
            if strip > len(previous):
                return None
            path = previous[: len(previous) - strip] + data[at:end]
            at = end + 1
        else:
            length = flags & NAME_MASK
            end = at + length if length < NAME_MASK else data.find(b"\0", at + length)
            if end < 0 or data[end] != 0:
                return None
            path = data[at:end]
            at = start + ((end - start + 8) & ~7)
        entries.append((path, meta))
        previous = path
    return entries, at


def index_listing(
    git_dir: GitDirPath, hash_size: int, index: str | None = None
) -> list[tuple[bytes, bytes, bytes]] | None:
    """``(tag, mode, path)`` of every entry of ``git_dir``'s index (or of
    the whole index file ``index``), in its
    order, as ``git ls-files -v -s`` lists them: tag ``H``, ``M`` for an
    unmerged entry, ``S`` for skip-worktree, lower case for
    assume-unchanged (ls-files.c, ``show_files``); the mode in octal
    (``100644``).  ``None`` when :func:`index_entries` has none, or the
    index is a sparse one (its directory entries are what git expands)."""
    if index is None:
        entries = index_entries(git_dir, hash_size)
    else:
        try:
            entries = parse_entries(read_admin_file(index, limit=1 << 34), hash_size)
        except OSError:
            entries = None
    if entries is None:
        return None
    listing = []
    for path, meta in entries:
        (mode,) = struct.unpack_from(">I", meta, 24)
        if mode == SPARSE_DIRECTORY:
            return None
        flags, extended = struct.unpack_from(">H", meta, STAT_BYTES + hash_size)[0], 0
        if flags & EXTENDED:
            (extended,) = struct.unpack_from(">H", meta, STAT_BYTES + hash_size + 2)
        tag = b"M" if flags & _STAGE else b"S" if extended & _SKIP_WORKTREE else b"H"
        listing.append((tag.lower() if flags & _ASSUME_VALID else tag, b"%06o" % mode, path))
    return listing


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """Git's offset number of a version 4 entry (varint.c): the value and
    where it ends."""
    byte = data[at]
    at += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[at]
        at += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, at


def leading_folders(path: bytes) -> list[bytes]:
    """The folders on the way to ``path``, an entry's path, outermost first
    (``a/b/c``: ``a``, ``a/b``)."""
    parts = path.split(b"/")
    return [b"/".join(parts[:end]) for end in range(1, len(parts))]
