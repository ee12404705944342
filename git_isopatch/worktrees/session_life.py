"""The life cycle of one step of a session (``--session <name>``): the
session's worktree for the run, made at its base by the first step, found
and brought back by the later ones, and put away again when the step ends
(:mod:`.sessions`), all under the session's lock; and ending a session.

Design: procedure steps 3 and 7, for a session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import replace

from ..errors import IsopatchError, known_os_failure
from ..git.admin_files import read_admin_file
from ..git.quote import quoted
from ..git.repo import UserRepository
from ..git.types import CommitId, WorktreePath
from ..git.worktree import worktree_admin_dirs
from . import kept, session_layer, sessions
from .deletion import delete_tree
from .inventory import SESSION_LOCK_REASON
from .isolation import Isolation
from .lease import Lease
from .lock import LockWaitInterrupted, leave, stand_on
from .provider import OverBaseTree, WorktreeProvider
from .removal import refusal, remove_ours
from .results import PrivateFolder
from .run_layer import RunLayer
from .sessions import SESSION_PATCH, Session, Step
from .store import WorktreeRecord


@contextlib.contextmanager
def session_for_run(
    provider: WorktreeProvider,
    repository: UserRepository,
    base: CommitId,
    session: sessions.SessionRun,
    *,
    command: list[str],
    private: PrivateFolder,
    places: tuple[str | None, str | None],
    over: CommitId | None = None,
) -> Iterator[Lease]:
    """The worktree of ``session`` for one step, held under the session's
    lock: made at ``base`` when the session does not exist yet (it
    remembers the run's confinement; with ``over``, a layer over the base
    tree of that commit, :mod:`.session_layer`), else found, checked (not broken, at
    ``base``, confined as the run is) and its git state put
    back (:func:`.sessions.unstow`).  When the step ends, however it ends,
    its administrative files are put right and its git state put away
    (:func:`.sessions.stow`), the session at the state the step left
    (:meth:`Lease.session_state`) or at its last one, or broken when its
    state could not be recorded (:meth:`Lease.session_broken`); a first
    step that fails leaves no session.

    Raises:
        IsopatchError: ``session-busy``, ``session-ended`` (by another:
            said once), ``session-broken``, ``session-base-differs``,
            ``session-confinement-differs``; as
            :meth:`WorktreeProvider.create`.
    """
    lock, name = provider.lock, session.name
    common = repository.common_dir
    with sessions.held(common, name, lock.seconds, lambda: lock.interrupted() is not None):
        found = sessions.find(repository, provider.store, name)
        if found is None and (by := sessions.ended_by(common, name)) is not None:
            sessions.forget_lock(common, name)
            raise sessions.ended(name, by)
        if found is None and (left := _lost(provider, repository, name)) is not None:
            sessions.forget_lock(common, name)
            gone = "left" if os.path.isdir(left) else "deleted"
            raise sessions.ended(
                name, f"another than git-isopatch, its folder {quoted(left)} {gone}"
            )
        if found is None:
            made = _make(provider, repository, (base, over), session, command, private, places)
            isolation, record = made
        else:
            run = (command, private, session.confined)
            isolation, record = _resume(provider, repository, found, base, run)
        private.mark()
        lease = Lease(isolation)
        try:
            yield lease
        except BaseException:
            if found is None:
                _leave(lease.isolation)
                provider.remove(lease.isolation)
                sessions.forget_lock(common, name)
                raise
            _put_away(provider, lease, record, None, None)
            raise
        _put_away(provider, lease, record, lease.state, lease.session_patch)


def _make(
    provider: WorktreeProvider,
    repository: UserRepository,
    commits: tuple[CommitId, CommitId | None],
    session: sessions.SessionRun,
    command: list[str],
    private: PrivateFolder,
    places: tuple[str | None, str | None],
) -> tuple[Isolation, sessions.SessionRecord]:
    """A new session's worktree at ``base`` (``commits``; over the base
    tree of the second when given, its layer kept), its records written."""
    (base, over), (tmp_root, worktree_root) = commits, places
    name = session.name
    isolation = provider.create(
        repository,
        base,
        command=command,
        private_dir=private.path,
        tmp_root=tmp_root,
        worktree_root=worktree_root,
        over=None if over is None else OverBaseTree(over, sessions.STATE_FOLDER),
    )
    record = replace(sessions.new_record(name, base, session), stepping=True)
    try:
        if isolation.layer is not None:  # the session stands on its base tree
            tree = isolation.layer.pin.tree
            stand_on(tree.admin_dir, isolation.admin_dir)
            name_of = os.path.basename(tree.admin_dir.rstrip("/"))
            record = replace(record, base_tree=name_of, tree_commit=tree.record.commit)
        isolation.record.session = name
        provider.store.save(isolation.admin_dir, isolation.record)
        sessions.save(isolation.container, record)
        _note_folder(repository.common_dir, name, isolation.container)
        os.makedirs(os.path.join(isolation.admin_dir, sessions.OBJECTS, "pack"), mode=0o700)
        os.makedirs(os.path.join(isolation.admin_dir, sessions.OBJECTS, "info"), mode=0o700)
    except OSError as exc:
        _leave(isolation)
        provider.remove(isolation)
        raise known_os_failure(f"could not record session '{name}'", exc) from exc
    return isolation._replace(session=_step(isolation, record)), record


def _note_folder(common_dir: str, name: str, container: str) -> None:
    """Write the folder made for session ``name`` in its lock file (the
    file itself kept: another step may hold it), so that a session whose
    worktree goes by another than git-isopatch (``git worktree remove``)
    is told from one that never was (:func:`_lost`).

    Raises:
        OSError: it cannot be written.
    """
    flags = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(sessions.lock_path(common_dir, name), flags)
    try:
        os.write(fd, os.fsencode(container))
    finally:
        os.close(fd)


def _lost(provider: WorktreeProvider, repository: UserRepository, name: str) -> str | None:
    """The folder made for session ``name``, which the caller did not find
    (:func:`.sessions.find`), as its lock file says (:func:`_note_folder`):
    its worktree went by another than git-isopatch (``git worktree
    remove``), or the folder did (``rm -rf``), whose registration left
    behind is removed.  ``None`` when the lock file names none."""
    for top, admin_dir in worktree_admin_dirs(repository.common_dir).items():
        record = provider.store.load(admin_dir)
        if record is None or record.session != name or record.container is None:
            continue
        if not _is_session_folder(record.container, name):  # caught half-gone
            with provider.lock.held(repository.common_dir):
                remove_ours(repository, WorktreePath(top), admin_dir)
    try:
        said = read_admin_file(sessions.lock_path(repository.common_dir, name), 4096)
    except OSError:
        return None
    return os.fsdecode(said) or None


def _leave(isolation: Isolation) -> None:
    """The session of ``isolation`` no longer stands on its base tree."""
    if isolation.layer is not None:
        leave(isolation.layer.pin.tree.admin_dir, isolation.admin_dir)


def _layer(
    provider: WorktreeProvider, repository: UserRepository, found: Session
) -> RunLayer | None:
    """A sandboxed session's layer over its base tree, pinned again
    (:mod:`.session_layer`); ``None`` for a real checkout.

    Raises:
        IsopatchError: ``session-broken``: its base tree is gone.
    """
    record = found.record
    if record.base_tree is None or record.tree_commit is None:
        return None
    trees = provider.base_trees_of(repository)
    pin = session_layer.pin_again(trees, record.base_tree, CommitId(record.tree_commit))
    if pin is None:
        why = "its base tree is gone (the repository moved, or its folder was deleted)"
        raise sessions.broken(record.name, why)
    return session_layer.layer_again(pin, found.worktree, found.container)


def _step(isolation: Isolation, record: sessions.SessionRecord) -> Step:
    objects = sessions.objects_env(isolation.admin_dir, isolation.repository.common_dir)
    head = sessions.head_commit(isolation.admin_dir)
    base, state = CommitId(record.base), CommitId(record.state)
    user_head = None if record.user_head is None else CommitId(record.user_head)
    return Step(record.name, base, state, objects, record.steps, head, user_head)


def _resume(
    provider: WorktreeProvider,
    repository: UserRepository,
    found: Session,
    base: CommitId,
    run: tuple[list[str], PrivateFolder, bool],
) -> tuple[Isolation, sessions.SessionRecord]:
    """The worktree of session ``found``, its git state put back and
    locked for this run (``run``: its command, private folder and whether
    it is confined).

    Raises:
        IsopatchError: ``session-broken``, ``session-base-differs``,
            ``session-confinement-differs`` (another run made the session
            meanwhile, confined otherwise).
    """
    record, name = found.record, found.record.name
    if record.broken is not None:
        raise sessions.broken(name, record.broken)
    if record.stepping:
        raise sessions.broken(name, "a step of it did not finish (its run was killed)")
    if record.base != base:
        raise IsopatchError(
            "session-base-differs",
            f"session '{name}' started at {record.base}, not at {base}",
            hint="a session keeps its base; end it to start again elsewhere",
        )
    command, private, confined = run
    if record.sandboxed is not None and record.sandboxed != confined:
        raise sessions.confinement_differs(name, record.sandboxed, confined)
    layer = _layer(provider, repository, found)
    try:
        return _put_back(provider, repository, found, (command, private.path), layer)
    except BaseException:
        if layer is not None:
            layer.pin.release()
        raise


def _put_back(
    provider: WorktreeProvider,
    repository: UserRepository,
    found: Session,
    run: tuple[list[str], str],
    layer: RunLayer | None,
) -> tuple[Isolation, sessions.SessionRecord]:
    """:func:`_resume`'s second half: the session's git state put back
    and its worktree locked for this run (``run``: its command and
    private folder), over ``layer`` when it has one."""
    record, name = found.record, found.record.name
    command, private_dir = run
    base = CommitId(record.base)
    owner = WorktreeRecord.for_this_process(container=found.container, base=base, command=command)
    owner.session = name
    stepping = replace(record, stepping=True)
    try:
        with provider.lock.held(repository.common_dir):
            again = sessions.find(repository, provider.store, name)
            if again is None or again.admin_dir != found.admin_dir:
                raise sessions.broken(name, "it was removed while this run waited for it")
            sessions.save(found.container, stepping)
            provider.store.save(found.admin_dir, owner)
            sessions.unstow(found.admin_dir, found.container, owner.lock_reason())
    except OSError as exc:
        raise sessions.broken(name, f"its git state cannot be put back: {_reason(exc)}") from None
    isolation = Isolation(
        private_dir=private_dir,
        worktree=found.worktree,
        admin_dir=found.admin_dir,
        repository=repository,
        base=base,
        record=owner,
        container=found.container,
        layer=layer,
    )
    isolation = isolation._replace(admin_files=kept.snapshot(found.admin_dir, found.worktree))
    return isolation._replace(session=_step(isolation, record)), stepping


def _put_away(
    provider: WorktreeProvider,
    lease: Lease,
    record: sessions.SessionRecord,
    state: CommitId | None,
    patch: str | None,
) -> None:
    """After a step: the administrative files put right, the git state put
    away, the record at ``state`` (``None``: as it was) with ``patch`` as
    the session's whole change.  What cannot be done leaves the session
    broken, saying why."""
    isolation = lease.isolation
    admin_dir, container = isolation.admin_dir, isolation.container
    why = None
    done = sessions.finished(record, state)
    if lease.broken is not None:
        done = replace(done, broken=lease.broken)
    try:
        if isolation.admin_files is not None:  # the pointers; HEAD is the session's
            made = {k: v for k, v in isolation.admin_files.items() if k != "HEAD"}
            put = kept.put_right(admin_dir, isolation.worktree, made, extras=False)
            kept.said_put_right(put, provider.warn)
        if patch is not None:
            shutil.copyfile(patch, os.path.join(sessions.state_dir(container), SESSION_PATCH))
        with provider.lock.held(isolation.repository.common_dir):
            sessions.stow(admin_dir, container, isolation.base, SESSION_LOCK_REASON)
            isolation.record.created = done.used
            provider.store.save(admin_dir, isolation.record)
    except (OSError, IsopatchError, LockWaitInterrupted) as exc:
        why = lease.broken or f"its git state could not be put away: {_reason(exc)}"
        done = replace(record, stepping=False, broken=why)
    try:
        sessions.save(isolation.container, done)
    except OSError as exc:
        provider.warn(f"could not record session '{record.name}': {exc.strerror or exc}")
    if isolation.layer is not None:  # the session stands on it still (:func:`.lock.stand_on`)
        provider.base_trees_of(isolation.repository).release(isolation.layer.pin)


def _reason(exc: BaseException) -> str:
    """``exc`` in one line: moving a folder across file systems copies it,
    and :class:`shutil.Error` lists every entry it could not copy (the
    first is named); an ``OSError`` by its path and its reason, as git
    says it."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        failed = [entry for entry in exc.args[0] if isinstance(entry, tuple) and entry]
        if failed:
            more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
            return f"cannot copy {quoted(str(failed[0][0]))}{more}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{quoted(os.fsdecode(exc.filename))}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    return str(exc).replace("`", "'")  # shutil's "`<path>` is a named pipe"


def _is_session_folder(folder: str, name: str) -> bool:
    """``folder`` holds the state of session ``name`` (:func:`.sessions.load`)."""
    found = sessions.load(folder)
    return found is not None and found.name == name


def end_session(provider: WorktreeProvider, repository: UserRepository, name: str) -> bool:
    """Remove session ``name``: its worktree, the folder made for it (with
    the session's state) and its lock file, under its lock.

    Returns:
        False when there is no such session (nor one another ended).
    Raises:
        IsopatchError: ``session-busy``; the worktree could not be removed.
    """
    lock = provider.lock
    common = repository.common_dir
    with sessions.held(common, name, lock.seconds, lambda: lock.interrupted() is not None):
        found = sessions.find(repository, provider.store, name)
        if found is None:  # one another ended is ended
            left = _lost(provider, repository, name)
            ended = sessions.ended_by(common, name) is not None or left is not None
            if left is not None and _is_session_folder(left, name):
                delete_tree(left)  # its worktree gone by another: what the session kept
            sessions.forget_lock(common, name)
            return ended
        why = refusal(found.worktree)
        if why is None:
            with lock.held(common):
                why = remove_ours(repository, WorktreePath(found.worktree), found.admin_dir)
        if why is not None:
            raise IsopatchError("session-not-removed", f"could not remove session '{name}': {why}")
        sessions.forget_lock(common, name)
    if found.record.base_tree is not None:  # its base tree may go now, as after a run
        tree = os.path.join(common, "worktrees", found.record.base_tree)
        leave(tree, found.admin_dir)
        with contextlib.suppress(IsopatchError, LockWaitInterrupted):
            provider.base_trees_of(repository).trim()
        sessions.forget_folders(common)
    return True
