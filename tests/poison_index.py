"""A hostile command's tool: rewrite the stat data of index entries so that
they match the files as they are now, keeping each entry's object id.  git
then takes the (changed) files for unchanged: ``git status`` is clean, and
``git read-tree --reset -u`` leaves them as they are.

Usage (in a worktree): ``python3 poison_index.py <path>...``; index
versions 2 and 3."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys


def main(paths: list[str]) -> None:
    index = subprocess.run(
        ["git", "rev-parse", "--git-path", "index"], capture_output=True, check=True, text=True
    ).stdout.strip()
    data = bytearray(open(index, "rb").read())
    signature, version, count = struct.unpack(">4sLL", data[:12])
    assert signature == b"DIRC" and version in (2, 3), (signature, version)
    wanted = {os.fsencode(p) for p in paths}
    offset = 12
    for _ in range(count):
        flags = struct.unpack(">H", data[offset + 60 : offset + 62])[0]
        start = offset + 62 + (2 if flags & 0x4000 else 0)
        end = data.index(b"\0", start)
        name = bytes(data[start:end])
        if name in wanted:
            st = os.lstat(name)
            fields = (
                int(st.st_ctime), st.st_ctime_ns % 10**9,
                int(st.st_mtime), st.st_mtime_ns % 10**9,
                st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF,
            )  # fmt: skip
            data[offset : offset + 24] = struct.pack(">6L", *fields)
            data[offset + 28 : offset + 40] = struct.pack(
                ">3L", st.st_uid, st.st_gid, st.st_size & 0xFFFFFFFF
            )
        entry = 62 + (2 if flags & 0x4000 else 0) + len(name)
        offset += (entry + 8) & ~7  # NUL padded to a multiple of 8
    body = bytes(data[:-20])
    with open(index, "wb") as handle:
        handle.write(body + hashlib.sha1(body).digest())


if __name__ == "__main__":
    main(sys.argv[1:])
