"""Mount points under a folder, so that removing a folder never deletes
what is mounted inside it (a bind mount the command left in its worktree).

Read from ``/proc/self/mountinfo`` (proc(5)): field 5 is the mount point,
relative to this process's root, with space, tab, newline and backslash
written as octal escapes.
"""

from __future__ import annotations

import os
import re

MOUNTINFO = "/proc/self/mountinfo"
_ESCAPE = re.compile(rb"\\([0-7]{3})")


def _unescape(field: bytes) -> str:
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def mount_points() -> list[str]:
    """Every mount point of this process's mount namespace (empty when
    ``/proc`` cannot be read)."""
    try:
        with open(MOUNTINFO, "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            found.append(_unescape(fields[4]))
    return found


def mount_points_under(folder: str) -> list[str]:
    """The mount points at ``folder`` or below it, sorted; ``folder`` is
    taken as it resolves (:func:`os.path.realpath`).

    When ``/proc`` cannot be read, a folder on another device than
    ``folder`` (``st_dev``) among its direct entries counts as one.
    """
    real = os.path.realpath(folder)
    inside = real.rstrip(os.sep) + os.sep
    found = sorted({m for m in mount_points() if m == real or m.startswith(inside)})
    if found or os.path.exists(MOUNTINFO):
        return found
    try:
        device = os.lstat(real).st_dev
        with os.scandir(real) as entries:
            return sorted(
                e.path
                for e in entries
                if e.is_dir(follow_symlinks=False)
                and e.stat(follow_symlinks=False).st_dev != device
            )
    except OSError:
        return []
