"""An index changed in a few entries, the others copied as they are
(gitformat-index(5)): a base tree moved to another commit by the
difference (:mod:`.moved_checkout`).  Git checks out the paths that
differ through an index holding their entries alone
(:func:`entries_index`); its new entries take the old ones' places in
the whole index (:func:`spliced_index`), whose other entries nobody reads
or writes, and whose table of entries (:func:`.partial_index.table_of`)
is made as it is written rather than by a walk.

Only a version 2 index is changed so (no extended flags: no
skip-worktree, no intent-to-add), whose table matches it and whose
extensions are all optional: the cache tree (``TREE``) stays, the
folders on the way to a changed path invalidated (as git's own
``cache_tree_invalidate_path`` leaves them); the others (caches, and
``EOIE``/``IEOT``, offsets the new entries would make wrong) are dropped,
as git allows for an optional extension.
"""

from __future__ import annotations

import array
import hashlib
import sys
from collections.abc import Iterable, Sequence

from .partial_index import TABLE_HEADER, Entries, index_checksum, table_of, walk_entries
from .record import Record

#: The mode of a gitlink, as an entry holds it.
_GITLINK = (0o160000).to_bytes(4, "big")


class IndexLayout(Record):
    """A version 2 index's bytes and where its parts lie.

    Attributes:
        data: the index file's bytes.
        entries: its entries, by number (through its table).
        end: where its last entry ends (its extensions start).
        extensions: ``(signature, body)`` of each, all optional.
    """

    data: bytes
    entries: Entries
    end: int
    extensions: tuple[tuple[bytes, bytes], ...]


class Spliced(Record):
    """What :func:`spliced_index` made: the new index (its bytes in
    pieces, some of them the old one's), its table, the
    paths changed, and those of the gitlinks among the entries it took in."""

    index: tuple[bytes | memoryview, ...]
    table: bytes
    changed: frozenset[bytes]
    gitlinks: tuple[bytes, ...]


def index_layout(data: bytes, table: bytes, hash_size: int) -> IndexLayout | None:
    """The layout of the index ``data`` through ``table``, its table;
    ``None`` when it is not a version 2 index, ``table`` is not its own, or
    an extension is required (lowercase: a split or sparse index)."""
    if data[:4] != b"DIRC" or data[4:8] != (2).to_bytes(4, "big") or len(data) >= 1 << 32:
        return None
    count = int.from_bytes(data[8:12], "big")
    head = len(TABLE_HEADER) + hash_size
    sizes = table[head : head + 12]
    if not table.startswith(TABLE_HEADER) or table[len(TABLE_HEADER) : head] != data[-hash_size:]:
        return None
    if sizes != len(data).to_bytes(8, "big") + count.to_bytes(4, "big"):
        return None
    starts = array.array("I")
    starts.frombytes(table[head + 12 :])
    if sys.byteorder == "little":
        starts.byteswap()
    entries = Entries(data, starts, hash_size)
    try:
        end = entries.path(count - 1)[1] if count else 12
    except (ValueError, IndexError):
        return None
    if len(starts) != count or end > len(data) - hash_size:
        return None
    extensions = _extensions(data[end : len(data) - hash_size])
    return None if extensions is None else IndexLayout(data, entries, end, extensions)


def _extensions(region: bytes) -> tuple[tuple[bytes, bytes], ...] | None:
    """The extensions in ``region``; ``None`` when one is required or the
    region is not a row of them."""
    found, at = [], 0
    while at < len(region):
        signature, size = region[at : at + 4], int.from_bytes(region[at + 4 : at + 8], "big")
        body = region[at + 8 : at + 8 + size]
        if len(signature) < 4 or not b"A" <= signature[:1] <= b"Z" or len(body) != size:
            return None
        found.append((signature, body))
        at += 8 + size
    return tuple(found)


def entry_numbers(layout: IndexLayout, paths: Iterable[bytes]) -> list[int] | None:
    """The numbers of the entries of ``paths``, sorted; ``None`` when one
    has none."""
    numbers = []
    entries = layout.entries
    try:
        for path in paths:
            number = entries.first_at_least(path)
            if number >= len(entries.starts) or entries.path(number)[0] != path:
                return None
            numbers.append(number)
    except (ValueError, IndexError):
        return None
    return sorted(numbers)


def entries_index(layout: IndexLayout, numbers: Sequence[int]) -> bytes:
    """A version 2 index holding the entries ``numbers`` of ``layout``'s,
    their stat data with them."""
    entries = layout.entries
    out = bytearray(b"DIRC" + (2).to_bytes(4, "big") + len(numbers).to_bytes(4, "big"))
    for number in numbers:
        out += layout.data[entries.starts[number] : entries.path(number)[1]]
    out += index_checksum(bytes(out), entries.hash_size)
    return bytes(out)


