"""How git-isopatch reads a worktree's files by path after the command:
as this process sees them (:data:`HOST_FILES`), or, for a worktree over a
base tree that exists only in the command's namespaces, through its layers
(:class:`..worktrees.run_layer.LayerFiles`).  Each reader that looks at
the worktree's files takes one.
"""

from __future__ import annotations

import os


class WorktreeFiles:
    """The worktree's files as this process sees them."""

    def lexists(self, path: str) -> bool:
        """``path`` is there (a link counts, never followed)."""
        return os.path.lexists(path)

    def is_real_folder(self, path: str) -> bool:
        """``path`` is a folder, not a link to one."""
        return os.path.isdir(path) and not os.path.islink(path)

    def listdir(self, path: str) -> list[str]:
        """The names in the folder ``path`` (none when it cannot be read)."""
        try:
            return os.listdir(path)
        except OSError:
            return []


#: The files as this process sees them.
HOST_FILES = WorktreeFiles()
