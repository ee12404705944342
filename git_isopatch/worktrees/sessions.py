"""Sessions: one worktree kept across several runs (``--session <name>``).

A session is a kept worktree of ours whose record (:class:`.store.WorktreeRecord`)
names it; each later run with the same name runs in it again, seeing
everything the earlier ones left.  Its own state lives beside the worktree,
in the folder made for it alone (``<container>/session/``): the
:class:`SessionRecord` (its base, the commit of its state after its last
finished step, whether a step is under way), its whole change as a patch
(``session.patch``), and, between steps, what git wrote into the worktree's
private folder (:func:`stow`).  The command cannot write there: under the
sandbox the folder holding the checkout is copy-on-write, and
``isopatch.tmpdir`` is not writable at all.

Between steps the worktree's private folder holds only what ``git worktree
add`` wrote (its pointers, the lock with :data:`SESSION_LOCK_REASON`, our
record) and a ``HEAD`` at the base: the session's index, ``HEAD``, reflogs
and per-worktree refs, and its object store (:data:`OBJECTS`) wait in
the session's folder, so that no object of the session is ever named
where the user's ``git gc`` looks.  A step puts them back (:func:`unstow`)
and takes them away again when it finishes.  The command reads that
store as an alternate and writes where its git would in a run of its
own (:meth:`Step.command_env`): a ``git clone`` or a repository it makes
is its own business.  After it, git-isopatch's git records the step's
state into the store and packs there what the state and the worktree's
``HEAD`` reach that the last state and the base do not (the
repository's store is copy-on-write under the sandbox, discarded with
the run).

Two runs of one session never interleave: each holds the session's lock
(:func:`held`, ``$GIT_COMMON_DIR/isopatch/sessions/<name>.lock``) for the
whole step; the next waits a bounded time, then fails (``session-busy``).
A step that did not finish (its run was killed) leaves the session marked
broken (``session-broken``): it can only be ended.

A sandboxed session's worktree is a run layer over the base tree of its
base, kept between steps (:mod:`.session_layer`): it costs what it
changed.  Unconfined, or where a sandboxed run cannot go over a base
tree (``--recurse-submodules``; a snapshot whose ``.gitattributes``
differ from its parent's), it is a real checkout at its base, made by
``git worktree add`` and kept between steps: a checkout of its base plus
what it changed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace

from ..errors import IsopatchError, known_os_failure
from ..git.admin_files import read_admin_file, replace_admin_file
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.run import quoted_path_entry
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..git.worktree import worktree_admin_dirs
from .lock import POLL_SECONDS, LockWaitInterrupted, try_flock
from .placement import LAYER_FOLDER, made_by_isopatch
from .store import RECORD_FILE, GitMetadataStore

#: The folder, beside the worktree in its container, holding the session's state.
STATE_FOLDER = "session"
#: The session's record in it.
SESSION_FILE = "session.json"
#: The session's whole change against its base, after its last finished step.
SESSION_PATCH = "session.patch"
#: What the worktree's private folder holds between steps, waiting there.
STOWED = "stowed"
#: The session's own object store, in the worktree's private folder during a step.
OBJECTS = "isopatch-objects"
#: What stays in the worktree's private folder between steps.
_STAYS = frozenset({"gitdir", "commondir", "locked", RECORD_FILE, "config.worktree"})


@dataclass(frozen=True)
class SessionRecord:
    """What git-isopatch knows of a session.

    Attributes:
        name: the session's name.
        base: the commit it started at (kept: never rebased).
        state: the commit of its worktree after its last finished step (in
            its own object store), the base before the first.
        created, used: when it was made and when its last step ended.
        steps: how many steps finished.
        stepping: a step is under way; found so by the next run, the step
            never finished: the session is broken.
        broken: why the session can only be ended, or ``None``.
        sandboxed: its first step ran confined: so do the later ones
            (``None``: a record from before this was kept).
        base_tree: over a base tree, the name of its private folder
            (:mod:`.session_layer`), with ``tree_commit``, its commit;
            ``None``: the session's worktree is a real checkout.
        user_head: the user's ``HEAD`` commit when the session began
            (``None``: unborn, or a record from before this was kept):
            a later step says when it has moved since.
    """

    name: str
    base: str
    state: str
    created: float
    used: float
    steps: int = 0
    stepping: bool = False
    broken: str | None = None
    version: int = 1
    sandboxed: bool | None = None
    base_tree: str | None = None
    tree_commit: str | None = None
    user_head: str | None = None


class Step(Record):
    """One run of a session, as the steps of the procedure see it.

    Attributes:
        name: the session's name.
        base: its base commit.
        since: the commit of its state before this step: the step's patch
            is taken against it.
        objects: the variables naming its object store
            (:func:`objects_env`), for git in its worktree.
        steps: how many steps finished before this one.
        head: the commit its worktree's ``HEAD`` named before this step
            (in its store already: a commit an earlier step made), or
            ``None`` (not a commit id: a branch, unborn).
        user_head: the user's ``HEAD`` when the session began
            (:attr:`SessionRecord.user_head`).
    """

    name: str
    base: CommitId
    since: CommitId
    objects: Mapping[str, str]
    steps: int
    head: CommitId | None = None
    user_head: CommitId | None = None

    @property
    def known(self) -> list[CommitId]:
        """What the session's store holds already with all it reaches:
        the step packs only what these do not reach."""
        return [self.since, self.base, *([self.head] if self.head else [])]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for git-isopatch's own git in the session's worktree."""
        return {**env, **self.objects}

    def command_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for the command: the session's store an alternate, to
        read what earlier steps made, and nothing more; its git writes
        where it works, as in a run of its own (a ``git clone``, a
        repository it makes), and the step's recording keeps what the
        session needs (:func:`.git.keep_objects.pack_reachable`)."""
        store = quoted_path_entry(self.objects["GIT_OBJECT_DIRECTORY"])
        return {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": store}


class Session(Record):
    """A session found: its worktree, the worktree's private folder, the
    folder made for both and its record."""

    worktree: WorktreePath
    admin_dir: GitDirPath
    container: str
    record: SessionRecord


def state_dir(container: str) -> str:
    return os.path.join(container, STATE_FOLDER)


def layer_folder(container: str) -> str:
    """The folder of a sandboxed session's layer kept over its base tree
    (its upper and work folders), in its state's folder."""
    return os.path.join(state_dir(container), LAYER_FOLDER)


