"""The patch: ``git diff --binary`` of a worktree with pinned options, and
its diffstat (design: The patch).

The user's diff configuration must not leak into the patch, so every option
that configuration could change is spelled out on the command line, and the
few that have no command-line form are forced with ``-c``.  New files are
marked intent-to-add first (:mod:`.intent_to_add`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TypeVar

from .process import Spawn
from .record import Record
from .result import Err, GitResult, Ok
from .run import run_git
from .stream import stream_git
from .types import CommitId, GitDirPath, WorktreePath

T = TypeVar("T")

#: ``-c`` settings for the diff that have no command-line option (git-config(1)).
#: ``core.fsmonitor`` is off: a file system monitor hook (a stale watcher)
#: could tell git that files the command changed are unchanged, and it is a
#: hook the user did not ask to run here.  ``index.sparse`` is
#: off: with a sparse index (``git sparse-checkout set --sparse-index``,
#: which ``git worktree add`` copies into the worktree) git 2.39 crashes
#: (``free(): invalid pointer``, a segmentation fault) when it writes an
#: intent-to-add entry outside the sparse set, and whenever it later
#: converts such an index back to a sparse one; a full index in our own
#: worktree costs only its size.  Every stat field counts
#: (``core.trustctime``, ``core.checkStat``): the repository's
#: configuration is read as the command left it, and with fewer fields
#: trusted a file it edited, keeping its size and putting its times back,
#: is taken for unchanged and left out of the patch.
DIFF_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.quotePath", "true"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.suppressBlankEmpty", "false"),
    ("core.fileMode", "true"),
    ("core.trustctime", "true"),
    ("core.checkStat", "default"),
    ("core.fsmonitor", "false"),
    ("diff.ignoreSubmodules", "none"),
    ("core.hooksPath", os.devnull),
    ("index.sparse", "false"),
)


#: Rename detection gives up above this many candidates (git's own default
#: of ``diff.renameLimit``, diff.c); pinned so that the setting cannot
#: change which renames the patch shows.
RENAME_LIMIT = 1000


#: ``git diff`` options that pin the patch format (git-diff(1)): binary
#: patches with full ids, ``a/`` and ``b/`` prefixes, no colour, no external
#: driver, no textconv, paths from the top, rename detection with git's
#: default limit, submodules as gitlinks (a new commit checked out in one
#: shows as ``Subproject commit``; modified or untracked content in one is
#: left out: ``Subproject commit <id>-dirty`` is nothing ``git apply`` can
#: use, gitsubmodules(7)), three lines of context, no file
#: ordering, and the default (Myers) algorithm with the indent heuristic
#: (``diff.algorithm``, ``diff.indentHeuristic``).  What stays the
#: repository's own: the text after ``@@ ... @@`` in a hunk header, which
#: the ``diff`` attribute's driver (``diff.<driver>.xfuncname``) chooses and
#: ``git apply`` ignores.
DIFF_OPTIONS: tuple[str, ...] = (
    "--binary",
    "--full-index",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-relative",
    "--find-renames",
    f"-l{RENAME_LIMIT}",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--submodule=short",
    "--ignore-submodules=dirty",
    "--unified=3",
    "--inter-hunk-context=0",
    f"-O{os.devnull}",
)


def only_pathspecs(paths: Sequence[bytes] | None) -> list[str]:
    """Pathspecs that name each of ``paths`` (from the top, each with what
    lies below it) and nothing else: ``:(top,literal)<path>``; none for
    ``None`` (the whole tree).  ``paths`` must not be empty: no pathspec
    at all would mean every path."""
    if paths is None:
        return []
    assert paths, "no path to compare is no git call"
    return [":(top,literal)" + os.fsdecode(path) for path in paths]


class Paths(Record):
    """What a look at the worktree takes: every path but ``exclude`` (from
    the top, ``/``-separated, each with what lies below it), or, with
    ``only``, those paths alone but ``exclude`` (the others are known not
    to differ: a worktree over a base tree).  ``index``, with ``only``: an
    index file holding the entries git reads to look at those paths
    (:func:`.partial_index.partial_index`), read and written instead of
    the worktree's own (``GIT_INDEX_FILE``)."""

    exclude: Sequence[str] = ()
    only: Sequence[bytes] | None = None
    index: str | None = None

    def pathspecs(self) -> list[str]:
        """:func:`only_pathspecs` and :func:`exclude_pathspecs`."""
        return [*only_pathspecs(self.only), *exclude_pathspecs(self.exclude)]

    def every_path(self) -> Paths:
        """Every path but :attr:`exclude`, in the worktree's own index."""
        return self._replace(only=None, index=None)

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """``env`` for git to read :attr:`index`, when there is one."""
        return env if self.index is None else {**env, "GIT_INDEX_FILE": self.index}

    def config(self) -> tuple[tuple[str, str], ...]:
        """:data:`DIFF_CONFIG` for a look at these paths; with ``only``,
        no preloading of the index (``core.preloadIndex``): to stat the
        few paths named, git would match every entry against the
        pathspecs on up to 20 threads before the diff matches them again
        (on 50,000 files, 28% of the diff's instructions).  With
        :attr:`index`, git writes it whole (``core.splitIndex``) and never
        takes one name for another that differs in case
        (``core.ignoreCase``: it would look for entries the index leaves
        out; it is used only where git does not fold case)."""
        if self.only is None:
            return DIFF_CONFIG
        only = (*DIFF_CONFIG, ("core.preloadIndex", "false"))
        if self.index is None:
            return only
        return (*only, ("core.splitIndex", "false"), ("core.ignoreCase", "false"))


