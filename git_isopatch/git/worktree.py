"""Linked worktree operations with the real git binary: add, remove, list, prune.

Every call here names the repository explicitly (``--git-dir``) and runs with
the caller's sanitised environment; see :func:`.run.own_git_environment`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence

from .admin_files import read_admin_file
from .record import Record
from .result import Err, GitError, GitResult, Ok
from .run import run_git, start_git
from .types import CommitId, GitDirPath, WorktreePath

#: Configuration for ``git worktree add``: no repository hook runs
#: (githooks(5), ``core.hooksPath``; a husky or LFS ``post-checkout`` must not
#: fire), nor a file system monitor hook (``core.fsmonitor``), and checkout
#: uses git's parallel workers (git-config(1), ``checkout.workers``; 0 means
#: one per core).
WORKTREE_ADD_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("checkout.workers", "0"),
)


class WorktreeRecord(Record):
    """One entry of ``git worktree list --porcelain -z``.

    Attributes:
        path: the worktree's top folder (as git recorded it).
        head: the checked-out commit id, or ``None`` (bare entry).
        branch: full ref name when a branch is checked out.
        detached: True when HEAD is detached.
        locked: the lock reason (``""`` when locked without one), or ``None``.
        prunable: the reason git would prune it, or ``None``.
    """

    path: str
    head: str | None = None
    branch: str | None = None
    detached: bool = False
    locked: str | None = None
    prunable: str | None = None


def add_detached_worktree(
    git_dir: GitDirPath,
    path: str,
    commit: CommitId,
    *,
    lock_reason: str,
    env: Mapping[str, str],
    progress: bool = False,
    checkout: bool = True,
    meanwhile: Callable[[], None] | None = None,
) -> GitResult[WorktreePath]:
    """``git worktree add --detach --lock --reason <r> <path> <commit>``
    (with ``--no-checkout`` unless ``checkout``: the registration, ``HEAD``
    and the ``.git`` file alone, no index).

    The worktree is locked from the moment git registers it (git-worktree(1),
    ``--lock``), so a concurrent ``git worktree prune`` cannot take it, and the
    reason names the owner (see the worktrees package).

    With ``progress`` (our standard error is a terminal), git says what it
    does (``Preparing worktree (detached HEAD <id>)``) and shows its
    checkout progress there (:func:`.progress.run_git_with_progress`); without
    it, git runs ``--quiet``, and ``meanwhile`` is called once it runs:
    the caller's own work, done beside it.  git reads every registration
    first: it is asked again while one changes under it
    (:func:`reading_registrations`; git made nothing yet then).

    Returns:
        ``Ok(WorktreePath)`` or ``Err(GitError)`` with git's stderr.
    """
    args = [
        f"--git-dir={git_dir}",
        "worktree",
        "add",
        *([] if progress else ["--quiet"]),
        *([] if checkout else ["--no-checkout"]),
        "--detach",
        "--lock",
        "--reason",
        lock_reason,
        "--",
        path,
        commit,
    ]

    def add() -> GitResult[bytes]:
        nonlocal meanwhile
        if progress:
            from .progress import run_git_with_progress  # its terminal, its thread

            return run_git_with_progress(args, env=env, config=WORKTREE_ADD_CONFIG)
        finish = start_git(args, env=env, config=WORKTREE_ADD_CONFIG)
        try:
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
        finally:
            result = finish()
        return result

    match reading_registrations(add):
        case Ok():
            return Ok(WorktreePath(path))
        case Err() as err:
            return err


#: git's words when a registration changed while it read it (setup.c,
#: ``get_common_dir_noenv``: "failed to read <id>/commondir", looked at
#: then gone, or made but not yet written; abspath.c, ``strbuf_realpath``:
#: "Invalid path '<id>'"; worktree.c: its ``locked``).
_CHANGED_UNDER = re.compile(
    rb"^fatal: (?:failed to read|Invalid path) '?.+?/worktrees/[^/\n]+?"
    rb"(?:/(?:commondir|gitdir|locked))?'?: ",
    re.MULTILINE,
)


def registration_changed_under(error: GitError) -> bool:
    """git failed reading a linked worktree's registration that another
    process was making or removing.  ``git worktree add`` and ``list`` read
    every registration (worktree.c, ``get_worktrees``), each file looked at
    before it is read, and another ``git worktree add`` (which writes
    ``commondir`` after making it) or ``remove``, or a run of ours removing
    its own without the worktree lock, can change one in between: git
    takes no lock against that, and the same command run again no longer
    meets it."""
    return _CHANGED_UNDER.search(error.stderr) is not None


#: The pauses before asking git again while a registration changed under it
#: (:func:`reading_registrations`): none is needed after a removal, but one
#: being made is empty until the git that makes it, on a busy machine, has
#: the processor again.
PAUSES = (0.0, 0.05, 0.2)


def reading_registrations(git: Callable[[], GitResult[bytes]]) -> GitResult[bytes]:
    """``git()``, a git that reads every registration, asked again (after
    each of :data:`PAUSES`) while it fails on one that changed under it
    (:func:`registration_changed_under`)."""
    for pause in PAUSES:
        result = git()
        if not (isinstance(result, Err) and registration_changed_under(result.error)):
            return result
        time.sleep(pause)
    return git()


def checkout_size(
    git_dir: GitDirPath, commit: CommitId, *, block: int, env: Mapping[str, str]
) -> GitResult[tuple[int, int]]:
    """What a checkout of ``commit`` takes on disk: ``(bytes, files)``, each
    file's size rounded up to whole ``block``s (``git ls-tree -r -l``;
    content filters aside).  Used to tell why a checkout failed, as git's
    "unable to write file" does not say (entry.c)."""
    match run_git(
        [f"--git-dir={git_dir}", "ls-tree", "-r", "-l", "-z", "--full-tree", commit], env=env
    ):
        case Err() as failed:
            return failed
        case Ok(output):
            pass
    total = files = 0
    for entry in output.split(b"\0"):
        fields = entry.split(b"\t", 1)[0].split()
        if len(fields) == 4 and fields[1] == b"blob":
            files += 1
            size = int(fields[3])
            total += -(-size // block) * block
    return Ok((total, files))


def worktree_admin_dir(worktree: WorktreePath) -> GitResult[GitDirPath]:
    """Read ``<worktree>/.git`` (``gitdir: <path>``) and return that folder.

    This is the worktree's private folder, ``$GIT_COMMON_DIR/worktrees/<id>``
    (gitrepository-layout(5), ``worktrees/<id>``).
    """
    try:
        text = read_admin_file(os.path.join(worktree, ".git")).decode("utf-8", "surrogateescape")
        text = text.strip()
    except OSError as exc:
        return Err(
            GitError(reason=f"cannot read '{worktree}/.git': {exc.strerror}", errno=exc.errno)
        )
    if not text.startswith("gitdir: "):
        return Err(GitError(reason=f"'{worktree}/.git' is not a gitdir file"))
    admin = text[len("gitdir: ") :]
    return Ok(GitDirPath(os.path.join(worktree, admin)))


def unlock_worktree(
    git_dir: GitDirPath, worktree: WorktreePath, *, env: Mapping[str, str]
) -> GitResult[None]:
    """``git worktree unlock <worktree>``."""
    match run_git([f"--git-dir={git_dir}", "worktree", "unlock", "--", worktree], env=env):
        case Ok():
            return Ok(None)
        case Err() as err:
            return err


def parse_worktree_list(output: bytes) -> list[WorktreeRecord]:
    """Parse ``git worktree list --porcelain -z`` output (git 2.36+).

    Records are NUL-terminated attribute lines; an empty attribute ends a
    worktree (git-worktree(1), "Porcelain Format").
    """
    records: list[WorktreeRecord] = []
    fields: dict[str, str | None] = {}

    def flush() -> None:
        if "worktree" in fields:
            records.append(
                WorktreeRecord(
                    path=fields["worktree"] or "",
                    head=fields.get("HEAD"),
                    branch=fields.get("branch"),
                    detached="detached" in fields,
                    locked=(fields["locked"] or "") if "locked" in fields else None,
                    prunable=(fields["prunable"] or "") if "prunable" in fields else None,
                )
            )
        fields.clear()

    for raw in output.split(b"\0"):
        if not raw:
            flush()
            continue
        line = raw.decode("utf-8", "surrogateescape")
        key, _, value = line.partition(" ")
        fields[key] = value if _ else None
    flush()
    return records


def list_worktrees(
    git_dir: GitDirPath, *, env: Mapping[str, str]
) -> GitResult[list[WorktreeRecord]]:
    """``git worktree list --porcelain -z``, parsed; the main work tree
    first; asked again while a registration changes under git
    (:func:`reading_registrations`)."""
    args = [f"--git-dir={git_dir}", "worktree", "list", "--porcelain", "-z"]
    match reading_registrations(lambda: run_git(args, env=env)):
        case Ok(output):
            return Ok(parse_worktree_list(output))
        case Err() as err:
            return err


def worktree_admin_dirs(common_dir: GitDirPath) -> dict[str, GitDirPath]:
    """Map each linked worktree's top folder to its private folder.

    Reads ``$GIT_COMMON_DIR/worktrees/<id>/gitdir``, which holds the path of
    the worktree's ``.git`` file (gitrepository-layout(5), ``worktrees/<id>/
    gitdir``); the top folder is that path without ``/.git``, as
    ``git worktree list`` shows it (a relative one is taken from the
    private folder).  Paths are normalised
    (:func:`os.path.normpath`).  Unreadable entries are left out.
    """
    folder = os.path.join(common_dir, "worktrees")
    try:
        ids = os.listdir(folder)
    except OSError:
        return {}
    found: dict[str, GitDirPath] = {}
    for name in ids:
        admin = os.path.join(folder, name)
        try:
            gitdir = read_admin_file(os.path.join(admin, "gitdir"))
            dotgit = gitdir.decode("utf-8", "surrogateescape").strip()
        except OSError:
            continue
        if dotgit:  # relative with worktree.useRelativePaths (git 2.48)
            top = os.path.dirname(os.path.join(admin, dotgit))
            found[os.path.normpath(top)] = GitDirPath(admin)
    return found


def discovered_top(folder: str, *, env: Mapping[str, str]) -> GitResult[str]:
    """``git rev-parse --show-toplevel`` run in ``folder``, with the
    repository found as a command run there finds it (no ``--git-dir``):
    the work tree git takes as its top there.  A ``core.worktree`` or
    ``core.bare`` that reaches ``folder`` shows here (git-worktree(1),
    "Configuration file": with ``extensions.worktreeConfig`` the
    repository's own ``core.worktree`` applies to every worktree)."""
    return start_discovered_top(folder, env=env)()


def start_discovered_top(folder: str, *, env: Mapping[str, str]) -> Callable[[], GitResult[str]]:
    """:func:`discovered_top` started now (:func:`.run.start_git`); the
    function returned finishes it (call it exactly once)."""
    finish = start_git(["rev-parse", "--show-toplevel"], env=env, cwd=folder)

    def result() -> GitResult[str]:
        match finish():
            case Ok(output):
                return Ok(output.decode("utf-8", "surrogateescape").rstrip("\n"))
            case Err() as err:
                return err

    return result


def set_worktree_config(
    admin_dir: GitDirPath, settings: Sequence[tuple[str, str]], *, env: Mapping[str, str]
) -> GitResult[None]:
    """Write ``settings`` into the worktree's own configuration file,
    ``<admin_dir>/config.worktree`` (read after the repository's
    ``config`` when ``extensions.worktreeConfig`` is on, so its values win
    for this worktree alone)."""
    path = os.path.join(admin_dir, "config.worktree")
    for key, value in settings:
        match run_git(["config", "--file", path, key, value], env=env):
            case Err() as err:
                return err
            case Ok():
                pass
    return Ok(None)
