"""The user's checkout, looked at before and after the command: what of
it changed during the run (design: procedure step 7, "checkout changes")."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from .git.repo import UserRepository
from .git.result import Err, GitResult, Ok
from .git.status import (
    CheckoutState,
    read_checkout,
    start_reading_checkout,
    work_tree_changes,
)
from .values import Start


class CheckoutLook:
    """The look at the user's checkout before the command (unconfined
    runs: under the sandbox the command's writes cannot reach it), its
    ``git status`` started as soon as the run is checked and its output
    read in a thread, so that it overlaps loading the rest of the run and
    getting the worktree (a claim's git processes, or ``git worktree
    add``) instead of coming after them.  Nothing that changes the
    checkout is git-isopatch's, so an earlier look sees what a later one
    would, and what the user changes meanwhile is reported as changed
    during the run."""

    def __init__(self, start: Start) -> None:
        self._result: GitResult[CheckoutState] | BaseException | None = None
        self._thread = None
        if start.sandbox.confined:
            return
        import threading  # subprocess has imported it already

        repository = start.repository
        # started here, not in the thread: the thread would wait for the
        # interpreter's lock while this one loads the run's modules
        finish = start_reading_checkout(repository.git_dir, repository.top, env=start.git_env)
        self._thread = threading.Thread(target=self._look, args=(finish,), name="checkout-look")
        self._thread.start()

    @property
    def taken(self) -> bool:
        """The look is taken (the run is not confined): its ``git status``
        started with it."""
        return self._thread is not None

    def _look(self, finish: Callable[[], GitResult[CheckoutState]]) -> None:
        try:
            self._result = finish()
        except BaseException as exc:  # handed to the caller of result()
            self._result = exc

    def result(self) -> GitResult[CheckoutState] | None:
        """The look (``None``: not taken, the run is sandboxed); waits for it."""
        if self._thread is None:
            return None
        self._thread.join()
        if isinstance(self._result, BaseException):
            raise self._result
        return self._result


def checkout_changes(
    before: GitResult[CheckoutState] | None,
    repository: UserRepository,
    ours: Sequence[str],
    env: Mapping[str, str],
) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """The paths of the user's work tree that changed since ``before``
    (:func:`.git.status.work_tree_changes`), leaving out git-isopatch's own
    folders (``ours``) where they lie inside it (``isopatch.tmpdir`` inside
    the work tree), and, when ``HEAD`` moved meanwhile (a command moved the
    checked-out branch), the commits it named before and after; nothing
    when either look fails or none was taken (``None``: ``--sandbox``)."""
    match before:
        case Ok(old):
            pass
        case _:
            return (), None
    match read_checkout(repository.git_dir, repository.top, env=env):
        case Ok(new):
            pass
        case Err():
            return (), None
    top = os.path.realpath(repository.top)
    inside = []
    for folder in ours:
        relative = os.path.relpath(os.path.realpath(folder), top)
        if relative != ".." and not relative.startswith("../"):
            inside.append(os.fsencode(relative))
    changed = work_tree_changes(
        old, new, repository.git_dir, repository.top, env=env, ignore=inside
    )
    moved = (old.head, new.head) if old.head and new.head and old.head != new.head else None
    return tuple(os.fsdecode(p) for p in changed), moved