def save(container: str, record: SessionRecord) -> None:
    """Write ``record`` into the session's folder (made if missing)."""
    folder = state_dir(container)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    replace_admin_file(os.path.join(folder, SESSION_FILE), json.dumps(asdict(record)).encode())


def load(container: str) -> SessionRecord | None:
    """The session record of ``container``, or ``None`` (none, or not one)."""
    try:
        data = json.loads(read_admin_file(os.path.join(state_dir(container), SESSION_FILE)))
        fields = SessionRecord.__dataclass_fields__
        if not isinstance(data, dict) or set(data) - set(fields):
            return None
        record = SessionRecord(**data)
    except (OSError, ValueError, TypeError):
        return None
    if not (isinstance(record.name, str) and isinstance(record.base, str)):
        return None
    return record


def sessions(repository: UserRepository, store: GitMetadataStore) -> list[Session]:
    """The repository's sessions, from the worktrees' private folders and
    the sessions' own folders alone (no git call)."""
    found = []
    for top, admin_dir in worktree_admin_dirs(repository.common_dir).items():
        record = store.load(admin_dir)
        if record is None or record.session is None or record.container is None:
            continue
        if not made_by_isopatch(top, record.container):
            continue
        session = load(record.container)
        if session is not None and session.name == record.session:
            found.append(Session(WorktreePath(top), admin_dir, record.container, session))
    return found


