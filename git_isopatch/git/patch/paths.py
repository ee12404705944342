"""What a patch holds, read from the patch itself in one pass: how many
files it has, each path with its status as ``git diff --name-status``
gives it, the lines it adds and removes (as ``git apply --numstat`` counts
them), and the ``diff --git`` headers that must be quoted
(:mod:`.headers`).

The paths come from the ``diff --git`` header and its extended header
lines (``new file mode``, ``rename from``, ...), which git writes in a
fixed form for the pinned options of :mod:`..diff`; the lines are counted
in the hunks.  No content line of a git patch starts with ``diff --git ``
(text lines start with `` ``, ``+``, ``-`` or ``\\``, the lines of a binary
patch with a length letter), so the headers are found at line starts.  The
file is read a chunk at a time, never whole: a patch of a large binary file
costs a chunk of memory.
"""

from __future__ import annotations

import os
from typing import IO

from ..record import Record
from .headers import Replacement, ambiguous_header

_HEADER = b"diff --git "
_CHUNK = 1 << 20
#: A file's header lines fit in this: four names of at most PATH_MAX bytes,
#: quoted (four bytes a byte at worst), and a few short lines.
_HEADER_BLOCK = 1 << 17

#: C escapes of git's quote.c, reversed.
_UNESCAPES = {
    ord("a"): 0x07,
    ord("b"): 0x08,
    ord("t"): 0x09,
    ord("n"): 0x0A,
    ord("v"): 0x0B,
    ord("f"): 0x0C,
    ord("r"): 0x0D,
    ord('"'): 0x22,
    ord("\\"): 0x5C,
}


class PathChange(Record):
    """One path of a patch.

    Attributes:
        status: ``A`` (added), ``D`` (deleted), ``M`` (modified, or its
            mode changed), ``T`` (its type changed: file, symlink,
            gitlink), ``R<score>`` / ``C<score>`` (renamed / copied, the
            similarity in percent on three digits, as ``R100``).
        path: the path after the change (for ``D``: the deleted one),
            from the top, decoded as ``os.fsdecode`` decodes.
        old_path: the path before a rename or copy, else ``None``.
    """

    status: str
    path: str
    old_path: str | None = None

    def fields(self) -> dict[str, str]:
        """The JSON object: ``status``, ``path`` and, for a rename or a
        copy, ``old-path``."""
        out = {"status": self.status, "path": self.path}
        if self.old_path is not None:
            out["old-path"] = self.old_path
        return out


def unquote_c_style(data: bytes, start: int = 0) -> tuple[bytes, int]:
    """The name that git's ``quote_c_style`` quoted at ``data[start]`` (a
    ``"``), and the index just past its closing quote.

    Raises:
        ValueError: ``data`` holds no such quoted name there.
    """
    if data[start : start + 1] != b'"':
        raise ValueError("not a quoted name")
    out = bytearray()
    at = start + 1
    while at < len(data):
        byte = data[at]
        if byte == 0x22:
            return bytes(out), at + 1
        if byte != 0x5C:
            out.append(byte)
            at += 1
            continue
        escape = data[at + 1 : at + 2]
        if not escape:
            break
        if escape[0] in _UNESCAPES:
            out.append(_UNESCAPES[escape[0]])
            at += 2
        elif escape.isdigit():
            out.append(int(data[at + 1 : at + 4], 8))
            at += 4
        else:
            raise ValueError(f"bad escape in a quoted name: {escape!r}")
    raise ValueError("a quoted name without its closing quote")


def _name(raw: bytes, prefix: bytes) -> bytes:
    """A name of an extended header line (``rename from <name>``), quoted
    or not, with ``prefix`` (``a/``) taken off when it has one."""
    name = unquote_c_style(raw)[0] if raw.startswith(b'"') else raw
    return name[len(prefix) :] if name.startswith(prefix) else name


