"""The user's repository, opened as every command of git-isopatch opens it
(a run, ``list``, ``prune``, the MCP server's ``apply``): as git would find
it, or git's refusal classified (:func:`.errors.repository_failure`)."""

from __future__ import annotations

from collections.abc import Mapping

from ..git.repo import UserRepository, open_user_repository
from ..git.result import Err, Ok
from .errors import repository_failure


def open_repository(repo_path: str, environ: Mapping[str, str]) -> UserRepository:
    """Step 2, first half: the user's repository as git would find it.

    Raises:
        IsopatchError: ``not-a-git-repository`` or ``not-a-work-tree``.
    """
    match open_user_repository(repo_path, environ):
        case Ok(repository):
            return repository
        case Err(error):
            raise repository_failure(error)