#: Every path of the worktree.
EVERY_PATH = Paths()


def exclude_pathspecs(paths: Sequence[str]) -> list[str]:
    """Pathspecs that leave out each of ``paths`` and everything under it.

    Each path (relative to the top of the work tree, ``/``-separated) becomes
    ``:(top,exclude,literal)<path>`` (gitglossary(7), "pathspec": ``top``
    anchors it at the root, ``literal`` turns off wildcards, ``exclude``
    subtracts it).  A pathspec naming a folder covers the files under it.
    """
    return [f":(top,exclude,literal){path}" for path in paths]


def worktree_args(worktree: WorktreePath, git_dir: GitDirPath) -> list[str]:
    """Name the worktree's git directory and top explicitly: the command may
    have rewritten ``<worktree>/.git`` to point at the user's repository,
    and our calls must not follow it (found by attacking git-isopatch)."""
    return [f"--git-dir={git_dir}", f"--work-tree={worktree}", "-C", worktree]


def worktree_output(
    worktree: WorktreePath,
    args: Sequence[str],
    parse: Callable[[bytes], T],
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    spawn: Spawn | None = None,
) -> GitResult[T]:
    """``parse`` of what ``git <args>`` prints in the worktree, named
    explicitly (:func:`worktree_args`), with the pinned configuration
    (:data:`DIFF_CONFIG`); ``spawn`` confines git
    (:func:`.run.run_git`).  The one way our look-ups in a worktree ask git."""
    match run_git(
        [*worktree_args(worktree, git_dir), *args],
        env=env,
        config=DIFF_CONFIG,
        spawn=spawn,
    ):
        case Err() as err:
            return err
        case Ok(output):
            return Ok(parse(output))


#: ``git apply`` refuses a patch of this many bytes or more ("git apply:
#: failed to read"; apply.c, ``MAX_APPLY_SIZE``, since git 2.39.1 and the
#: maintenance releases of January 2023; t4141-apply-too-large.sh).
GIT_APPLY_MAX_BYTES = 1024 * 1024 * 1023


def apply_size_warning(size: int) -> str | None:
    """The warning for a patch of ``size`` bytes that ``git apply`` would
    refuse (:data:`GIT_APPLY_MAX_BYTES`), else ``None``."""
    if size < GIT_APPLY_MAX_BYTES:
        return None
    return (
        f"the patch is {size} bytes ({size / (1 << 20):.0f} MiB): git apply refuses a patch "
        "of 1023 MiB or more"
    )


