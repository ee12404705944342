"""The ``diff --git`` header lines of a patch file, read by chunks (a patch
is never held in memory): counting the paths, and quoting the names that
``git apply`` could not split again (design: The patch, "quoting as git
does").
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import IO

_HEADER = b"diff --git a/"


_CHUNK = 1 << 20


def _header_lines(handle: IO[bytes], chunk_size: int = _CHUNK) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of each ``diff --git a/`` line (unquoted names) of
    a patch, without its newline.  Reads ``chunk_size`` bytes at a time, so
    memory stays bounded by a chunk and one header line whatever the size
    of the patch (a patch is never held in memory; an ``mmap`` would count
    the whole file in the resident set)."""
    needle = b"\n" + _HEADER
    buffer = b"\n"  # a virtual newline before the first byte
    base = -1  # file offset of buffer[0]
    eof = False
    while not eof:
        chunk = handle.read(chunk_size)
        eof = not chunk
        buffer += chunk
        keep_from = max(len(buffer) - (len(needle) - 1), 0)
        at = buffer.find(needle)
        while at >= 0:
            end = buffer.find(b"\n", at + 1)
            if end < 0 and not eof:
                keep_from = at  # the header line goes on in the next chunk
                break
            end = len(buffer) if end < 0 else end
            yield base + at + 1, buffer[at + 1 : end]
            at = buffer.find(needle, at + 1)
        base += keep_from
        buffer = buffer[keep_from:]


def quote_ambiguous_headers(path: str) -> int:
    """Quote the names of ``diff --git a/X b/X`` header lines where ``X``
    holds a space before a slash: ``diff --git "a/X" "b/X"``.

    Git leaves such names unquoted (only control characters, ``"``, ``\\``
    and bytes above 0x7f make it quote), and ``git apply`` cannot split that
    header again ("git diff header lacks filename information when removing
    1 leading pathname component"); for an entry with no ``---``/``+++``
    lines (an empty new or deleted file, a mode change, a binary file) the
    header is all it has.  A quoted name needs no escape here: git would
    have quoted a name that did.  Headers of renames (``X`` and ``Y``
    differ) are left alone: ``rename from``/``rename to`` name them.  The
    file is rewritten (same mode), streaming, only when a header needs it.

    Returns:
        The number of header lines rewritten.
    Raises:
        OSError: the file cannot be read or rewritten.
    """
    replacements: list[tuple[int, int, bytes]] = []
    with open(path, "rb") as handle:
        for offset, line in _header_lines(handle):
            rest = line[len(_HEADER) :]
            if b" /" not in rest:
                continue
            name = rest[: (len(rest) - len(b" b/")) // 2]
            if rest == name + b" b/" + name:
                quoted = b'diff --git "a/' + name + b'" "b/' + name + b'"'
                replacements.append((offset, offset + len(line), quoted))
        if not replacements:
            return 0
        handle.seek(0)
        temporary = path + ".quoting"
        mode = os.fstat(handle.fileno()).st_mode & 0o777
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            with os.fdopen(fd, "wb") as out:
                done = 0
                for start, end, quoted in replacements:
                    _copy_range(handle, out, start - done)
                    out.write(quoted)
                    handle.seek(end)
                    done = end
                shutil.copyfileobj(handle, out, _CHUNK)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    return len(replacements)


def _copy_range(source: IO[bytes], target: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes from ``source``'s position to ``target``, by chunks."""
    while size > 0:
        chunk = source.read(min(size, _CHUNK))
        if not chunk:
            raise OSError(f"patch file ended {size} bytes early")
        target.write(chunk)
        size -= len(chunk)


def count_patch_files(path: str, chunk_size: int = 1 << 20) -> int:
    """Count the paths in a patch file: its ``diff --git`` header lines.

    No content line of a git patch starts with ``diff --git `` (text lines
    start with `` ``, ``+``, ``-`` or ``\\``; binary lines with a length
    letter), so counting headers at line starts is exact.  Reads in chunks
    of ``chunk_size`` bytes.
    """
    header = b"\ndiff --git "
    count = 0
    carry = b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            data = carry + chunk
            count += data.count(header)
            carry = data[-(len(header) - 1) :]
    return count
