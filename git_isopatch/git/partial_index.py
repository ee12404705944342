"""An index holding a few paths' entries of another (gitformat-index(5)),
for a git that looks at those paths alone: it reads and writes a few
entries, not one for every file of the worktree.

The entries are found in the whole index through a table of where each
one starts (:func:`entry_table`, made once when that index was written,
kept beside it, checked against its checksum and size) and copied as they
are, their stat data with them: git takes the same files for unchanged,
and reads the same ones again, as with the whole index.  Besides each
path's own entries (and those below it), the new index holds what git
reads of the index beside them on its way there (:func:`_wanted`): for
each folder on the way, its own entry (a file, a gitlink) and its first
one (git asks whether a folder is tracked before it asks whether it is a
repository of its own, dir.c ``treat_directory``), its ``.gitignore`` and
``.gitattributes`` (read from the index where the work tree lacks them: a
sparse checkout); and the top's ``.gitmodules``.

Only versions 2 and 3 are copied entry by entry (version 4 stores each
path as the difference from the one before it); a sparse index (folder
entries) and an index without a checksum (``index.skipHash``) get no
table.
"""

from __future__ import annotations

import array
import mmap
import os
import stat
import struct
import sys
from collections.abc import Sequence

from .admin_files import read_admin_file
from .index_entries import (
    EXTENDED,
    NAME_MASK,
    SPARSE_DIRECTORY,
    STAT_BYTES,
    leading_folders,
    read_entries,
)

#: The first line of a table (:func:`entry_table`).
TABLE_HEADER = b"git-isopatch index table 1\n"
#: A new index holding more than this share of the whole one's entries,
#: and more than :data:`_FEW` of them, is not worth its making: git reads
#: the whole one instead.
_MOST = 0.5
_FEW = 1024
#: The modes of a gitlink and of a sparse index's directory entry, as an
#: entry holds them.
_GITLINK = (0o160000).to_bytes(4, "big")
_SPARSE_DIRECTORY = SPARSE_DIRECTORY.to_bytes(4, "big")


