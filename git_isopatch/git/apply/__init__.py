"""Bring a patch into the user's work tree (and index), all or nothing.

``git apply`` itself is not all or nothing: it checks every hunk first, but
then removes every file it rewrites before it writes any, so a write that
fails half-way (a file where a folder must go, no space left, a read-only
file) leaves files deleted.  So the work tree is never handed to it.
Instead:

1. *Compute*, writing nothing of the user's: the current work-tree content
   of each path the patch touches is hashed (with git's own input
   conversion: ``core.autocrlf``, ``eol``, clean filters) into a temporary
   index that holds only those paths (``GIT_INDEX_FILE``); ``git apply
   --cached`` applies the patch there, checking every hunk as ``git
   apply`` would; the results are read back with git's output conversion
   (``git cat-file --filters``).  With ``index_file`` the same patch is
   also applied with ``--cached`` to a copy of that index.
2. *Prepare*: every new content is written beside its target (same
   folder, a temporary name ``.isopatch-new-*``), every file that will be
   replaced or removed is kept (a hard link, else a copy) in a journal
   folder ``<git-dir>/isopatch-apply-*/old/<path>``, and the new index is
   written to ``<index>.lock`` (git's own lock: a concurrent git fails
   rather than being overwritten).  A failure here has changed nothing.
3. *Switch*: removals, then renames into place, then the index; a failure
   puts back every path done so far from the journal.
4. *Verify* that the touched paths hold what the patch says, then remove
   the journal.

A rename replaces a file whole, so a ``SIGKILL`` during the switch leaves
each path either as it was or with its new content, never truncated; what
a kill leaves behind is the journal (the originals of what was replaced)
and ``.isopatch-new-*`` files not yet renamed.

No ``--3way`` and no ``--reject``: neither conflict markers nor ``.rej``
files are ever left.

Step 1 is :mod:`.compute`'s, steps 2 to 4 :mod:`.switch`'s; this
module runs them.  The colour of a diffstat (:func:`diff_color`) is asked
here too: the quiet path loads neither.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping

from ..result import Err, GitResult, Ok
from ..run import run_git
from ..types import GitDirPath, RepoPath
from .compute import (
    GITLINK,
    Entry,
    apply_cached,
    index_git,
    os_fail,
    patch_paths,
    patched_contents,
    read_entries,
    work_tree_entries,
    write_entries,
)
from .switch import JOURNAL_PREFIX, Applied, plan_switch, switch_work_tree

#: The reason's start when, with an index, the fix applies to the index but
#: not on top of the work tree's unstaged edits.
UNSTAGED_REFUSAL = "the fix does not apply on top of your unstaged changes"


def apply_to_work_tree(
    git_dir: GitDirPath,
    top: RepoPath,
    patch: str,
    *,
    env: Mapping[str, str],
    index_file: str | None = None,
    proceed: Callable[[], bool] | None = None,
) -> GitResult[Applied]:
    """Apply ``patch`` to the work tree at ``top`` as it is now (and to
    ``index_file`` too when given), all or nothing (see the module).

    Paths in the patch are from the top.  Content conversion
    (``core.autocrlf``, the ``eol`` and ``filter`` attributes) is git's
    own, as ``git apply`` does it.  A gitlink in the patch is left alone in
    the work tree (``git apply`` only makes or removes an empty folder
    there); with ``index_file`` the index gets it.

    Args:
        git_dir: the user's git directory.
        top: the top of the user's work tree.
        patch: the patch file (``a/``/``b/`` prefixes, binary-safe).
        env: git-isopatch's own git environment
            (:func:`..run.own_git_environment`).
        index_file: the index to write as well (:func:`..snapshot.user_index_file`),
            the one the patch is relative to (``--staged``); the work tree
            then gets the same change on top of its unstaged edits.
        proceed: asked once everything is computed and written beside its
            target, before the first user's path changes; ``False`` stops
            there (a signal arrived), with nothing written.

    Returns:
        ``Ok(Applied)``; ``Err(GitError)`` when any part of the patch does
        not apply, a write failed, or ``proceed`` said no: then every path
        of the work tree and the index is as it was.
    """
    match patch_paths(top, patch, env=env):
        case Ok(paths):
            pass
        case Err() as err:
            return err
    scratch = tempfile.mkdtemp(prefix=JOURNAL_PREFIX)
    try:
        return _apply(git_dir, top, patch, paths, scratch, env, index_file, proceed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _apply(
    git_dir: GitDirPath,
    top: RepoPath,
    patch: str,
    paths: tuple[str, ...],
    scratch: str,
    env: Mapping[str, str],
    index_file: str | None,
    proceed: Callable[[], bool] | None,
) -> GitResult[Applied]:
    work = index_git(git_dir, top, os.path.join(scratch, "work-tree"), env)
    new_index = os.path.join(scratch, "index")
    staged = index_git(git_dir, top, new_index, env)
    gitlinks: dict[str, Entry] = {}
    if index_file is not None:
        try:
            shutil.copyfile(index_file, new_index)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return os_fail(f"cannot copy the index '{index_file}'", exc)
        match read_entries(staged, paths):
            case Ok(entries):
                gitlinks = {p: e for p, e in entries.items() if e.mode == GITLINK}
            case Err() as err:
                return err
        applied = apply_cached(staged, patch, "the index")
        if isinstance(applied, Err):
            return applied
    match work_tree_entries(work, top, paths, gitlinks):
        case Ok(before):
            pass
        case Err() as err:
            return err
    if before:
        wrote = write_entries(work, before)
        if isinstance(wrote, Err):
            return wrote
    applied = apply_cached(work, patch, "the work tree")
    if isinstance(applied, Err):
        if index_file is not None:  # the index took it: the unstaged changes are in the way
            error = applied.error
            reason = error.reason.replace(
                "the patch does not apply to the work tree as it is now", UNSTAGED_REFUSAL
            )
            return Err(error._replace(reason=reason))
        return applied
    match read_entries(work, paths):
        case Ok(after):
            pass
        case Err() as err:
            return err
    changed = {p: e for p, e in after.items() if before.get(p) != e and e.mode != GITLINK}
    match patched_contents(work, changed, scratch):
        case Ok(contents):
            pass
        case Err() as err:
            return err
    match plan_switch(top, paths, before, after, contents):
        case Ok(plan):
            pass
        case Err() as err:
            return err
    return switch_work_tree(git_dir, top, plan, index_file, new_index, proceed)


def diff_color(git_dir: GitDirPath, *, to_terminal: bool, env: Mapping[str, str]) -> bool:
    """Whether git would colour a diff written to a terminal or not.

    ``git config --get-colorbool color.diff <to_terminal>`` decides with the
    user's ``color.diff`` and ``color.ui`` (``auto`` by default) and
    ``TERM=dumb`` (git-config(1), ``--get-colorbool``).  Git's own ``auto``
    looks at its standard output, which is a pipe to us: ``to_terminal`` is
    where the diff really goes (our standard error is a terminal).

    Returns:
        ``True`` for colour; ``False`` also when git cannot answer (a bad
        configuration value is reported elsewhere).
    """
    match run_git(
        [
            f"--git-dir={git_dir}",
            "config",
            "--get-colorbool",
            "color.diff",
            "true" if to_terminal else "false",
        ],
        env=env,
    ):
        case Ok(output):
            return output.strip() == b"true"
        case Err():
            return False
