"""The Git LFS objects a sandboxed run left in its copy-on-write view of
the repository's LFS store (git-lfs's clean filter writes there when
git-isopatch's own git, or the command's, reads a changed file tracked by
LFS), brought into the real store: the patch's pointers lead to them, and
``git apply`` of the patch (git-lfs's smudge) reads them there, as after
an unconfined run.

What the layer holds is the command's: its folders are read a component at
a time, never through a link, its files opened without blocking, regular
files only (:mod:`.untrusted`); an object whose content does not hash to
its name stays behind (:func:`..git.lfs_store.store_object`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..git.lfs_store import STORE, has_object, is_oid, store_object
from .untrusted import list_beneath, open_beneath

if TYPE_CHECKING:
    from .namespaces import Namespaces

#: Names of the layer's store looked at before it stops: far more objects
#: than one run's files change.
LOOKED_AT_MOST = 100_000


def bring_lfs_objects_home(box: Namespaces, common_dir: str) -> int:
    """Copy the objects the layer of ``box`` holds in the LFS store of
    ``common_dir`` and the real store lacks into it; how many were."""
    place = box.place(os.path.join(common_dir, STORE))
    if place is None:  # not copy-on-write: git-lfs wrote the real store
        return 0
    root, store = place
    brought, looked = 0, 0
    for first in list_beneath(root, store):
        for second in list_beneath(root, os.path.join(store, first)):
            folder = os.path.join(store, first, second)
            for oid in list_beneath(root, folder):
                looked += 1
                if looked > LOOKED_AT_MOST:
                    return brought
                if not is_oid(oid) or not oid.startswith(first + second):
                    continue
                if has_object(common_dir, oid):
                    continue
                fd = open_beneath(root, os.path.join(folder, oid))
                if fd is None:
                    continue
                try:
                    brought += store_object(common_dir, oid, fd)
                finally:
                    os.close(fd)
    return brought
