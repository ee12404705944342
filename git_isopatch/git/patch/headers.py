"""The ``diff --git`` header lines of a patch file that ``git apply`` could
not split again, and their quoting (design: The patch, "quoting as git
does").  :func:`.paths.read_patch` finds them as it reads the patch;
:func:`quote_headers` rewrites the file, streaming, when there are any.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import IO

_HEADER = b"diff --git a/"

_CHUNK = 1 << 20

#: A header line to replace: its start and end offsets in the file, and
#: the line to put there.
Replacement = tuple[int, int, bytes]


def ambiguous_header(line: bytes) -> bytes | None:
    """The quoted form of the header ``line`` (``diff --git a/X b/X``, no
    newline) when ``X`` holds a space before a slash: ``diff --git "a/X"
    "b/X"``; else ``None``.

    Git leaves such names unquoted (only control characters, ``"``, ``\\``
    and bytes above 0x7f make it quote), and ``git apply`` cannot split that
    header again ("git diff header lacks filename information when removing
    1 leading pathname component"); for an entry with no ``---``/``+++``
    lines (an empty new or deleted file, a mode change, a binary file) the
    header is all it has.  A quoted name needs no escape here: git would
    have quoted a name that did.  Headers of renames (``X`` and ``Y``
    differ) are left alone: ``rename from``/``rename to`` name them."""
    if not line.startswith(_HEADER):
        return None
    rest = line[len(_HEADER) :]
    if b" /" not in rest:
        return None
    name = rest[: (len(rest) - len(b" b/")) // 2]
    if rest != name + b" b/" + name:
        return None
    return b'diff --git "a/' + name + b'" "b/' + name + b'"'


def quote_headers(path: str, replacements: list[Replacement]) -> int:
    """Put each of ``replacements`` (:func:`ambiguous_header`, in the order
    of the file) in the patch file ``path``: the file is rewritten (same
    mode), streaming, when there is any.

    Returns:
        The number of header lines rewritten.
    Raises:
        OSError: the file cannot be read or rewritten.
    """
    if not replacements:
        return 0
    with open(path, "rb") as handle:
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
