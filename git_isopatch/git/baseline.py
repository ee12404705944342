"""Changes nobody made: paths that differ from the base right after checkout
(design: The patch).

A file stored with CRLF under a ``text`` attribute (``*.txt text``, an old
repository's ``.bat`` files), a blob that another conversion (``eol``,
``ident``, a filter) does not give back as stored, is "modified" as soon as
it is checked out: every ``git diff`` of a fresh worktree shows it
normalised, whatever the command did (public reports: "The current
.gitattributes results in file changes by simply cloning the repo").  The
patch holds only what the command changed, so such a path is looked at
before the command (:func:`read_baseline`: one ``git diff --name-only``,
and a fingerprint of each path it names, only when it names one) and left
out of the patch when the command left it as it was
(:func:`untouched_paths`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .diff import exclude_pathspecs, worktree_output
from .result import GitResult
from .types import CommitId, GitDirPath, WorktreePath

#: What a path is, for :func:`fingerprint`: ``None`` when it does not
#: exist, else (file type and permission bits, SHA-256 of the content or
#: the link target; empty for anything else).
Fingerprint = tuple[int, bytes] | None


def fingerprint(worktree: WorktreePath, path: bytes) -> Fingerprint:
    """What ``path`` (from the top) of the worktree is now, read without
    following a symbolic link; any change a patch can hold (content, mode,
    type, a link's target) changes it."""
    import hashlib  # only when some path differed before the command: a plain run does not

    full = os.path.join(os.fsencode(worktree), path)
    try:
        mode = os.lstat(full).st_mode
        if stat.S_ISLNK(mode):
            return mode, hashlib.sha256(os.readlink(full)).digest()
        if not stat.S_ISREG(mode):
            return mode, b""
        digest = hashlib.sha256()
        with open(full, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        return mode, digest.digest()
    except OSError:
        return None


@dataclass(frozen=True)
class Baseline:
    """The paths of a worktree that differ from its base before the command
    ran, each with its :func:`fingerprint` then.

    Attributes:
        paths: path from the top (bytes, as git names it) -> fingerprint.
    """

    paths: Mapping[bytes, Fingerprint] = field(default_factory=dict)


def read_baseline(
    worktree: WorktreePath,
    base: CommitId,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    preexec_fn: Callable[[], None] | None = None,
) -> GitResult[Baseline]:
    """The paths that differ from ``base`` now, before the command:
    ``git diff --name-only --no-renames <base>`` (the pinned configuration,
    ``exclude`` left out: linked and copied paths, populated submodules),
    then a fingerprint of each.  Right after a checkout the list is empty
    but for conversions that do not give the blob back; that one git call
    is what every run pays."""
    return worktree_output(
        worktree,
        [
            "--no-pager",
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=dirty",
            base,
            "--",
            *exclude_pathspecs(exclude),
        ],
        lambda output: Baseline(
            {path: fingerprint(worktree, path) for path in output.split(b"\0") if path}
        ),
        git_dir=git_dir,
        env=env,
        preexec_fn=preexec_fn,
    )


def untouched_paths(baseline: Baseline, worktree: WorktreePath) -> list[str]:
    """The paths of ``baseline`` that are now as they were before the
    command (same :func:`fingerprint`), sorted: the command did not change
    them, so they are left out of the patch."""
    return sorted(
        os.fsdecode(path)
        for path, before in baseline.paths.items()
        if fingerprint(worktree, path) == before
    )


def untouched_warning(path: str) -> str:
    """The warning for a path left out of the patch by :func:`untouched_paths`."""
    return (
        f"'{path}' differs from the base right after checkout (line endings or another "
        "conversion of the repository's attributes) and the command did not change it: "
        "left out of the patch"
    )
