"""Temporary files and folders named as :mod:`tempfile` names them (a
prefix, eight characters of ``[a-z0-9_]``, a suffix: what
:mod:`..worktrees.placement` recognizes), made the way it makes them
(exclusive creation, mode 0600 or 0700, another name while one is taken),
without its import: :mod:`tempfile` loads :mod:`random`, whose generator
a run never needs (about 9 M instructions on every run).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import TypeVar

#: The characters of a name's random part (tempfile's ``_RandomNameSequence``).
_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
#: How many names are tried before giving up (tempfile's ``TMP_MAX``).
_ATTEMPTS = 10000
#: How :func:`make_file` opens its file (tempfile's ``_bin_openflags``).
_FILE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_Made = TypeVar("_Made")


def _make(folder: str, prefix: str, suffix: str, create: Callable[[str], _Made]) -> _Made:
    """``create`` called on new names in ``folder`` until one is not taken."""
    folder = os.path.abspath(folder)
    for _ in range(_ATTEMPTS):
        drawn = "".join(_CHARACTERS[byte % len(_CHARACTERS)] for byte in os.urandom(8))
        try:
            return create(os.path.join(folder, prefix + drawn + suffix))
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no usable temporary name found", folder)


def _new_folder(path: str) -> str:
    os.mkdir(path, 0o700)
    return path


def _new_file(path: str) -> tuple[int, str]:
    return os.open(path, _FILE_FLAGS, 0o600), path


def make_folder(folder: str, prefix: str, suffix: str = "") -> str:
    """A new folder in ``folder`` (mode 0700), as :func:`tempfile.mkdtemp`
    makes it: its absolute path.

    Raises:
        OSError: it cannot be made.
    """
    return _make(folder, prefix, suffix, _new_folder)


def make_file(folder: str, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new file in ``folder`` (mode 0600), open for reading and writing,
    as :func:`tempfile.mkstemp` makes it: its descriptor and absolute path.

    Raises:
        OSError: it cannot be made.
    """
    return _make(folder, prefix, suffix, _new_file)


def default_folder() -> str:
    """Where temporary files go when nothing says where
    (:func:`tempfile.gettempdir`: ``$TMPDIR``, then ``/tmp``...), loaded
    only then."""
    import tempfile

    return tempfile.gettempdir()
