"""The worktree's ``.gitattributes`` files: whether the command changed
one, and making git look at every file again when it did, so that the
patch does not depend on git's stat cache (design: The patch, "Content
conversion stays").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence

from .diff import DIFF_CONFIG, worktree_args
from .process import Spawn
from .result import Err, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, WorktreePath


def is_attributes_file(path: bytes, own: bytes | None = None) -> bool:
    """``path`` (from the top) names a ``.gitattributes`` file, or the
    worktree's own attributes file ``own`` (:func:`own_attributes_file`)
    or a folder holding it."""
    if own is not None and (path == own or own.startswith(path + b"/")):
        return True
    return path == b".gitattributes" or path.endswith(b"/.gitattributes")


def own_attributes_file(configured: str | None) -> bytes | None:
    """The path from the top of the file a relative ``core.attributesFile``
    (``configured``) names: git reads it from the top of the worktree it
    runs in, so a command that writes it changes the attributes as with a
    ``.gitattributes``.  ``None`` when unset, absolute, under ``~`` or
    outside the worktree."""
    if not configured or configured.startswith(("/", "~")):
        return None
    path = os.path.normpath(configured)
    if path in (".", "..") or path.startswith("../"):
        return None
    return os.fsencode(path)


def attributes_changed(
    worktree: WorktreePath,
    base: CommitId,
    paths: Sequence[bytes],
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    spawn: Spawn | None = None,
) -> GitResult[bool]:
    """Whether one of the ``.gitattributes`` files ``paths`` (tracked and
    new ones, from :func:`.intent_to_add.mark_untracked_intent_to_add`) differs from
    ``base``: ``git diff --quiet`` on them alone, no call when there are
    none.  A change of these files' own stat data is what git notices, so
    this answer does not depend on the stat cache of the other files."""
    if not paths:
        return Ok(False)
    result = run_git(
        [
            *worktree_args(worktree, git_dir),
            "diff",
            "--quiet",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            base,
            "--",
            *(":(top,literal)" + os.fsdecode(path) for path in paths),
        ],
        env=env,
        config=DIFF_CONFIG,
        spawn=spawn,
    )
    match result:
        case Ok():
            return Ok(False)
        case Err() as err:
            if err.error.returncode == 1:
                return Ok(True)
            return err


def look_again_at_every_file(git_dir: GitDirPath) -> None:
    """Make git compare every tracked file's content on its next look, as
    when the attributes changed: the index file's time goes back to one
    second after the epoch, so that every entry is "racily clean" (its
    file's time is not older than the index, read-cache.c,
    ``is_racy_timestamp``; gitformat-index(5)) and git reads the file
    instead of trusting its stat data.  Without it, which files a changed
    ``text``/``eol`` attribute shows as modified depends on which entries
    happened to be racy (``: > .gitattributes`` on git/git gave
    4 files in one run and 1 in another).  Only the worktree's own index
    is touched; git rewrites it with the current time when it next writes
    it, after comparing each racy entry.

    Raises:
        OSError: the index cannot be touched.
    """
    os.utime(os.path.join(git_dir, "index"), (1, 1), follow_symlinks=False)


@contextlib.contextmanager
def every_file_read_again(git_dir: GitDirPath) -> Iterator[None]:
    """For git's looks inside the block, every tracked file's content is
    compared (:func:`look_again_at_every_file`); after it the index gets
    its own times back, so that the looks after the block trust the stat
    data as they did before it (unless git wrote the index meanwhile: then
    its new time stands).  Best effort: an index that cannot be touched is
    looked at as it is."""
    index = os.path.join(git_dir, "index")
    before: os.stat_result | None = None
    try:
        before = os.stat(index)
        look_again_at_every_file(git_dir)
    except OSError:
        before = None
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                if os.stat(index).st_mtime_ns == 1_000_000_000:
                    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))


def index_may_track_attributes(git_dir: GitDirPath) -> bool:
    """Whether the index of ``git_dir`` may hold a ``.gitattributes``,
    read in process: its bytes hold ``ttributes`` and a NUL, as every
    entry's path ends with a NUL (gitformat-index(5); version 4 stores
    only the end of a path that the one before it does not share, and
    only a path before it that starts with ``.gitat`` could take more than
    ``.gi`` of the name).  True when the index cannot be read, or is split
    (``core.splitIndex``: most entries are in a ``sharedindex.*`` file).
    A name that merely ends so costs a look, never the patch."""
    try:
        with open(os.path.join(git_dir, "index"), "rb") as handle:
            data = handle.read()
        split = any(name.startswith("sharedindex.") for name in os.listdir(git_dir))
    except OSError:
        return True
    return split or b"ttributes\0" in data
