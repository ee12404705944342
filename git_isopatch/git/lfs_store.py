"""The repository's Git LFS store, as git-lfs lays it out: each object at
``lfs/objects/<oid[:2]>/<oid[2:4]>/<oid>`` in the common git directory,
named by the SHA-256 of its content.

:func:`store_object` puts one there from an open file, checked against its
name as it is copied and against the size its pointer gives before: a
content that does not hash to the name is never stored, so a store filled
from what a command left holds only what git-lfs would have written.
"""

from __future__ import annotations

import contextlib
import os

from .temporary import make_file

#: The store, relative to the common git directory.
STORE = os.path.join("lfs", "objects")

#: git-lfs's own folder for files on their way into the store.
STORE_TMP = os.path.join("lfs", "tmp")

#: The digits of an object's name.
HEX_DIGITS = frozenset("0123456789abcdef")


def is_oid(name: str) -> bool:
    """Whether ``name`` names an object: 64 lowercase hexadecimal digits."""
    return len(name) == 64 and set(name) <= HEX_DIGITS


def object_path(oid: str) -> str:
    """Where the object ``oid`` lies, relative to the store."""
    return os.path.join(oid[:2], oid[2:4], oid)


def has_object(common_dir: str, oid: str) -> bool:
    """Whether the store of ``common_dir`` holds ``oid`` (or something at its place)."""
    return os.path.lexists(os.path.join(common_dir, STORE, object_path(oid)))


#: A block of zeros as :func:`store_object` copies it: a hole of the copy.
_ZEROS = bytes(1 << 20)


def store_object(common_dir: str, oid: str, source: int, size: int) -> bool:
    """Copy the open file ``source`` into the store of ``common_dir`` as
    the object ``oid`` of ``size`` bytes (its pointer's), through a file in
    git-lfs's ``lfs/tmp`` linked into place (one already there stays);
    ``False`` when it holds another size, its content does not hash to
    ``oid`` or it cannot be written (nothing is then left).  Blocks of
    zeros are left holes, as ``cp --sparse=always`` leaves them: a sparse
    file stays sparse and fills no disk.  ``hashlib`` (OpenSSL's) loads
    here, in a run that stores one."""
    import hashlib

    final = os.path.join(common_dir, STORE, object_path(oid))
    temp = None
    try:
        if os.fstat(source).st_size != size:
            return False
        tmp = os.path.join(common_dir, STORE_TMP)
        os.makedirs(tmp, exist_ok=True)
        fd, temp = make_file(tmp, "isopatch-")
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            while chunk := os.read(source, len(_ZEROS)):
                digest.update(chunk)
                if chunk == _ZEROS[: len(chunk)]:
                    out.seek(len(chunk), os.SEEK_CUR)
                else:
                    out.write(chunk)
            out.truncate()  # the holes at the end too
            os.fchmod(out.fileno(), 0o644)
        if digest.hexdigest() != oid:
            return False
        os.makedirs(os.path.dirname(final), exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.link(temp, final)
        return True
    except OSError:
        return False
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
