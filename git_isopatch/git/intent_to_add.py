"""New files into the worktree's index as intent-to-add, so that ``git diff``
shows them (design: The patch, step 6), and what git leaves out without a
word while listing them: folders it cannot open, nested repositories,
``.git`` entries that are not repositories.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from .attributes import is_attributes_file
from .diff import EVERY_PATH, Paths, only_pathspecs, worktree_args
from .files import HOST_FILES, WorktreeFiles
from .index_flags import Listed
from .process import Spawn
from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath, WorktreePath


def unreadable_folder_warning(said: str) -> str:
    """The warning for a folder git could not open while listing new files
    (``said``: git's "'<path>/': <reason>"), a long path shortened in the
    middle: what the command wrote under it is not in the patch."""
    quoted, sep, reason = said.rpartition("': ")
    if sep:
        path = quoted.removeprefix("'")
    else:  # git cuts a message at 4096 bytes (usage.c, vreportf): no reason
        path = said.removeprefix("'")
        reason = "a path longer than git can name"
    if len(path) > 120:
        path = f"{path[:60]}...{path[-40:]}"
    return f"left out of the patch: git could not open '{path}' ({reason})"


class Found:
    """What :func:`mark_untracked_intent_to_add` saw besides the new files.

    Attributes:
        unreadable: git's warning for each folder it could not open (a path
            longer than ``PATH_MAX``, a folder without read permission),
            which git leaves out with no error (dir.c, "could not open
            directory"), as git wrote it ("'<path>/': File name too long").
        nested: new repositories inside the worktree, from the top, without
            the ``/`` git lists them with: they are recorded as gitlinks, so
            the patch holds their commit, not their files.
        dot_git: the ``.git`` entries below the top that are not
            repositories (a regular file, a folder git cannot read as one),
            in a folder of the index or of a new file: git skips every path
            named ``.git`` (dir.c, ``is_dot_git``), so they are never listed
            nor added (:func:`find_dot_git_entries`).
        attributes: the ``.gitattributes`` paths of the index and the new
            ones (:func:`.attributes.is_attributes_file`), for
            :func:`.attributes.attributes_changed`.
        ignored_attributes: the ``.gitattributes`` files in the index's
            folders that are neither tracked nor listed as new (an ignore
            rule leaves them out): git reads them all the same, so the
            attributes changed (:func:`find_ignored_attributes`).
        attributes_file: given by the caller, the worktree's own
            attributes file (:func:`.attributes.own_attributes_file`):
            found as a ``.gitattributes`` is, ignored or not.
    """

    def __init__(self) -> None:
        self.attributes_file: bytes | None = None
        self.unreadable: list[str] = []
        self.nested: list[str] = []
        self.dot_git: list[str] = []
        self.attributes: list[bytes] = []
        self.ignored_attributes: list[bytes] = []


def mark_untracked_intent_to_add(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    paths: Paths = EVERY_PATH,
    spawn: Spawn | None = None,
    listed: Listed | None = None,
    found: Found | None = None,
    files: WorktreeFiles = HOST_FILES,
) -> GitResult[int]:
    """Mark every untracked, not ignored file of the worktree intent-to-add
    (of ``paths``: :class:`.diff.Paths`).

    ``git ls-files --others --exclude-standard -z`` lists them, then
    ``git add --intent-to-add --sparse`` records them (git-add(1), ``-N``), so
    that ``git diff`` shows new files; ``--sparse`` (git 2.34) lets it record
    paths outside the sparse-checkout set, which ``git add`` refuses
    otherwise (git-sparse-checkout(1)).  Only new files are touched: ``add --all``
    would hash every modified file into the object store shared with the
    user's repository.  Ignored files stay out (``.gitignore``,
    ``.git/info/exclude``, ``core.excludesFile``), and so do ``paths.exclude``
    (paths relative to the top, see :func:`.diff.exclude_pathspecs`) whatever the
    ignore rules say: a symbolic link named ``node_modules`` is not matched by
    a ``node_modules/`` pattern (gitignore(5)), yet it is not the command's
    doing (``--link``).

    ``git_dir`` is the worktree's private folder
    (``$GIT_COMMON_DIR/worktrees/<id>``).  ``spawn`` confines git
    (:func:`.run.run_git`).  ``listed``: what the caller has just listed
    (:func:`.index_flags.clear_hiding_flags`): the index's paths, and the
    new files when the same git listed them; what it did not list is
    listed here.
    ``found``, when given, gets what git leaves out without a word (see
    :class:`Found`).

    Returns:
        ``Ok(number of paths marked)`` or ``Err(GitError)``.
    """
    git = _bound_git(worktree, git_dir, env, spawn, paths.config())
    warnings: list[str] = [] if listed is None else list(listed.warnings)
    new = None if listed is None else listed.new
    if new is None:
        listing = ["ls-files", "-z", "--others", "--exclude-standard", "--full-name", "--"]
        match git([*listing, *paths.pathspecs()], warnings=warnings):
            case Err() as err:
                return err
            case Ok(new):
                pass
    if found is not None:
        _note_listing(found, new, warnings)
    if not new and found is None:
        return Ok(0)
    tracked = None if listed is None else listed.tracked
    if tracked is None:
        match git(["ls-files", "-z", "--full-name", "--", *only_pathspecs(paths.only)]):
            case Err() as err:
                return err
            case Ok(tracked):
                pass
    if found is not None:
        _note_unlisted(found, worktree, new, tracked, files)
        if found.ignored_attributes and paths.only is not None:
            # a listing of the compared paths leaves the tracked ones out
            match git(
                ["ls-files", "-z", "--full-name", "--", *only_pathspecs(found.ignored_attributes)]
            ):
                case Err() as err:
                    return err
                case Ok(listed_now):
                    known = set(listed_now.split(b"\0"))
            found.ignored_attributes = [p for p in found.ignored_attributes if p not in known]
    if not new:
        return Ok(0)
    # the folders holding the paths compared hold tracked ones beside them
    around = b"".join(path + b"\0" for path in paths.only or ())
    return _add_intent_to_add(git, new, tracked + around, paths.exclude)


def _bound_git(
    worktree: WorktreePath,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    spawn: Spawn | None,
    config: Sequence[tuple[str, str]],
) -> Callable[..., GitResult[bytes]]:
    """:func:`.run.run_git` in ``worktree`` with the pinned settings ``config``."""

    def git(
        args: Sequence[str], *, input: bytes | None = None, warnings: list[str] | None = None
    ) -> GitResult[bytes]:
        return run_git(
            [*worktree_args(worktree, git_dir), *args],
            env=env,
            config=config,
            input=input,
            warnings=warnings,
            spawn=spawn,
        )

    return git


def _note_listing(found: Found, paths: bytes, warnings: Sequence[str]) -> None:
    """The folders git could not open and the nested repositories, from
    the listing of new files."""
    prefix = "could not open directory "
    found.unreadable += [w[len(prefix) :] for w in warnings if w.startswith(prefix)]
    found.nested += [os.fsdecode(p[:-1]) for p in paths.split(b"\0") if p.endswith(b"/")]


def _note_unlisted(
    found: Found, worktree: WorktreePath, paths: bytes, tracked: bytes, files: WorktreeFiles
) -> None:
    """The ``.gitattributes`` files (ignored ones too) and the ``.git``
    entries that are not repositories, in the index's folders and the new
    files'."""
    own = found.attributes_file
    found.attributes += [p for p in tracked.split(b"\0") if is_attributes_file(p, own)]
    found.attributes += [p for p in paths.split(b"\0") if is_attributes_file(p, own)]
    repositories = {os.fsencode(path) for path in found.nested}
    folders = _folders_of(tracked)
    found.dot_git += find_dot_git_entries(
        worktree, folders | _folders_of(paths), repositories, files
    )
    listed = set(found.attributes)
    found.ignored_attributes += find_ignored_attributes(worktree, folders, listed, files, own)


