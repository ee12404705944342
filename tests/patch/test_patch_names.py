"""A folder whose name ends with a space (``"dir /file"``): git leaves the
name unquoted in the ``diff --git`` header, and ``git apply`` cannot split
that header again when nothing else in the entry names the file (found by
the round-trip property test; see ``git/diff.py``,
``ambiguous_header``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from test_patch_roundtrip import _check_roundtrip


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def test_names_with_a_space_before_a_slash_round_trip(env, tmp_path: Path) -> None:
    tree = {
        "dir /tool.sh": b"#!/bin/sh\n",
        "old /gone": b"",
        "from /moved": b"a file long enough to be found again after a rename\n" * 3,
        "0": b"",
    }

    def write(path: str, data: bytes, exec_bit: bool = False) -> dict:
        return {"kind": "write", "path": _b64(path), "data": _b64(data), "exec": exec_bit}

    changes = [
        write(" /0", b""),  # the example hypothesis found
        write("new /empty", b""),
        write("bin /blob", bytes(range(256))),
        {"kind": "chmod", "path": _b64("dir /tool.sh"), "exec": True},
        {"kind": "delete", "path": _b64("old /gone")},
        {"kind": "rename", "path": _b64("from /moved"), "to": _b64("to /moved")},
    ]
    _check_roundtrip(tmp_path, env, tree, changes)


@pytest.mark.parametrize("chunk_size", [1, 7, 13, 64, 1 << 20])
def test_header_scan_is_the_same_at_any_chunk_size(tmp_path, chunk_size: int) -> None:
    """The one read of the patch (bounded memory, a chunk at a time) finds
    exactly the headers to quote that a whole-file line split finds, and
    counts every entry, at any chunk size."""
    from git_isopatch.git.patch.headers import ambiguous_header
    from git_isopatch.git.patch.paths import read_patch

    patch = (
        b"diff --git a/x /y b/x /y\nnew file mode 100644\n"
        b"diff --git a/plain b/plain\nindex 1..2\n--- a/plain\n+++ b/plain\n"
        b"@@ -1 +1 @@\n-diff --git a/not a header\n+x\n"
        b"diff --git a/z /w b/z /w\ndeleted file mode 100644\n"
        b"diff --git a/last b/last"
    )
    expected = []
    offset = 0
    for line in patch.split(b"\n"):
        quoted = ambiguous_header(line)
        if quoted is not None:
            expected.append((offset, offset + len(line), quoted))
        offset += len(line) + 1
    (tmp_path / "p").write_bytes(patch)
    contents, replacements = read_patch(str(tmp_path / "p"), chunk_size)
    assert replacements == expected and len(expected) == 2
    assert contents.files == 4
    assert (contents.insertions, contents.deletions) == (1, 1)
