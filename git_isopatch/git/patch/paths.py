"""What a patch holds, read from the patch itself: each path with its
status as ``git diff --name-status`` gives it, and the lines it adds and
removes (``git apply --numstat``).

The paths come from the ``diff --git`` header and its extended header
lines (``new file mode``, ``rename from``, ...), which git writes in a
fixed form for the pinned options of :mod:`..diff`; the file is read one
header at a time, never whole.  The line counts are git's own, so that they
are what ``git apply`` will apply.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO

from ..result import Err, GitResult, Ok
from ..run import run_git

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


@dataclass(frozen=True)
class PathChange:
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


def _header_offsets(handle: IO[bytes]) -> Iterator[int]:
    """The offset of each ``diff --git`` line of a patch, found a chunk at
    a time (no content line of a git patch starts so: text lines start
    with `` ``, ``+``, ``-`` or ``\\``, binary ones with a length letter)."""
    needle = b"\n" + _HEADER
    carry = b"\n"  # a virtual newline before the first byte
    base = -1  # file offset of the buffer's first byte
    while chunk := handle.read(_CHUNK):
        data = carry + chunk
        at = data.find(needle)
        while at >= 0:
            yield base + at + 1
            at = data.find(needle, at + 1)
        keep = min(len(data), len(needle) - 1)
        base += len(data) - keep
        carry = data[-keep:]


#: Lines that end a file's header: its content follows.
_CONTENT = (b"--- ", b"+++ ", b"@@", b"Binary files ", b"GIT binary patch", _HEADER)


def _entries(handle: IO[bytes]) -> Iterator[list[bytes]]:
    """The header of each file of a patch: its ``diff --git`` line and the
    extended header lines after it (up to its content, or the next file).
    Reads one block a header; content is skipped unread."""
    for offset in list(_header_offsets(handle)):
        handle.seek(offset)
        first, *rest = handle.read(_HEADER_BLOCK).split(b"\n")
        entry = [first]
        for line in rest:
            if line.startswith(_CONTENT):
                break
            entry.append(line)
        yield entry


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


def patch_paths(path: str) -> tuple[PathChange, ...]:
    """Each path of the patch file ``path``, in its order, with its status
    as ``git diff --name-status`` gives it: a path deleted and added again
    in a row (its type changed: git writes it as two entries) is one ``T``.

    Raises:
        OSError: the file cannot be read.
        ValueError: a header git would not have written.
    """
    changes: list[PathChange] = []
    with open(path, "rb") as handle:
        for entry in _entries(handle):
            change = _change(entry)
            last = changes[-1] if changes else None
            if change.status == "A" and last == PathChange("D", change.path):
                changes[-1] = PathChange("T", change.path)
            else:
                changes.append(change)
    return tuple(changes)


def line_counts(path: str, *, env: Mapping[str, str]) -> GitResult[tuple[int, int]]:
    """``(insertions, deletions)`` of the patch file ``path``, summed from
    ``git apply --numstat``; a binary file counts none, as in git's
    diffstat.  Runs at ``/``: in a subfolder of a repository (a ``-o``
    file in the checkout) ``git apply`` would leave out the paths outside
    that folder, and at the top of one, or outside, it leaves out none.

    Returns:
        ``Ok((insertions, deletions))`` or ``Err(GitError)``.
    Raises:
        OSError: the file cannot be read.
    """
    if os.path.getsize(path) == 0:  # git apply refuses a patch with no file
        return Ok((0, 0))
    done = run_git(
        ["apply", "--numstat", "-z", "--", os.path.abspath(path)],
        env=env,
        cwd="/",
    )
    match done:
        case Ok(output):
            insertions = deletions = 0
            for record in output.split(b"\0"):
                added, tab, rest = record.partition(b"\t")
                removed = rest.partition(b"\t")[0]
                if tab and added.isdigit() and removed.isdigit():
                    insertions += int(added)
                    deletions += int(removed)
            return Ok((insertions, deletions))
        case Err() as err:
            return err


@dataclass(frozen=True)
class PatchContents:
    """What a patch holds (:func:`read_contents`).

    Attributes:
        paths: its paths with their status (:func:`patch_paths`), or
            ``None`` when a header could not be read.
        insertions: lines it adds, or ``None`` when git could not read it
            (:func:`line_counts`) or the paths are unknown.
        deletions: lines it removes, likewise.
    """

    paths: tuple[PathChange, ...] | None
    insertions: int | None
    deletions: int | None


def read_contents(path: str, files: int, *, env: Mapping[str, str]) -> PatchContents:
    """The paths and line counts of the patch file ``path`` of ``files``
    paths (none to read when it is empty).

    Raises:
        OSError: the file cannot be read.
    """
    if not files:
        return PatchContents((), 0, 0)
    try:
        paths = patch_paths(path)
    except ValueError:  # a header git would not write: nothing to say of it
        return PatchContents(None, None, None)
    match line_counts(path, env=env):
        case Ok((insertions, deletions)):
            return PatchContents(paths, insertions, deletions)
        case _:  # git apply refuses it (over 1023 MiB: said already)
            return PatchContents(paths, None, None)
