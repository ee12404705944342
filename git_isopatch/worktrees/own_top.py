"""git inside a worktree of ours takes it as its top (design: procedure
step 3, "git inside sees the worktree as its top (a shared ``core.worktree``
must not leak in)").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from ..errors import IsopatchError, known_failure
from ..git.config_read import linked_top_may_move
from ..git.result import Err, Ok
from ..git.types import GitDirPath, WorktreePath
from ..git.worktree import discovered_top, set_worktree_config, start_discovered_top


def take_as_top(
    worktree: WorktreePath, dirs: tuple[GitDirPath, GitDirPath], *, env: Mapping[str, str]
) -> None:
    """:func:`start_taking_as_top`, finished at once.

    Raises:
        IsopatchError: as :func:`start_taking_as_top`'s function.
    """
    start_taking_as_top(worktree, dirs, env=env)()


def _taken() -> None:
    """Nothing to finish: git takes the worktree as its top."""


def start_taking_as_top(
    worktree: WorktreePath, dirs: tuple[GitDirPath, GitDirPath], *, env: Mapping[str, str]
) -> Callable[[], None]:
    """Make sure git run inside ``worktree`` takes it as its top: its
    first question to git started now, the rest in the function returned
    (call it exactly once), so that the caller's work goes on beside it.

    With ``extensions.worktreeConfig``, a ``core.worktree`` or
    ``core.bare`` in the repository's shared ``config`` applies to every
    worktree (git-worktree(1), "Configuration file"; older
    ``git sparse-checkout init`` left submodules so): git in the worktree
    would take another folder, such as ``.git/modules/<name>``, as its
    work tree, and a ``git clean`` there deletes the repository.  When
    git does not see ``worktree`` as its top, the worktree's own
    ``config.worktree`` gets ``core.bare=false`` and ``core.worktree``
    set to it; then git is asked again.

    Raises:
        IsopatchError: from the function returned: ``worktree-not-isolated``
            when git still takes another folder as the top.
    """
    common_dir, admin_dir = dirs
    if not linked_top_may_move(common_dir, admin_dir):
        return _taken
    first = start_discovered_top(worktree, env=env)

    def finish() -> None:
        real = os.path.realpath(worktree)
        match first():
            case Ok(top) if os.path.realpath(top) == real:
                return
            case _:
                pass
        _configure_top(worktree, admin_dir, real, env)

    return finish


def _configure_top(
    worktree: WorktreePath, admin_dir: GitDirPath, real: str, env: Mapping[str, str]
) -> None:
    """Give ``worktree`` (its real path ``real``) a ``config.worktree`` that
    makes it git's top, then ask git again.

    Raises:
        IsopatchError: ``worktree-not-isolated``.
    """
    settings = (("core.bare", "false"), ("core.worktree", real))
    match set_worktree_config(admin_dir, settings, env=env):
        case Err(error):
            raise known_failure(f"could not configure worktree '{worktree}'", error)
        case Ok():
            pass
    match discovered_top(worktree, env=env):
        case Ok(top) if os.path.realpath(top) == real:
            return
        case Ok(top):
            seen = f"'{top}'"
        case Err(error):
            seen = f"nothing ({error.message()})"
    raise IsopatchError(
        "worktree-not-isolated",
        f"git inside the worktree '{worktree}' takes {seen} as its top; "
        "refusing to run the command there",
        hint="check core.worktree and core.bare in the repository's configuration",
    )
