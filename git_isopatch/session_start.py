"""What a run of a session (``--session <name>``) checks before anything
exists, in step 1: the session, if there is one yet, the confinement it
keeps (:func:`existing_session`) and its base (:func:`session_base`).
Loaded only for a session's run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .git.repo import UserRepository
from .git.types import CommitId
from .request import CaptureRequest, UsageConflict
from .settings import AUTO

if TYPE_CHECKING:
    from .worktrees.sessions import SessionRecord


def existing_session(
    repository: UserRepository, request: CaptureRequest
) -> tuple[CaptureRequest, SessionRecord | None]:
    """The record of the existing session ``request.session`` (``None``:
    none asked for, or none yet: this run makes it), and ``request``
    confined as the session's first step was when it asks for no
    confinement of its own: without ``--sandbox`` or ``--no-sandbox`` the
    session's wins over the configuration.

    Raises:
        IsopatchError: ``session-confinement-differs``: the request asks
            for the other confinement; nothing exists yet.
    """
    if not request.session:
        return request, None
    from .worktrees.sessions import confinement_differs, find
    from .worktrees.store import GitMetadataStore

    found = find(repository, GitMetadataStore(), request.session)
    if found is None:
        return request, None
    session = found.record
    if session.sandboxed is None:
        return request, session
    if request.sandbox is None or request.sandbox == AUTO:
        return request._replace(sandbox=session.sandboxed), session
    if bool(request.sandbox) != session.sandboxed:
        raise confinement_differs(session.name, session.sandboxed, bool(request.sandbox))
    return request, session


def session_base(
    request: CaptureRequest, found: SessionRecord, resolve: Callable[[str], CommitId]
) -> CommitId:
    """The base of the existing session ``found``.  A later run keeps the
    session's base: a snapshot option, or a ``--base`` naming another
    commit (``resolve`` resolves it), contradicts it.

    Raises:
        UsageConflict: a base option contradicts the session's base.
    """
    name = found.name
    given = "--staged" if request.staged else "--include-uncommitted"
    if request.staged or request.include_uncommitted:
        raise UsageConflict(f"option '{given}' cannot be used with the existing session '{name}'")
    base = CommitId(found.base)
    if request.base != "HEAD" and resolve(request.base) != base:
        raise UsageConflict(
            f"session '{name}' started at {base}: '--base {request.base}' contradicts it"
        )
    return base
