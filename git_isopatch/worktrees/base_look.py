"""What a base tree's checkout alone makes differ from its commit, looked
at once when it is made or moved (design: The patch, "changes nobody
made"), for every run over it (:func:`.fidelity.look_over_base_tree`),
and its submodules' paths (gitlinks: a change below one is the
submodule's, :meth:`.run_layer.RunLayer.compared`).

A run in a worktree of its own looks before every command
(:func:`.fidelity.look_before_command`); a base tree is never written
after its checkout, so one look serves every run: it is kept in the base
tree's private folder (:data:`BASELINE_FILE`), with the commit it was
found for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..git.admin_files import read_admin_file, replace_admin_file
from ..git.index_entries import index_entries
from ..git.record import Record
from ..git.result import Err, Ok
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..logger import log

#: The file of a base tree's private folder that holds what its look found:
#: each path ended by NUL, after a kind byte (``b``: differs after
#: checkout; ``g``: a gitlink).
BASELINE_FILE = "isopatch-baseline"
_HEADER = b"git-isopatch baseline 2\n"


class BaseLook(Record):
    """What :func:`look_once` found.

    Attributes:
        baseline: the paths the checkout alone makes differ.
        gitlinks: the submodules' paths (index entries of mode 160000).
        known: the look was made (else both are empty for want of it).
    """

    baseline: tuple[bytes, ...] = ()
    gitlinks: tuple[bytes, ...] = ()
    known: bool = False


def look_once(
    path: WorktreePath, admin_dir: GitDirPath, commit: CommitId, *, env: Mapping[str, str]
) -> None:
    """The paths the checkout of the base tree at ``path`` alone makes
    differ from ``commit`` (a conversion of the attributes that does not
    give the blob back, :func:`..git.baseline.read_baseline`; none where
    no attributes apply), kept in ``admin_dir``.  Best effort: without it,
    a run finds none."""
    from ..git.attributes import index_may_track_attributes
    from ..git.baseline import read_baseline
    from ..git.pinned import read_settings
    from .fidelity import attributes_may_apply

    paths: list[bytes] = []
    settings = read_settings(admin_dir, env)
    if index_may_track_attributes(admin_dir) or attributes_may_apply(admin_dir, settings, env):
        looked = read_baseline(
            path, commit, git_dir=admin_dir, env=env, whole=False, conversions=True
        )
        match looked:
            case Ok(found):
                paths = sorted(found.paths)
            case Err(error):
                log.debug("no look at the base tree: %s", error.message())
                return
    links = _gitlinks(admin_dir, len(commit) // 2)
    if links is None:
        return
    listed = [b"b" + p for p in paths] + [b"g" + p for p in links]
    data = _HEADER + commit.encode() + b"\n" + b"".join(p + b"\0" for p in listed)
    try:
        replace_admin_file(os.path.join(admin_dir, BASELINE_FILE), data)
    except OSError as exc:
        log.debug("could not keep the base tree's look: %s", exc)


def _gitlinks(admin_dir: GitDirPath, hash_size: int) -> list[bytes] | None:
    """The paths of the gitlinks of ``admin_dir``'s index (mode 160000, the
    fifth number of an entry's stat data); ``None`` when it cannot be read."""
    entries = index_entries(admin_dir, hash_size)
    if entries is None:
        return None
    return [path for path, meta in entries if meta[24:28] == b"\x00\x00\xe0\x00"]


def look_of(admin_dir: GitDirPath, commit: str) -> BaseLook:
    """What :func:`look_once` found for the base tree whose private folder
    is ``admin_dir``, checked out at ``commit``; an unknown one when none
    is kept for that commit."""
    try:
        data = read_admin_file(os.path.join(admin_dir, BASELINE_FILE), limit=1 << 30)
    except OSError:
        return BaseLook()
    head = _HEADER + commit.encode() + b"\n"
    if not data.startswith(head):
        return BaseLook()
    listed = [path for path in data[len(head) :].split(b"\0") if path]
    baseline = tuple(p[1:] for p in listed if p[:1] == b"b")
    return BaseLook(baseline, tuple(p[1:] for p in listed if p[:1] == b"g"), True)
