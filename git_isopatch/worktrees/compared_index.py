"""The index a run's extraction reads over a base tree (design: procedure
step 6): while the run's own index is still the copy of the base tree's,
an index holding only what git reads to look at the paths the run
compares (:meth:`.run_layer.RunLayer.compared`), their entries copied from
the base tree's index with their stat data
(:func:`..git.partial_index.partial_index`, through the table the base
tree's look keeps, :data:`.base_look.INDEX_TABLE`).  The extraction's
git then reads a few entries, and writes a few when it marks new files
intent-to-add, not one for every file of the repository; the patch is
the same.  Anything else keeps the run's own index: an index the command
or a snapshot's difference rewrote (its entries are the run's, not the
base tree's), a session's, a git that folds case, a base tree without a
table that matches its index.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from ..git.partial_index import partial_index
from ..git.types import CommitId, GitDirPath
from .base_look import INDEX_TABLE
from .run_layer import RunLayer


def compared_index(
    layer: RunLayer,
    admin_dir: GitDirPath,
    commit: CommitId,
    paths: Sequence[bytes] | None,
    *,
    folds_case: bool,
) -> str | None:
    """A new index file in the run's private git folder ``admin_dir``
    holding what git reads of the base tree's index to look at ``paths``,
    with the time of the run's own index (git takes an entry whose file is
    not older than its index for "racily clean", and reads that file
    again: the same ones as with the run's own); ``None`` when the run's
    own index is to be read (see the module's text), or there is no path
    to compare.  Best effort; :func:`drop_compared_index` removes it."""
    if not paths or folds_case or layer.index is None:
        return None
    if not layer.index_is_base_trees(admin_dir, commit):
        return None
    data = partial_index(
        layer.base_tree_index,
        os.path.join(layer.pin.tree.admin_dir, INDEX_TABLE),
        paths,
        len(commit) // 2,
    )
    if data is None:
        return None
    path = os.path.join(admin_dir, f"index.isopatch-{os.urandom(6).hex()}")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(path, flags, 0o600), "wb") as handle:
            handle.write(data)
        made = layer.index[2]
        os.utime(path, ns=(made, made), follow_symlinks=False)
    except OSError:
        drop_compared_index(path)
        return None
    return path


def drop_compared_index(path: str | None) -> None:
    """Remove :func:`compared_index`'s file, and a lock git left beside it
    (best effort, never raises)."""
    if path is None:
        return
    for name in (path, f"{path}.lock"):
        with contextlib.suppress(OSError):
            os.unlink(name)
