"""Make what git does not look at in a used worktree as a checkout leaves
it (:func:`sweep_worktree`), a step of :func:`.refresh.refresh_worktree`."""

from __future__ import annotations

import os
import stat

from .result import Err, GitError, GitResult, Ok
from .types import WorktreePath


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def sweep_worktree(worktree: WorktreePath) -> GitResult[bool]:
    """Make what git does not look at in ``worktree`` as a checkout leaves
    it: git ignores FIFOs, sockets and devices (``git clean`` and ``git
    status`` pass them by; a FIFO named ``pyproject.toml`` blocks every tool
    that reads it) and compares only the executable bit of a file's mode.
    So every entry that is neither a regular file, a symbolic link nor a
    folder is deleted, and every file and folder gets the mode a checkout
    gives (``0666``, ``0777`` when executable, folders ``0777``; less the
    umask): no world-writable, setuid, setgid or sticky bit survives.  The
    worktree's ``.git`` file is left alone; nothing is followed through a
    symbolic link.

    Returns ``Ok(True)`` when it saw an empty folder or deleted something:
    ``git status`` does not show empty folders, so only ``git clean`` can
    be trusted to leave none then."""
    mask = _current_umask()
    file_mode, exec_mode = 0o666 & ~mask, 0o777 & ~mask

    def fix(path: str, mode: int, wanted: int) -> None:
        if stat.S_IMODE(mode) != wanted:
            os.chmod(path, wanted, follow_symlinks=False)

    untidy = False
    try:
        fix(worktree, os.lstat(worktree).st_mode, exec_mode)
        for folder, dirs, files in os.walk(worktree):
            untidy = untidy or not (dirs or files)
            for name in dirs + files:
                if folder == worktree and name == ".git":
                    continue
                path = os.path.join(folder, name)
                mode = os.lstat(path).st_mode
                if stat.S_ISDIR(mode):
                    fix(path, mode, exec_mode)  # before the walk lists it
                elif stat.S_ISREG(mode):
                    fix(path, mode, exec_mode if mode & stat.S_IXUSR else file_mode)
                elif not stat.S_ISLNK(mode):
                    os.unlink(path)
                    untidy = True
    except OSError as exc:
        return Err(GitError(reason=f"cannot sweep '{worktree}': {exc}", errno=exc.errno))
    return Ok(untidy)