def _add_intent_to_add(
    git: Callable[..., GitResult[bytes]], paths: bytes, tracked: bytes, exclude: Sequence[str]
) -> GitResult[int]:
    """``git add --intent-to-add`` of the new ``paths`` (NUL-ended), new
    folders as one pathspec each (:func:`_collapse_new_folders`)."""
    # a folder that holds an excluded path is never given whole: git add
    # would take the path, and an exclude pathspec naming an ignored path
    # makes git add fail (git 2.39: "The following paths are ignored")
    excluded = b"\0".join(os.fsencode(path) for path in exclude)
    specs = _collapse_new_folders(
        paths.split(b"\0")[:-1], _folders_of(tracked) | _folders_of(excluded)
    )
    pathspecs = b"".join(b":(top,literal)" + spec + b"\0" for spec in specs)
    add = ["add", "--intent-to-add", "--sparse", "--pathspec-from-file=-", "--pathspec-file-nul"]
    match git(add, input=pathspecs):
        case Ok():
            return Ok(len(specs))
        case Err() as err:
            return err


def dot_git_warning(path: str) -> str:
    """The warning for an entry :func:`find_dot_git_entries` found."""
    return (
        f"'{path}' is not in the patch: git never tracks a path named .git, "
        "and it is not a repository git can read (a nested repository would be a gitlink)"
    )


