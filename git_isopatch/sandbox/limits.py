"""Bounds on a sandboxed command's processes and memory, enforced by the
kernel (design: "What it does").

Where a cgroup can be had, the command's namespace lives in one of its
own (:func:`bound`), made for the run and removed after it (or, when a
``SIGKILL`` ended the run first, by a later run): ``pids.max``
bounds its processes (threads count, as the kernel counts them), and
``memory.max`` (cgroup v2) or ``memory.limit_in_bytes`` (v1) its memory,
page cache and tmpfs files included.  Which controller lives where is read
from ``/proc/self/cgroup`` and ``/proc/self/mountinfo``: on cgroup v2 the
group is made in the nearest ancestor of this process's cgroup that
enables both controllers for its children and lets this user create a
group and move a process there (root: the hierarchy's root; a user of a
systemd session: the part systemd delegates to them, such as
``user@<uid>.service/app.slice``); on v1 (each controller its own
hierarchy) below this process's own group.  The launcher (:mod:`.launcher`),
the namespace's first process, moves itself in by writing ``0`` through a
descriptor opened here before it starts the command: to the group's
``cgroup.procs`` on v2, to its ``tasks`` on v1 (:data:`MOVE_FILE`).  The
launcher has one thread, so moving that thread moves the process, and what
it forks afterwards follows; and v1 moves the writer's own thread without
the lock that moving a whole process takes, whose every taking waits for
an RCU grace period (some 10 ms here, on every run).  A bound reached is
read from the group's counters (``pids.events`` ``max``,
``memory.events`` or v1's ``memory.oom_control`` ``oom_kill``) while the
command runs (:meth:`Bound.reached`): the run stops the command then, as
on a timeout.

Where no cgroup can be had (a user outside a delegated part of the
hierarchy; a container), the launcher sets rlimits for the command
instead: ``RLIMIT_NPROC`` (counted per user in the sandbox's user
namespace, and against the user's own processes on the machine) and
``RLIMIT_DATA`` (each process's own memory, not their sum).  A command that
reaches those fails to fork or to allocate, as it would under any rlimit;
git-isopatch cannot tell that it did.  (The kernel exempts root of the
machine's own user namespace from ``RLIMIT_NPROC``: root gets the cgroup.)

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..git.record import Record

#: The names a reached bound has in the result (``limit-reached``).
PROCESSES = "processes"
MEMORY = "memory"


class Limits(Record):
    """How many processes and how many bytes of memory a sandboxed
    command may use; 0: no bound."""

    processes: int = 0
    memory: int = 0


NONE = Limits(0, 0)


class _Group:
    """One cgroup made for the run: its folder, its version, the
    controllers it bounds, and the descriptor the launcher moves itself in
    through (:data:`MOVE_FILE`; set once it is open).  Plain classes here:
    a dataclass compiles its methods as the module loads, on every run."""

    __slots__ = ("path", "version", "controllers", "procs")

    def __init__(self, path: str, version: int, controllers: tuple[str, ...]) -> None:
        self.path, self.version, self.controllers = path, version, controllers
        self.procs = -1


class Bound:
    """The bounds of one run: the cgroups the launcher moves into
    (:attr:`fds`), the rlimits it sets where none could be had
    (:attr:`rlimits`), and what was reached."""

    __slots__ = ("limits", "groups", "rlimits")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.groups: list[_Group] = []
        self.rlimits: dict[int, int] = {}

    @property
    def fds(self) -> tuple[int, ...]:
        return tuple(group.procs for group in self.groups)

    def launcher_spec(self, fds: tuple[int, ...]) -> str:
        """The launcher's argument: ``<fd>,...;<resource>=<value>,...``,
        ``fds`` its copies of :attr:`fds`."""
        groups = ",".join(map(str, fds))
        rlimits = ",".join(f"{k}={v}" for k, v in self.rlimits.items())
        return f"{groups};{rlimits}"

    def reached(self) -> str | None:
        """:data:`PROCESSES` or :data:`MEMORY` when the command reached
        that bound (a fork refused by ``pids.max``, a process the kernel
        ended for memory); ``None`` otherwise, and always for rlimits."""
        for group in self.groups:
            if "memory" in group.controllers:
                name = "memory.events" if group.version == 2 else "memory.oom_control"
                if _counter(os.path.join(group.path, name), "oom_kill"):
                    return MEMORY
            if "pids" in group.controllers:
                if _counter(os.path.join(group.path, "pids.events"), "max"):
                    return PROCESSES
        return None

    def mechanism(self) -> str:
        """Which mechanism bounds what: ``cgroup v1``, ``cgroup v2``,
        ``rlimit``, per bound (for messages and tests)."""
        kinds = [f"cgroup v{g.version} ({', '.join(g.controllers)})" for g in self.groups]
        kinds += [f"rlimit {number}" for number in self.rlimits]
        return "; ".join(kinds) or "none"

    def stop(self) -> None:
        """End every process in the run's groups (a fork bomb's included:
        once it reached ``pids.max`` it cannot fork again)."""
        for group in self.groups:
            _end_members(group.path)


#: Seconds between two looks at the groups' counters while the command runs.
WATCH_SECONDS = 0.05


@contextlib.contextmanager
def watched(bounds: Bound | None, state: dict[str, Any]) -> Iterator[None]:
    """While the block runs, look at ``bounds``' counters every
    :data:`WATCH_SECONDS`; when the command reached one, record its name in
    ``state["limit"]`` and end the command (every process of the groups:
    the launcher moved into them before it started the command, so the
    whole namespace), as a timeout does.  Nothing to watch without a
    cgroup."""
    if bounds is None or not bounds.groups:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_SECONDS):
            found = bounds.reached()
            if found is not None:
                state["limit"] = found
                bounds.stop()
                return

    watcher = threading.Thread(target=watch, name="git-isopatch-limits", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        if state.get("limit") is None:
            state["limit"] = bounds.reached()


def _counter(path: str, name: str) -> int:
    try:
        with open(path, "rb") as handle:
            for line in handle.read(4096).decode("ascii", "replace").splitlines():
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value.strip() or 0)
    except (OSError, ValueError):
        pass
    return 0


def _mounts() -> tuple[tuple[str, str] | None, dict[str, tuple[str, str]]]:
    """The cgroup v2 mount ``(mount point, root)`` and each v1
    controller's, from ``/proc/self/mountinfo``."""
    v2: tuple[str, str] | None = None
    v1: dict[str, tuple[str, str]] = {}
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            lines = handle.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return None, {}
    for line in lines:
        fields, _, tail = line.partition(" - ")
        parts, rest = fields.split(), tail.split()
        if len(parts) < 5 or len(rest) < 3:
            continue
        where = (parts[4].replace("\\040", " "), parts[3])
        if rest[0] == "cgroup2" and v2 is None:
            v2 = where
        elif rest[0] == "cgroup":
            for option in rest[2].split(","):
                if option in ("pids", "memory"):
                    v1.setdefault(option, where)
    return v2, v1


