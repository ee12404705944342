"""Branded path and ref types (design: Architecture, "Branded types").

Each type is a distinct subclass whose constructor rejects empty and
malformed values at run time, so that a plain ``str`` cannot cross a layer
where one of them is meant.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath

_HEX40 = re.compile(r"\A(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")


class _BrandedPath(str):
    """An absolute, normalised filesystem path held as ``str``."""

    __slots__ = ()
    _what = "path"

    def __new__(cls, value: str | os.PathLike[str]) -> _BrandedPath:
        text = os.fspath(value)
        if not isinstance(text, str):
            raise TypeError(f"{cls.__name__} takes a str path, not {type(text).__name__}")
        if not text:
            raise ValueError(f"empty {cls._what}")
        if "\0" in text:
            raise ValueError(f"{cls._what} holds a NUL byte: {text!r}")
        return super().__new__(cls, os.path.abspath(text))

    def join(self, *parts: str) -> str:
        """Return ``os.path.join(self, *parts)`` as a plain str."""
        return os.path.join(self, *parts)


class RepoPath(_BrandedPath):
    """Top folder of a user's work tree (absolute)."""

    __slots__ = ()
    _what = "repository path"


class GitDirPath(_BrandedPath):
    """A repository's git directory or common git directory (absolute)."""

    __slots__ = ()
    _what = "git directory"


class WorktreePath(_BrandedPath):
    """Top folder of a linked worktree (absolute)."""

    __slots__ = ()
    _what = "worktree path"


class Ref(str):
    """A revision as the user spelled it (``HEAD``, ``main``, ``v1.0^{commit}``).

    Rejects empty values, values starting with ``-`` (they would read as an
    option), and values holding NUL, newline or other control characters.
    """

    __slots__ = ()

    def __new__(cls, value: str) -> Ref:
        if not isinstance(value, str):
            raise TypeError(f"Ref takes a str, not {type(value).__name__}")
        if not value:
            raise ValueError("empty ref")
        if value.startswith("-"):
            raise ValueError(f"ref may not start with '-': {value!r}")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError(f"ref holds a control character: {value!r}")
        return super().__new__(cls, value)


class CommitId(str):
    """A full commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits."""

    __slots__ = ()

    def __new__(cls, value: str) -> CommitId:
        if not isinstance(value, str) or not _HEX40.match(value):
            raise ValueError(f"not a full commit id: {value!r}")
        return super().__new__(cls, value)


def posix_prefix(path: str) -> str:
    """Return ``path`` (a relative folder) with ``/`` separators and no ``.``."""
    text = PurePosixPath(path).as_posix()
    return "" if text == "." else text
