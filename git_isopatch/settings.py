"""Completing a run's request from ``isopatch.*`` configuration; flags win.

``isopatch.keep`` (boolean), ``isopatch.timeout`` (seconds),
``isopatch.tmpdir`` (path), ``isopatch.link`` and ``isopatch.copy``
(multi-valued paths, from the top of the work tree; an empty value clears
the values read before it, as git does for ``push.pushOption``) and
``isopatch.maxWorktrees`` (a count, 0 for no limit); ``isopatch.sandbox``
(a boolean or ``auto``, the default); ``isopatch.allowNetwork`` and
``isopatch.recurseSubmodules`` (booleans),
``isopatch.allowWrite`` (multi-valued paths, an empty one is a bad
value); ``isopatch.pool`` (a count, 0
for no pool); ``isopatch.maxProcesses`` and ``isopatch.maxMemory`` (the
sandbox's bounds, sizes as git reads integers, 0 for none);
``isopatch.cache`` (boolean) and ``isopatch.cacheLimit`` (a size, 0 for
no bound): the sandbox's cache layer; ``isopatch.baseTrees`` (a count,
0 to keep none).  All are read through
git's whole chain: system, global, repository and worktree files, and
``git -c`` (which git passes to ``git-isopatch`` in
``GIT_CONFIG_PARAMETERS``); see :func:`git_isopatch.git.config.read_section`.

To add a key: add the field to :class:`~git_isopatch.request.CaptureRequest`
(``None`` when not given), a row to :data:`CONFIG_KEYS` (a ``multi`` row
collects every value, in the order git reads them, as a tuple: for keys like
``isopatch.link``) and its default to :func:`complete_request`.  Document it
in ``man/git-isopatch.rst`` (CONFIGURATION) and the README; the tests check
that each key of the table is in both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .git.config import SECTION, read_section
from .git.config_read import parse_bool
from .git.record import Record
from .git.result import Err, GitError, Ok

if TYPE_CHECKING:  # pygit2 stays unloaded for the CLI's --timeout check
    from .git.repo import UserRepository

#: Default of ``isopatch.maxWorktrees``: how many worktrees git-isopatch
#: keeps registered in one repository at most
#: (:func:`.worktrees.removal.make_room`).
DEFAULT_MAX_WORKTREES = 25

#: Default of ``isopatch.maxProcesses``: the processes (threads count, as
#: the kernel counts them) a sandboxed command may have at once.
DEFAULT_MAX_PROCESSES = 4096


#: Default of ``isopatch.cacheLimit``: past this many bytes a
#: repository's cache layer is cleared after the run.
DEFAULT_CACHE_LIMIT = 1 << 30


def default_max_memory() -> int:
    """Default of ``isopatch.maxMemory``: half the machine's memory."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError):
        return 8 << 30


#: Default of ``isopatch.baseTrees``: how many base trees a repository
#: keeps for its sandboxed runs (:mod:`.worktrees.base_trees`).
DEFAULT_BASE_TREES = 2


#: A request (:class:`~git_isopatch.request.CaptureRequest`): a frozen
#: dataclass with a field for each row of :data:`CONFIG_KEYS`.
Request = TypeVar("Request")


#: ``isopatch.sandbox=auto``: confined where the machine allows it.
AUTO = "auto"


class BadValue(ValueError):
    """A configuration value a key's parser refuses; the text is a hint."""


