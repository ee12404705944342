"""The Git LFS objects a sandboxed run left in its copy-on-write view of
the repository's LFS store (git-lfs's clean filter writes there when
git-isopatch's own git, or the command's, reads a changed file tracked by
LFS), brought into the real store: the patch's pointers lead to them, and
``git apply`` of the patch (git-lfs's smudge) reads them there, as after
an unconfined run.

What the layer holds is the command's: its folders are read a component at
a time, never through a link, its files opened without blocking, regular
files only (:mod:`.untrusted`); an object no pointer the run's patches add
names stays behind (the command could leave a sparse file of a terabyte
there, named by its hash, at no cost), and so does one of another size
than the pointer's or whose content does not hash to its name; one that
goes is copied with its holes (:func:`..git.lfs_store.store_object`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..git.lfs_store import STORE, has_object, is_oid, store_object
from .untrusted import list_beneath, open_beneath

if TYPE_CHECKING:
    from .namespaces import Namespaces

#: Names of the layer's store looked at before it stops: far more objects
#: than one run's files change.
LOOKED_AT_MOST = 100_000


#: The line a patch adds to a Git LFS pointer naming its object, and the
#: pointer's size, added or context (git-lfs writes ``oid`` then ``size``).
_ADDED_OID = re.compile(rb"\n\+oid sha256:([0-9a-f]{64})\n[+ ]size ([0-9]{1,20})(?=\n)")


def named_objects(patches: Sequence[str]) -> dict[str, set[int]]:
    """The objects the pointers ``patches`` add name, each with the sizes
    they give it (read a megabyte at a time: a line of a patch may be as
    long as a file)."""
    named: dict[str, set[int]] = {}
    for patch in patches:
        with contextlib.suppress(OSError), open(patch, "rb") as handle:
            tail = b"\n"
            while chunk := handle.read(1 << 20):
                text = tail + chunk
                for match in _ADDED_OID.finditer(text):
                    named.setdefault(match.group(1).decode(), set()).add(int(match.group(2)))
                tail = text[-160:]
    return named


def bring_lfs_objects_home(box: Namespaces, common_dir: str, patches: Sequence[str]) -> int:
    """Copy the objects the layer of ``box`` holds in the LFS store of
    ``common_dir``, that a pointer ``patches`` add names and the real store
    lacks, into it; how many were."""
    place = box.place(os.path.join(common_dir, STORE))
    if place is None:  # not copy-on-write: git-lfs wrote the real store
        return 0
    root, store = place
    brought, looked = 0, 0
    named: dict[str, set[int]] | None = None  # the patches read once an object is there
    for first in list_beneath(root, store):
        for second in list_beneath(root, os.path.join(store, first)):
            folder = os.path.join(store, first, second)
            for oid in list_beneath(root, folder):
                looked += 1
                if looked > LOOKED_AT_MOST:
                    return brought
                if not is_oid(oid) or not oid.startswith(first + second):
                    continue
                named = named_objects(patches) if named is None else named
                if len(named.get(oid, ())) != 1 or has_object(common_dir, oid):
                    continue
                fd = open_beneath(root, os.path.join(folder, oid))
                if fd is None:
                    continue
                try:
                    brought += store_object(common_dir, oid, fd, *named[oid])
                finally:
                    os.close(fd)
    return brought