def find_dot_git_entries(
    worktree: WorktreePath,
    folders: set[bytes],
    repositories: set[bytes] = frozenset(),
    files: WorktreeFiles = HOST_FILES,
) -> list[str]:
    """The ``<folder>/.git`` entries of the worktree (one ``lstat`` per
    folder of ``folders``, paths from the top), sorted, but for the folders
    in ``repositories`` (nested repositories, which git records as
    gitlinks): what git leaves out without a word."""
    found = []
    for folder in sorted(folders - repositories):
        if folder and files.lexists(os.path.join(worktree, os.fsdecode(folder), ".git")):
            found.append(os.fsdecode(folder) + "/.git")
    return found


def find_ignored_attributes(
    worktree: WorktreePath,
    folders: set[bytes],
    listed: set[bytes],
    files: WorktreeFiles = HOST_FILES,
    own: bytes | None = None,
) -> list[bytes]:
    """The ``<folder>/.gitattributes`` files of the worktree (one ``lstat``
    per folder of ``folders`` and the top, paths from the top), and its own
    attributes file ``own``, sorted, but those of ``listed`` (tracked, or
    new): the ones an ignore rule leaves out of every listing, whose rules
    git applies to the tracked files all the same."""
    paths = {folder + b"/.gitattributes" if folder else b".gitattributes" for folder in folders}
    paths |= {b".gitattributes"} | ({own} if own else set())
    return [
        path
        for path in sorted(paths - listed)
        if files.lexists(os.path.join(worktree, os.fsdecode(path)))
    ]


def _folders_of(listing: bytes) -> set[bytes]:
    """Every folder that holds an entry of a NUL-separated path list."""
    folders: set[bytes] = set()
    for path in listing.split(b"\0"):
        end = path.rfind(b"/")
        while end > 0:
            folder = path[:end]
            if folder in folders:
                break
            folders.add(folder)
            end = path.rfind(b"/", 0, end)
    return folders


def _collapse_new_folders(paths: Sequence[bytes], tracked: set[bytes]) -> list[bytes]:
    """The untracked ``paths`` (sorted, as ``git ls-files`` lists them) as
    few pathspecs: the paths under a folder that holds no tracked entry
    become that folder (``d/``), the highest such one.

    ``git add`` matches every file it finds against every pathspec, so
    100,000 paths given one by one take time in their square (measured:
    10,000 new files 10 s, 20,000 41 s); a command that makes a new folder
    of files costs one pathspec.  ``git add d/`` takes the same files
    ``ls-files --others --exclude-standard`` lists under ``d/`` (the same
    ignore rules); a folder that holds an excluded path counts as tracked
    here, so that it is never given whole.
    """
    specs: list[bytes] = []
    folder: bytes | None = None
    for path in paths:
        if folder is not None and path.startswith(folder):
            continue
        folder = None
        parts = path.rstrip(b"/").split(b"/")
        spec = path
        for end in range(1, len(parts)):
            candidate = b"/".join(parts[:end])
            if candidate not in tracked:
                spec = folder = candidate + b"/"
                break
        specs.append(spec)
    return specs
