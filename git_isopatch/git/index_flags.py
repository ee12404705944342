"""The index flags with which a command could hide a change from ``git
diff`` (assume-unchanged, skip-worktree), cleared in the worktree's own
index before the patch is taken (design: The patch, step 6).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .diff import EVERY_PATH, Paths, only_pathspecs, worktree_args
from .files import HOST_FILES, WorktreeFiles
from .index_entries import index_listing
from .process import Spawn
from .record import Record
from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath, WorktreePath


class Listed(Record):
    """What a listing of the index said, for
    :func:`.intent_to_add.mark_untracked_intent_to_add`.

    Attributes:
        tracked: the index's paths, each ended by NUL.
        new: the untracked, not ignored files, each ended by NUL, when the
            same ``git ls-files`` listed them (``--others
            --exclude-standard``); ``None``: not listed.
        warnings: what that git said while listing them (a folder it
            could not open).
    """

    tracked: bytes
    new: bytes | None = None
    warnings: tuple[str, ...] = ()


def clear_hiding_flags(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    spawn: Spawn | None = None,
    hash_size: int | None = None,
    paths: Paths = EVERY_PATH,
    files: WorktreeFiles = HOST_FILES,
    own_index: int | None = None,
) -> GitResult[Listed]:
    """Clear the index flags with which a command could hide a change from
    ``git diff``: assume-unchanged on any entry, skip-worktree on an entry
    whose file is in the work tree (git-update-index(1), "USING ASSUME
    UNCHANGED BIT" and "SKIP-WORKTREE BIT": git then never looks at the
    file).  An entry a sparse checkout leaves out (skip-worktree, no file)
    keeps its flag, as git itself clears the flag only for files present.
    With ``paths.only``, the entries of those paths alone
    (:func:`.diff.only_pathspecs`), in the index ``paths`` reads
    (``env`` names it), with its pinned settings (:meth:`.diff.Paths.config`).

    The index is listed by ``git ls-files -v``, or read in process when
    the object ids' ``hash_size`` is given and the index is one
    :func:`.index_entries.index_listing` reads (the caller gives it only
    where git-isopatch may read what the command left: unconfined).  Without
    it, when ``paths`` leaves nothing out, the same ``git ls-files`` lists
    the new files too (``--others --exclude-standard``, tagged ``?``): one
    read of the index where two would grow with the repository.  With ``own_index`` (the
    object ids' size), ``paths.index`` is git-isopatch's own, made after
    the command (nothing the command left): it is read in process, and
    when every path of ``paths.only`` is one of its entries and none is a
    folder now, no file is new, and no git runs.

    Returns:
        ``Ok(Listed)``, or ``Err(GitError)``.
    """
    only, config = paths.only, paths.config()
    in_process = hash_size is not None and "GIT_INDEX_FILE" not in env and only is None
    listing = index_listing(git_dir, hash_size) if in_process and hash_size else None
    new: bytes | None = None
    if listing is None and own_index and only and paths.index is not None:
        listing = _all_tracked(index_listing(git_dir, own_index, paths.index), paths)
        if listing is not None and any(
            files.is_real_folder(os.path.join(worktree, os.fsdecode(path))) for path in only
        ):  # the command made a folder of a tracked file: what it holds is new
            listing = None
        new = None if listing is None else b""
    warnings: tuple[str, ...] = ()
    if listing is None:
        new_files = hash_size is None and not paths.exclude
        match _listed_by_git(worktree, git_dir, env, spawn, only, new_files, config):
            case Err() as err:
                return err
            case Ok((listing, new, warnings)):
                pass
    assumed, skipped, paths = [], [], []
    for tag, _, path in listing:
        paths.append(path)
        if tag.islower():
            assumed.append(path)
        if tag.upper() == b"S" and files.lexists(os.path.join(worktree, os.fsdecode(path))):
            skipped.append(path)
    # one flag per call: update-index applies only the first of them
    for option, flagged in (("--no-assume-unchanged", assumed), ("--no-skip-worktree", skipped)):
        if not flagged:
            continue
        match run_git(
            [*worktree_args(worktree, git_dir), "update-index", option, "-z", "--stdin"],
            env=env,
            config=config,
            input=b"".join(path + b"\0" for path in flagged),
            spawn=spawn,
        ):
            case Err() as err:
                return err
            case Ok():
                pass
    return Ok(Listed(b"".join(path + b"\0" for path in paths), new, warnings))


def _all_tracked(
    listing: list[tuple[bytes, bytes, bytes]] | None, paths: Paths
) -> list[tuple[bytes, bytes, bytes]] | None:
    """``listing``'s entries of ``paths`` when each path of ``paths.only``
    is one of them: what ``git ls-files`` of ``paths`` lists, and, unless
    the worktree made a folder of one, no new file; else ``None``."""
    wanted = set(paths.only or ())
    if listing is None or not wanted <= {path for _, _, path in listing}:
        return None
    out = [os.fsencode(path).strip(b"/") for path in paths.exclude]
    return [
        (tag, mode, path)
        for tag, mode, path in listing
        if path in wanted and not any(path == x or path.startswith(x + b"/") for x in out)
    ]


def _listed_by_git(
    worktree: WorktreePath,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    spawn: Spawn | None,
    only: Sequence[bytes] | None,
    new_files: bool,
    config: Sequence[tuple[str, str]],
) -> GitResult[tuple[list[tuple[bytes, bytes, bytes]], bytes | None, tuple[str, ...]]]:
    """``git ls-files -v`` of ``only``: its ``(tag, b"", path)`` records,
    as :func:`.index_entries.index_listing` gives them; with ``new_files``,
    ``--cached --others --exclude-standard`` too: the new files (tagged
    ``?``) apart, each ended by NUL, and the warnings git gave."""
    warnings: list[str] = []
    others = ["--cached", "--others", "--exclude-standard"] if new_files else []
    match run_git(
        [
            *worktree_args(worktree, git_dir),
            "ls-files",
            "-z",
            "-v",
            *others,
            "--full-name",
            "--",
            *only_pathspecs(only),
        ],
        env=env,
        config=config,
        spawn=spawn,
        warnings=warnings,
    ):
        case Err() as err:
            return err
        case Ok(output):
            pass
    listing, found = [], []
    for record in output.split(b"\0"):
        tag, _, path = record.partition(b" ")
        if path:
            (found if tag == b"?" else listing).append((tag, b"", path))
    new = b"".join(path + b"\0" for _, _, path in found) if new_files else None
    return Ok((listing, new, tuple(warnings)))
