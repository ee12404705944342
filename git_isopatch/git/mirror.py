"""The worktree's ``HEAD`` and index made the user's, for a run that starts
from a snapshot (design: What it does, "the configuration context").

A worktree at a snapshot commit (``--staged``: ``HEAD`` + index,
``--include-uncommitted``: + work tree; :mod:`.snapshot`) holds the user's
work as if it were committed: its ``HEAD`` is the snapshot and its index
equals it, so ``git diff --cached`` and ``git status`` there are empty and
a tool that checks "the staged files" finds none.  Before the command runs,
:func:`mirror_head` points ``HEAD`` at the user's ``HEAD`` commit (the
snapshot's parent), and under ``--include-uncommitted``
:func:`mirror_index` gives the worktree's index the user's entries where
they differ from the snapshot, so that git there sees what it sees in the
checkout: staged changes as staged, unstaged ones and untracked files as
such.  The files stay the snapshot's, and the patch is still taken against
the snapshot commit, whatever the command then does to ``HEAD`` or the
index.

Only what differs is written: the other entries keep the stat data the
checkout wrote (git need not read their files again), and an entry written
here carries none (git reads its file the first time it looks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .admin_files import replace_admin_file
from .diff import DIFF_CONFIG, worktree_args
from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, WorktreePath

#: Where an unborn branch's ``HEAD`` points in the worktree: below
#: ``refs/worktree/``, the worktree's own refs (git-worktree(1), "REFS"), so
#: that a command that commits there never makes the user's branch.
UNBORN_PREFIX = "refs/worktree/"

#: The empty blob's id (SHA-1, SHA-256): what an intent-to-add entry holds.
_EMPTY_BLOBS = frozenset(
    {
        b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
        b"473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
    }
)


def _fail(reason: str, exc: OSError | None = None) -> Err:
    return Err(GitError(reason=reason, errno=None if exc is None else exc.errno))


def mirror_head(
    admin_dir: GitDirPath,
    head: CommitId | None,
    *,
    user_git_dir: GitDirPath,
    env: Mapping[str, str],
) -> GitResult[None]:
    """Detach the worktree's ``HEAD`` at ``head``, the user's ``HEAD``
    commit; on an unborn branch (``head`` ``None``) point it at the user's
    branch name under :data:`UNBORN_PREFIX`, unborn too ("No commits yet").

    Returns:
        ``Ok(None)``, or ``Err(GitError)``: git could not read the user's
        branch, or ``HEAD`` could not be written.
    """
    if head is not None:
        content = f"{head}\n"
    else:
        match run_git([f"--git-dir={user_git_dir}", "symbolic-ref", "--quiet", "HEAD"], env=env):
            case Ok(output):
                branch = output.decode("utf-8", "surrogateescape").strip()
            case Err() as err:
                return err
        content = f"ref: {UNBORN_PREFIX}{branch.removeprefix('refs/heads/')}\n"
    path = os.path.join(admin_dir, "HEAD")
    try:
        replace_admin_file(path, content.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        return _fail(f"cannot write '{path}': {exc.strerror}", exc)
    return Ok(None)


def mirror_index(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    snapshot: CommitId,
    *,
    user_git_dir: GitDirPath,
    user_index: str,
    env: Mapping[str, str],
) -> GitResult[int]:
    """Give the worktree's index (equal to ``snapshot``) the entries of the
    user's index (``user_index``, read, never written) where the two differ:
    a path the user has not added goes (untracked), a staged content,
    mode or deletion comes in (the file keeps the snapshot's content: an
    unstaged change), an unmerged path gets its stages, and an
    intent-to-add entry is made one again (``git add --intent-to-add``).

    Returns:
        ``Ok(the number of paths changed)``, or ``Err(GitError)``.
    """
    user_env = {**env, "GIT_INDEX_FILE": user_index}
    match _differences(user_git_dir, snapshot, user_env, intent_to_add_visible=True):
        case Ok(records):
            pass
        case Err() as err:
            return err
    intent_to_add: set[bytes] = set()
    if any(oid in _EMPTY_BLOBS for _, _, oid, _ in records):
        match _differences(user_git_dir, snapshot, user_env, intent_to_add_visible=False):
            case Ok(hidden):
                intent_to_add = _intent_to_add(records, hidden)
            case Err() as err:
                return err
    # an intent-to-add entry whose file the snapshot lacks (the user
    # deleted it) stays out: there is no file to add
    lines = [
        _entry(b"000000" if status == b"D" or path in intent_to_add else mode, oid, path)
        for status, mode, oid, path in records
        if status != b"U" and not (status == b"A" and path in intent_to_add)
    ]
    added_back = [
        path for status, _, _, path in records if status != b"A" and path in intent_to_add
    ]
    # an unmerged path's record holds the null id, of the repository's length
    unmerged = {path: oid for status, _, oid, path in records if status == b"U"}
    if unmerged:
        match _stages(user_git_dir, list(unmerged), user_env):
            case Ok(stages):
                lines += [_entry(b"000000", oid, path) for path, oid in unmerged.items()] + stages
            case Err() as err:
                return err
    git = worktree_args(worktree, admin_dir)
    if lines:
        written = run_git(
            [*git, "update-index", "-z", "--index-info"],
            env=env,
            config=DIFF_CONFIG,
            input=b"".join(lines),
        )
        if isinstance(written, Err):
            return written
    if added_back:
        specs = b"".join(b":(top,literal)" + path + b"\0" for path in added_back)
        add = ["add", "--intent-to-add", "--sparse", "--pathspec-from-file=-"]
        added = run_git(
            [*git, *add, "--pathspec-file-nul"], env=env, config=DIFF_CONFIG, input=specs
        )
        if isinstance(added, Err):
            return added
    return Ok(len(records))


def _entry(mode: bytes, oid: bytes, path: bytes) -> bytes:
    """One ``git update-index -z --index-info`` record at stage 0 (mode 0
    removes the path)."""
    return mode + b" " + oid + b" 0\t" + path + b"\0"


def _differences(
    user_git_dir: GitDirPath,
    snapshot: CommitId,
    user_env: Mapping[str, str],
    *,
    intent_to_add_visible: bool,
) -> GitResult[list[tuple[bytes, bytes, bytes, bytes]]]:
    """``git diff-index --cached --raw`` of the user's index against
    ``snapshot``: ``(status, the index's mode, its object id, path)`` of
    each path that differs, renames not looked for, gitlinks compared
    whatever the configuration says to ignore."""
    visibility = "--ita-visible-in-index" if intent_to_add_visible else "--ita-invisible-in-index"
    args = [
        f"--git-dir={user_git_dir}",
        "diff-index",
        "--cached",
        "--raw",
        "-z",
        "--no-renames",
        "--no-abbrev",
        "--ignore-submodules=none",
        visibility,
        snapshot,
        "--",
    ]
    match run_git(args, env=user_env, config=DIFF_CONFIG):
        case Ok(output):
            pass
        case Err() as err:
            return err
    fields = output.split(b"\0")
    records = []
    for header, path in zip(fields[0:-1:2], fields[1::2], strict=False):
        # ":<mode> <mode> <oid> <oid> <status>"
        _, mode, _, oid, status = header.split(b" ")
        records.append((status[:1], mode, oid, path))
    return Ok(records)


def _intent_to_add(
    visible: Sequence[tuple[bytes, bytes, bytes, bytes]],
    hidden: Sequence[tuple[bytes, bytes, bytes, bytes]],
) -> set[bytes]:
    """The intent-to-add entries: those that differ from the snapshot as an
    empty blob when they are seen, and otherwise (or not at all) when
    they are not (git-diff(1), ``--ita-invisible-in-index``); a staged
    empty file is the same both ways."""
    unseen = {path: record for *record, path in hidden}
    return {
        path
        for *record, path in visible
        if record[2] in _EMPTY_BLOBS and unseen.get(path) != record
    }


def _stages(
    user_git_dir: GitDirPath, paths: Sequence[bytes], user_env: Mapping[str, str]
) -> GitResult[list[bytes]]:
    """The unmerged entries of ``paths`` in the user's index, as ``git
    ls-files --stage -z`` lists them: ``--index-info`` records."""
    specs = [":(top,literal)" + os.fsdecode(path) for path in paths]
    args = [f"--git-dir={user_git_dir}", "ls-files", "--stage", "-z", "--unmerged", "--", *specs]
    match run_git(args, env=user_env, config=DIFF_CONFIG):
        case Ok(output):
            return Ok([record + b"\0" for record in output.split(b"\0") if record])
        case Err() as err:
            return err
