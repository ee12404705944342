"""The repository's hooks in the worktree (githooks(5)).

A relative ``core.hooksPath`` is taken from the top of the work tree where
git runs, so in a worktree it names the worktree's own folder.  When that
folder is generated and ignored (husky 9 sets ``core.hooksPath=.husky/_``
and writes ``.husky/_`` with a ``.gitignore`` of ``*``), the worktree does
not have it, and the repository's ``pre-commit`` hook silently does not run
there: a commit the hook would reject goes through.  git-isopatch says so
and names ``--copy``.
"""

from __future__ import annotations

import os
import posixpath
import shlex


def missing_hooks_warning(
    worktree: str, top: str, value: str | None, prefix: str = ""
) -> str | None:
    """The warning for a relative ``core.hooksPath`` (``value``) whose folder
    the user's checkout (``top``) has and the ``worktree`` lacks, naming
    ``--copy`` from the user's folder (``prefix``, ``/``-separated from the
    top); ``None`` otherwise: no value, an absolute or ``~`` path (the same
    for both), a folder both have or neither has."""
    if not value or os.path.isabs(value) or value.startswith("~"):
        return None
    if os.path.lexists(os.path.join(worktree, value)):
        return None
    if not os.path.isdir(os.path.join(top, value)):
        return None
    path = shlex.quote(posixpath.relpath(posixpath.normpath(value), prefix or "."))
    return (
        f"core.hooksPath '{value}' is not in the worktree (git does not track it), so the "
        f"repository's hooks do not run there; bring it in with --copy {path}"
    )
