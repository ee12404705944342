"""Bring a used linked worktree back to what ``git worktree add --detach``
at a commit leaves, in time proportional to what differs, and check it.

What a fresh ``git worktree add --detach <path> <commit>`` (git 2.39) leaves:

- in its private folder ``$GIT_COMMON_DIR/worktrees/<id>``
  (gitrepository-layout(5)): ``HEAD`` and ``ORIG_HEAD`` holding the commit
  id, ``logs/HEAD`` with one entry from the null id to it (no message),
  ``commondir``, ``gitdir``, ``index`` and, when added locked, ``locked``;
  nothing else (no ``config.worktree``, no ``refs/bisect`` or
  ``refs/worktree``, no ``BISECT_*``, ``MERGE_HEAD``, ``rebase-merge``...);
- an index of the commit's tree, no entry flagged skip-worktree,
  assume-unchanged or intent-to-add;
- a work tree holding exactly the commit's files with their modes, no
  untracked or ignored file, and empty folders for gitlinks.

:func:`refresh_worktree` makes a used worktree so and then verifies it;
a worktree it cannot vouch for is reported, never silently used.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping

from .admin_files import common_dir_of, pointer_leads_to, read_admin_file, replace_admin_file
from .index_entries import index_listing
from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .sweep import sweep_worktree
from .types import CommitId, GitDirPath, WorktreePath

#: Files of a worktree's private folder that a fresh ``git worktree add
#: --detach --lock`` leaves, besides ``logs/``; git-isopatch adds its own
#: record (:data:`RECORD_FILES`).
FRESH_ADMIN_FILES = frozenset({"HEAD", "ORIG_HEAD", "commondir", "gitdir", "index", "locked"})

#: Our own files in the private folder, which git ignores (the worktrees
#: package's record, and the answer it keeps for the look before the command).
RECORD_FILES = frozenset({"isopatch.json", "isopatch-conversions"})


#: Configuration for the refresh and its checks: no hook runs, no file
#: system monitor answers for the work tree, no command recurses into a
#: submodule folder (``submodule.recurse``, which ``read-tree`` honours:
#: the folder may hold a repository the command planted, whose filters
#: would run with the user's rights), every stat field and the executable
#: bit count (so that a file whose mode the command changed, or whose
#: content it changed and whose modification time it restored, is seen),
#: and the whole index is used (no sparse index).
REFRESH_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("submodule.recurse", "false"),
    ("core.untrackedCache", "false"),
    ("core.fileMode", "true"),
    ("core.trustctime", "true"),
    ("core.checkStat", "default"),
    ("index.sparse", "false"),
    ("checkout.workers", "0"),
)


def _fail(reason: str) -> Err:
    return Err(GitError(reason=reason))


def _git(
    worktree: WorktreePath, admin_dir: GitDirPath, args: list[str], env: Mapping[str, str]
) -> GitResult[bytes]:
    return run_git(
        [f"--git-dir={admin_dir}", f"--work-tree={worktree}", "-C", worktree, *args],
        env=env,
        config=REFRESH_CONFIG,
    )


def admin_extras(admin_dir: GitDirPath) -> list[str]:
    """Names in ``admin_dir`` that a fresh detached worktree's private
    folder does not hold (``config.worktree``, ``refs``, ``BISECT_LOG``,
    ``info``...), sorted; ``logs`` counts only when it holds more than
    ``HEAD``."""
    extras = []
    for name in sorted(os.listdir(admin_dir)):
        if name in FRESH_ADMIN_FILES or name in RECORD_FILES:
            continue
        if name == "logs":
            logs = os.path.join(admin_dir, "logs")
            if os.path.isdir(logs) and not os.path.islink(logs) and os.listdir(logs) == ["HEAD"]:
                continue
        extras.append(name)
    return extras


def _first_reflog_identity(admin_dir: GitDirPath) -> GitResult[bytes]:
    """The ``Name <email>`` of the first entry of the worktree's
    ``logs/HEAD``: what ``git worktree add`` wrote when it made the
    worktree, with the identity git-isopatch's own git calls have (git's
    lenient ``git_committer_info``, which ``git var`` does not offer)."""
    path = os.path.join(admin_dir, "logs", "HEAD")
    try:
        first = read_admin_file(path).split(b"\n", 1)[0]
    except OSError as exc:
        return Err(GitError(reason=f"cannot read '{path}': {exc.strerror}", errno=exc.errno))
    entry = first.rstrip(b"\n").split(b"\t", 1)[0]
    fields = entry.split(b" ", 2)
    if len(fields) < 3 or b"<" not in fields[2]:
        return _fail(f"cannot read the first entry of '{path}'")
    ident = fields[2].rsplit(b" ", 2)[0]
    return Ok(ident)


def _reset_admin_dir(
    worktree: WorktreePath, admin_dir: GitDirPath, commit: CommitId, env: Mapping[str, str]
) -> GitResult[None]:
    """Leave in ``admin_dir`` only what a fresh add leaves, ``HEAD``
    detached at ``commit``."""
    match _first_reflog_identity(admin_dir):
        case Ok(ident):
            pass
        case Err() as err:
            return err
    offset = time.localtime().tm_gmtoff // 60
    sign = "-" if offset < 0 else "+"
    when = f"{int(time.time())} {sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
    null_id = "0" * len(commit)  # 40 hex digits, or 64 in a SHA-256 repository
    line = f"{null_id} {commit} ".encode() + ident + f" {when}\n".encode()
    try:
        replace_admin_file(os.path.join(admin_dir, "HEAD"), f"{commit}\n".encode())
        replace_admin_file(os.path.join(admin_dir, "ORIG_HEAD"), f"{commit}\n".encode())
        for name in os.listdir(admin_dir):
            if name in FRESH_ADMIN_FILES or name in RECORD_FILES:
                continue
            path = os.path.join(admin_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        os.mkdir(os.path.join(admin_dir, "logs"))
        replace_admin_file(os.path.join(admin_dir, "logs", "HEAD"), line)
    except OSError as exc:
        return Err(GitError(reason=f"cannot reset '{admin_dir}': {exc}", errno=exc.errno))
    return Ok(None)


def _check_admin_pointers(worktree: WorktreePath, admin_dir: GitDirPath) -> GitResult[None]:
    """Check, before any git runs there, that the private folder
    ``admin_dir`` (``$GIT_COMMON_DIR/worktrees/<id>``) still leads where
    ``git worktree add`` pointed it: ``commondir`` to the repository that
    holds ``admin_dir`` (git reads its configuration, hooks and objects from
    there), ``gitdir`` to the worktree's ``.git`` (gitrepository-layout(5),
    ``worktrees/<id>/commondir`` and ``gitdir``)."""
    common = common_dir_of(admin_dir)
    if not pointer_leads_to(admin_dir, "commondir", common):
        return _fail(f"'{admin_dir}/commondir' no longer points at '{common}'")
    dotgit = os.path.join(worktree, ".git")
    if not pointer_leads_to(admin_dir, "gitdir", dotgit):
        return _fail(f"'{admin_dir}/gitdir' no longer points at '{dotgit}'")
    return Ok(None)


def _index_entries(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    env: Mapping[str, str],
    hash_size: int | None = None,
) -> GitResult[list[tuple[bytes, bytes, bytes]]]:
    """``(tag, mode, path)`` of every index entry (``git ls-files -v -s``:
    tag ``H`` for a plain entry, lower case for assume-unchanged, ``S`` for
    skip-worktree; git-ls-files(1)).  Read in process when the object ids'
    ``hash_size`` is known and the index is one :func:`.index_entries.index_listing`
    reads (the index our own ``git read-tree`` just wrote): no git process."""
    if hash_size is not None:
        listing = index_listing(admin_dir, hash_size)
        if listing is not None:
            return Ok(listing)
    match _git(worktree, admin_dir, ["ls-files", "-z", "-v", "-s"], env):
        case Ok(output):
            pass
        case Err() as err:
            return err
    entries = []
    for record in output.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        fields = meta.split(b" ")
        entries.append((fields[0], fields[1] if len(fields) > 1 else b"", path))
    return Ok(entries)


def _flagged(entries: list[tuple[bytes, bytes, bytes]]) -> list[bytes]:
    return [path for tag, _, path in entries if tag != b"H"]


def refresh_worktree(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    commit: CommitId,
    *,
    env: Mapping[str, str],
) -> GitResult[list[bytes]]:
    """Make the used linked worktree ``worktree`` (private folder
    ``admin_dir``) what a fresh ``git worktree add --detach <worktree>
    <commit>`` leaves, then check it.

    Steps, each proportional to what differs:

    0. before any git call: ``.git`` still points at ``admin_dir``, and
       ``admin_dir``'s ``commondir`` and ``gitdir`` at the repository and
       the worktree (a ``commondir`` leading elsewhere would have git read
       another configuration, which names programs);
    1. the private folder: ``HEAD``/``ORIG_HEAD`` at ``commit``, a one-entry
       ``logs/HEAD``, everything else git keeps per worktree deleted
       (``config.worktree``, ``refs/``, ``BISECT_*``, rebase state...);
    2. ``git read-tree --reset -u <commit>``: the index and the work tree
       move to the commit, rewriting only the files whose content, mode or
       stat data changed (git-read-tree(1));
    3. :func:`sweep_worktree`: FIFOs, sockets and devices (which git does
       not see) go, and files and folders get a checkout's modes;
    4. the index listed (``git ls-files -v -s``, or read in process); when an entry carries a
       flag that keeps read-tree from rewriting its file (assume-unchanged,
       skip-worktree), the flags are cleared (``git update-index
       --no-assume-unchanged --no-skip-worktree``) and 2-4 run once more;
    5. ``git clean -ffdqx``: untracked and ignored files go, nested
       repositories too (git-clean(1): ``-f`` twice), and empty folders;
       skipped when the checks of 6 pass without it and the sweep saw no
       empty folder (:func:`_clean_and_verify`);
    6. the checks, on the last listing: ``.git`` still points at
       ``admin_dir``; ``git status --porcelain --ignored -uall`` prints
       nothing; every index entry is plain (``git ls-files -v``); every
       gitlink's folder is empty; the private folder holds only what a
       fresh add leaves.

    Returns:
        ``Ok(paths)`` when the worktree now is as fresh, with the paths of
        its index (the last listing); ``Err(GitError)`` saying why not (the
        caller must not use it then).
    """
    match _check_pointers(worktree, admin_dir):
        case Err() as err:
            return err
        case Ok():
            pass
    match _reset_admin_dir(worktree, admin_dir, commit, env):
        case Err() as err:
            return err
        case Ok():
            pass
    # read-tree and the sweep first, and the index listed once after them:
    # the check needs that listing anyway, and only when it finds flags
    # (which keep read-tree from rewriting a file, or make it refuse: a
    # sparse checkout's) are they cleared and the steps run again, so an
    # index without flags costs one listing, not two
    cleared = False
    while True:
        moved = _move_to(worktree, admin_dir, commit, env)
        failed = moved if isinstance(moved, Err) else None
        if failed is not None and cleared:
            return failed
        match _index_entries(worktree, admin_dir, env, len(commit) // 2):
            case Ok(entries):
                pass
            case Err() as err:
                return err
        if not _flagged(entries) and failed is not None:
            return failed
        if failed is None and (cleared or not _flagged(entries)):
            return _clean_and_verify(worktree, admin_dir, env, entries, must_clean=moved is True)
        match _clear_flags(worktree, admin_dir, entries, env):
            case Err() as err:
                return err
            case Ok():
                cleared = True


def _check_pointers(worktree: WorktreePath, admin_dir: GitDirPath) -> GitResult[None]:
    """Step 0 of :func:`refresh_worktree`, before any git call: the
    worktree's ``.git`` still points at ``admin_dir``, and ``admin_dir``'s
    own pointers at the repository and the worktree."""
    dotgit = os.path.join(worktree, ".git")
    try:
        pointer = read_admin_file(dotgit).decode("utf-8", "surrogateescape").strip()
    except OSError as exc:
        return Err(GitError(reason=f"cannot read '{dotgit}': {exc.strerror}", errno=exc.errno))
    if os.path.islink(dotgit) or pointer != f"gitdir: {admin_dir}":
        return _fail(f"'{dotgit}' no longer points at '{admin_dir}'")
    return _check_admin_pointers(worktree, admin_dir)


def _move_to(
    worktree: WorktreePath, admin_dir: GitDirPath, commit: CommitId, env: Mapping[str, str]
) -> Err | bool:
    """Steps 2 and 3 of :func:`refresh_worktree` but ``git clean``: ``git
    read-tree --reset -u`` and :func:`sweep_worktree`; the first failure,
    else whether the sweep saw what only ``git clean`` removes."""
    match _git(worktree, admin_dir, ["read-tree", "--reset", "-u", commit], env):
        case Err() as err:
            return err
        case Ok():
            pass
    match sweep_worktree(worktree):
        case Err() as err:
            return err
        case Ok(untidy):
            return untidy


def _clean_and_verify(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    env: Mapping[str, str],
    entries: list[tuple[bytes, bytes, bytes]],
    *,
    must_clean: bool,
) -> GitResult[list[bytes]]:
    """``git clean -ffdqx``, then :func:`verify_fresh`; but first the check
    alone unless ``must_clean``: when ``git status --ignored -uall`` shows
    nothing there is no untracked or ignored file for clean to remove, and
    the sweep saw no empty folder (which status does not show), so a
    worktree the command left as it found it costs no clean.  The paths
    of ``entries`` when the check passes."""
    paths = [path for _, _, path in entries]
    if not must_clean:
        match verify_fresh(worktree, admin_dir, env=env, entries=entries):
            case Ok():
                return Ok(paths)
            case Err():
                pass  # something for clean to remove, perhaps: clean, check again
    match _git(worktree, admin_dir, ["clean", "-ffdqx"], env):
        case Err() as err:
            return err
        case Ok():
            pass
    match verify_fresh(worktree, admin_dir, env=env, entries=entries):
        case Err() as err:
            return err
        case Ok():
            return Ok(paths)


def _clear_flags(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    entries: list[tuple[bytes, bytes, bytes]],
    env: Mapping[str, str],
) -> GitResult[None]:
    """Clear the assume-unchanged and skip-worktree flags of ``entries``
    (``git update-index --no-assume-unchanged --no-skip-worktree``)."""
    # one flag per call: update-index applies only the first of
    # --[no-]assume-unchanged and --[no-]skip-worktree (update_one, builtin/update-index.c)
    assume_unchanged = [path for tag, _, path in entries if tag.islower()]
    skip_worktree = [path for tag, _, path in entries if tag.upper() == b"S"]
    for option, paths in (
        ("--no-assume-unchanged", assume_unchanged),
        ("--no-skip-worktree", skip_worktree),
    ):
        if not paths:
            continue
        cleared = run_git(
            [
                f"--git-dir={admin_dir}",
                f"--work-tree={worktree}",
                "-C",
                worktree,
                "update-index",
                option,
                "-z",
                "--stdin",
            ],
            env=env,
            config=REFRESH_CONFIG,
            input=b"".join(path + b"\0" for path in paths),
        )
        match cleared:
            case Err() as err:
                return err
            case Ok():
                pass
    return Ok(None)


def verify_fresh(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    *,
    env: Mapping[str, str],
    entries: list[tuple[bytes, bytes, bytes]] | None = None,
) -> GitResult[None]:
    """Check that ``worktree`` is as a fresh detached add leaves it (step 6
    of :func:`refresh_worktree`); ``Err`` names the first difference.
    ``entries``: the index as listed (:func:`_index_entries`) after the
    last change to it, if the caller has just listed it.

    The submodule folders are looked at before ``git status`` runs: a
    repository in one of them would have ``git status`` (which recurses
    into submodules) run what that repository's configuration names."""
    if entries is None:
        match _index_entries(worktree, admin_dir, env):
            case Ok(entries):
                pass
            case Err() as err:
                return err
    flagged = _flagged(entries)
    if flagged:
        return _fail(f"an index entry is still flagged: {flagged[0].decode(errors='replace')}")
    for _, mode, path in entries:
        if mode == b"160000":
            folder = os.path.join(worktree, os.fsdecode(path))
            try:
                if os.path.islink(folder) or os.listdir(folder):
                    return _fail(f"submodule folder '{os.fsdecode(path)}' is not empty")
            except OSError as exc:
                return _fail(f"cannot read submodule folder '{os.fsdecode(path)}': {exc}")
    status = _git(
        worktree,
        admin_dir,
        [
            "status",
            "--porcelain",
            "-z",
            "--ignored=matching",
            "--untracked-files=all",
            "--ignore-submodules=none",
            "--no-renames",
        ],
        env,
    )
    match status:
        case Ok(output) if output:
            first = output.split(b"\0")[0].decode("utf-8", "backslashreplace")
            return _fail(f"the worktree still differs from its commit: {first}")
        case Err() as err:
            return err
        case Ok():
            pass
    try:
        extras = admin_extras(admin_dir)
    except OSError as exc:
        return Err(GitError(reason=f"cannot read '{admin_dir}': {exc}", errno=exc.errno))
    if extras:
        return _fail(f"the worktree's private folder still holds '{extras[0]}'")
    return Ok(None)
