"""A checked-out worktree moved to another commit by the difference
between the two (a base tree, :mod:`..worktrees.base_trees`): what it
costs grows with the paths that differ, not with the repository.

``git checkout --detach`` reads the whole index, looks at every file
(``lstat``) and writes the whole index again.  Here git reads and writes
an index holding the entries of the paths that differ alone (``git
checkout --no-overlay <new> -- <paths>``: it writes those files, removes
those ``<new>`` lacks with the folders they empty, and stats what it
wrote; ``git read-tree -m -u`` would walk both commits' whole trees),
whose new entries then take the old ones' places in the whole index
(:mod:`.index_splice`); ``HEAD`` is moved by ``git update-ref``.  Where
that cannot be (a ``.gitattributes`` or the top's ``.lfsconfig``
differs: files neither commit changes may convert otherwise, and are
written again; a folder becomes a
gitlink: git takes the folder as it finds it, the old files in it; a
sparse checkout;
an index that is not of version 2 or whose table is not its own; more
paths than :data:`MOST_PATHS`), the caller moves the worktree whole.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from .admin_files import read_admin_file, replace_admin_file
from .checkouts import CHECKOUT_CONFIG, DIFF_TREE, without_index
from .index_entries import leading_folders
from .index_splice import (
    IndexLayout,
    Spliced,
    entries_index,
    entry_numbers,
    index_layout,
    spliced_index,
)
from .record import Record
from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .temporary import make_file
from .types import CommitId, GitDirPath, WorktreePath


class Whole(Record):
    """A move that cannot be made by the difference: the worktree is moved
    whole, with ``rewrite`` (a ``.gitattributes`` or the ``.lfsconfig``
    differs) every file written again (:func:`.checkouts.check_out_worktree`)."""

    rewrite: bool = False


#: Checks out the paths read from its input as a commit holds them, the
#: index's entries of those it lacks removed with their files.
_CHECKOUT = [
    *("checkout", "--quiet", "--no-overlay", "--no-recurse-submodules"),
    *("--pathspec-from-file=-", "--pathspec-file-nul"),
]
#: The most paths moved by the difference: ``git checkout`` matches each
#: entry against every path named (1000 paths cost it some 90 ms of CPU,
#: 5000 two seconds), when a whole move of 50,000 files costs 150 ms.
MOST_PATHS = 500
#: The mode of a path a commit lacks, as ``git diff-tree --raw`` says.
_NO_MODE = b"000000"
#: The mode of a gitlink.
_GITLINK = 0o160000


class Difference(Record):
    """What differs between the trees of ``old`` and another commit
    (:func:`changed_paths`): ``(path, in old, mode in the other)`` of each
    path whose entry differs (a mode of 0: not in the other)."""

    old: CommitId
    paths: tuple[tuple[bytes, bool, int], ...]


def changed_paths(
    git_dir: GitDirPath, old: CommitId, new: CommitId, *, env: Mapping[str, str]
) -> GitResult[Difference]:
    """What differs between the trees of ``old`` and ``new`` (``git
    diff-tree -r --raw``), gitlinks too whatever ``ignore`` a
    ``.gitmodules`` gives them: what a move from one to the other writes."""
    args = [f"--git-dir={git_dir}", *DIFF_TREE, "-z", "--raw"]
    match run_git([*args, old, new, "--"], env=without_index(env, git_dir)):
        case Ok(output):
            fields = output.split(b"\0")
        case Err() as err:
            return err
    found = []
    for meta, path in zip(fields[0:-1:2], fields[1::2], strict=True):
        modes = meta.split(b" ", 2)
        found.append((path, modes[0] != b":" + _NO_MODE, int(modes[1], 8)))
    return Ok(Difference(old, tuple(found)))


def move_by_difference(
    admin_dir: GitDirPath,
    worktree: WorktreePath,
    difference: Difference,
    new: CommitId,
    table: bytes,
    *,
    env: Mapping[str, str],
) -> GitResult[Spliced] | Whole:
    """Move the worktree whose private folder is ``admin_dir``, a clean
    checkout of ``difference.old`` (its ``HEAD``, else the move fails), to
    ``new``; ``table`` is its index's table
    (:func:`.partial_index.index_table`).  :class:`Whole` when it cannot be
    so (nothing changed yet); an error once it may have changed (move it
    whole, discarding what differs)."""
    changed = list(difference.paths)
    if any(_converts_others(path) for path, _, _ in changed):
        return Whole(rewrite=True)
    if len(changed) > MOST_PATHS or _folder_to_gitlink(changed):
        return Whole()
    sparse = os.path.lexists(os.path.join(admin_dir, "info", "sparse-checkout"))
    try:
        data = read_admin_file(os.path.join(admin_dir, "index"), limit=1 << 32)
    except OSError:
        return Whole()
    layout = index_layout(data, table, len(new) // 2)
    if sparse or layout is None:
        return Whole()
    removed = entry_numbers(layout, [path for path, before, _ in changed if before])
    if removed is None:
        return Whole()
    moved = _spliced(admin_dir, worktree, new, layout, removed, changed, env)
    if isinstance(moved, Err):
        return moved
    args = [f"--git-dir={admin_dir}", f"--work-tree={worktree}", "-C", worktree]
    old = difference.old
    match run_git([*args, "update-ref", "--no-deref", "HEAD", new, old], env=env):
        case Err() as err:
            return err
    return Ok(moved or Spliced((data,), table, frozenset(), ()))


def _converts_others(path: bytes) -> bool:
    """Whether a change of ``path`` may change how files it leaves alone
    are checked out: a ``.gitattributes``, or the ``.lfsconfig`` git-lfs
    reads at the top (its ``lfs.fetchexclude`` leaves files as pointers)."""
    return path == b".lfsconfig" or path.rsplit(b"/", 1)[-1] == b".gitattributes"


def _spliced(
    admin_dir: GitDirPath,
    worktree: WorktreePath,
    new: CommitId,
    layout: IndexLayout,
    removed: list[int],
    changed: list[tuple[bytes, bool, int]],
    env: Mapping[str, str],
) -> Spliced | Err[GitError] | None:
    """Check out the ``changed`` paths of ``new`` through an index holding
    their entries alone, and write the whole index with its entries
    ``removed`` replaced by theirs; ``None`` when none changed."""
    if not changed:
        return None
    try:
        fd, index = make_file(admin_dir, "index.isopatch-move-")
    except OSError as exc:
        return Err(GitError(reason=f"cannot write an index: {exc.strerror}", errno=exc.errno))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(entries_index(layout, removed))
        args = [f"--git-dir={admin_dir}", f"--work-tree={worktree}", "-C", worktree]
        paths = [path for path, _, _ in changed]
        match run_git(
            ["--literal-pathspecs", *args, *_CHECKOUT, new],
            env={**env, "GIT_INDEX_FILE": index},
            config=CHECKOUT_CONFIG,
            input=b"".join(path + b"\0" for path in _pathspecs(changed)),
        ):
            case Err() as err:
                return err
        spliced = spliced_index(layout, removed, read_admin_file(index, 1 << 32), paths)
        if spliced is None:
            return Err(GitError(reason="the index of the difference is not of version 2"))
        replace_admin_file(os.path.join(admin_dir, "index"), spliced.index)
    except OSError as exc:
        return Err(GitError(reason=f"cannot write the index: {exc.strerror}", errno=exc.errno))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index)
    return spliced


def _pathspecs(changed: list[tuple[bytes, bool, int]]) -> list[bytes]:
    """The paths to name to ``git checkout``: all but those below a path
    that becomes a file (its entry replaces theirs, and its checkout
    removes their folder: named, they would match nothing)."""
    files = {path for path, _, after in changed if after}
    return [
        path
        for path, _, after in changed
        if after or not any(folder in files for folder in leading_folders(path))
    ]


def _folder_to_gitlink(changed: list[tuple[bytes, bool, int]]) -> bool:
    """Whether a path becomes a gitlink where a folder of ``changed`` paths
    was: git checkout then drops their entries for the gitlink's, their
    files left in its folder."""
    links = {path for path, _, after in changed if after == _GITLINK}
    return bool(links) and any(
        folder in links for path, before, _ in changed if before for folder in leading_folders(path)
    )
