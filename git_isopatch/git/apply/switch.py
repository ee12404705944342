"""Steps 2 to 4 of an apply (see :mod:`..apply`): *prepare* (new contents
beside their targets, the originals kept in a journal, the new index
written to git's ``<index>.lock``), *switch* (removals, renames into
place, the index; every path put back from the journal on a failure) and
*verify*.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..record import Record
from ..result import GitResult, Ok
from ..types import GitDirPath, RepoPath
from .compute import GITLINK, SYMLINK, Entry, ancestors, fail, lstat_or_none, os_fail

#: Prefix of the journal folder in the git directory, and of the new
#: contents written beside their targets before they are renamed into place.
JOURNAL_PREFIX = "isopatch-apply-"
NEW_PREFIX = ".isopatch-new-"


class Applied(Record):
    """A patch applied: the paths it touched, and those that did not hold
    what the patch says right afterwards (another writer meanwhile)."""

    paths: tuple[str, ...]
    not_as_patched: tuple[str, ...] = ()


@dataclass
class _Plan:
    """What the switch does: ``removals`` (paths of files and symlinks),
    ``writes`` (path -> (mode, new bytes)), the paths whose current file is
    replaced, and the parents that were missing."""

    removals: list[str] = field(default_factory=list)
    writes: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    replaced: set[str] = field(default_factory=set)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plan_switch(
    top: RepoPath,
    paths: Sequence[str],
    before: Mapping[str, Entry],
    after: Mapping[str, Entry],
    contents: Mapping[str, bytes],
) -> GitResult[_Plan]:
    """The switch for the work tree, refusing what ``git apply`` would fail
    on half-way: a file or symbolic link where the patch needs a folder, a
    folder (with content the patch does not remove) where it needs a file."""
    plan = _Plan()
    for path in paths:
        old, new = before.get(path), after.get(path)
        if old == new or GITLINK in (getattr(old, "mode", ""), getattr(new, "mode", "")):
            continue
        if new is None:
            plan.removals.append(path)
        else:
            plan.writes[path] = (new.mode, contents[path])
            if old is not None:
                plan.replaced.add(path)
    removed = set(plan.removals)
    for path in plan.writes:
        for parent in ancestors(path):
            st = lstat_or_none(os.path.join(top, parent))
            if st is None:
                break
            if not stat.S_ISDIR(st.st_mode) and parent not in removed:
                kind = "symbolic link" if stat.S_ISLNK(st.st_mode) else "file"
                return fail(
                    f"'{parent}' is a {kind} in the work tree where the patch needs a folder"
                )
        st = lstat_or_none(os.path.join(top, path))
        if st is not None and stat.S_ISDIR(st.st_mode):
            for folder, _dirs, files in os.walk(os.path.join(top, path)):
                for name in files:
                    rel = os.path.relpath(os.path.join(folder, name), top)
                    if rel not in removed:
                        return fail(
                            f"'{path}' is a folder in the work tree where the patch needs a file"
                        )
    return Ok(plan)


@dataclass
class _Switch:
    """The journal of one apply: kept originals, new contents beside their
    targets, and the undo steps of what the switch has done."""

    top: str
    journal: str
    temps: dict[str, str] = field(default_factory=dict)
    undo: list[Callable[[], None]] = field(default_factory=list)

    def keep(self, path: str) -> None:
        """Keep the current file (or symlink) at ``path`` in the journal: a
        hard link, else (another file system, a mount) a copy."""
        target = os.path.join(self.top, path)
        kept = os.path.join(self.journal, "old", path)
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        try:
            os.link(target, kept, follow_symlinks=False)
        except OSError:
            if os.path.islink(target):
                os.symlink(os.readlink(target), kept)
            else:
                shutil.copy2(target, kept)

    def put_back(self, path: str) -> None:
        kept = os.path.join(self.journal, "old", path)
        target = os.path.join(self.top, path)
        try:
            os.rename(kept, target)
        except OSError:
            tmp = self._temp_name(os.path.dirname(target))
            if os.path.islink(kept):
                os.symlink(os.readlink(kept), tmp)
            else:
                shutil.copy2(kept, tmp)
            os.rename(tmp, target)

    def _temp_name(self, folder: str) -> str:
        return os.path.join(folder, NEW_PREFIX + os.urandom(6).hex())

    def stage(self, path: str, mode: str, content: bytes, old_mode: int | None) -> None:
        """Write the new content of ``path`` beside it, in the nearest
        folder that exists (a folder the patch makes does not yet)."""
        folder = os.path.dirname(os.path.join(self.top, path))
        while not os.path.isdir(folder) or os.path.islink(folder):
            folder = os.path.dirname(folder)
        tmp = self._temp_name(folder)
        if mode == SYMLINK:
            os.symlink(os.fsdecode(content), tmp)
            self.temps[path] = tmp
        else:
            if old_mode is not None:
                perms = stat.S_IMODE(old_mode) & ~0o111
                if mode == "100755":
                    perms |= (perms & 0o444) >> 2
            else:
                perms = (0o777 if mode == "100755" else 0o666) & ~_umask()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self.temps[path] = tmp
            try:
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, perms)
            finally:
                os.close(fd)

    def discard(self) -> None:
        for tmp in self.temps.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass
        shutil.rmtree(self.journal, ignore_errors=True)

    def roll_back(self) -> None:
        for step in reversed(self.undo):
            try:
                step()
            except OSError:
                pass  # the journal keeps what could not be put back
        self.undo.clear()


def _remove_empty_parents(switch: _Switch, path: str) -> None:
    """Remove the folders ``path`` leaves empty, as ``git apply`` does."""
    for parent in reversed(list(ancestors(path))):
        folder = os.path.join(switch.top, parent)
        try:
            mode = os.lstat(folder).st_mode
            os.rmdir(folder)
        except OSError:
            return
        switch.undo.append(lambda f=folder, m=mode: os.mkdir(f, stat.S_IMODE(m)))


def _make_parents(switch: _Switch, path: str) -> None:
    for parent in ancestors(path):
        folder = os.path.join(switch.top, parent)
        if os.path.isdir(folder) and not os.path.islink(folder):
            continue
        os.mkdir(folder)
        switch.undo.append(lambda f=folder: os.rmdir(f))


def _do_switch(switch: _Switch, plan: _Plan) -> None:
    top = switch.top
    for path in plan.removals:
        os.unlink(os.path.join(top, path))
        switch.undo.append(lambda p=path: switch.put_back(p))
        _remove_empty_parents(switch, path)
    for path in plan.writes:
        _make_parents(switch, path)
        target = os.path.join(top, path)
        st = lstat_or_none(target)
        if st is not None and stat.S_ISDIR(st.st_mode):
            os.rmdir(target)  # emptied by the removals (checked by the plan)
            switch.undo.append(lambda t=target, m=st.st_mode: os.mkdir(t, stat.S_IMODE(m)))
        os.rename(switch.temps[path], target)
        del switch.temps[path]
        if path in plan.replaced:
            switch.undo.append(lambda p=path: switch.put_back(p))
        else:
            switch.undo.append(lambda t=target: os.unlink(t))


def _verify(top: str, plan: _Plan) -> list[str]:
    """The touched paths that do not hold what the patch says (something
    else wrote there meanwhile)."""
    wrong = []
    for path in plan.removals:
        if path not in plan.writes and lstat_or_none(os.path.join(top, path)) is not None:
            wrong.append(path)
    for path, (mode, content) in plan.writes.items():
        target = os.path.join(top, path)
        try:
            if mode == SYMLINK:
                ok = os.fsencode(os.readlink(target)) == content
            else:
                st = os.lstat(target)
                with open(target, "rb") as handle:
                    ok = (
                        stat.S_ISREG(st.st_mode)
                        and bool(st.st_mode & 0o100) == (mode == "100755")
                        and handle.read() == content
                    )
        except OSError:
            ok = False
        if not ok:
            wrong.append(path)
    return wrong


def _journal_folder(git_dir: GitDirPath) -> str:
    """The journal in the git directory (beside the work tree's file system
    as a rule, so originals are kept by hard link), else in ``$TMPDIR``."""
    try:
        return tempfile.mkdtemp(prefix=JOURNAL_PREFIX, dir=git_dir)
    except OSError:
        return tempfile.mkdtemp(prefix=JOURNAL_PREFIX)


def switch_work_tree(
    git_dir: GitDirPath,
    top: RepoPath,
    plan: _Plan,
    index_file: str | None,
    new_index: str,
    proceed: Callable[[], bool] | None,
) -> GitResult[Applied]:
    try:
        switch = _Switch(top=top, journal=_journal_folder(git_dir))
    except OSError as exc:
        return os_fail("cannot make the apply's journal", exc)
    lock = None
    try:
        try:
            for path in sorted({*plan.removals, *plan.replaced}):
                switch.keep(path)
            for path, (mode, content) in plan.writes.items():
                st = lstat_or_none(os.path.join(top, path)) if path in plan.replaced else None
                regular = st is not None and stat.S_ISREG(st.st_mode)
                switch.stage(path, mode, content, st.st_mode if regular else None)
            if index_file is not None:
                _write_lock(index_file + ".lock", new_index)
                lock = index_file + ".lock"
            if proceed is not None and not proceed():
                return fail("interrupted before anything was written")
        except OSError as exc:
            return os_fail(f"nothing was written: cannot write {_where(top, exc)}", exc)
        try:
            _do_switch(switch, plan)
            if lock is not None and index_file is not None:
                os.rename(lock, index_file)
                lock = None
        except BaseException as exc:
            switch.roll_back()
            if isinstance(exc, OSError):
                return os_fail(f"all put back: cannot write {_where(top, exc)}", exc)
            raise
        wrong = _verify(top, plan)
        touched = tuple(sorted({*plan.removals, *plan.writes}))
        return Ok(Applied(paths=touched, not_as_patched=tuple(wrong)))
    finally:
        if lock is not None:
            _unlink(lock)
        switch.discard()


def _where(top: str, exc: OSError) -> str:
    """The path an ``OSError`` is about, from the top of the work tree when
    it lies inside (a rename names its target second)."""
    name = exc.filename2 if isinstance(exc.filename2, str) else exc.filename
    if not isinstance(name, str):
        return "the work tree"
    rel = os.path.relpath(name, top)
    return f"'{name if rel.startswith('..') else rel}'"


def _write_lock(lock: str, content_from: str) -> None:
    """Create ``lock`` (git's ``<index>.lock``: exclusive, so a running git
    is never overwritten) with the content of ``content_from``."""
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError as exc:
        raise OSError(
            errno.EEXIST, "another git process seems to be running (it holds the lock)", lock
        ) from exc
    try:
        with open(content_from, "rb") as source:
            while chunk := source.read(1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        _unlink(lock)
        raise
    os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
