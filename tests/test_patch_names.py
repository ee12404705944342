"""A folder whose name ends with a space (``"dir /file"``): git leaves the
name unquoted in the ``diff --git`` header, and ``git apply`` cannot split
that header again when nothing else in the entry names the file (found by
the round-trip property test; see ``git/diff.py``,
``quote_ambiguous_headers``)."""

from __future__ import annotations

import base64
from pathlib import Path

from test_roundtrip import _check_roundtrip


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
