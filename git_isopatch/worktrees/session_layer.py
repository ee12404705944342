"""A sandboxed session over its base tree: its run layer kept between steps.

A session's first sandboxed step runs over the base tree of its base, as
any sandboxed run does (:mod:`.run_layer`), but its layer (the upper and
work folders, :func:`.sessions.layer_folder`) is made in the folder made for the
session's worktree, beside its state, and outlives the step: the session
costs what it changed.  The session pins the base tree beyond its steps'
processes (:func:`.lock.stand_on`): while it lives no run moves or
removes the base tree, ``prune`` and expiry leave it.  Each later step
pins the same base tree again (:func:`pin_again`) and mounts the same
layer over it (:func:`layer_again`) at the same place.  A base tree that
is gone (the repository moved, its folder deleted) leaves the session
broken; nothing of the session is lost.

Design: procedure steps 3 and 7, for a session.
"""

from __future__ import annotations

import contextlib
import os
import time

from ..git.index_entries import changed_entries
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..sandbox.layers import WorktreeOverlay
from ..sandbox.touched import touched_paths
from .base_trees import BaseTrees, Pin, base_trees
from .lock import open_pin, try_flock
from .run_layer import RunLayer, dot_git_folder
from .sessions import STOWED, layer_folder, state_dir


def pin_again(trees: BaseTrees, admin_dir: str, commit: CommitId) -> Pin | None:
    """The base tree whose private folder is named as ``admin_dir`` is
    (``worktrees/<name>``: a moved repository's is found), pinned, when
    it is there, ready and at ``commit``; ``None``: it is gone.

    Raises:
        IsopatchError: ``lock-timeout``.
        LockWaitInterrupted: a signal arrived while waiting.
    """
    name = os.path.basename(admin_dir.rstrip("/"))
    with trees.lock.held(trees.repository.common_dir):
        for tree in base_trees(trees.repository, trees.store):
            if os.path.basename(tree.admin_dir.rstrip("/")) != name:
                continue
            if tree.gone or not tree.record.ready or tree.record.commit != commit:
                return None
            fd = open_pin(tree.admin_dir)
            if fd is None:
                return None
            if not try_flock(fd, exclusive=False):
                os.close(fd)
                return None
            record = tree.record._replace(used=time.time())
            with contextlib.suppress(OSError):
                trees.store.save_base(tree.admin_dir, record)
            return Pin(tree._replace(record=record), fd, made=False)
    return None


def layer_again(pin: Pin, worktree: WorktreePath, container: str) -> RunLayer:
    """The session's layer over the base tree of ``pin``, mounted at
    ``worktree`` as at its first step.  Its index is the session's, not
    the base tree's copy: the patch compares what the index changed too
    (:meth:`.run_layer.RunLayer.compared`), from the index the last step
    left (still stowed: the command has not run), not from the base
    tree's: an entry the step puts back to the base tree's (an
    unpopulated submodule's, which no file shows) changed all the same.
    So are the paths the layer holds before the step (:func:`_held`)."""
    folder = layer_folder(container)
    upper, work = os.path.join(folder, "upper"), os.path.join(folder, "work")
    overlay = WorktreeOverlay(worktree, (pin.tree.path, worktree), upper, work)
    tree = pin.tree
    stowed = GitDirPath(os.path.join(state_dir(container), STOWED))
    left = changed_entries(stowed, tree.admin_dir, len(tree.record.commit) // 2)
    held = _held(upper, (worktree, tree.path))
    started = None if left is None or held is None else frozenset({*left, *held})
    return RunLayer(pin, overlay, None, started)


def _held(upper: str, lowers: tuple[str, ...]) -> frozenset[bytes] | None:
    """The paths the session's upper layer holds before a step, over
    ``lowers`` (:func:`..sandbox.touched.touched_paths`, which reads it
    as a command's layer: the earlier steps' commands wrote it; a ``.git``
    stands for its folder); ``None`` when it cannot be listed whole.  A
    file an earlier step made where no lower layer holds one leaves no
    trace in the layer once a step removes it (no whiteout): that step
    changed it all the same."""
    try:
        touched = touched_paths(upper, lowers)
    except OSError:
        return None
    return frozenset(map(dot_git_folder, touched.paths)) if touched.complete else None
