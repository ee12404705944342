"""The patch: intent-to-add and ``git diff --binary`` in a worktree (design: The patch).

The user's diff configuration must not leak into the patch, so every option
that configuration could change is spelled out on the command line, and the
few that have no command-line form are forced with ``-c``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from .result import Err, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, WorktreePath

#: ``-c`` settings for the diff that have no command-line option (git-config(1)).
#: ``core.fsmonitor`` is off: a file system monitor hook (a stale watcher)
#: could tell git that files the command changed are unchanged, and it is a
#: hook the user did not ask to run here.  ``index.sparse`` is
#: off: with a sparse index (``git sparse-checkout set --sparse-index``,
#: which ``git worktree add`` copies into the worktree) git 2.39 crashes
#: (``free(): invalid pointer``, a segmentation fault) when it writes an
#: intent-to-add entry outside the sparse set, and whenever it later
#: converts such an index back to a sparse one; a full index in our own
#: worktree costs only its size.
DIFF_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.quotePath", "true"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.suppressBlankEmpty", "false"),
    ("core.fileMode", "true"),
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


def exclude_pathspecs(paths: Sequence[str]) -> list[str]:
    """Pathspecs that leave out each of ``paths`` and everything under it.

    Each path (relative to the top of the work tree, ``/``-separated) becomes
    ``:(top,exclude,literal)<path>`` (gitglossary(7), "pathspec": ``top``
    anchors it at the root, ``literal`` turns off wildcards, ``exclude``
    subtracts it).  A pathspec naming a folder covers the files under it.
    """
    return [f":(top,exclude,literal){path}" for path in paths]


def _worktree_args(worktree: WorktreePath, git_dir: GitDirPath) -> list[str]:
    """Name the worktree's git directory and top explicitly: the command may
    have rewritten ``<worktree>/.git`` to point at the user's repository,
    and our calls must not follow it (found by attacking git-isopatch)."""
    return [f"--git-dir={git_dir}", f"--work-tree={worktree}", "-C", worktree]


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


@dataclass
class Found:
    """What :func:`mark_untracked_intent_to_add` saw besides the new files.

    Attributes:
        unreadable: git's warnings for folders it could not open.
        nested: new repositories (recorded as gitlinks), from the top.
        dot_git: ``.git`` entries that are not repositories
            (:func:`find_dot_git_entries`).
        attributes: the ``.gitattributes`` paths, tracked and new.
    """

    unreadable: list[str] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    dot_git: list[str] = field(default_factory=list)
    attributes: list[bytes] = field(default_factory=list)


def mark_untracked_intent_to_add(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    preexec_fn: Callable[[], None] | None = None,
    tracked: bytes | None = None,
    found: Found | None = None,
) -> GitResult[int]:
    """Mark every untracked, not ignored file of the worktree intent-to-add.

    ``git ls-files --others --exclude-standard -z`` lists them, then
    ``git add --intent-to-add --sparse`` records them (git-add(1), ``-N``), so
    that ``git diff`` shows new files; ``--sparse`` (git 2.34) lets it record
    paths outside the sparse-checkout set, which ``git add`` refuses
    otherwise (git-sparse-checkout(1)).  Only new files are touched: ``add --all``
    would hash every modified file into the object store shared with the
    user's repository.  Ignored files stay out (``.gitignore``,
    ``.git/info/exclude``, ``core.excludesFile``), and so do ``exclude``
    (paths relative to the top, see :func:`exclude_pathspecs`) whatever the
    ignore rules say: a symbolic link named ``node_modules`` is not matched by
    a ``node_modules/`` pattern (gitignore(5)), yet it is not the command's
    doing (``--link``).

    ``git_dir`` is the worktree's private folder
    (``$GIT_COMMON_DIR/worktrees/<id>``).  ``preexec_fn`` confines git
    (:func:`.run.run_git`).

    A folder git cannot open (a path longer than ``PATH_MAX``, a folder
    without read permission) is left out by git with a warning and no
    error (dir.c, "could not open directory"): each such warning is
    appended to ``found.unreadable`` when given, as git wrote it ("'<path>/':
    File name too long").

    A new repository inside the worktree is listed by git as its folder
    (``path/``) and recorded as a gitlink: the patch then holds its commit,
    not its files.  Each such path (without the ``/``) is appended to
    ``found.nested`` when given.

    ``tracked``: the index's paths, each ended by NUL, when the caller has
    just listed them (:func:`clear_hiding_flags`); else they are listed
    here.

    An entry named ``.git`` below the top that is not a repository (a
    regular file, a folder git cannot read as one) is never listed nor
    added: git skips every path named ``.git`` (dir.c, ``is_dot_git``).
    Each such path (``d/.git``) in a folder of the index or of a new file
    is appended to ``found.dot_git`` when given (:func:`find_dot_git_entries`).

    ``found.attributes``, when given, gets the path of each ``.gitattributes``
    of the index and each new one (:func:`is_attributes_file`), for
    :func:`attributes_changed`.

    Returns:
        ``Ok(number of paths marked)`` or ``Err(GitError)``.
    """
    warnings: list[str] = []
    listed = run_git(
        [
            *_worktree_args(worktree, git_dir),
            "ls-files",
            "-z",
            "--others",
            "--exclude-standard",
            "--full-name",
            "--",
            *exclude_pathspecs(exclude),
        ],
        env=env,
        config=DIFF_CONFIG,
        warnings=warnings,
        preexec_fn=preexec_fn,
    )
    match listed:
        case Err() as err:
            return err
        case Ok(output):
            paths = output
    unreadable = found.unreadable if found else None
    nested = found.nested if found else None
    dot_git = found.dot_git if found else None
    attributes = found.attributes if found else None
    if unreadable is not None:
        prefix = "could not open directory "
        unreadable += [w[len(prefix) :] for w in warnings if w.startswith(prefix)]
    if nested is not None:
        nested += [os.fsdecode(p[:-1]) for p in output.split(b"\0") if p.endswith(b"/")]
    if not paths and dot_git is None and attributes is None:
        return Ok(0)
    if tracked is None:
        match run_git(
            [*_worktree_args(worktree, git_dir), "ls-files", "-z", "--full-name"],
            env=env,
            config=DIFF_CONFIG,
            preexec_fn=preexec_fn,
        ):
            case Err() as err:
                return err
            case Ok(tracked):
                pass
    if attributes is not None:
        attributes += [p for p in tracked.split(b"\0") if is_attributes_file(p)]
        attributes += [p for p in paths.split(b"\0") if is_attributes_file(p)]
    if dot_git is not None:
        repositories = {os.fsencode(path) for path in nested or ()}
        dot_git += find_dot_git_entries(
            worktree, _folders_of(tracked) | _folders_of(paths), repositories
        )
    if not paths:
        return Ok(0)
    # a folder that holds an excluded path is never given whole: git add
    # would take the path, and an exclude pathspec naming an ignored path
    # makes git add fail (git 2.39: "The following paths are ignored")
    excluded = b"\0".join(os.fsencode(path) for path in exclude)
    specs = _collapse_new_folders(
        paths.split(b"\0")[:-1], _folders_of(tracked) | _folders_of(excluded)
    )
    pathspecs = b"".join(b":(top,literal)" + spec + b"\0" for spec in specs)
    result = run_git(
        [
            *_worktree_args(worktree, git_dir),
            "add",
            "--intent-to-add",
            "--sparse",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ],
        env=env,
        config=DIFF_CONFIG,
        input=pathspecs,
        preexec_fn=preexec_fn,
    )
    match result:
        case Ok():
            return Ok(len(specs))
        case Err() as err:
            return err


def clear_hiding_flags(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    preexec_fn: Callable[[], None] | None = None,
) -> GitResult[bytes]:
    """Clear the index flags with which a command could hide a change from
    ``git diff``: assume-unchanged on any entry, skip-worktree on an entry
    whose file is in the work tree (git-update-index(1), "USING ASSUME
    UNCHANGED BIT" and "SKIP-WORKTREE BIT": git then never looks at the
    file).  An entry a sparse checkout leaves out (skip-worktree, no file)
    keeps its flag, as git itself clears the flag only for files present.

    Returns:
        ``Ok(the index's paths, each ended by NUL)`` (what
        :func:`mark_untracked_intent_to_add` takes as ``tracked``), or
        ``Err(GitError)``.
    """
    match run_git(
        [*_worktree_args(worktree, git_dir), "ls-files", "-z", "-v", "--full-name"],
        env=env,
        config=DIFF_CONFIG,
        preexec_fn=preexec_fn,
    ):
        case Err() as err:
            return err
        case Ok(listing):
            pass
    assumed, skipped, paths = [], [], []
    for record in listing.split(b"\0"):
        tag, _, path = record.partition(b" ")
        if not path:
            continue
        paths.append(path)
        if tag.islower():
            assumed.append(path)
        if tag.upper() == b"S" and os.path.lexists(os.path.join(worktree, os.fsdecode(path))):
            skipped.append(path)
    # one flag per call: update-index applies only the first of them
    for option, flagged in (("--no-assume-unchanged", assumed), ("--no-skip-worktree", skipped)):
        if not flagged:
            continue
        match run_git(
            [*_worktree_args(worktree, git_dir), "update-index", option, "-z", "--stdin"],
            env=env,
            config=DIFF_CONFIG,
            input=b"".join(path + b"\0" for path in flagged),
            preexec_fn=preexec_fn,
        ):
            case Err() as err:
                return err
            case Ok():
                pass
    return Ok(b"".join(path + b"\0" for path in paths))


def is_attributes_file(path: bytes) -> bool:
    """``path`` (from the top) names a ``.gitattributes`` file."""
    return path == b".gitattributes" or path.endswith(b"/.gitattributes")


def attributes_changed(
    worktree: WorktreePath,
    base: CommitId,
    paths: Sequence[bytes],
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    preexec_fn: Callable[[], None] | None = None,
) -> GitResult[bool]:
    """Whether one of the ``.gitattributes`` files ``paths`` (tracked and
    new ones, from :func:`mark_untracked_intent_to_add`) differs from
    ``base``: ``git diff --quiet`` on them alone, no call when there are
    none.  A change of these files' own stat data is what git notices, so
    this answer does not depend on the stat cache of the other files."""
    if not paths:
        return Ok(False)
    result = run_git(
        [
            *_worktree_args(worktree, git_dir),
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
        preexec_fn=preexec_fn,
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
    os.utime(os.path.join(git_dir, "index"), (1, 1))


def dot_git_warning(path: str) -> str:
    """The warning for an entry :func:`find_dot_git_entries` found."""
    return (
        f"'{path}' is not in the patch: git never tracks a path named .git, "
        "and it is not a repository git can read (a nested repository would be a gitlink)"
    )


def find_dot_git_entries(
    worktree: WorktreePath, folders: set[bytes], repositories: set[bytes] = frozenset()
) -> list[str]:
    """The ``<folder>/.git`` entries of the worktree (one ``lstat`` per
    folder of ``folders``, paths from the top), sorted, but for the folders
    in ``repositories`` (nested repositories, which git records as
    gitlinks): what git leaves out without a word."""
    found = []
    for folder in sorted(folders - repositories):
        if folder and os.path.lexists(os.path.join(worktree, os.fsdecode(folder), ".git")):
            found.append(os.fsdecode(folder) + "/.git")
    return found


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


def write_binary_diff(
    worktree: WorktreePath,
    base: CommitId,
    out: IO[bytes],
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    preexec_fn: Callable[[], None] | None = None,
    prefix: str = "",
) -> GitResult[None]:
    """Stream ``git diff --binary <base>`` of the worktree into ``out``.

    The patch is never held in memory.  ``git apply`` of it on a clean
    checkout of ``base`` reproduces the worktree (design: The patch), but
    for ``exclude``: paths relative to the top left out of the patch even if
    the command ``git add``-ed them (:func:`exclude_pathspecs`).
    ``preexec_fn`` confines git (:func:`.run.run_git`).  ``prefix`` (ending
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
    result = run_git(
        [
            "--no-pager",
            *_worktree_args(worktree, git_dir),
            "diff",
            *options,
            base,
            "--",
            *exclude_pathspecs(exclude),
        ],
        env=env,
        config=DIFF_CONFIG,
        stdout=out,
        preexec_fn=preexec_fn,
    )
    match result:
        case Ok():
            return Ok(None)
        case Err() as err:
            return err


_HEADER = b"diff --git a/"
_CHUNK = 1 << 20


def _header_lines(handle: IO[bytes], chunk_size: int = _CHUNK) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of each ``diff --git a/`` line (unquoted names) of
    a patch, without its newline.  Reads ``chunk_size`` bytes at a time, so
    memory stays bounded by a chunk and one header line whatever the size
    of the patch (a patch is never held in memory; an ``mmap`` would count
    the whole file in the resident set)."""
    needle = b"\n" + _HEADER
    buffer = b"\n"  # a virtual newline before the first byte
    base = -1  # file offset of buffer[0]
    eof = False
    while not eof:
        chunk = handle.read(chunk_size)
        eof = not chunk
        buffer += chunk
        keep_from = max(len(buffer) - (len(needle) - 1), 0)
        at = buffer.find(needle)
        while at >= 0:
            end = buffer.find(b"\n", at + 1)
            if end < 0 and not eof:
                keep_from = at  # the header line goes on in the next chunk
                break
            end = len(buffer) if end < 0 else end
            yield base + at + 1, buffer[at + 1 : end]
            at = buffer.find(needle, at + 1)
        base += keep_from
        buffer = buffer[keep_from:]


def quote_ambiguous_headers(path: str) -> int:
    """Quote the names of ``diff --git a/X b/X`` header lines where ``X``
    holds a space before a slash: ``diff --git "a/X" "b/X"``.

    Git leaves such names unquoted (only control characters, ``"``, ``\\``
    and bytes above 0x7f make it quote), and ``git apply`` cannot split that
    header again ("git diff header lacks filename information when removing
    1 leading pathname component"); for an entry with no ``---``/``+++``
    lines (an empty new or deleted file, a mode change, a binary file) the
    header is all it has.  A quoted name needs no escape here: git would
    have quoted a name that did.  Headers of renames (``X`` and ``Y``
    differ) are left alone: ``rename from``/``rename to`` name them.  The
    file is rewritten (same mode), streaming, only when a header needs it.

    Returns:
        The number of header lines rewritten.
    Raises:
        OSError: the file cannot be read or rewritten.
    """
    replacements: list[tuple[int, int, bytes]] = []
    with open(path, "rb") as handle:
        for offset, line in _header_lines(handle):
            rest = line[len(_HEADER) :]
            if b" /" not in rest:
                continue
            name = rest[: (len(rest) - len(b" b/")) // 2]
            if rest == name + b" b/" + name:
                quoted = b'diff --git "a/' + name + b'" "b/' + name + b'"'
                replacements.append((offset, offset + len(line), quoted))
        if not replacements:
            return 0
        handle.seek(0)
        temporary = path + ".quoting"
        mode = os.fstat(handle.fileno()).st_mode & 0o777
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            with os.fdopen(fd, "wb") as out:
                done = 0
                for start, end, quoted in replacements:
                    _copy_range(handle, out, start - done)
                    out.write(quoted)
                    handle.seek(end)
                    done = end
                shutil.copyfileobj(handle, out, _CHUNK)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    return len(replacements)


def _copy_range(source: IO[bytes], target: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes from ``source``'s position to ``target``, by chunks."""
    while size > 0:
        chunk = source.read(min(size, _CHUNK))
        if not chunk:
            raise OSError(f"patch file ended {size} bytes early")
        target.write(chunk)
        size -= len(chunk)


def count_patch_files(path: str, chunk_size: int = 1 << 20) -> int:
    """Count the paths in a patch file: its ``diff --git`` header lines.

    No content line of a git patch starts with ``diff --git `` (text lines
    start with `` ``, ``+``, ``-`` or ``\\``; binary lines with a length
    letter), so counting headers at line starts is exact.  Reads in chunks
    of ``chunk_size`` bytes.
    """
    header = b"\ndiff --git "
    count = 0
    carry = b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            data = carry + chunk
            count += data.count(header)
            carry = data[-(len(header) - 1) :]
    return count


def diff_stat(
    worktree: WorktreePath,
    base: CommitId,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    color: bool = False,
    width: int | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> GitResult[bytes]:
    """``git diff --stat --summary <base>`` of the worktree: the diffstat of
    the patch :func:`write_binary_diff` writes (the same pinned options, so
    the same paths and renames), with the summary of created, deleted and
    renamed files and mode changes that ``git merge`` and ``git pull`` show.

    Run after :func:`mark_untracked_intent_to_add`, like the patch.

    Args:
        color: colour it (``--color``); git's own ``auto`` cannot tell, its
            standard output being a pipe (see :func:`.apply.diff_color`).
        width: columns of the terminal it goes to (``--stat-width``);
            ``None``: git's default for a pipe (80).
        preexec_fn: confines git as the patch's diff is confined
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
            *_worktree_args(worktree, git_dir),
            "diff",
            *options,
            base,
            "--",
            *exclude_pathspecs(exclude),
        ],
        env=env,
        config=DIFF_CONFIG,
        preexec_fn=preexec_fn,
    )
