"""Changes nobody made: paths that differ from the base right after checkout
(design: The patch).

A file stored with CRLF under a ``text`` attribute (``*.txt text``, an old
repository's ``.bat`` files), a blob that another conversion (``eol``,
``ident``, a filter) does not give back as stored, is "modified" as soon as
it is checked out: every ``git diff`` of a fresh worktree that reads the
file shows it normalised, whatever the command did (public reports: "The
current .gitattributes results in file changes by simply cloning the
repo").  The patch holds only what the command changed, so such a path is
looked at before the command (:func:`read_baseline`) and left out of the
patch when the command left it as it was (:func:`untouched_paths`).

Whether git reads such a file depends on its stat cache: it trusts an
entry written a second or more before the index (a slow checkout, a
worktree from the pool) and reads one written in the index's own second
("racily clean").  After a command that changes the attributes git reads
every file (:func:`.attributes.look_again_at_every_file`), so the look
before the command must not trust the stat data either where a
conversion applies, or the patch would depend on which entries were racy:
with attributes (:data:`CONVERSION_PATHSPECS`) those files are read again.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from .attributes import every_file_read_again
from .diff import exclude_pathspecs, worktree_output
from .process import Spawn
from .record import Record
from .result import Err, GitResult, Ok
from .types import CommitId, GitDirPath, WorktreePath

#: What a path is, for :func:`fingerprint`: ``None`` when it does not
#: exist, else (file type and permission bits, SHA-256 of the content or
#: the link target; empty for anything else).
Fingerprint = tuple[int, bytes] | None


def fingerprint(worktree: WorktreePath, path: bytes) -> Fingerprint:
    """What ``path`` (from the top) of the worktree is now, read without
    following a symbolic link; any change a patch can hold (content, mode,
    type, a link's target) changes it."""
    return fingerprint_at(os.path.join(os.fsencode(worktree), path))


def fingerprint_at(full: str | bytes | None) -> Fingerprint:
    """:func:`fingerprint` of the file at ``full`` (``None``: not there)."""
    import hashlib  # only when some path differed before the command: a plain run does not

    if full is None:
        return None
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


class Baseline(Record):
    """The paths of a worktree that differ from its base before the command
    ran, each with its :func:`fingerprint` then.

    Attributes:
        paths: path from the top (bytes, as git names it) -> fingerprint.
    """

    paths: Mapping[bytes, Fingerprint] = MappingProxyType({})


#: The paths where a conversion may apply that does not give the blob back
#: when git reads the file a checkout wrote (gitattributes(5), convert.c):
#: all but those under no conversion attribute, those under ``text=auto``
#: (a blob that holds CR stays as it is, both ways) and the binary ones
#: (``-text``), unless ``ident`` or a ``working-tree-encoding`` applies, or
#: a filter to a path that is not binary (git LFS's ``filter=lfs -text``
#: gives its blob back: reading every large file before every command
#: would cost).  Excluding costs git fewer attribute look-ups than naming
#: each attribute that converts.
CONVERSION_PATHSPECS = (
    ":(top)",
    ":(top,exclude,attr:!text !eol !crlf !ident !filter !working-tree-encoding)",
    ":(top,exclude,attr:text=auto !ident !filter !working-tree-encoding)",
    ":(top,exclude,attr:-text !ident !working-tree-encoding)",
)


def read_baseline(
    worktree: WorktreePath,
    base: CommitId,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    whole: bool = True,
    conversions: bool | Sequence[bytes] = False,
    spawn: Spawn | None = None,
) -> GitResult[Baseline]:
    """The paths that differ from ``base`` now, before the command, each
    with its fingerprint: ``git diff --name-only --no-renames <base>`` (the
    pinned configuration, ``exclude`` left out: linked and copied paths,
    populated submodules) as git sees the worktree (``whole``: its stat
    cache decides which files it reads), and with ``conversions`` (an
    attributes file applies) the same on :data:`CONVERSION_PATHSPECS`
    alone with each of those files read again
    (:func:`.attributes.every_file_read_again`), or, when
    ``conversions`` names paths, on those of them alone (none: no call).
    Right after a checkout
    both lists are empty but for conversions that do not give the blob
    back; one git call is what a run without attributes pays, and the
    second reads only the files a conversion applies to."""
    looks: list[tuple[Sequence[str], contextlib.AbstractContextManager[None]]] = []
    if whole:
        looks.append(((), contextlib.nullcontext()))
    if conversions is True:
        looks.append((CONVERSION_PATHSPECS, every_file_read_again(git_dir)))
    elif conversions:
        named = [":(top,literal)" + os.fsdecode(path) for path in conversions]
        looks.append(([*named, *CONVERSION_PATHSPECS[1:]], every_file_read_again(git_dir)))
    paths: dict[bytes, None] = {}
    for pathspecs, reading in looks:
        with reading:
            listed = _name_only(worktree, base, pathspecs, git_dir, env, exclude, spawn)
        match listed:
            case Ok(names):
                paths.update(dict.fromkeys(names))
            case Err() as err:
                return err
    return Ok(Baseline({path: fingerprint(worktree, path) for path in paths}))


def _name_only(
    worktree: WorktreePath,
    base: CommitId,
    pathspecs: Sequence[str],
    git_dir: GitDirPath,
    env: Mapping[str, str],
    exclude: Sequence[str],
    spawn: Spawn | None,
) -> GitResult[list[bytes]]:
    """``git diff --name-only -z <base> -- <pathspecs>`` (all paths when
    none), ``exclude`` left out."""
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
            *pathspecs,
            *exclude_pathspecs(exclude),
        ],
        lambda output: [path for path in output.split(b"\0") if path],
        git_dir=git_dir,
        env=env,
        spawn=spawn,
    )


def untouched_paths(
    baseline: Baseline,
    worktree: WorktreePath,
    locate: Callable[[bytes], str | None] | None = None,
) -> list[str]:
    """The paths of ``baseline`` that are now as they were before the
    command (same :func:`fingerprint`), sorted: the command did not change
    them, so they are left out of the patch.  ``locate`` says where a path
    lies on disk (a worktree over a base tree: its layers), else it is in
    ``worktree``."""
    if locate is None:
        return sorted(
            os.fsdecode(path)
            for path, before in baseline.paths.items()
            if fingerprint(worktree, path) == before
        )
    return sorted(
        os.fsdecode(path)
        for path, before in baseline.paths.items()
        if fingerprint_at(locate(path)) == before
    )


def untouched_warning(path: str) -> str:
    """The warning for a path left out of the patch by :func:`untouched_paths`."""
    return (
        f"'{path}' differs from the base right after checkout (line endings or another "
        "conversion of the repository's attributes) and the command did not change it: "
        "left out of the patch"
    )
