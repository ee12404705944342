"""Submodules in a worktree (gitsubmodules(7)).

A fresh linked worktree has an empty folder for each submodule.  With
``--recurse-submodules`` the submodules the user has checked out are
populated from the user's own submodule repositories, never from the
network: ``git submodule update --checkout`` runs in the worktree with
``submodule.<name>.url`` pointed at the user's submodule git directory for
this run only (``-c``), so git clones it locally (objects hard-linked) into
the worktree's own ``$GIT_DIR/modules/<name>``
(``$GIT_COMMON_DIR/worktrees/<id>/modules/<name>``), which goes with the
worktree.  The user's submodule repositories are only read, and the
superproject's configuration is not written (no ``--init``).

The changes inside a populated submodule go into the patch as ordinary file
changes with paths prefixed by the submodule's path (``diff --git
a/sub/file b/sub/file``), made by a binary diff inside the submodule against
the commit the superproject records: ``git apply`` at the top of the user's
work tree writes them into the submodule's files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import IO

from .diff import DIFF_CONFIG, worktree_args, worktree_output, write_binary_diff
from .files import HOST_FILES, WorktreeFiles
from .intent_to_add import mark_untracked_intent_to_add
from .process import Spawn
from .record import Record
from .result import Err, GitResult, Ok
from .run import run_git
from .types import CommitId, GitDirPath, RepoPath, WorktreePath

GITLINK_MODE = b"160000"

#: Settings for ``git submodule update`` in the worktree: the local clone
#: uses the ``file`` transport, which git refuses for submodules unless
#: told (git 2.38.1, CVE-2022-39253, ``protocol.file.allow``); no hook runs.
UPDATE_CONFIG: tuple[tuple[str, str], ...] = (
    ("protocol.file.allow", "always"),
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
)


class Gitlink(Record):
    """A submodule entry of a worktree's index.

    Attributes:
        path: relative to the top, ``/``-separated.
        commit: the commit the superproject records for it.
    """

    path: str
    commit: CommitId


class Submodule(Record):
    """A submodule populated in a worktree.

    Attributes:
        name: its name (``.gitmodules``, ``submodule.<name>.path``).
        path: relative to the top of the worktree, ``/``-separated.
        commit: the commit checked out (the superproject's gitlink).
        git_dir: its git directory in the worktree's private folder
            (``<admin>/modules/<name>``).
    """

    name: str
    path: str
    commit: CommitId
    git_dir: GitDirPath


def list_gitlinks(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    env: Mapping[str, str],
    spawn: Spawn | None = None,
    files: WorktreeFiles = HOST_FILES,
) -> GitResult[list[Gitlink]]:
    """The submodule entries of the worktree's index (``git ls-files -s``,
    mode 160000), or none when the worktree has no ``.gitmodules`` (git
    knows no submodule there: a gitlink without it is an embedded
    repository, which git cannot populate either).  ``spawn`` runs in
    git's process before it starts (a sandbox).

    Raises:
        subprocess.SubprocessError: ``spawn`` failed."""
    if not files.lexists(os.path.join(worktree, ".gitmodules")):
        return Ok([])
    return worktree_output(
        worktree,
        ["ls-files", "-s", "-z", "--full-name"],
        lambda listing: [
            Gitlink(path, CommitId(commit))
            for path, commit, stage in _gitlinks(listing)
            if stage == b"0"
        ],
        git_dir=git_dir,
        env=env,
        spawn=spawn,
    )


def _gitlinks(listing: bytes) -> list[tuple[str, str, bytes]]:
    """(path, commit id, stage) of each gitlink (mode 160000) of ``git
    ls-files -s -z``."""
    links = []
    for entry in listing.split(b"\0"):
        info, _, path = entry.partition(b"\t")
        fields = info.split()
        if len(fields) == 3 and fields[0] == GITLINK_MODE:
            links.append((os.fsdecode(path), fields[1].decode("ascii"), fields[2]))
    return links


def submodule_names(worktree: WorktreePath, *, env: Mapping[str, str]) -> GitResult[dict[str, str]]:
    """Path -> name of the submodules ``<worktree>/.gitmodules`` declares
    (``submodule.<name>.path``)."""
    result = run_git(
        [
            "config",
            "--file",
            os.path.join(worktree, ".gitmodules"),
            "-z",
            "--get-regexp",
            r"^submodule\..*\.path$",
        ],
        env=env,
    )
    match result:
        case Err() as err:
            if err.error.returncode == 1:  # no such key
                return Ok({})
            return err
        case Ok(output):
            pass
    names = {}
    for record in output.split(b"\0"):
        key, _, value = record.partition(b"\n")
        if key.startswith(b"submodule.") and key.endswith(b".path") and value:
            name = key[len(b"submodule.") : -len(b".path")]
            names[os.fsdecode(value).strip("/")] = os.fsdecode(name)
    return Ok(names)


def user_submodule_git_dir(top: RepoPath, path: str) -> str | None:
    """The git directory of the submodule at ``path`` of the user's work tree
    ``top``: ``<path>/.git`` when it is a folder, the folder its ``gitdir:``
    line names when it is a file (an absorbed submodule:
    ``.git/modules/<name>``); ``None`` when the user has not checked it out."""
    dotgit = os.path.join(top, path, ".git")
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        return os.path.realpath(dotgit)
    try:
        with open(dotgit, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape").strip()
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    found = os.path.realpath(os.path.join(top, path, text[len("gitdir: ") :]))
    return found if os.path.isdir(found) else None


def populate_submodules(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    sources: Mapping[str, tuple[str, str]],
    env: Mapping[str, str],
) -> GitResult[None]:
    """``git submodule update --checkout -- <paths>`` in the worktree, each
    submodule cloned from a local repository, sharing no file with it.

    Args:
        worktree: the worktree's top folder.
        git_dir: its private folder.
        sources: path -> (name, the user's git directory of that submodule).
        env: git-isopatch's own git environment.

    Returns:
        ``Ok(None)``, or ``Err`` with git's message (the recorded commit is
        not in the user's submodule repository, no space...).
    """
    if not sources:
        return Ok(None)
    config = list(UPDATE_CONFIG)
    for name, source in sources.values():
        # a file:// URL: git copies the objects over its transport instead of
        # hard-linking the user's (a local clone's default), so that no file
        # of the clone is one of the user's submodule repository
        url = "file://" + source.replace("%", "%25")
        config += [(f"submodule.{name}.url", url), (f"submodule.{name}.update", "checkout")]
    result = run_git(
        [
            "--literal-pathspecs",
            *worktree_args(worktree, git_dir),
            "submodule",
            "update",
            "--checkout",
            "--no-recommend-shallow",
            "--quiet",
            "--",
            *sources,
        ],
        env=env,
        config=config,
    )
    match result:
        case Ok():
            return Ok(None)
        case Err() as err:
            return err


def changed_submodules(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    gitlinks: Sequence[Gitlink],
    env: Mapping[str, str],
    spawn: Spawn | None = None,
    files: WorktreeFiles = HOST_FILES,
) -> GitResult[list[str]]:
    """The paths of ``gitlinks`` whose content the command changed: a
    checked-out submodule that ``git status`` reports with modified or
    untracked content or another commit (porcelain v2 ``S`` state with
    ``C``, ``M`` or ``U``), or an empty submodule folder that now holds
    files.  ``git status`` runs in each checked-out submodule, and with it
    what that repository's configuration names (a filter): ``spawn``
    runs in git's process before it starts (a sandbox).

    Raises:
        subprocess.SubprocessError: ``spawn`` failed."""
    changed = []
    populated = []
    for link in gitlinks:
        folder = os.path.join(worktree, link.path)
        if files.lexists(os.path.join(folder, ".git")):
            populated.append(link.path)
        elif files.is_real_folder(folder) and files.listdir(folder):
            changed.append(link.path)
    if not populated:
        return Ok(sorted(set(changed)))
    return worktree_output(
        worktree,
        [
            "--literal-pathspecs",
            "status",
            "--porcelain=2",
            "-z",
            "--ignore-submodules=none",
            "--untracked-files=no",
            "--",
            *populated,
        ],
        lambda status: sorted({*changed, *_changed_in_status(status)}),
        git_dir=git_dir,
        env=env,
        spawn=spawn,
    )


def _changed_in_status(status: bytes) -> list[str]:
    """The submodules ``git status --porcelain=2 -z`` reports with modified
    or untracked content or another commit (``S`` state other than ``S...``)."""
    changed = []
    for record in status.split(b"\0"):
        fields = record.split(b" ", 8)
        if len(fields) == 9 and fields[0] == b"1" and fields[2].startswith(b"S"):
            if fields[2] != b"S...":
                changed.append(os.fsdecode(fields[8]))
    return changed


def write_submodule_diff(
    worktree: WorktreePath,
    submodule: Submodule,
    out: IO[bytes],
    *,
    env: Mapping[str, str],
    spawn: Spawn | None = None,
) -> GitResult[None]:
    """Append the changes inside ``submodule`` to ``out``: its untracked
    files are marked intent-to-add in its own index, then ``git diff
    --binary <commit>`` with the pinned options and ``a/<path>/``,
    ``b/<path>/`` prefixes, so the patch names the files from the top of
    the superproject.  Commits the command made in the submodule show as
    their content.  ``spawn`` confines git (:func:`.run.run_git`), as
    for the superproject's diff."""
    folder = WorktreePath(os.path.join(worktree, submodule.path))
    match mark_untracked_intent_to_add(folder, git_dir=submodule.git_dir, env=env, spawn=spawn):
        case Err() as err:
            return err
        case Ok():
            pass
    return write_binary_diff(
        folder,
        submodule.commit,
        out,
        git_dir=submodule.git_dir,
        env=env,
        prefix=submodule.path + "/",
        spawn=spawn,
    )


def patch_stat(patch: str, *, env: Mapping[str, str]) -> GitResult[bytes]:
    """``git apply --stat --summary <patch>``: the diffstat of a patch file
    as written, submodule files included (a diff made in the worktree
    cannot show those under their paths from the top).  Uncoloured, 80
    columns; nothing is applied."""
    folder = os.path.dirname(patch) or "."
    return run_git(
        ["apply", "--stat", "--summary", "--", patch], env=env, config=DIFF_CONFIG, cwd=folder
    )


def still_checked_out(
    worktree: WorktreePath,
    *,
    git_dir: GitDirPath,
    submodules: Sequence[Submodule],
    env: Mapping[str, str],
    spawn: Spawn | None = None,
) -> GitResult[list[Submodule]]:
    """The ``submodules`` (populated before the command) that are still
    submodules after it: a gitlink in the worktree's index and a folder
    holding its ``.git``.  One the command removed (``git rm sub``, ``rm
    -rf sub``, a checkout of a commit without it, which leaves the folder
    as an untracked repository) has no diff of its own: its removal is the
    superproject's (one ``git ls-files -s`` on their paths, none without
    submodules).  ``spawn`` confines git."""
    if not submodules:
        return Ok([])
    listed = worktree_output(
        worktree,
        [
            "--literal-pathspecs",
            "ls-files",
            "-s",
            "-z",
            "--full-name",
            "--",
            *(submodule.path for submodule in submodules),
        ],
        lambda listing: {path for path, _, _ in _gitlinks(listing)},
        git_dir=git_dir,
        env=env,
        spawn=spawn,
    )
    match listed:
        case Err() as err:
            return err
        case Ok(gitlinks):
            pass
    kept = []
    for submodule in submodules:
        folder = os.path.join(worktree, submodule.path)
        if (
            submodule.path in gitlinks
            and os.path.isdir(folder)
            and not os.path.islink(folder)
            and os.path.lexists(os.path.join(folder, ".git"))
        ):
            kept.append(submodule)
    return Ok(kept)