def _header_name(rest: bytes) -> bytes:
    """The path of a ``diff --git a/X b/X`` header (``rest``: after ``diff
    --git ``) whose two names are the same: quoted, or split in the middle
    (git writes the same name twice)."""
    if rest.startswith(b'"'):
        return _name(rest[: unquote_c_style(rest)[1]], b"a/")
    return rest[len(b"a/") : (len(rest) - len(b" b/") + len(b"a/")) // 2]


#: Lines that end a file's header: its content follows.
_CONTENT = (b"--- ", b"+++ ", b"@@", b"Binary files ", b"GIT binary patch", _HEADER)


def _change(entry: list[bytes]) -> PathChange:
    """The :class:`PathChange` one file's header lines say."""
    extended = {}
    for line in entry[1:]:
        for key in (b"new file mode", b"deleted file mode", b"rename from", b"rename to",
                    b"copy from", b"copy to", b"similarity index"):  # fmt: skip
            if line.startswith(key + b" "):
                extended[key] = line[len(key) + 1 :]
    for kind, letter in ((b"rename", "R"), (b"copy", "C")):
        if kind + b" to" in extended:
            score = int(extended.get(b"similarity index", b"0%").rstrip(b"%"))
            return PathChange(
                f"{letter}{score:03d}",
                os.fsdecode(_name(extended[kind + b" to"], b"b/")),
                os.fsdecode(_name(extended[kind + b" from"], b"a/")),
            )
    path = os.fsdecode(_header_name(entry[0][len(_HEADER) :]))
    if b"new file mode" in extended:
        return PathChange("A", path)
    if b"deleted file mode" in extended:
        return PathChange("D", path)
    return PathChange("M", path)


class PatchContents(Record):
    """What a patch holds (:func:`read_patch`).

    Attributes:
        files: its paths, as ``git diff --stat`` counts them (a type
            change, two entries, is one); its ``diff --git`` entries when
            a header could not be read.
        paths: its paths with their status, a path deleted and added again
            in a row (its type changed: git writes two entries) one ``T``;
            ``None`` when a header could not be read.
        insertions: lines it adds (a binary file counts none, as in git's
            diffstat), or ``None`` when the paths are unknown.
        deletions: lines it removes, likewise.
    """

    files: int
    paths: tuple[PathChange, ...] | None
    insertions: int | None
    deletions: int | None


class _Scanner:
    """A patch file read forward a chunk at a time: lines for the headers,
    whole spans for the hunks."""

    def __init__(self, handle: IO[bytes], chunk_size: int) -> None:
        self._handle, self._chunk_size = handle, chunk_size
        self.data = b""
        self.pos = 0  # where the unread part of ``data`` starts
        self.offset = 0  # the file offset of ``data[0]``
        self.eof = False

    def more(self) -> bool:
        """Read the next chunk (what is before :attr:`pos` is dropped);
        false at the end of the file."""
        chunk = self._handle.read(self._chunk_size)
        if not chunk:
            self.eof = True
            return False
        self.offset += self.pos
        self.data = self.data[self.pos :] + chunk
        self.pos = 0
        return True

    def line(self) -> bytes | None:
        """The next line, without its newline (``None`` at the end); the
        line starts at :attr:`pos` until the next call."""
        while (end := self.data.find(b"\n", self.pos)) < 0:
            if not self.more():
                if self.pos == len(self.data):
                    return None
                end = len(self.data)
                break
        return self.data[self.pos : end]

    def skip(self, line: bytes) -> None:
        """Past ``line``, the one :meth:`line` returned."""
        self.pos = min(self.pos + len(line) + 1, len(self.data))


def _header(scan: _Scanner) -> list[bytes]:
    """The lines of one file's header at ``scan``'s position (a ``diff
    --git`` line): up to its content, past the ``---``/``+++`` lines.

    Raises:
        ValueError: a header longer than git writes.
    """
    entry: list[bytes] = []
    size = 0
    while (line := scan.line()) is not None:
        if entry and line.startswith(_CONTENT):
            if line.startswith(b"--- "):  # the names again, then the hunks
                scan.skip(line)
                plus = scan.line()
                if plus is not None and plus.startswith(b"+++ "):
                    scan.skip(plus)
            break
        entry.append(line)
        scan.skip(line)
        size += len(line) + 1
        if size > _HEADER_BLOCK:
            raise ValueError("a header longer than git writes")
    return entry


def _hunks(scan: _Scanner) -> tuple[int, int]:
    """Skip one file's content, counting its added and removed lines: the
    lines that start with ``+`` and ``-`` before the next ``diff --git``
    line (or the end).  ``scan`` starts at a line's start (after the
    header) and is left at the next header."""
    data, start = scan.data, scan.pos
    if data.startswith(_HEADER, start):  # an entry without content
        return 0, 0
    added, removed = int(data.startswith(b"+", start)), int(data.startswith(b"-", start))
    needle = b"\n" + _HEADER
    while True:
        data, start = scan.data, scan.pos
        found = data.find(needle, start)
        if found >= 0 or scan.eof:
            end = len(data) if found < 0 else found
            added += data.count(b"\n+", start, end)
            removed += data.count(b"\n-", start, end)
            scan.pos = end if found < 0 else found + 1
            return added, removed
        # a header may begin in the last bytes: they are scanned again, and
        # a newline just before them is counted here, with the byte after it
        keep = len(data) - len(needle) + 1
        if keep > start:
            added += data.count(b"\n+", start, keep + 1)
            removed += data.count(b"\n-", start, keep + 1)
            scan.pos = keep
        scan.more()


def read_patch(path: str, chunk_size: int = _CHUNK) -> tuple[PatchContents, list[Replacement]]:
    """What the patch file ``path`` holds (:class:`PatchContents`), and its
    headers to quote (:func:`.headers.ambiguous_header`), in one read.

    Raises:
        OSError: the file cannot be read.
    """
    entries = insertions = deletions = 0
    changes: list[PathChange] | None = []
    replacements: list[Replacement] = []
    with open(path, "rb") as handle:
        scan = _Scanner(handle, chunk_size)
        while (first := scan.line()) is not None:
            if not first.startswith(_HEADER):  # before the first header: nothing git writes
                scan.skip(first)
                continue
            entries += 1
            quoted = ambiguous_header(first)
            if quoted is not None:
                start = scan.offset + scan.pos
                replacements.append((start, start + len(first), quoted))
            try:
                entry = _header(scan)
                change = _change(entry) if changes is not None else None
            except ValueError:  # a header git would not write: nothing to say of it
                changes = None
                change = None
            if changes is not None and change is not None:
                last = changes[-1] if changes else None
                if change.status == "A" and last == PathChange("D", change.path):
                    changes[-1] = PathChange("T", change.path)
                else:
                    changes.append(change)
            added, removed = _hunks(scan)
            insertions, deletions = insertions + added, deletions + removed
    if changes is None:
        return PatchContents(entries, None, None, None), replacements
    return PatchContents(len(changes), tuple(changes), insertions, deletions), replacements