class ConfigError(Exception):
    """A configuration git-isopatch cannot use: ``message`` is ``bad config
    value for 'isopatch.<key>'`` with a ``hint``, or, when git could not
    read the configuration, the action and git's ``error``
    (:func:`.errors.config_failure` makes the failure of it)."""

    def __init__(
        self, message: str, *, hint: str | None = None, error: GitError | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.error = error


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


def _sandbox(key: str, value: str | None, repository: UserRepository) -> bool | str:
    """:data:`AUTO` (confined where the machine allows it), or a boolean."""
    if value is not None and value.strip().lower() == AUTO:
        return AUTO
    try:
        return _bool(key, value, repository)
    except BadValue:
        raise BadValue(
            f"'{value}' is not a boolean (true/false, yes/no, on/off, 1/0) or 'auto'"
        ) from None


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


def _tmpdir(key: str, value: str | None, repository: UserRepository) -> str:
    """A path as :func:`_path` reads one, that is not git metadata
    (:func:`.git.metadata.git_metadata_dir`): the worktree and its files
    placed in ``.git`` would read as the repository's refs and objects, as
    ``-o`` refuses to write there."""
    from .git.metadata import git_metadata_dir

    path = _path(key, value, repository)
    git_dir = git_metadata_dir(repository, path)
    if git_dir is not None:
        raise BadValue(f"'{path}' is inside the git directory '{git_dir}'")
    return path


def _include_path(key: str, value: str | None, _repository: UserRepository) -> str:
    """A path to link or copy, as written (relative to the top of the work
    tree); it is checked when a run brings it in (:mod:`.worktrees.include`)."""
    if value is None:
        raise BadValue(f"{key} needs a path")
    return value


_COUNT = re.compile(r"\A\s*([0-9]+)([kmg]?)\s*\Z", re.IGNORECASE)


def _count(_key: str, value: str | None, _repository: UserRepository) -> int:
    """A non-negative integer as git reads one (git-config(1), ``--type=int``:
    an optional ``k``, ``m`` or ``g`` suffix multiplies by 1024...)."""
    match = _COUNT.match(value or "")
    if match is None:
        raise BadValue(f"'{value or ''}' is not a number of worktrees (0 for no limit)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


def parse_size(text: str) -> int:
    """A non-negative size as git reads an integer (``512m``, ``2g``,
    ``1073741824``); 0: no bound.

    Raises:
        ValueError: anything else.
    """
    match = _COUNT.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


def _processes(_key: str, value: str | None, _repository: UserRepository) -> int:
    try:
        return parse_size(value or "")
    except ValueError:
        raise BadValue(f"'{value or ''}' is not a number of processes (0 for no bound)") from None


def _memory(_key: str, value: str | None, _repository: UserRepository) -> int:
    try:
        return parse_size(value or "")
    except ValueError:
        why = "is not a size in bytes (512m, 2g; 0 for no bound)"
        raise BadValue(f"'{value or ''}' {why}") from None


def _cache_limit(_key: str, value: str | None, _repository: UserRepository) -> int:
    try:
        return parse_size(value or "")
    except ValueError:
        why = "is not a size in bytes (512m, 2g; 0 for no bound)"
        raise BadValue(f"'{value or ''}' {why}") from None


def after_last_reset(values: list[str | None]) -> list[str | None]:
    """The values of a multi-valued key after its last empty one: an empty
    value clears the list (git-config(1), ``push.pushOption``)."""
    resets = [i for i, value in enumerate(values) if value == ""]
    return values[resets[-1] + 1 :] if resets else values


def _pool_size(key: str, value: str | None, repository: UserRepository) -> int:
    """A count as :func:`_count` reads one; 0 means no pool."""
    try:
        return _count(key, value, repository)
    except BadValue:
        raise BadValue(f"'{value or ''}' is not a number of worktrees (0 for no pool)") from None


def _base_trees(key: str, value: str | None, repository: UserRepository) -> int:
    """A count as :func:`_count` reads one; 0 keeps no base tree."""
    try:
        return _count(key, value, repository)
    except BadValue:
        raise BadValue(f"'{value or ''}' is not a number of base trees (0 keeps none)") from None


class ConfigKey(Record):
    """One ``isopatch.<name>`` key.

    Attributes:
        name: the key as documented (``keep``, ``maxWorktrees``); git
            compares it without regard to case.
        field: the :class:`~git_isopatch.request.CaptureRequest` field it sets.
        parse: ``(full key, value, repository) -> setting``; raises
            :class:`BadValue` with a hint.  ``value`` is ``None`` for a key
            written without ``=``.
        multi: every value counts (a tuple, in git's order) instead of the last.
        empty_resets: with ``multi``, an empty value clears the values read
            before it (:func:`after_last_reset`); else ``parse`` gets it.
    """

    name: str
    field: str
    parse: Callable[[str, str | None, UserRepository], Any]
    multi: bool = False
    empty_resets: bool = True

    @property
    def key(self) -> str:
        return f"{SECTION}.{self.name}"


#: Every configuration key git-isopatch reads.
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("keep", "keep", _bool),
    ConfigKey("timeout", "timeout", _seconds),
    ConfigKey("tmpdir", "tmpdir", _tmpdir),
    ConfigKey("link", "configured_links", _include_path, multi=True),
    ConfigKey("copy", "configured_copies", _include_path, multi=True),
    ConfigKey("maxWorktrees", "max_worktrees", _count),
    ConfigKey("sandbox", "sandbox", _sandbox),
    # empty: fatal, as for --allow-write (an unset variable must not make the top writable)
    ConfigKey("allowWrite", "allow_write", _path, multi=True, empty_resets=False),
    ConfigKey("allowNetwork", "allow_network", _bool),
    ConfigKey("pool", "pool", _pool_size),
    ConfigKey("baseTrees", "base_trees", _base_trees),
    ConfigKey("recurseSubmodules", "recurse_submodules", _bool),
    ConfigKey("maxProcesses", "max_processes", _processes),
    ConfigKey("maxMemory", "max_memory", _memory),
    ConfigKey("cache", "cache", _bool),
    ConfigKey("cacheLimit", "cache_limit", _cache_limit),
)


def default_tmpdir(environ: Mapping[str, str]) -> str:
    """``tmpdir`` when neither the caller nor ``isopatch.tmpdir`` says:
    ``$TMPDIR``, else ``/tmp``.  Only the run's private folder goes there;
    a ``tmpdir`` that differs holds the worktree too
    (:func:`.worktrees.placement.place_worktree`)."""
    return environ.get("TMPDIR") or "/tmp"


def _defaults(environ: Mapping[str, str]) -> dict[str, Any]:
    """What a field is when neither the caller nor the configuration says."""
    return {
        "keep": False,
        "timeout": 0.0,  # no limit
        "tmpdir": default_tmpdir(environ),
        "configured_links": (),
        "configured_copies": (),
        "max_worktrees": DEFAULT_MAX_WORKTREES,
        "pool": 0,
        "base_trees": DEFAULT_BASE_TREES,
        "sandbox": AUTO,
        "allow_write": (),
        "allow_network": False,
        "recurse_submodules": False,
        "max_processes": DEFAULT_MAX_PROCESSES,
        "max_memory": default_max_memory(),
        "cache": True,
        "cache_limit": DEFAULT_CACHE_LIMIT,
    }


def complete_request(
    request: Request,
    repository: UserRepository,
    environ: Mapping[str, str],
    *,
    only: Collection[str] | None = None,
) -> Request:
    """``request`` with each configurable field that is ``None`` taken from
    the configuration, else from its default (``timeout`` 0: no limit;
    ``tmpdir``: ``$TMPDIR`` of ``environ``, else ``/tmp``).

    Configuration is read (one ``git config`` call) only when some field is
    ``None``, and only the keys still needed are parsed: a bad value of a
    key that is not needed is no error, as in git, which reads a key where
    a command uses it.

    Args:
        request: what the caller asked for; its given fields win.
        repository: the user's repository; its configuration counts.
        environ: the caller's environment (``git -c`` arrives in it).
        only: the names of the fields to complete (``None``: all); the
            others stay as they are.

    Raises:
        ConfigError: ``bad config value for 'isopatch.<key>'`` with a hint,
            or git could not read a configuration file.
    """
    needed = [
        row
        for row in CONFIG_KEYS
        if getattr(request, row.field) is None and (only is None or row.field in only)
    ]
    if not needed:
        return request
    values = _configured(needed, repository, environ)
    return request._replace(**{row.field: values[row.field] for row in needed})


def configured_tmpdir(repository: UserRepository, environ: Mapping[str, str]) -> str:
    """``isopatch.tmpdir``, else :func:`default_tmpdir`; no other key is
    read, so that a bad value of another key is no error.

    Raises:
        ConfigError: as :func:`complete_request`.
    """
    return configured(repository, environ, "tmpdir")


def configured(repository: UserRepository, environ: Mapping[str, str], field: str) -> Any:
    """The configured value of the request's ``field`` alone (say
    ``base_trees``), else its default.

    Raises:
        ConfigError: as :func:`complete_request`.
    """
    rows = [row for row in CONFIG_KEYS if row.field == field]
    return _configured(rows, repository, environ)[field]


def _configured(
    needed: Collection[ConfigKey], repository: UserRepository, environ: Mapping[str, str]
) -> dict[str, Any]:
    """The value of each of the ``needed`` rows' fields (and the defaults
    of the others): one ``git config`` call, only these keys parsed."""
    match read_section(repository.git_dir, environ):
        case Ok(config):
            pass
        case Err(error):
            raise ConfigError("could not read the configuration", error=error)
    values = _defaults(environ)
    for row in needed:
        raw = config.get(row.key.lower())
        if not raw:
            continue
        try:
            if row.multi:
                kept = after_last_reset(raw) if row.empty_resets else raw
                values[row.field] = tuple(row.parse(row.key, value, repository) for value in kept)
            else:
                values[row.field] = row.parse(row.key, raw[-1], repository)
        except BadValue as bad:
            raise ConfigError(f"bad config value for '{row.key}'", hint=str(bad)) from None
    return values
