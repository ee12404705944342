"""Step 4 of the procedure: the worktree brought to what the command needs.

With ``--include-uncommitted`` in a sparse checkout, the snapshot's files
the sparse patterns leave out but the user has are checked out; with
``--recurse-submodules``, the submodules the user has checked out are
populated from the user's own repositories; then the ``--link``/``--copy``/
``.worktreeinclude`` paths are brought in; last, from a snapshot
(``--staged``, ``--include-uncommitted``), the worktree's ``HEAD`` becomes
the user's ``HEAD`` commit (:func:`.git.mirror.mirror_head`).
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import known_failure
from .git.result import Err, Ok
from .git.submodule import Submodule
from .values import Start
from .worktrees.include import bring_in
from .worktrees.isolation import Isolation
from .worktrees.submodules import populate as populate_submodules


def populate(
    isolation: Isolation, start: Start, warn: Callable[[str], None]
) -> tuple[Submodule, ...]:
    """Step 4 for the worktree of ``isolation``.

    Returns:
        the submodules populated (``--recurse-submodules``), whose changes
        the patch holds.
    Raises:
        IsopatchError: a classified git or OS failure.
    """
    if start.include_uncommitted:
        _check_out_present_skipped(isolation, start)
    submodules: tuple[Submodule, ...] = ()
    if start.recurse_submodules:
        submodules = populate_submodules(
            isolation.worktree, isolation.admin_dir, isolation.repository.top, env=start.git_env
        )
    bring_in(isolation.repository, isolation.worktree, start.includes, env=start.git_env, warn=warn)
    if start.staged or start.include_uncommitted:
        _mirror_head(isolation, start)
    return submodules


def _mirror_head(isolation: Isolation, start: Start) -> None:
    """The worktree's ``HEAD`` is the user's ``HEAD`` commit, the
    snapshot's parent (:func:`.git.mirror.mirror_head`); the index follows
    before the command (:mod:`.execute`).

    Raises:
        IsopatchError: a classified git or OS failure.
    """
    from .git.mirror import mirror_head

    match mirror_head(
        isolation.admin_dir,
        start.user_head,
        user_git_dir=isolation.repository.git_dir,
        env=start.git_env,
    ):
        case Err(error):
            raise known_failure(f"could not point the HEAD of '{isolation.worktree}'", error)
        case Ok():
            pass


def _check_out_present_skipped(isolation: Isolation, start: Start) -> None:
    """``--include-uncommitted`` in a sparse checkout: the files of the
    snapshot that the sparse patterns leave out but the user has are
    checked out (:func:`.git.sparse.check_out_present_skipped`).

    Raises:
        IsopatchError: a classified git failure.
    """
    from .git.sparse import check_out_present_skipped

    match check_out_present_skipped(
        isolation.worktree,
        git_dir=isolation.admin_dir,
        source_top=isolation.repository.top,
        env=start.git_env,
    ):
        case Err(error):
            raise known_failure(f"could not check out '{isolation.worktree}'", error)
        case Ok():
            pass