def spliced_index(
    layout: IndexLayout, removed: Sequence[int], taken: bytes, changed: Sequence[bytes]
) -> Spliced | None:
    """``layout``'s index without its entries ``removed`` (sorted), with
    the entries of the version 2 index ``taken`` in their places, its cache
    tree invalidated on the way to each ``changed`` path; ``None`` when
    ``taken`` is not such an index."""
    entries, hash_size = layout.entries, layout.entries.hash_size
    new = _taken_entries(taken, hash_size)
    if new is None:
        return None
    count = len(entries.starts)
    places: dict[int, list[bytes]] = {}
    for path, entry in new:
        places.setdefault(entries.first_at_least(path), []).append(entry)
    gone = set(removed)
    data = memoryview(layout.data)
    head = data[:8].tobytes() + (count - len(gone) + len(new)).to_bytes(4, "big")
    out: list[bytes | memoryview] = [head]
    starts = array.array("I")
    kept, size = 0, len(head)
    for boundary in sorted(gone | places.keys() | {count}):
        if kept < boundary:
            size = _copy_run(layout, kept, boundary, out, starts, size)
        for entry in places.get(boundary, ()):
            starts.append(size)
            out.append(entry)
            size += len(entry)
        kept = boundary + 1 if boundary in gone else boundary
    folders = _folders(changed)
    for signature, body in layout.extensions:
        tree = _invalidated_tree(body, folders, hash_size) if signature == b"TREE" else None
        if tree is not None:
            out.append(b"TREE" + len(tree).to_bytes(4, "big") + tree)
    checksum = hashlib.new("sha1" if hash_size == 20 else "sha256")
    for piece in out:
        checksum.update(piece)
    out.append(checksum.digest())
    size = sum(len(piece) for piece in out)
    links = tuple(path for path, entry in new if entry[24:28] == _GITLINK)
    table = table_of(starts, out[-1], size)
    return Spliced(tuple(out), table, frozenset(changed), links)


def _taken_entries(taken: bytes, hash_size: int) -> list[tuple[bytes, bytes]] | None:
    """``(path, entry bytes)`` of each entry of the version 2 index
    ``taken``, in its order."""
    if taken[:4] != b"DIRC" or taken[4:8] != (2).to_bytes(4, "big"):
        return None
    count = int.from_bytes(taken[8:12], "big")
    try:
        walked = walk_entries(taken, hash_size, min(count, len(taken) // 8), extended=False)
        if walked is None or len(walked[0]) != count:
            return None
        entries = Entries(taken, walked[0], hash_size)
        found = []
        for number, start in enumerate(walked[0]):
            path, end = entries.path(number)
            found.append((path, taken[start:end]))
    except (ValueError, IndexError):
        return None
    return found


def _copy_run(
    layout: IndexLayout,
    first: int,
    stop: int,
    out: list[bytes | memoryview],
    starts: array.array,
    size: int,
) -> int:
    """Append the entries ``first`` to ``stop`` (excluded) of ``layout`` to
    ``out``, which holds ``size`` bytes, and where each now starts to
    ``starts``; the bytes ``out`` then holds."""
    old = layout.entries.starts
    end = old[stop] if stop < len(old) else layout.end
    shift = size - old[first]
    out.append(memoryview(layout.data)[old[first] : end])
    run = old[first:stop]
    starts.extend(run if not shift else array.array("I", [start + shift for start in run]))
    return size + end - old[first]


def _folders(paths: Iterable[bytes]) -> set[bytes]:
    """Every folder on the way to each of ``paths``, the top (``b""``)
    too."""
    found = {b""}
    for path in paths:
        at = path.find(b"/")
        while at >= 0:
            found.add(path[:at])
            at = path.find(b"/", at + 1)
    return found


def _invalidated_tree(body: bytes, folders: set[bytes], hash_size: int) -> bytes | None:
    """The cache tree ``body`` with the nodes of ``folders`` invalid (an
    entry count of -1, no object id), the others as they are; ``None``
    (no cache tree) when it cannot be read."""
    out, at = bytearray(), 0
    above: list[list] = []  # [path, subtrees not yet read] of each open node
    try:
        while at < len(body):
            name_end = body.index(b"\0", at)
            line_end = body.index(b"\n", name_end)
            counted, subtrees = body[name_end + 1 : line_end].split(b" ")
            after = line_end + 1 + (hash_size if int(counted) >= 0 else 0)
            while above and above[-1][1] == 0:
                above.pop()
            if above:
                above[-1][1] -= 1
                parent = above[-1][0]
                path = parent + b"/" + body[at:name_end] if parent else body[at:name_end]
            elif out:
                return None  # a second top
            else:
                path = b""
            if path in folders and int(counted) >= 0:
                out += body[at : name_end + 1] + b"-1 " + subtrees + b"\n"
            else:
                out += body[at:after]
            above.append([path, int(subtrees)])
            at = after
    except ValueError:
        return None
    return bytes(out) if at == len(body) else None