def find(repository: UserRepository, store: GitMetadataStore, name: str) -> Session | None:
    """The session called ``name``, or ``None``."""
    return next((s for s in sessions(repository, store) if s.record.name == name), None)


def lock_path(common_dir: str, name: str) -> str:
    return os.path.join(common_dir, "isopatch", "sessions", f"{name}.lock")


@contextlib.contextmanager
def held(
    common_dir: str, name: str, seconds: float, interrupted: Callable[[], bool]
) -> Iterator[None]:
    """Hold the lock of session ``name`` (an exclusive ``flock``) for the
    block, waiting at most ``seconds`` for the run holding it.  A lock
    file removed meanwhile (the session ended) is taken again.

    Raises:
        IsopatchError: ``session-busy``, or the lock cannot be made.
        LockWaitInterrupted: a signal arrived while waiting.
    """
    path = lock_path(common_dir, name)
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise known_os_failure(f"could not lock session '{name}'", exc) from exc
        try:
            while not try_flock(fd, exclusive=True):
                if interrupted():
                    raise LockWaitInterrupted(path)
                if time.monotonic() >= deadline:
                    raise IsopatchError(
                        "session-busy",
                        f"session '{name}' is busy: another run has held it for {seconds:g} "
                        f"second{'' if seconds == 1 else 's'}",
                        hint="wait for that run to finish; ISOPATCH_LOCK_TIMEOUT sets the wait",
                    )
                time.sleep(POLL_SECONDS)
            if _same_file(fd, path):
                yield
                return
        finally:
            os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    """The lock file ``fd`` holds is still the one at ``path``."""
    try:
        held, here = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (here.st_dev, here.st_ino)


def forget_lock(common_dir: str, name: str) -> None:
    """Remove the lock file of an ended session (under its lock), and the
    sessions' folder when it is empty."""
    with contextlib.suppress(OSError):
        os.unlink(lock_path(common_dir, name))
    forget_folders(common_dir)


def forget_folders(common_dir: str) -> None:
    """Remove the sessions' folder and ``$GIT_COMMON_DIR/isopatch`` when
    they are empty (the last session, or the base tree it stood on, gone)."""
    folder = os.path.dirname(lock_path(common_dir, "-"))
    with contextlib.suppress(OSError):
        os.rmdir(folder)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(folder))


def _ended_path(common_dir: str, name: str) -> str:
    return os.path.join(os.path.dirname(lock_path(common_dir, name)), f"{name}.ended")


def mark_ended(common_dir: str, name: str, by: str) -> None:
    """Leave word that session ``name`` was ended ``by`` another than its
    own ``--end``, for its next step to say (:func:`ended_by`)."""
    path = _ended_path(common_dir, name)
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        replace_admin_file(path, f"{by} at {when}".encode())


def ended_by(common_dir: str, name: str) -> str | None:
    """What ended session ``name`` and when (:func:`mark_ended`), or
    ``None``; taken away: said once, the name is free for a new session."""
    path = _ended_path(common_dir, name)
    try:
        by = read_admin_file(path, 4096).decode("utf-8", "replace").strip()
        os.unlink(path)
    except OSError:
        return None
    return by or "another process"


def forget_ended(common_dir: str, before: float | None) -> None:
    """Remove the word left (:func:`mark_ended`) before ``before`` (seconds
    since the epoch; ``None``: all) that no step came back for."""
    folder = os.path.dirname(lock_path(common_dir, "-"))
    try:
        names = [name for name in os.listdir(folder) if name.endswith(".ended")]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if before is None or os.stat(path, follow_symlinks=False).st_mtime <= before:
                os.unlink(path)
    forget_folders(common_dir)


def ended(name: str, by: str) -> IsopatchError:
    return IsopatchError(
        "session-ended",
        f"session '{name}' was ended by {by}",
        hint="its worktree is gone; run the step again to start the session afresh at its base",
    )