def index_table(data: bytes, hash_size: int) -> tuple[bytes | None, list[bytes]] | None:
    """The table of the index ``data`` (its checksum and size, then where
    each entry starts as a 4-byte number) and its gitlinks' paths, in one
    walk that reads each entry's flags and mode alone; the table is
    ``None`` for an index whose entries cannot be copied one by one (a
    sparse index, no checksum).  ``None`` for an index of another version
    than 2 or 3 (version 4 stores each path as the difference from the one
    before: :func:`.index_entries.parse_entries` reads it), of 4 GiB or
    more, or that cannot be read."""
    try:
        signature, version, count = struct.unpack_from(">4sII", data, 0)
        if signature != b"DIRC" or version not in (2, 3) or len(data) >= 1 << 32:
            return None
        walked = walk_entries(data, hash_size, min(count, len(data) // 8), extended=version == 3)
    except (struct.error, IndexError, ValueError):
        return None
    if walked is None or len(walked[0]) != count:
        return None
    starts, links, sparse = walked
    checksum = data[-hash_size:]
    if sparse or not any(checksum):
        return None, links
    return table_of(starts, checksum, len(data)), links


def table_of(starts: array.array, checksum: bytes, size: int) -> bytes:
    """The table of an index of ``size`` bytes ending with ``checksum``
    whose entries start at ``starts`` (in this machine's byte order, left
    as it is)."""
    if sys.byteorder == "little":
        starts = array.array("I", starts)
        starts.byteswap()
    counts = size.to_bytes(8, "big") + len(starts).to_bytes(4, "big")
    return TABLE_HEADER + checksum + counts + starts.tobytes()


def walk_entries(
    data: bytes, hash_size: int, count: int, *, extended: bool
) -> tuple[array.array, list[bytes], bool] | None:
    """Where each of the ``count`` entries of ``data`` starts, the paths of
    the gitlinks, and whether a sparse directory entry is there; ``None``
    when an entry is not as its version has it."""
    starts = array.array("I", bytes(4 * count))
    if starts.itemsize != 4:
        return None
    links: list[bytes] = []
    sparse, at, fixed = False, 12, STAT_BYTES + hash_size + 2
    for number in range(count):
        starts[number] = at
        flags = (data[at + fixed - 2] << 8) | data[at + fixed - 1]
        name = at + fixed
        if flags & EXTENDED:
            if not extended:
                return None
            name += 2
        length = flags & NAME_MASK
        end = name + length if length < NAME_MASK else data.index(b"\0", name + length)
        if data[end]:
            return None
        mode = data[at + 24 : at + 28]
        if mode == _GITLINK:
            links.append(data[name:end])
        elif mode == _SPARSE_DIRECTORY:
            sparse = True
        at += (end - at + 8) & ~7
    return None if at > len(data) - hash_size else (starts, links, sparse)


def partial_index(index: str, table: str, paths: Sequence[bytes], hash_size: int) -> bytes | None:
    """The bytes of an index holding the entries of the index file
    ``index`` that git reads to look at ``paths`` (from the top, each with
    what lies below it), in its order, with its version; ``table`` is the
    file of its :func:`entry_table`.  ``None`` when that table is not the
    index's (the index was written since), cannot be read, or the entries
    would be too many (:data:`_MOST`)."""
    try:
        raw = read_admin_file(table, limit=1 << 32)
        fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        head = len(TABLE_HEADER) + hash_size
        checksum, size = raw[len(TABLE_HEADER) : head], int.from_bytes(raw[head : head + 8], "big")
        if not raw.startswith(TABLE_HEADER) or not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size != size or size < 12 + hash_size:
            return None
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            if data[size - hash_size :] != checksum:
                return None
            starts = array.array("I")
            starts.frombytes(raw[head + 12 :])
            if sys.byteorder == "little":
                starts.byteswap()
            if len(starts) != int.from_bytes(raw[head + 8 : head + 12], "big"):
                return None
            return Entries(data, starts, hash_size).partial(paths)
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)


class Entries:
    """The entries of an index's bytes ``data``, by number, found through
    ``starts`` (a version 2 or 3 index)."""

    def __init__(self, data: mmap.mmap, starts: array.array, hash_size: int) -> None:
        self.data, self.starts, self.hash_size = data, starts, hash_size
        self.fixed = STAT_BYTES + hash_size + 2
        self.most = max(_FEW, int(len(starts) * _MOST))

    def path(self, number: int) -> tuple[bytes, int]:
        """The path of entry ``number`` and where its bytes end."""
        read = read_entries(self.data, self.starts[number], 1, 3, self.fixed, [])
        if read is None or read[1] > len(self.data) - self.hash_size:
            raise ValueError("an entry past the end")
        ((path, _),), after = read
        return path, after

    def first_at_least(self, key: bytes) -> int:
        """The number of the first entry whose path is not before ``key``
        (an index is sorted by path, byte by byte)."""
        low, high = 0, len(self.starts)
        while low < high:
            middle = (low + high) // 2
            if self.path(middle)[0] < key:
                low = middle + 1
            else:
                high = middle
        return low

    def numbers(
        self, key: bytes, chosen: set[int], *, below: bool = False, first: bool = False
    ) -> bool:
        """Add to ``chosen`` the entries of path ``key`` (every stage), or
        with ``below`` those whose path starts with ``key``; with
        ``first``, the first of them alone.  False when ``chosen`` gets
        too many (:data:`_MOST`)."""
        number = self.first_at_least(key)
        while number < len(self.starts):
            path = self.path(number)[0]
            if not (path.startswith(key) if below else path == key):
                break
            chosen.add(number)
            if first or len(chosen) > self.most:
                break
            number += 1
        return len(chosen) <= self.most

    def partial(self, paths: Sequence[bytes]) -> bytes | None:
        """The index holding the entries :func:`_wanted` names for
        ``paths``, or ``None`` when they are too many."""
        chosen: set[int] = set()
        exact, folders = _wanted(paths)
        found = all(self.numbers(key, chosen) for key in exact)
        found = found and all(
            self.numbers(folder + b"/", chosen, below=True, first=True) for folder in folders
        )
        if not (found and all(self.numbers(p + b"/", chosen, below=True) for p in paths)):
            return None
        out = bytearray(self.data[:8])
        out += len(chosen).to_bytes(4, "big")
        for number in sorted(chosen):
            out += self.data[self.starts[number] : self.path(number)[1]]
        out += index_checksum(bytes(out), self.hash_size)
        return bytes(out)


def _wanted(paths: Sequence[bytes]) -> tuple[set[bytes], set[bytes]]:
    """What git reads of the index to look at ``paths`` besides what lies
    below each: the paths themselves, and for each folder on the way (the
    top too) its ``.gitignore`` and ``.gitattributes``, and the folder's own
    entry; the top's ``.gitmodules``.  Then the folders on the way, whose
    first entry git reads too."""
    exact, folders = {b".gitmodules"}, set()
    for path in paths:
        exact.add(path)
        for folder in (b"", *leading_folders(path)):
            if folder in folders:
                continue
            prefix = folder + b"/" if folder else b""
            exact.update((prefix + b".gitignore", prefix + b".gitattributes"))
            if folder:
                folders.add(folder)
                exact.add(folder)
    return exact, folders


def index_checksum(data: bytes, hash_size: int) -> bytes:
    """The index's checksum: the repository's hash of ``data``."""
    if hash_size == 20:
        try:
            from _sha1 import sha1  # cheaper to load than hashlib
        except ImportError:
            from hashlib import sha1
        return sha1(data).digest()
    from hashlib import sha256

    return sha256(data).digest()
