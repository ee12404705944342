"""What a sandboxed command wrote in its copy-on-write view of the object
stores that git-isopatch's own git reads after it (the repository's, and
those its ``objects/info/alternates`` names): git reads an object by its
name and never checks that the content hashes to it, so a command that
rewrote the loose object of a base blob to hold its own edit, and made
that edit in the worktree, left the extraction's ``git diff`` nothing to
show.

:func:`forged_objects` names what git must not read there: a loose object
whose content does not give its name, a pack or pack index that differs
from the store's own of that name, a new pack index that its pack does
not give (``git verify-pack``, inside the namespaces), an
``info/alternates`` the store does not hold, anything but a file, a
folder or a whiteout.  The indexes a command may write beside them
(``commit-graph``, ``multi-pack-index``, reverse indexes) are not read at
all (:data:`..git.pinned.NO_STORE_INDEXES`).

What a layer holds is the command's: read as :mod:`.untrusted` reads it.

Layering: knows nothing of the command line.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..git.process import Spawn
from ..git.result import Ok
from ..git.run import run_git
from .layer_writes import is_whiteout
from .untrusted import chunks_beneath, lstat_beneath, walk

if TYPE_CHECKING:
    from .namespaces import Namespaces

#: A loose object's name in its store (SHA-1 or SHA-256).
_LOOSE = re.compile(r"[0-9a-f]{2}/(?:[0-9a-f]{38}|[0-9a-f]{62})")

#: How deep git follows ``objects/info/alternates`` (sha1-file.c).
ALTERNATES_DEPTH = 5

_CHUNK = 1 << 20


def real_stores(objects: str) -> list[str]:
    """``objects`` and the object stores its ``info/alternates`` names, as
    git follows them (relative to the store, :data:`ALTERNATES_DEPTH`
    deep), each a real path: the files read are the user's own."""
    found: list[str] = []
    todo = [(os.path.realpath(objects), 0)]
    while todo:
        store, depth = todo.pop(0)
        if store in found:
            continue
        found.append(store)
        if depth >= ALTERNATES_DEPTH:
            continue
        try:
            with open(os.path.join(store, "info", "alternates"), "rb") as handle:
                lines = handle.read(1 << 16).splitlines()
        except OSError:
            continue
        for line in lines:
            if line.strip() and not line.startswith(b"#"):
                path = os.path.join(store, os.fsdecode(line.strip()))
                todo.append((os.path.realpath(path), depth + 1))
    return found


def forged_objects(
    box: Namespaces, common_dir: str, env: Mapping[str, str], spawn: Spawn
) -> list[str]:
    """What the command wrote in its view of the object stores of the
    repository of ``common_dir`` that git must not read (the module says
    which), by their paths; a store whose layer holds more than
    :func:`.untrusted.walk` looks at is named whole.  A new pack index is
    checked by ``git verify-pack`` with ``env``, inside (``spawn``)."""

    def verify(index: str) -> bool:
        return isinstance(run_git(["verify-pack", index], env=env, cwd="/", spawn=spawn), Ok)

    found: list[str] = []
    for store in real_stores(os.path.join(common_dir, "objects")):
        place = box.place(store)
        if place is None:
            continue
        root, relative = place
        entries, complete = walk(root, relative)
        if not complete:
            found.append(store)
        for name, mode in entries:
            if _forged(name, mode, store, root, os.path.join(relative, name), verify):
                found.append(os.path.join(store, name))
    return sorted(found)


def unsafe_in_git_dir(
    box: Namespaces, common_dir: str, admin_dir: str, env: Mapping[str, str], spawn: Spawn
) -> list[str]:
    """What git must not meet in the git directory of ``common_dir`` and
    the worktree's private folder ``admin_dir``, as the command left them:
    :func:`.layer_state.planted_in_git_dir`, else :func:`forged_objects`."""
    from .layer_state import planted_in_git_dir

    planted = planted_in_git_dir(box, common_dir, (admin_dir,))
    if planted:
        return planted
    own = env.get("GIT_OBJECT_DIRECTORY")  # a session's, in ``admin_dir``: really written
    return forged_objects(box, common_dir, env, spawn) + (forged_in(own, env, spawn) if own else [])


def forged_in(store: str, env: Mapping[str, str], spawn: Spawn) -> list[str]:
    """What git must not read in the object store ``store``, all of which
    the command could write for real (a session's, in the worktree's
    private folder): every file is looked at as a new one of a layer is,
    the pack indexes by one ``git verify-pack``."""
    entries, complete = walk(store)
    found = [] if complete else [store]
    indexes: list[str] = []

    def verify(index: str) -> bool:  # checked at once below
        indexes.append(os.path.join(store, os.path.relpath(index, os.devnull)))
        return True

    for name, mode in entries:
        if _forged(name, mode, os.devnull, store, name, verify):  # no file is the store's own
            found.append(os.path.join(store, name))
    done = run_git(["verify-pack", *indexes], env=env, cwd="/", spawn=spawn) if indexes else None
    if done is not None and not isinstance(done, Ok):
        found += indexes
    return sorted(found)


def _forged(
    name: str, mode: int, store: str, root: str, path: str, verify: Callable[[str], bool]
) -> bool:
    """The entry ``name`` of the store ``store`` (of mode ``mode``, at
    ``path`` in the layer ``root``) is one git must not read."""
    if stat.S_ISDIR(mode):
        return False
    if not stat.S_ISREG(mode):
        st = lstat_beneath(root, path)
        return st is None or not is_whiteout(st)
    if _LOOSE.fullmatch(name):
        return _object_name(root, path) != name.replace("/", "")
    real = os.path.join(store, name)
    if name == "info/alternates" or name.endswith((".pack", ".idx")):
        if os.path.lexists(real):
            return not _same(root, path, real)
        return name == "info/alternates" or (name.endswith(".idx") and not verify(real))
    return False


def _same(root: str, path: str, real: str) -> bool:
    """The file ``path`` of the layer ``root`` holds what the file
    ``real`` of the store does (a copy up, as ``git`` freshening an
    object makes)."""
    st = lstat_beneath(root, path)
    try:
        if st is None or st.st_size != os.path.getsize(real):
            return False
        with open(real, "rb") as handle:
            for chunk in chunks_beneath(root, path):
                if handle.read(len(chunk)) != chunk:
                    return False
            return not handle.read(1)
    except OSError:
        return False


def _object_name(root: str, path: str) -> str | None:
    """The name the loose object at ``path`` of ``root`` has by its
    content (``None``: no whole zlib stream), inflated a bounded chunk at
    a time (``hashlib`` and ``zlib`` loaded then: a run whose command
    wrote no object pays nothing for them)."""
    import hashlib
    import zlib

    inflate = zlib.decompressobj()
    digest = hashlib.sha256() if len(path.rpartition("/")[2]) == 62 else hashlib.sha1()
    try:
        for chunk in chunks_beneath(root, path):
            while chunk:
                digest.update(inflate.decompress(chunk, _CHUNK))
                chunk = inflate.unconsumed_tail
    except zlib.error:
        return None
    return digest.hexdigest() if inflate.eof and not inflate.unused_data else None