def broken(name: str, why: str) -> IsopatchError:
    return IsopatchError(
        "session-broken",
        f"session '{name}' is broken: {why}",
        hint=f"end it with 'git isopatch --session {name} --end'",
    )


def confinement_differs(name: str, sandboxed: bool, confined: bool) -> IsopatchError:
    """A run confined otherwise (``confined``) than session ``name``
    (``sandboxed``) is refused: a session keeps its first step's."""
    asked = "--sandbox" if confined else "--no-sandbox"
    runs = "sandboxed" if sandboxed else "unconfined"
    return IsopatchError(
        "session-confinement-differs",
        f"session '{name}' runs {runs}: '{asked}' contradicts it",
        hint="a session keeps the confinement of its first step; end it to start again",
    )


def stow(admin_dir: GitDirPath, container: str, base: CommitId, reason: str) -> None:
    """Move what git wrote into the worktree's private folder (index,
    ``HEAD``, reflogs, refs, the session's objects) into the session's
    folder; leave a ``HEAD`` at ``base`` and lock the worktree with
    ``reason``."""
    stowed = os.path.join(state_dir(container), STOWED)
    if os.path.lexists(stowed):
        shutil.rmtree(stowed)
    os.makedirs(stowed, mode=0o700)
    for name in os.listdir(admin_dir):
        if name not in _STAYS:
            shutil.move(os.path.join(admin_dir, name), os.path.join(stowed, name))
    replace_admin_file(os.path.join(admin_dir, "HEAD"), f"{base}\n".encode())
    replace_admin_file(os.path.join(admin_dir, "locked"), reason.encode())


def unstow(admin_dir: GitDirPath, container: str, reason: str) -> None:
    """Put back what :func:`stow` moved away, the worktree locked with
    ``reason`` (the run's own)."""
    stowed = os.path.join(state_dir(container), STOWED)
    replace_admin_file(os.path.join(admin_dir, "locked"), reason.encode())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(admin_dir, "HEAD"))
    for name in os.listdir(stowed):
        target = os.path.join(admin_dir, name)
        if name in _STAYS or os.path.lexists(target):
            raise OSError(errno.EEXIST, "already there", target)
        shutil.move(os.path.join(stowed, name), target)
    os.rmdir(stowed)


def objects_env(admin_dir: str, common_dir: str) -> Mapping[str, str]:
    """The variables that have git in the session's worktree write its
    objects to the session's own store, reading the repository's too."""
    return {
        "GIT_OBJECT_DIRECTORY": os.path.join(admin_dir, OBJECTS),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": quoted_path_entry(os.path.join(common_dir, "objects")),
    }


def head_commit(admin_dir: str) -> CommitId | None:
    """The commit the worktree's ``HEAD`` file names directly, or ``None``
    (a symbolic ``HEAD``, none, unreadable)."""
    try:
        named = read_admin_file(os.path.join(admin_dir, "HEAD")).strip()
    except OSError:
        return None
    hexdigits = b"0123456789abcdef"
    if len(named) in (40, 64) and all(byte in hexdigits for byte in named):
        return CommitId(named.decode("ascii"))
    return None


class SessionRun(Record):
    """A run's ask of a session: its name, whether the run is confined
    and the user's ``HEAD`` commit now (a new session remembers both)."""

    name: str
    confined: bool
    user_head: CommitId | None = None


def new_record(name: str, base: CommitId, run: SessionRun) -> SessionRecord:
    now = time.time()
    return SessionRecord(
        name=name,
        base=base,
        state=base,
        created=now,
        used=now,
        sandboxed=run.confined,
        user_head=run.user_head,
    )


def finished(record: SessionRecord, state: CommitId | None) -> SessionRecord:
    """``record`` after a step that left the session at ``state``
    (``None``: no state could be taken, the session stays at its last)."""
    now = time.time()
    if state is None:
        return replace(record, stepping=False, used=now)
    return replace(record, state=state, used=now, steps=record.steps + 1, stepping=False)
