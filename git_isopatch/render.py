"""Rendering of a capture result: porcelain v1, JSON and the human summary.

Design: "Porcelain v1".  Kept apart from ``cli.py`` so that the format is
defined (and pinned by tests) in one place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .capture import CaptureResult

#: Porcelain v1 keys, in output order (design: Porcelain v1).
PORCELAIN_KEYS = (
    "base",
    "exit",
    "patch",
    "files",
    "stdout",
    "stderr",
    "worktree",
    "error",
    "error-code",
)

#: Keys whose value is a path (quoted like git quotes paths without ``-z``).
PATH_KEYS = frozenset({"patch", "stdout", "stderr", "worktree"})

_C_ESCAPES = {
    0x07: b"\\a",
    0x08: b"\\b",
    0x09: b"\\t",
    0x0A: b"\\n",
    0x0B: b"\\v",
    0x0C: b"\\f",
    0x0D: b"\\r",
    0x22: b'\\"',
    0x5C: b"\\\\",
}


def quote_c_style(path: bytes) -> bytes:
    """Quote ``path`` the way git quotes paths with ``core.quotePath=true``.

    A path is quoted only when it has to be: when it holds a control byte,
    ``"``, ``\\`` or a byte of 0x80 and above.  Then it is put in double
    quotes with C escapes (``\\t``, ``\\n``, ``\\"``, ``\\\\``, ...) and octal
    ``\\ooo`` for other bytes (git's quote.c, ``quote_c_style``).
    """
    if not any(b < 0x20 or b >= 0x7F or b in (0x22, 0x5C) for b in path):
        return path
    out = bytearray(b'"')
    for b in path:
        if b in _C_ESCAPES:
            out += _C_ESCAPES[b]
        elif b < 0x20 or b >= 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    out += b'"'
    return bytes(out)


def result_fields(result: CaptureResult) -> dict[str, object]:
    """The porcelain/JSON fields of a ``CaptureResult``, in order, absent
    ones left out (design: Porcelain v1)."""
    fields: dict[str, object] = {
        "base": result.base,
        "exit": result.exit_code,
        "patch": result.patch_path,
        "files": result.files,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "worktree": result.worktree_path,
        "error": result.error,
        "error-code": result.error_code,
    }
    return {k: v for k, v in fields.items() if v is not None}


def porcelain(fields: dict[str, object], *, nul: bool) -> bytes:
    """Porcelain v1 records: ``key value`` each ended by ``\\n``, or by NUL
    with ``nul`` (then nothing is quoted)."""
    end = b"\0" if nul else b"\n"
    out = bytearray()
    for key in PORCELAIN_KEYS:
        if key not in fields:
            continue
        value = fields[key]
        raw = os.fsencode(value) if isinstance(value, str) else str(value).encode()
        if key in PATH_KEYS and not nul:
            raw = quote_c_style(raw)
        elif key == "error" and not nul:
            raw = raw.replace(b"\n", b" ")
        out += key.encode() + b" " + raw + end
    return bytes(out)


def as_json(fields: dict[str, object]) -> bytes:
    """One JSON object with the porcelain fields, and a newline."""
    return json.dumps(fields, ensure_ascii=True).encode() + b"\n"


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def summary_lines(result: CaptureResult) -> Iterable[str]:
    """The human summary for stderr (design: the first line is
    ``isopatch: 3 files changed, exit 0, patch <path>``)."""
    files = result.files
    patch = result.patch_path
    exit_code = result.exit_code
    if patch is not None:
        yield (
            f"isopatch: {plural(files or 0, 'file', 'files')} changed, "
            f"exit {exit_code}, patch {patch}"
        )
    worktree = result.worktree_path
    if worktree is not None and patch is not None:
        yield f"isopatch: worktree kept at {worktree}"
