"""Where git-isopatch records the worktrees it made.

The git-metadata store writes one JSON file, ``isopatch.json`` (a run's
worktree) or ``isopatch-base.json`` (a base tree, :mod:`.base_trees`), into
the worktree's private folder ``$GIT_COMMON_DIR/worktrees/<id>/``
(gitrepository-layout(5)).  Git ignores files it does not know there and
deletes the folder with the worktree, so a record never outlives its
worktree, and a worktree without the file was not made by git-isopatch.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from ..git.admin_files import read_admin_file, replace_admin_file
from ..git.record import Record
from ..git.types import GitDirPath
from ..logger import log

RECORD_FILE = "isopatch.json"
#: The record of a base tree (:class:`BaseRecord`).
BASE_RECORD_FILE = "isopatch-base.json"
LOCK_REASON_PREFIX = "git-isopatch"

#: The ``git worktree lock`` reason of a base tree: no process owns it (the
#: runs that use it pin it, :mod:`.base_trees`); ``git worktree prune``
#: leaves it alone.
BASE_LOCK_REASON = "git-isopatch base tree"

#: The ``git worktree lock`` reason of a worktree waiting in the pool
#: (``isopatch.pool``): no process owns it; a run claims it by writing its
#: own reason over this one (:mod:`.provider`).
POOL_LOCK_REASON = "git-isopatch pooled"

#: ``git worktree add --lock --reason`` text of a worktree git-isopatch is
#: making or running in; see :meth:`WorktreeRecord.lock_reason`.
_LOCK_REASON = re.compile(r"\Agit-isopatch pid (\d+) on (\S+) started (\d+|None)\Z")


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields 3 and on of ``/proc/<pid>/stat`` (proc(5)), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after it.
    return stat[stat.rfind(b")") + 2 :].split()


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat``
    field 22), to tell a live owner from a reused pid; ``None`` if unknown."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def process_is_running(pid: int) -> bool:
    """True when ``pid`` exists and has not ended: a zombie (state ``Z``, a
    process killed but not yet reaped by its parent) is not running."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X", b"x")


#: The fields a record cannot be made without.
_REQUIRED = ("pid", "host", "start_ticks", "created", "tmpdir", "base")
#: The other fields' values when a record is made without them.
_DEFAULTS = {
    "command": [],
    "kept": False,
    "version": 2,
    "pooled": False,
    "container": None,
    "session": None,
}


