"""The worktree's index made ready for the patch's diff (design: procedure
step 6): the index flags that hide a change cleared, the new files
intent-to-add, git made to read every file again where the attributes
changed; over a base tree, for the paths its layer holds alone, unless the
attributes changed (every file may then convert anew).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import known_failure
from ..git.diff import Paths
from ..git.intent_to_add import Found, dot_git_warning, unreadable_folder_warning
from ..git.result import Err, Ok
from ..git.submodule import Submodule
from ..git.types import CommitId
from .worktree_git import WorktreeGit


def prepare_index(
    git: WorktreeGit,
    base: CommitId,
    paths: Paths,
    submodules: Sequence[Submodule],
    warn: Callable[[str], None],
    attributes_outside: bool,
) -> tuple[Paths, list[Submodule]]:
    """Before the diff of ``paths``: the hiding flags cleared, new files
    intent-to-add (what git left out named by ``warn``), git made to look
    at every file again when the attributes changed (``info/attributes``:
    ``attributes_outside``; a ``.gitattributes``, an ignored one too),
    every path compared then.  A populated submodule the command removed is no longer diffed
    from inside: its removal is the superproject's, and its folder (a
    checkout leaves it as a repository) is never added back.

    Returns:
        what the diff takes (the submodules' paths left out), and the
        submodules still there.
    Raises:
        IsopatchError: a classified git failure.
    """
    if attributes_outside:
        paths = paths.every_path()
    worktree = git.worktree
    match git.still_checked_out(submodules):
        case Err(error):
            raise known_failure(f"could not read the index of '{worktree}'", error)
        case Ok(kept):
            pass
    new_files = paths._replace(exclude=[*paths.exclude, *(s.path for s in submodules)])
    found = _mark_new_files(git, base, new_files)
    ignored = bool(found.ignored_attributes)  # git reads them: they changed
    if paths.only is not None and git.settle_attributes(
        base, found.attributes, info_changed=ignored, paths=paths
    ):
        paths, new_files = paths.every_path(), new_files.every_path()
        found = _mark_new_files(git, base, new_files)  # every file may now convert anew
    for said in found.unreadable:
        warn(unreadable_folder_warning(said))
    for path in found.nested:
        warn(
            f"'{path}' is a repository the command made: the patch holds its commit "
            "(a gitlink), not its files"
        )
    for path in found.dot_git:
        warn(dot_git_warning(path))
    if paths.only is None:
        changed = attributes_outside or bool(found.ignored_attributes)
        git.settle_attributes(base, found.attributes, info_changed=changed)
    return paths._replace(exclude=[*paths.exclude, *(s.path for s in kept)]), kept


def _mark_new_files(git: WorktreeGit, base: CommitId, paths: Paths) -> Found:
    """The hiding flags cleared and the new files intent-to-add, of
    ``paths``; what git said of them."""
    worktree = git.worktree
    found = Found()
    if paths.only == []:
        return found
    match git.clear_hiding_flags(base, paths):
        case Err(error):
            raise known_failure(f"could not read the index of '{worktree}'", error)
        case Ok(listed):
            pass
    match git.mark_untracked_intent_to_add(paths=paths, listed=listed, found=found):
        case Err(error):
            raise known_failure(f"could not mark new files intent-to-add in '{worktree}'", error)
        case Ok():
            pass
    return found