def _own_groups() -> dict[str, str]:
    """This process's cgroup per hierarchy: ``""`` for v2, else each
    controller's name."""
    found: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", "rb") as handle:
            lines = handle.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _on_disk(mount: tuple[str, str], path: str) -> str | None:
    point, root = mount
    if root != "/" and not (path + "/").startswith(root.rstrip("/") + "/"):
        return None
    relative = os.path.relpath(path, root)
    return os.path.normpath(os.path.join(point, "" if relative == "." else relative))


#: How a run's group is named: ``git-isopatch-<pid>-<start>-<random>``,
#: ``<start>`` the process's start time (:func:`_started`).
PREFIX = "git-isopatch-"

#: A group older than this whose run's process is gone was left by a run
#: killed before it could remove it (:func:`_remove_stale`).
STALE_SECONDS = 60


def _started(pid: int | str) -> str | None:
    """When process ``pid`` started (``/proc/<pid>/stat``, field 22, in
    clock ticks since boot): with its PID it names one process, never a
    later one the PID was given again; ``None`` when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _name() -> str:
    return f"{PREFIX}{os.getpid()}-{_started('self') or 0}-{os.urandom(4).hex()}"


def _remove_stale(parent: str) -> None:
    """Remove the groups in ``parent`` that runs killed by ``SIGKILL`` left
    behind: named by a process that is gone (its PID names none, or one
    started at another time: the PID was given again), older than
    :data:`STALE_SECONDS` (a process of another PID namespace may be
    making one), and empty (``rmdir`` refuses a group that holds a
    process).  Best effort."""
    try:
        with os.scandir(parent) as entries:
            names = [entry.name for entry in entries if entry.name.startswith(PREFIX)]
    except OSError:
        return
    old = time.time() - STALE_SECONDS
    for name in names:
        parts = name[len(PREFIX) :].split("-")
        pid, start = parts[0], parts[1] if len(parts) == 3 else None  # or <pid>-<random>
        if not pid.isdigit():
            continue
        now = _started(pid)
        path = os.path.join(parent, name)
        with contextlib.suppress(OSError):
            if now is None or (start is not None and now != start):
                if os.stat(path, follow_symlinks=False).st_mtime < old:
                    os.rmdir(path)


def _v2_parent(folder: str, top: str, wanted: set[str]) -> str | None:
    """The nearest of ``folder`` and its ancestors up to ``top`` where a
    child group gets ``wanted`` and this user may make one and move a
    process into it (``folder`` itself only as the hierarchy's root: a
    group with processes cannot enable controllers for children)."""
    here = folder if os.path.samefile(folder, top) else os.path.dirname(folder)
    while True:
        try:
            with open(os.path.join(here, "cgroup.subtree_control"), "rb") as handle:
                enabled = set(handle.read().decode().split())
        except OSError:
            enabled = set()
        procs = os.path.join(here, "cgroup.procs")
        if wanted <= enabled and os.access(here, os.W_OK) and os.access(procs, os.W_OK):
            return here
        if os.path.samefile(here, top) or len(here) <= len(top):
            return None
        here = os.path.dirname(here)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


#: The file of a group the launcher writes ``0`` to, per cgroup version.
MOVE_FILE = {1: "tasks", 2: "cgroup.procs"}


def _make(path: str, version: int, controllers: tuple[str, ...], limits: Limits) -> _Group:
    _remove_stale(os.path.dirname(path))
    os.mkdir(path, 0o755)
    group = _Group(path, version, controllers)
    try:
        if "pids" in controllers:
            _write(os.path.join(path, "pids.max"), str(limits.processes))
        if "memory" in controllers and version == 2:
            _write(os.path.join(path, "memory.max"), str(limits.memory))
            with contextlib.suppress(OSError):  # the whole command ends, not one process
                _write(os.path.join(path, "memory.oom.group"), "1")
            with contextlib.suppress(OSError):
                _write(os.path.join(path, "memory.swap.max"), "0")
        elif "memory" in controllers:
            _write(os.path.join(path, "memory.limit_in_bytes"), str(limits.memory))
        move = os.path.join(path, MOVE_FILE[version])
        group.procs = os.open(move, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        _remove(group)
        raise
    return group


def _wanted(limits: Limits) -> set[str]:
    return {c for c, n in (("pids", limits.processes), ("memory", limits.memory)) if n > 0}


def _groups(limits: Limits) -> list[_Group]:
    """The cgroups this process can make for ``limits`` (none where it
    cannot: the rlimits stand in)."""
    wanted = _wanted(limits)
    v2, v1 = _mounts()
    own = _own_groups()
    groups: list[_Group] = []
    if v2 is not None and "" in own:
        top = _on_disk(v2, "/" if v2[1] == "/" else v2[1])
        folder = _on_disk(v2, own[""])
        try:
            with open(os.path.join(top or "", "cgroup.controllers"), "rb") as handle:
                in_v2 = wanted & set(handle.read().decode().split())
        except OSError:
            in_v2 = set()
        parent = _v2_parent(folder, top, in_v2) if in_v2 and folder and top else None
        if parent is not None:
            with contextlib.suppress(OSError):
                path = os.path.join(parent, _name())
                groups.append(_make(path, 2, tuple(sorted(in_v2)), limits))
                wanted -= in_v2
    for controller in sorted(wanted):
        mount, path = v1.get(controller), own.get(controller)
        folder = _on_disk(mount, path) if mount and path is not None else None
        if folder is not None and os.access(folder, os.W_OK):
            with contextlib.suppress(OSError):
                groups.append(_make(os.path.join(folder, _name()), 1, (controller,), limits))
    return groups


def _end_members(path: str) -> None:
    """SIGKILL every process of the group at ``path`` (``cgroup.kill`` on
    v2), until none is listed (bounded)."""
    with contextlib.suppress(OSError):
        _write(os.path.join(path, "cgroup.kill"), "1")
    for _ in range(100):
        try:
            with open(os.path.join(path, "cgroup.procs"), "rb") as handle:
                pids = [int(p) for p in handle.read().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _remove(group: _Group) -> None:
    """End what is left in ``group`` and remove it (best effort; an
    emptied group goes a moment after its last process)."""
    if group.procs >= 0:
        with contextlib.suppress(OSError):
            os.close(group.procs)
        group.procs = -1
    for _ in range(200):
        _end_members(group.path)
        try:
            os.rmdir(group.path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


@contextlib.contextmanager
def bound(limits: Limits) -> Iterator[Bound]:
    """The bounds of one run: its cgroups, made and removed around the
    block whatever happens, and rlimits for what they do not bound."""
    import resource

    made = Bound(limits)
    try:
        made.groups = _groups(limits) if _wanted(limits) else []
        bounded = {c for group in made.groups for c in group.controllers}
        if limits.processes > 0 and "pids" not in bounded:
            made.rlimits[resource.RLIMIT_NPROC] = limits.processes
        if limits.memory > 0 and "memory" not in bounded:
            made.rlimits[resource.RLIMIT_DATA] = limits.memory
        yield made
    finally:
        for group in made.groups:
            _remove(group)
