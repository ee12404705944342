"""Checkouts git-isopatch makes outside the user's work tree: a base
tree's, and its move to another commit (:mod:`..worktrees.base_trees`);
a snapshot's difference from a base tree's commit, and a kept run's files
(:mod:`..worktrees.run_layer`).  No hook runs, checkout is parallel
(:data:`.worktree.WORKTREE_ADD_CONFIG`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping

from .index_entries import leading_folders
from .progress import run_git_with_progress
from .record import Record
from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, WorktreePath
from .worktree import WORKTREE_ADD_CONFIG

#: :data:`.worktree.WORKTREE_ADD_CONFIG`, and a whole index in one file (no
#: ``sharedindex.*`` beside it, no sparse directory entries): a base
#: tree's index is copied as each run's own (one file) and read in process
#: (:mod:`.index_entries`); one git writes anew is of version 2 whatever
#: the user's ``index.version`` or ``feature.manyFiles`` (version 4 stores
#: each path as the difference from the one before: no entry is read or
#: replaced alone, :mod:`.partial_index`, :mod:`.index_splice`), with its
#: checksum (``feature.manyFiles`` sets ``index.skipHash`` from git 2.40:
#: a table is checked against the checksum; git 2.39 knows no such key).
CHECKOUT_CONFIG: tuple[tuple[str, str], ...] = (
    *WORKTREE_ADD_CONFIG,
    ("core.splitIndex", "false"),
    ("index.sparse", "false"),
    ("index.version", "2"),
    ("index.skipHash", "false"),
)


#: The file :func:`without_index` names.
NO_INDEX = "isopatch-no-index"


def check_out_worktree(
    admin_dir: GitDirPath,
    worktree: WorktreePath,
    commit: CommitId | None = None,
    *,
    env: Mapping[str, str],
    progress: bool = False,
    rewrite: bool = False,
) -> GitResult[None]:
    """Check out a worktree registered with ``checkout=False``
    (:func:`add_detached_worktree`): ``git reset --hard`` as ``git worktree
    add`` runs it (builtin/worktree.c), every file written.  With
    ``commit``, a checked-out worktree is moved there instead: ``git
    checkout --detach --force <commit>``, which writes only the files
    that differ (a two-way merge of the index); nobody changes a worktree
    moved so (a base tree), and what git would take for a local change is
    a file whose checkout does not give its blob back, or one a move by
    the difference that failed half-way wrote; with
    ``rewrite`` (a ``.gitattributes`` differs: a file neither commit
    changes may convert otherwise), every file is then written again, as
    a new checkout writes it: the index read anew from ``commit`` without
    stat data (``git read-tree``), then ``git reset --hard``.
    Under :data:`WORKTREE_ADD_CONFIG` (no hook, parallel checkout).
    A move is quiet but for its ``progress``: git's "Previous HEAD position
    was ..." and "HEAD is now at ..." speak of this checkout's ``HEAD``,
    which a user at the terminal would take for their own."""
    quiet = [] if progress else ["--quiet"]
    reset = ["reset", "--hard", "--no-recurse-submodules", *quiet]
    if commit is None:
        steps = [reset]
    else:
        shown = ["--progress"] if progress else []
        action = ["checkout", "--detach", "--no-recurse-submodules", "--quiet", *shown]
        action += ["--force", commit, "--"]
        steps = [action, ["read-tree", commit], reset] if rewrite else [action]
    for step in steps:
        args = [f"--git-dir={admin_dir}", f"--work-tree={worktree}", "-C", worktree, *step]
        if progress:
            result = run_git_with_progress(args, env=env, config=CHECKOUT_CONFIG)
        else:
            result = run_git(args, env=env, config=CHECKOUT_CONFIG)
        if isinstance(result, Err):
            return result
    return Ok(None)


#: ``git diff-tree`` of two commits as every comparison here runs it: whole
#: trees, no renames, and gitlinks compared whatever ``ignore`` a
#: ``.gitmodules`` gives them (a checkout writes them all the same).
DIFF_TREE = ("diff-tree", "-r", "--no-renames", "--ignore-submodules=none")


def without_index(env: Mapping[str, str], git_dir: GitDirPath) -> dict[str, str]:
    """``env`` for a git that compares trees alone (``git diff-tree``,
    which reads the whole index all the same): ``GIT_INDEX_FILE`` names a
    file of ``git_dir`` that is never made, an empty index to git."""
    return {**env, "GIT_INDEX_FILE": os.path.join(git_dir, NO_INDEX)}


def read_tree_two_way(
    admin_dir: GitDirPath,
    worktree: str,
    old: CommitId,
    new: CommitId,
    *,
    env: Mapping[str, str],
) -> GitResult[None]:
    """``git read-tree -m -u <old> <new>`` in a worktree whose index holds
    ``old``: the files that differ in ``new`` are written (a missing one is
    no local change, a removal of one finds nothing to remove), the others
    neither read nor stated (a two-way merge keeps their entries)."""
    args = [f"--git-dir={admin_dir}", f"--work-tree={worktree}", "-C", worktree]
    match run_git([*args, "read-tree", "-m", "-u", old, new], env=env, config=CHECKOUT_CONFIG):
        case Ok():
            return Ok(None)
        case Err() as err:
            return err


class TreeDifference(Record):
    """What ``new`` changes from ``old`` (:func:`tree_difference`).

    Attributes:
        paths: every path whose entry differs (a file, a link, a gitlink).
        removed: what ``new`` removes, each as the highest folder it
            empties (a folder ``new`` does not hold), else the path itself,
            sorted and without repeats.
    """

    paths: frozenset[bytes]
    removed: list[bytes]


def tree_difference(
    git_dir: GitDirPath, old: CommitId, new: CommitId, *, env: Mapping[str, str]
) -> GitResult[TreeDifference]:
    """What ``new`` changes from ``old``: the paths, and what it removes."""
    args = [f"--git-dir={git_dir}", *DIFF_TREE, "-z", "--name-status"]
    match run_git([*args, old, new, "--"], env=without_index(env, git_dir)):
        case Ok(output):
            fields = output.split(b"\0")
            changes = list(zip(fields[0:-1:2], fields[1::2], strict=True))
        case Err() as err:
            return err
    removed = [path for status, path in changes if status == b"D"]
    paths = frozenset(path for _, path in changes)
    folders = sorted({p[:i] for p in removed for i in range(len(p)) if p[i : i + 1] == b"/"})
    kept: set[bytes] = set()
    if folders:
        # -t: a folder on the way to another asked for is listed too (without
        # it, asking for "s" and "s/f" lists only "s/f")
        listing = [f"--git-dir={git_dir}", "ls-tree", "-d", "-t", "-z", "--name-only", new, "--"]
        match run_git([*listing, *(os.fsdecode(b":(literal)" + f) for f in folders)], env=env):
            case Ok(output):
                kept = {path for path in output.split(b"\0") if path}
            case Err() as err:
                return err
    found: set[bytes] = set()
    for path in removed:
        found.add(next((f for f in leading_folders(path) if f not in kept), path))
    return Ok(TreeDifference(paths, sorted(found)))


def check_out_index_copy(
    admin_dir: GitDirPath, target: str, *, env: Mapping[str, str]
) -> GitResult[None]:
    """Write every file of the index of the worktree whose private folder is
    ``admin_dir`` into the folder ``target`` (``git checkout-index -a``
    through a copy of that index, which stays as it is), under
    :data:`WORKTREE_ADD_CONFIG`."""
    with tempfile.TemporaryDirectory(prefix="isopatch-index-") as scratch:
        index = os.path.join(scratch, "index")
        try:
            shutil.copyfile(os.path.join(admin_dir, "index"), index)
        except OSError as exc:
            return Err(GitError(reason=f"cannot copy the index: {exc.strerror}", errno=exc.errno))
        args = [f"--git-dir={admin_dir}", f"--work-tree={target}", "-C", target]
        match run_git(
            [*args, "checkout-index", "-a", "-f"],
            env={**env, "GIT_INDEX_FILE": index},
            config=CHECKOUT_CONFIG,
        ):
            case Ok():
                return Ok(None)
            case Err() as err:
                return err


def attributes_differ(
    git_dir: GitDirPath, old: CommitId, new: CommitId, *, env: Mapping[str, str]
) -> bool:
    """Whether a ``.gitattributes`` of ``new`` differs from ``old``'s (then
    a checkout of ``new`` may convert files neither changes otherwise than
    one of ``old``); True when git cannot tell."""
    args = [f"--git-dir={git_dir}", *DIFF_TREE, "--quiet", old, new]
    match run_git([*args, "--", ":(glob)**/.gitattributes"], env=without_index(env, git_dir)):
        case Ok():
            return False
        case Err():
            return True