class WorktreeRecord:
    """What git-isopatch knows of a worktree it made: a plain class (a
    dataclass builds its methods as the module loads, some 4.6 M
    instructions of every run), mutable, compared by its fields.

    Attributes:
        pid: the git-isopatch process that made it.
        host: that process's host name.
        start_ticks: that process's start time (see :func:`process_start_ticks`).
        created: creation time, seconds since the epoch.
        container: the folder made for the worktree alone, which holds it
            (:func:`.placement.place_worktree`).
        tmpdir: what older versions read as the folder holding the
            worktree (in their records ``container`` is unset); new records
            hold ``container`` here too, so that an older git-isopatch still
            finds the worktree.
        base: the commit id the worktree started at.
        command: the command's argument list.
        kept: True once the worktree is kept on purpose (``--keep``, or
            extraction failed).
        pooled: True while it waits in the pool (``isopatch.pool``) for the
            next run; then ``container`` holds nothing but the worktree.
        session: the name of the session it holds (:mod:`.sessions`);
            ``created`` is then when its last step ended.
    """

    __slots__ = (*_REQUIRED, *_DEFAULTS)  # in the order isopatch.json holds them
    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(self, **fields: Any) -> None:
        """Its fields by name: those of :data:`_REQUIRED`, and any of
        :data:`_DEFAULTS` (``command`` a new list when not given)."""
        for name in self.__slots__:
            if name in fields:
                setattr(self, name, fields.pop(name))
            elif name in _DEFAULTS:
                setattr(self, name, [] if name == "command" else _DEFAULTS[name])
            else:
                raise TypeError(f"WorktreeRecord() missing required field {name!r}")
        if fields:
            raise TypeError(f"WorktreeRecord() got unknown fields {sorted(fields)}")

    def as_dict(self) -> dict[str, Any]:
        """Its fields by name, in order (what ``isopatch.json`` holds)."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if type(other) is not WorktreeRecord:
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.as_dict().items())
        return f"WorktreeRecord({fields})"

    @property
    def worktree_folder(self) -> str:
        """The folder holding the worktree (``container``, else, in an
        older record, ``tmpdir``)."""
        return self.container or self.tmpdir

    @classmethod
    def for_this_process(cls, *, container: str, base: str, command: list[str]) -> WorktreeRecord:
        pid = os.getpid()
        return cls(
            pid=pid,
            host=host_name(),
            start_ticks=process_start_ticks(pid),
            created=time.time(),
            base=base,
            command=list(command),
            tmpdir=container,
            container=container,
        )

    def lock_reason(self) -> str:
        """The ``git worktree add --lock --reason`` text naming the owner."""
        return f"{LOCK_REASON_PREFIX} pid {self.pid} on {self.host} started {self.start_ticks}"

    def owner_is_running(self) -> bool:
        """True when the owning process still runs on this host (same pid and
        same start time, so a reused pid does not count; a killed owner its
        parent has not reaped yet does not count either)."""
        return owner_is_running(self.pid, self.host, self.start_ticks)


def host_name() -> str:
    """This machine's name, as ``gethostname(2)`` says it (the node name of
    ``uname(2)``; ``socket`` costs a run some 11 M instructions to load)."""
    return os.uname().nodename


def owner_is_running(pid: int, host: str, start_ticks: int | None) -> bool:
    """True when process ``pid`` started at ``start_ticks`` still runs on
    ``host``.  A process on another host cannot be seen from here: it counts
    as running, so that nothing of it is ever pruned."""
    if host != host_name():
        return True
    ticks = process_start_ticks(pid)
    if ticks is None or not process_is_running(pid):
        return False
    return start_ticks is None or ticks == start_ticks


class LockOwner(Record):
    """The process named by a git-isopatch lock reason."""

    pid: int
    host: str
    start_ticks: int | None

    def is_running(self) -> bool:
        return owner_is_running(self.pid, self.host, self.start_ticks)


def parse_lock_reason(reason: str | None) -> LockOwner | None:
    """The owner named by a ``git worktree lock`` reason that
    :meth:`WorktreeRecord.lock_reason` wrote, or ``None`` for any other
    reason (a worktree someone else locked)."""
    match = _LOCK_REASON.match(reason or "")
    if match is None:
        return None
    ticks = None if match.group(3) == "None" else int(match.group(3))
    return LockOwner(pid=int(match.group(1)), host=match.group(2), start_ticks=ticks)


#: The JSON types of each field of a record: anything else makes it corrupt.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "pid": (int,),
    "host": (str,),
    "start_ticks": (int, type(None)),
    "created": (int, float),
    "tmpdir": (str,),
    "base": (str,),
    "command": (list,),
    "kept": (bool,),
    "version": (int,),
    "pooled": (bool,),
    "container": (str, type(None)),
    "session": (str, type(None)),
}


def record_from_json(data: object) -> WorktreeRecord:
    """The record a decoded ``isopatch.json`` holds.

    Raises:
        ValueError: it is not an object of our fields with their types (a
            ``"command": 7`` would crash whoever reads it later); why, in
            a few words.
    """
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(data) - set(_FIELD_TYPES))
    missing = [name for name in _REQUIRED if name not in data]
    if unknown or missing:
        raise ValueError(
            f"field '{(unknown or missing)[0]}' is {'unknown' if unknown else 'missing'}"
        )
    for name, value in data.items():
        types = _FIELD_TYPES[name]
        # bool is an int to Python, not to a record
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"field '{name}' has the wrong type")
    if not all(isinstance(arg, str) for arg in data.get("command", [])):
        raise ValueError("field 'command' has the wrong type")
    return WorktreeRecord(**data)


class BaseRecord(Record):
    """What git-isopatch knows of a base tree (:mod:`.base_trees`).

    Attributes:
        commit: the commit it is checked out at (or being brought to).
        created: when it was made, seconds since the epoch.
        used: when a run last pinned it (least recently used go first).
        ready: its checkout at ``commit`` is complete; False while it is
            made or moved (by the run holding its pin exclusively), or
            when that run died half-way.
        container: the folder made for it alone, which holds it.
        made_from: what it was made from
            (:attr:`.base_trees.BaseTrees.made_from`): what it copied from
            the worktree it was made from (its sparse-checkout patterns and
            ``config.worktree``) and the settings that convert files on
            checkout; runs under others get a base tree of their own.
    """

    commit: str
    created: float
    used: float
    container: str
    ready: bool = False
    version: int = 1
    made_from: str = ""


_BASE_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "commit": (str,),
    "created": (int, float),
    "used": (int, float),
    "container": (str,),
    "ready": (bool,),
    "version": (int,),
    "made_from": (str,),
}


def base_record_from_json(data: object) -> BaseRecord:
    """The record a decoded ``isopatch-base.json`` holds.

    Raises:
        ValueError: it is not an object of our fields with their types.
    """
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(data) - set(_BASE_FIELD_TYPES))
    missing = [name for name in ("commit", "created", "used", "container") if name not in data]
    if unknown or missing:
        raise ValueError(
            f"field '{(unknown or missing)[0]}' is {'unknown' if unknown else 'missing'}"
        )
    for name, value in data.items():
        types = _BASE_FIELD_TYPES[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"field '{name}' has the wrong type")
    return BaseRecord(**data)


class GitMetadataStore:
    """The records of the worktrees git-isopatch made: ``isopatch.json`` in
    each worktree's private folder under ``$GIT_COMMON_DIR/worktrees/``.

    A record that cannot be read as one (not JSON, a field missing or of the
    wrong type) is corrupt: it counts as no record, and is named in one
    ``warning:`` per store (one ``list`` or ``prune`` reads it more than once).
    """

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def save(self, admin_dir: GitDirPath, record: WorktreeRecord) -> None:
        # the command can write in admin_dir: never through a name it planted
        data = json.dumps(record.as_dict()).encode("utf-8")
        replace_admin_file(os.path.join(admin_dir, RECORD_FILE), data)

    def load(self, admin_dir: GitDirPath) -> WorktreeRecord | None:
        path = os.path.join(admin_dir, RECORD_FILE)
        try:
            data = read_admin_file(path)
        except OSError:
            return None  # no record: not ours
        try:
            decoded = json.loads(data)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            return self._corrupt(path, "not JSON")
        try:
            return record_from_json(decoded)
        except ValueError as exc:
            return self._corrupt(path, str(exc))

    def save_base(self, admin_dir: GitDirPath, record: BaseRecord) -> None:
        data = json.dumps(record._asdict()).encode("utf-8")
        replace_admin_file(os.path.join(admin_dir, BASE_RECORD_FILE), data)

    def load_base(self, admin_dir: GitDirPath) -> BaseRecord | None:
        """The base tree record in ``admin_dir``; ``None`` when there is
        none (not a base tree) or it is corrupt (named in a warning)."""
        path = os.path.join(admin_dir, BASE_RECORD_FILE)
        try:
            data = read_admin_file(path)
        except OSError:
            return None
        try:
            decoded = json.loads(data)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            return self._corrupt(path, "not JSON")
        try:
            return base_record_from_json(decoded)
        except ValueError as exc:
            return self._corrupt(path, str(exc))

    def _corrupt(self, path: str, why: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            log.warning("ignoring the corrupt record '%s' (%s)", path, why)