def write_binary_diff(
    worktree: WorktreePath,
    base: CommitId,
    out: IO[bytes],
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    paths: Paths = EVERY_PATH,
    spawn: Spawn | None = None,
    prefix: str = "",
) -> GitResult[None]:
    """Stream ``git diff --binary <base>`` of the worktree into ``out``.

    The patch is never held in memory.  ``git apply`` of it on a clean
    checkout of ``base`` reproduces the worktree (design: The patch), but
    for ``exclude``: paths relative to the top left out of the patch even if
    the command ``git add``-ed them (:func:`exclude_pathspecs`).
    ``spawn`` confines git (:func:`.run.run_git`).  ``prefix`` (ending
    with ``/``) goes before every path after ``a/`` and ``b/``: the diff of
    a submodule names its files from the superproject's top.
    """
    options = [
        f"--src-prefix=a/{prefix}"
        if option == "--src-prefix=a/"
        else f"--dst-prefix=b/{prefix}"
        if option == "--dst-prefix=b/"
        else option
        for option in DIFF_OPTIONS
    ]
    result = stream_git(
        [
            "--no-pager",
            *worktree_args(worktree, git_dir),
            "diff",
            *options,
            base,
            "--",
            *paths.pathspecs(),
        ],
        out,
        env=env,
        config=paths.config(),
        spawn=spawn,
    )
    match result:
        case Ok():
            return Ok(None)
        case Err() as err:
            return err


def diff_stat(
    worktree: WorktreePath,
    base: CommitId,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    paths: Paths = EVERY_PATH,
    color: bool = False,
    width: int | None = None,
    spawn: Spawn | None = None,
) -> GitResult[bytes]:
    """``git diff --stat --summary <base>`` of the worktree: the diffstat of
    the patch :func:`write_binary_diff` writes (the same pinned options, so
    the same paths and renames), with the summary of created, deleted and
    renamed files and mode changes that ``git merge`` and ``git pull`` show.

    Run after :func:`.intent_to_add.mark_untracked_intent_to_add`, like the patch.

    Args:
        color: colour it (``--color``); git's own ``auto`` cannot tell, its
            standard output being a pipe (see :func:`.apply.diff_color`).
        width: columns of the terminal it goes to (``--stat-width``);
            ``None``: git's default for a pipe (80).
        spawn: confines git as the patch's diff is confined
            (:func:`.run.run_git`).

    Returns:
        ``Ok(the diffstat)``, empty when nothing changed, or ``Err(GitError)``.
    """
    # the options of the patch that shape its text only (``-U`` would also
    # turn the patch output on)
    text_only = ("--binary", "--full-index", "--no-color", "--unified=", "--inter-hunk-context=")
    options = [o for o in DIFF_OPTIONS if not o.startswith(text_only)]
    options += ["--stat", "--summary", "--color" if color else "--no-color"]
    if width is not None:
        options.append(f"--stat-width={width}")
    return run_git(
        [
            "--no-pager",
            *worktree_args(worktree, git_dir),
            "diff",
            *options,
            base,
            "--",
            *paths.pathspecs(),
        ],
        env=env,
        config=paths.config(),
        spawn=spawn,
    )


def write_commit_diff(
    git_dir: GitDirPath,
    old: CommitId,
    new: CommitId,
    out: IO[bytes],
    *,
    env: Mapping[str, str],
    spawn: Spawn | None = None,
) -> GitResult[None]:
    """Stream ``git diff --binary <old> <new>`` (the pinned options) into
    ``out``: ``git apply`` of it on a clean checkout of ``old`` gives
    ``new``'s tree.  ``spawn`` confines git."""
    result = stream_git(
        ["--no-pager", f"--git-dir={git_dir}", "diff", *DIFF_OPTIONS, old, new, "--"],
        out,
        env=env,
        config=DIFF_CONFIG,
        spawn=spawn,
    )
    return Ok(None) if isinstance(result, Ok) else result  # type: ignore[return-value]
