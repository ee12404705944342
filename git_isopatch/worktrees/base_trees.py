"""The repository's base trees: one checkout per commit, shared by every sandboxed run at
that commit and kept for the next (design: procedure step 3).

A base tree is a real linked worktree (``git worktree add --detach``), checked out once and
never written by a command: the read-only lower layer of each run's own copy-on-write layer. It
lives in the repository's git directory
(``$GIT_COMMON_DIR/isopatch/git-isopatch-XXXXXXXX/<name>``), out of the user's view of the
folder above the checkout; ``git worktree list`` still shows it (every registered worktree is
there), locked with the reason :data:`.store.BASE_LOCK_REASON`, which keeps ``git worktree
prune`` away. Its private folder holds our record (:class:`.store.BaseRecord`) and its pin file.

A run pins the base tree it uses (:func:`pin_base_tree`): a shared ``flock`` on the pin file,
held until the run lets go (:meth:`Pin.release`), however many runs share it; a session, until
it ends (:func:`.lock.stand_on`). Whatever changes a base tree (making, moving, removing it)
takes the exclusive lock on that file without waiting, under the repository's worktree lock
(:class:`.lock.AdminLock`, :func:`.lock.idle_pin`): a base tree in use is never moved or
removed, and the lock goes with the process that held it, however it ended.

At most ``isopatch.baseTrees`` are kept (:func:`trim`, after each run): one whose maker died
half-way goes first, then the least recently used idle ones; 0 keeps none and goes over none an
earlier run left (:meth:`BaseTrees._present`): every run's base tree goes when its last run
ends. An idle one is moved to a new commit by the difference
(:func:`.base_look.check_out_base_tree`: the paths that differ are written, their index entries
alone replaced) when few of its files differ, or when no more may be kept
(:func:`.nearest_base.nearest`); one unused for two weeks expires with the result folders.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..errors import known_failure, known_os_failure
from ..git.admin_files import worktree_add_copies
from ..git.quote import quoted
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.temporary import make_folder
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..git.worktree import add_detached_worktree, worktree_admin_dir, worktree_admin_dirs
from ..logger import log, warning
from .base_look import check_out_base_tree, keep_missing_table
from .lock import (
    PIN_FILE,
    POLL_SECONDS,
    AdminLock,
    LockWaitInterrupted,
    idle_pin,
    open_pin,
    try_flock,
)
from .placement import (
    BASE_TREES_FOLDER,
    TMP_PREFIX,
    base_tree_now,
    made_by_isopatch,
    worktree_name,
)
from .removal import remove_ours
from .space import no_space
from .store import BASE_LOCK_REASON, BaseRecord, GitMetadataStore

if TYPE_CHECKING:
    from ..git.moved_checkout import Difference

#: The folder of the common git directory that holds the base trees.
FOLDER = BASE_TREES_FOLDER


class BaseTree(Record):
    """One base tree: its top folder, private folder and record; ``gone``
    when its folder is not where git's registration says (the repository
    was moved, the folder deleted): ``path`` is then where it lies now, if
    anywhere, and it is only ever removed."""

    path: WorktreePath
    admin_dir: GitDirPath
    record: BaseRecord
    gone: bool = False


class Pin:
    """A run's hold on its base tree (a shared ``flock`` on its pin file),
    until :meth:`release`.  A value a caller may keep across several runs.

    Attributes:
        tree: the base tree, ready at the commit asked for.
        made: this claim made the base tree or moved it (a cold start).
    """

    def __init__(self, tree: BaseTree, fd: int, made: bool) -> None:
        self.tree = tree
        self.made = made
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Let go of the base tree (free to move or go); never raises; a second does nothing."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def base_tree_folder(repository: UserRepository, root: str | None = None) -> str:
    """Where the repository's base trees are made: in its git directory, or
    under ``root`` (``isopatch.tmpdir``, a place the user chose for
    worktrees)."""
    return root if root is not None else os.path.join(repository.common_dir, FOLDER)


def base_trees(repository: UserRepository, store: GitMetadataStore) -> list[BaseTree]:
    """The repository's base trees, from their private folders alone (no
    git call): registered worktrees with our base record, right in a folder
    made for each (:func:`.placement.made_by_isopatch`)."""
    found = []
    for top, admin_dir in worktree_admin_dirs(repository.common_dir).items():
        record = store.load_base(admin_dir)
        if record is not None and made_by_isopatch(top, record.container):
            now = base_tree_now(repository.common_dir, top, admin_dir)
            gone = now != top or not os.path.isdir(top)
            found.append(BaseTree(WorktreePath(now), admin_dir, record, gone))
    return found


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class _Plan(Record):
    """What the worktree lock's holder decided: a pin taken (``pin``), a
    base tree to wait for (``wait``, a pin descriptor), one to move
    (``move`` with its exclusive pin ``fd``, by ``difference``), or one to
    make (none)."""

    pin: Pin | None = None
    wait: int | None = None
    move: BaseTree | None = None
    fd: int | None = None
    difference: Difference | None = None


class BaseTrees:
    """The base trees of one repository, as a run sees them.

    Args:
        repository: the user's repository.
        env: the environment of git-isopatch's own git calls.
        lock: the repository's worktree lock.
        limit: ``isopatch.baseTrees``.
        progress: a checkout shows its progress (on a terminal).
        warn: called with a one-line warning.
        store: the record store.
        root: where new base trees are made (:func:`base_tree_folder`).
    """

    def __init__(
        self,
        repository: UserRepository,
        *,
        env: Mapping[str, str],
        lock: AdminLock,
        limit: int,
        progress: bool = False,
        warn: Callable[[str], None] = warning,
        store: GitMetadataStore | None = None,
        root: str | None = None,
    ) -> None:
        self.root = root
        self.repository = repository
        self.env = env
        self.lock = lock
        self.limit = max(0, limit)
        self.progress = progress
        self.warn = warn
        self.store = store or GitMetadataStore()

    @functools.cached_property
    def settings(self) -> tuple[dict[str, str | None], bool]:
        """The repository's settings (:func:`.git.pinned.read_shared_settings`),
        read once: for :attr:`made_from` and the look of a run over a base tree."""
        from ..git.pinned import read_shared_settings

        return read_shared_settings(self.repository.git_dir, self.env)

    @functools.cached_property
    def made_from(self) -> str:
        """The key base trees are chosen and moved by with their commit:
        what ``git worktree add`` copies from this worktree (its sparse
        patterns) and what converts files on checkout
        (:func:`.git.conversion_key.settings_key`); one of this process
        alone when an attributes file cannot be read."""
        from ..git.conversion_key import settings_key

        key = settings_key(
            self.repository.git_dir,
            settings=self.settings[0],
            env=self.env,
            extra=(worktree_add_copies(self.repository.git_dir),),
        )
        return key or f"unread {os.getpid()} {time.time()}"

    def pin(self, commit: CommitId, *, tmp_root: str | None = None) -> Pin:
        """A base tree ready at ``commit``, pinned: the one at that commit
        (waited for while another run makes it), else an idle one moved
        there, else a new one.

        Raises:
            IsopatchError: the base tree could not be made or moved
                (classified; nothing is left half-made), ``lock-timeout``.
            LockWaitInterrupted: a signal arrived while waiting.
        """
        while True:
            with self.lock.held(self.repository.common_dir):
                plan = self._plan(commit)
                if plan.pin is None and plan.wait is None and plan.move is None:
                    tree, fd = self._register(commit)
                elif plan.move is not None:
                    tree, fd = plan.move, plan.fd
            if plan.pin is not None:
                keep_missing_table(plan.pin.tree.admin_dir, len(commit) // 2)
                return plan.pin
            if plan.wait is not None:
                self._wait(plan.wait)
                continue
            assert fd is not None
            return self._check_out(tree, fd, commit, moved=plan.difference, tmp_root=tmp_root)

    def _plan(self, commit: CommitId) -> _Plan:
        """Under the worktree lock: pin the base tree at ``commit`` when
        one is ready, or say what to do."""
        mine = (commit, self.made_from)
        trees = self._present(base_trees(self.repository, self.store))
        for tree in [t for t in trees if (t.record.commit, t.record.made_from) == mine]:
            fd = open_pin(tree.admin_dir)
            if fd is None:
                continue
            if tree.record.ready and try_flock(fd, exclusive=False):
                record = tree.record._replace(used=time.time())
                with contextlib.suppress(OSError):  # a full disk: the time it was used kept
                    self._save(tree.admin_dir, record)
                return _Plan(pin=Pin(tree._replace(record=record), fd, made=False))
            if not tree.record.ready and try_flock(fd, exclusive=True):
                self._remove(tree)  # its maker died half-way
                _close([fd])
                continue
            return _Plan(wait=fd)  # another run makes it or moves it here
        idle: list[tuple[BaseTree, int]] = []
        for tree in [t for t in trees if t.record.made_from == self.made_from]:
            fd = idle_pin(tree.admin_dir)
            if fd is not None:
                idle.append((tree, fd))
        from .nearest_base import nearest  # only to move a base tree

        ready = [tree for tree, _ in idle if tree.record.ready]
        found = nearest(
            [(CommitId(tree.record.commit), tree.admin_dir, tree.path) for tree in ready],
            commit,
            room=len(trees) < max(self.limit, 1),
            git_dir=self.repository.git_dir,
            env=self.env,
            settings=self.settings[0],
        )
        chosen, difference = (ready[found[0]], found[1]) if found else (None, None)
        _close([fd for tree, fd in idle if tree is not chosen])
        if chosen is None:
            return _Plan()
        fd = next(fd for tree, fd in idle if tree is chosen)
        record = chosen.record._replace(commit=commit, ready=False, used=time.time())
        try:
            self._save(chosen.admin_dir, record)
        except OSError:
            _close([fd])
            return _Plan()
        return _Plan(move=chosen._replace(record=record), fd=fd, difference=difference)

    def _present(self, trees: list[BaseTree]) -> list[BaseTree]:
        """Under the worktree lock: ``trees`` but the gone ones (so that a
        run makes a base tree again rather than run over none) and, at a
        limit of 0, the idle ones (a run is then fully ephemeral, over no
        checkout an earlier run left): an idle one is removed, one a run
        still pins is left to it."""
        present: list[BaseTree] = []
        for tree in trees:
            fd = idle_pin(tree.admin_dir) if tree.gone or self.limit == 0 else None
            if fd is not None:
                self._remove(tree)
                _close([fd])
            elif not tree.gone:
                present.append(tree)
        return present

    def _register(self, commit: CommitId) -> tuple[BaseTree, int]:
        """Under the worktree lock: register a new base tree at ``commit``
        (``git worktree add --no-checkout``), its pin held exclusively.

        Raises:
            IsopatchError: classified; nothing is left behind.
        """
        folder = base_tree_folder(self.repository, self.root)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            container = make_folder(folder, TMP_PREFIX)
        except OSError as exc:
            raise known_os_failure(f"could not create a base tree in '{folder}'", exc) from exc
        path = os.path.join(container, worktree_name(self.repository.top))
        added = add_detached_worktree(
            self.repository.git_dir,
            path,
            commit,
            lock_reason=BASE_LOCK_REASON,
            env=self.env,
            checkout=False,
            progress=self.progress,
        )
        if isinstance(added, Err):
            with contextlib.suppress(OSError):
                os.rmdir(container)
            raise known_failure(f"could not create worktree at {quoted(path)}", added.error)
        now = time.time()
        record = BaseRecord(commit, now, now, container, made_from=self.made_from)
        try:
            match worktree_admin_dir(WorktreePath(path)):
                case Ok(admin_dir):
                    pass
                case Err(error):
                    raise known_failure(f"could not read worktree '{path}'", error)
            self._save(admin_dir, record)
            pin = os.path.join(admin_dir, PIN_FILE)
            fd = os.open(pin, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else holds it
        except OSError as exc:
            remove_ours(self.repository, WorktreePath(path), None)
            raise known_os_failure(f"could not create the base tree '{path}'", exc) from exc
        except BaseException:
            remove_ours(self.repository, WorktreePath(path), None)
            raise
        return BaseTree(WorktreePath(path), admin_dir, record), fd

    def _check_out(
        self,
        tree: BaseTree,
        fd: int,
        commit: CommitId,
        *,
        moved: Difference | None,
        tmp_root: str | None,
    ) -> Pin:
        """Outside the worktree lock, holding ``tree``'s pin exclusively:
        check it out (a new one) or move it to ``commit`` by the difference
        ``moved``; then, under the lock, mark it ready and hold its pin
        shared.  A failure removes it."""
        done = check_out_base_tree(
            tree.path, tree.admin_dir, commit, moved=moved, env=self.env, progress=self.progress
        )
        try:
            with self.lock.held(self.repository.common_dir):
                if isinstance(done, Err):
                    self._remove(tree)
                else:
                    record = tree.record._replace(ready=True, used=time.time())
                    self._save(tree.admin_dir, record)
                    fcntl.flock(fd, fcntl.LOCK_SH)
                    return Pin(tree._replace(record=record), fd, made=True)
        except BaseException:
            _close([fd])
            raise
        _close([fd])
        assert isinstance(done, Err)
        failure = known_failure(f"could not create worktree at {quoted(tree.path)}", done.error)
        if failure.code == "checkout-failed":
            failure = no_space(self.repository, commit, tree.path, tmp_root, failure, env=self.env)
        raise failure

    def _wait(self, fd: int) -> None:
        """Wait until the run that makes or moves a base tree lets go of
        its pin (its process ends, or it holds the pin shared), then let go
        of ``fd``; a signal the caller recorded ends the wait."""
        try:
            while not try_flock(fd, exclusive=False):
                if self.lock.interrupted() is not None:
                    raise LockWaitInterrupted(PIN_FILE, self.lock.interrupted())
                time.sleep(POLL_SECONDS)
        finally:
            _close([fd])

    def _save(self, admin_dir: GitDirPath, record: BaseRecord) -> None:
        self.store.save_base(admin_dir, record)

    def _remove(self, tree: BaseTree) -> bool:
        """Remove ``tree`` (the caller holds the worktree lock and its pin
        exclusively) with the one removal; say why not as a warning."""
        reason = remove_ours(self.repository, tree.path, tree.admin_dir)
        if reason is not None:
            self.warn(f"could not remove the base tree '{tree.path}': {reason}")
        return reason is None

    def release(self, pin: Pin) -> None:
        """Let go of ``pin``, keep at most ``limit`` base trees (:meth:`trim`). Never raises."""
        pin.release()
        try:
            self.trim()
        except Exception as exc:  # clean-up never raises
            log.debug("could not trim the base trees: %s", exc)

    def _trimmed(self, trees: list[BaseTree]) -> bool:
        return len(trees) <= self.limit and all(tree.record.ready for tree in trees)

    def trim(self, *, unused_since: float | None = None) -> list[BaseTree]:
        """Remove the idle base trees not ready (their makers died), then
        idle ones beyond ``limit`` (least recently used first: the pinned
        ones count, and stay) and, with ``unused_since``, every idle one
        last used before then.

        Returns:
            the base trees removed.
        Raises:
            IsopatchError: ``lock-timeout``.
        """
        removed: list[BaseTree] = []
        if unused_since is None and self._trimmed(base_trees(self.repository, self.store)):
            return removed  # nothing to trim: the worktree lock is not waited for
        with self.lock.held(self.repository.common_dir):
            trees = base_trees(self.repository, self.store)  # ready ones first
            trees.sort(key=lambda t: (not t.record.ready, -t.record.used))
            idle, pinned = [], 0
            for tree in trees:
                fd = idle_pin(tree.admin_dir)
                if fd is not None:
                    idle.append((tree, fd))
                else:
                    pinned += 1
            room = max(0, self.limit - pinned)
            for position, (tree, fd) in enumerate(idle):
                stale = unused_since is not None and tree.record.used < unused_since
                if (position >= room or stale or not tree.record.ready) and self._remove(tree):
                    removed.append(tree)
                _close([fd])
        return removed
