"""Which idle base tree a run moves to its commit, rather than make one
(:mod:`.base_trees`): the one with the fewest paths that differ, when few
of its files do or no more base trees may be kept.  The difference found
is the one the move writes (:func:`..git.moved_checkout.move_by_difference`):
``git diff-tree`` runs once for each idle base tree, never again.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence

from ..git.admin_files import read_admin_file
from ..git.attributes import own_attributes_file
from ..git.moved_checkout import Difference, changed_paths
from ..git.pinned import ATTRIBUTES_FILE
from ..git.result import Ok
from ..git.types import CommitId, GitDirPath

#: An idle base tree is moved rather than a new one made when at most one
#: in this many of its files differ from the commit wanted, or at most
#: :data:`NEAR_FILES`.
NEAR = 4
NEAR_FILES = 1000


def nearest(
    idle: Sequence[tuple[CommitId, GitDirPath, str]],
    commit: CommitId,
    *,
    room: bool,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    settings: Mapping[str, str | None],
) -> tuple[int, Difference] | None:
    """Which of the idle base trees ``idle`` (each its commit, private
    folder and path) to move to ``commit``, and what differs: the one with the
    fewest paths to write, when few of its files differ (:data:`NEAR`) or
    there is no ``room`` for another base tree, never one whose move would
    read the ``core.attributesFile`` of ``settings`` (as
    :func:`..git.pinned.read_settings` reads them) from its own files
    (:func:`_reads_own_attributes`); ``None``: make one."""
    best: tuple[int, Difference] | None = None
    attributes_file = settings.get(ATTRIBUTES_FILE)
    for number, (old, _, path) in enumerate(idle):
        match changed_paths(git_dir, old, commit, env=env):
            case Ok(difference) if best is None or len(difference.paths) < len(best[1].paths):
                if not _reads_own_attributes(path, difference, attributes_file):
                    best = (number, difference)
            case _:
                pass
    if best is None:
        return None
    near = max(_index_entries(idle[best[0]][1]) // NEAR, NEAR_FILES)
    return best if len(best[1].paths) <= near or not room else None


def _index_entries(admin_dir: GitDirPath) -> int:
    """The number of entries of a base tree's index (its header), 0 when
    unknown."""
    try:
        header = read_admin_file(os.path.join(admin_dir, "index"), limit=12)
        signature, _, count = struct.unpack(">4sII", header)
    except (OSError, struct.error):
        return 0
    return count if signature == b"DIRC" else 0


def _reads_own_attributes(top: str, difference: Difference, name: str | None) -> bool:
    """Whether moving the base tree at ``top`` by ``difference`` would
    have git read the relative ``core.attributesFile`` ``name`` (read from
    the worktree's top on the first look at an attribute) from the base
    tree itself: a file there, or one the move writes.  A new checkout, into an empty folder, reads
    none; a move would convert what it writes by the old commit's rules,
    or, moved whole, every file by the new one's."""
    path = own_attributes_file(name)
    if path is None:  # outside: a new checkout reads it too
        return False
    if any(changed == path for changed, _, _ in difference.paths):
        return True
    return os.path.lexists(os.path.join(top, os.fsdecode(path)))
