"""Step 6 for a session's step: the session's state and its whole change.

After the step's own patch (:mod:`.extract`, taken against the session's
state before the step), the worktree is recorded as a commit in the
session's object store (:func:`.git.snapshot.snapshot_worktree`: what
``git add --all`` would stage, without the linked and copied paths); the
objects reachable from it and from the worktree's ``HEAD`` (a commit the
command made) that its last state, its base and the ``HEAD`` it had
before the step do not reach (earlier steps packed those) are packed
into that store (:func:`.git.keep_objects.pack_reachable`), with the
blobs the command staged and did not commit (the worktree's index, as the
command left it, names them; the next step's git reads them): the command's
git wrote them where it works, under the sandbox into a copy-on-write
view of the repository's store that the run discards.  ``git diff
--binary <base> <state>`` (the pinned options) is the session's
whole change, ``session.patch`` in the run's private folder.  git runs
where the command ran, as for extraction.  The worktree's index is put
back as the command left it: the marks extraction added are not the
session's.
"""

from __future__ import annotations

import contextlib
import os

from .errors import IsopatchError, known_failure, known_os_failure
from .git.admin_files import copy_admin_file
from .git.patch.headers import quote_headers
from .git.patch.paths import read_patch
from .git.quote import quoted
from .git.result import Err, Ok
from .values import SessionPatch, Start
from .worktrees.results import open_private
from .worktrees.sessions import Step
from .worktrees.worktree_git import WorktreeGit

#: The session's whole change, in the run's private folder.
SESSION_PATCH_NAME = "session.patch"


def index_aside(git: WorktreeGit, private_dir: str) -> str | None:
    """Copy the worktree's index as the command left it into the run's
    private folder, to put back after extraction (:func:`take`)."""
    aside = os.path.join(private_dir, "session-index")
    try:
        copy_admin_file(os.path.join(git.admin_dir, "index"), aside)
    except OSError:
        return None
    return aside


def take(
    git: WorktreeGit, start: Start, step: Step, private_dir: str, index: str | None
) -> SessionPatch | IsopatchError:
    """The session after this step: its state and its patch against its
    base; ``index`` (:func:`index_aside`) is the worktree's index again.
    A failure is a value: the session stays at its last state.  No git
    runs on a git directory where the command left what git would wait on
    (:meth:`.worktrees.worktree_git.WorktreeGit.planted`): the step's own
    extraction refused it too, and the state cannot be recorded."""
    planted = git.planted()
    if planted:
        return IsopatchError(
            "unsafe-git-dir",
            f"the command left {quoted(planted[0])} in the git directory"
            " (a FIFO, a device, a link, a forged object)",
        )
    try:
        exclude = [include.path for include in start.includes]
        match git.snapshot(step.since, exclude=exclude):
            case Err(error):
                return known_failure("could not record the session's state", error)
            case Ok(state_id):
                pass
        kept = git.keep_objects([state_id, "HEAD"], step.known, index)
        if isinstance(kept, Err):
            return known_failure("could not keep the session's objects", kept.error)
        path = os.path.join(private_dir, SESSION_PATCH_NAME)
        with open_private(path) as out:
            written = git.write_commit_diff(step.base, state_id, out)
        if isinstance(written, Err):
            return known_failure("could not write the session's patch", written.error)
        contents, replacements = read_patch(path)
        quote_headers(path, replacements)
    except OSError as exc:
        return known_os_failure("could not write the session's patch", exc)
    finally:
        if index is not None:
            _put_back(git.admin_dir, index)
    return SessionPatch(step.name, state_id, path, contents.files, step.user_head)


def _put_back(admin_dir: str, copy: str) -> None:
    """The worktree's index is ``copy`` again (copied beside it, then
    renamed into place: never through a link put there); when extraction
    had git read every file (the attributes changed,
    :func:`.git.attributes.look_again_at_every_file`), the next step's
    git does too: the command's entries hold what the files converted to
    before."""
    index = os.path.join(admin_dir, "index")
    fresh = f"{index}.isopatch-{os.getpid()}"
    with contextlib.suppress(OSError):
        copy_admin_file(copy, fresh)
        if os.stat(index, follow_symlinks=False).st_mtime_ns == 1_000_000_000:
            os.utime(fresh, (1, 1))  # as look_again_at_every_file leaves it
        os.replace(fresh, index)
    with contextlib.suppress(OSError):
        os.unlink(copy)
