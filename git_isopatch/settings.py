"""Defaults for a run from ``isopatch.*`` configuration; the command line wins.

Issue 3: ``isopatch.keep`` (boolean), ``isopatch.timeout`` (seconds) and
``isopatch.tmpdir`` (path) are read through git's whole chain: system,
global, repository and worktree files, and ``git -c`` (which git passes to
``git-isopatch`` in ``GIT_CONFIG_PARAMETERS``); see
:func:`git_isopatch.git.config.read_section`.

To add a key: add a field to :class:`Settings` and a row to
:data:`CONFIG_KEYS` (a ``multi`` row collects every value, in the order git
reads them, as a tuple: for keys like ``isopatch.link``).  Document it in
``man/git-isopatch.rst`` (CONFIGURATION) and the README; the tests check that
each key of the table is in both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .git.config import SECTION, parse_bool, read_section
from .git.result import Err, Ok
from .isolation.errors import IsopatchError, known_failure

if TYPE_CHECKING:  # pygit2 stays unloaded for the CLI's --timeout check
    from .git.repo import UserRepository


@dataclass(frozen=True)
class Settings:
    """What configuration and command line decide for one run.

    Attributes:
        keep: keep the worktree after a successful run (``isopatch.keep``,
            ``--keep``/``--no-keep``).
        timeout: seconds before the command's process group is stopped, or
            ``None`` for no limit (``isopatch.timeout``, ``--timeout``; 0
            means no limit).
        tmpdir: the folder to make the private temporary folder in, or
            ``None`` for ``$TMPDIR`` (``isopatch.tmpdir``).
    """

    keep: bool = False
    timeout: float | None = None
    tmpdir: str | None = None


class BadValue(ValueError):
    """A configuration value a key's parser refuses; the text is a hint."""


_SECONDS = re.compile(r"\A\s*(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*\Z")


def parse_seconds(text: str) -> float:
    """A duration in seconds: a non-negative decimal number (``90``,
    ``1.5``); 0 means no limit.

    Raises:
        ValueError: anything else (``-1``, ``1e3``, ``inf``, ``5m``, empty).
    """
    if not _SECONDS.match(text):
        raise ValueError(f"not a number of seconds: {text!r}")
    return float(text)


def _bool(key: str, value: str | None, _repository: UserRepository) -> bool:
    match parse_bool(key, value):
        case Ok(flag):
            return flag
        case Err():
            raise BadValue(f"'{value}' is not a boolean (true/false, yes/no, on/off, 1/0)")


def _seconds(_key: str, value: str | None, _repository: UserRepository) -> float:
    try:
        return parse_seconds(value if value is not None else "")
    except ValueError:
        raise BadValue(f"'{value or ''}' is not a number of seconds (0 for no limit)") from None


def _path(key: str, value: str | None, repository: UserRepository) -> str:
    """A path as git reads one (git-config(1), "pathname"): ``~/`` and
    ``~user/`` are expanded; a relative path is taken from the top of the
    work tree, where git runs."""
    if not value:
        raise BadValue(f"{key} needs a path")
    return os.path.join(repository.top, os.path.expanduser(value))


@dataclass(frozen=True)
class ConfigKey:
    """One ``isopatch.<name>`` key.

    Attributes:
        name: the key as documented (``keep``, ``maxWorktrees``); git
            compares it without regard to case.
        field: the :class:`Settings` attribute it sets.
        parse: ``(full key, value, repository) -> setting``; raises
            :class:`BadValue` with a hint.  ``value`` is ``None`` for a key
            written without ``=``.
        multi: every value counts (a tuple, in git's order) instead of the last.
    """

    name: str
    field: str
    parse: Callable[[str, str | None, UserRepository], Any]
    multi: bool = False

    @property
    def key(self) -> str:
        return f"{SECTION}.{self.name}"


#: Every configuration key git-isopatch reads.
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("keep", "keep", _bool),
    ConfigKey("timeout", "timeout", _seconds),
    ConfigKey("tmpdir", "tmpdir", _path),
)


def _normalise(field: str, value: Any) -> Any:
    if field == "timeout":
        return value or None  # 0 means no limit
    return value


def resolve_settings(
    repository: UserRepository,
    environ: Mapping[str, str],
    given: Mapping[str, Any],
) -> Settings:
    """The settings of one run: each field from ``given`` when it is not
    ``None`` (the command line, the API's arguments), else from the
    configuration, else the default of :class:`Settings`.

    Configuration is read (one ``git config`` call) only when some field is
    not given, and only the keys still needed are parsed.

    Args:
        repository: the user's repository; its configuration counts.
        environ: the caller's environment (``git -c`` arrives in it).
        given: field name -> value or ``None``; ``timeout`` 0 means no limit.

    Raises:
        IsopatchError: ``bad-config``: ``bad config value for 'isopatch.<key>'``
            with a hint, or git could not read a configuration file.
    """
    values = {field: _normalise(field, value) for field, value in given.items()}
    needed = [row for row in CONFIG_KEYS if given.get(row.field) is None]
    if needed:
        match read_section(repository.git_dir, environ):
            case Ok(config):
                pass
            case Err(error):
                raise known_failure("could not read the configuration", error)
        for row in needed:
            raw = config.get(row.key.lower())
            if not raw:
                continue
            try:
                if row.multi:
                    parsed = tuple(row.parse(row.key, value, repository) for value in raw)
                else:
                    parsed = row.parse(row.key, raw[-1], repository)
            except BadValue as bad:
                raise IsopatchError(
                    "bad-config", f"bad config value for '{row.key}'", hint=str(bad)
                ) from None
            values[row.field] = _normalise(row.field, parsed)
    return Settings(**{k: v for k, v in values.items() if v is not None})
