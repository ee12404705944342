"""The sandbox on the kernel's namespaces, through bubblewrap (design: "What
it does").

A policy is a small frozen value (:class:`NamespacePolicy`): what is really
writable, what is copy-on-write, what stays read-only inside a writable
folder, whether the network is kept.  :func:`bwrap_arguments` turns it into
bubblewrap's argument list, a pure function; :class:`Namespaces` binds a
policy to a ``bwrap`` and to the folder on disk that holds the copy-on-write
layers, wraps argument lists in it and, after the run, lists what was
written outside (:meth:`Namespaces.outside_writes`).

What the command sees (each line one or more of bwrap's options):

- the whole file system read-only (``--ro-bind / /``), metadata included:
  ``chmod``, ``chown``, ``utimes``, ``setxattr`` and ``chattr`` fail with
  ``EROFS`` as writes do;
- its own ``/dev`` (the harmless devices, its terminal, a fresh
  ``/dev/shm``), ``/proc`` of its PID namespace, an empty ``/run`` (and
  ``$XDG_RUNTIME_DIR``), so that the session's sockets there are gone;
- copy-on-write folders (``--overlay-src``/``--overlay``): ``$HOME``, the
  temporary folders, the checkout's folder and the repository's git
  directory.  The command reads them as they are and writes them freely;
  every write (and every change of mode, owner, times, attributes) lands in
  an upper layer on disk in the run's private folder, which git-isopatch
  lists after the run and removes.  A unix socket there cannot be
  connected to through the overlay (the overlay's inode is not the
  listening one);
- really writable folders bound over all that (``--bind``): the worktree,
  its admin folder, the private ``TMPDIR``, ``--allow-write`` paths; and,
  last, what inside them must not change (``--ro-bind``): the folder of
  the sandbox's kept availability answers (:mod:`.availability`), which
  an ``--allow-write ~/.cache`` would otherwise let the command rewrite
  for the runs after;
- its own user, mount, PID, IPC, UTS and cgroup namespaces, and a network
  namespace with only its loopback unless the network is kept
  (``--unshare-all``, ``--share-net``); no capabilities (``--cap-drop
  ALL``: as root the command would otherwise hold ``CAP_SYS_ADMIN`` in its
  namespace and could remount what is read-only); no nested user namespace
  (``--disable-userns``);
- the seccomp filter of :func:`.landlock.seccomp_filter` (terminal input
  injection), given as ``--seccomp <fd>``;
- with ``env`` given to :meth:`Namespaces.wrap`, the command started by the
  launcher (:mod:`.launcher`), which reports its wait status: bubblewrap
  says ``128+N`` both for a command killed by signal N and for one that
  exited ``128+N``.

Nothing the command starts outlives it: the PID namespace ends when its
first process does, the kernel kills every other process in it, and
``--die-with-parent`` ends it when git-isopatch dies.  :func:`wait_gone`
waits, after bwrap itself, until the namespace's first process is gone,
which the kernel lets happen only once every process in it is.

Landlock is not used under this mechanism: a Landlock domain forbids
``mount(2)`` to the process it restricts, so it cannot wrap bwrap; the
read-only mount already denies every path-based write and the
metadata changes Landlock cannot see, and the PID and network namespaces
take signals and abstract sockets out of reach.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .bwrap import MINIMUM_VERSION as MINIMUM_VERSION
from .bwrap import UNAVAILABLE as UNAVAILABLE
from .bwrap import Bwrap as Bwrap
from .bwrap import find_bwrap as find_bwrap
from .launcher import launcher_argv
from .layers import (
    OVERLAY,
    Layer,
    inside,
    layer_writes,
    make_layers,
    mount_points,
    plan_layers,
    upper,
)
from .limits import Bound
from .pidns import GONE_TIMEOUT_SECONDS as GONE_TIMEOUT_SECONDS
from .pidns import Wrapped as Wrapped
from .pidns import _alive as _alive
from .pidns import read_status as read_status
from .pidns import wait_gone as wait_gone

#: Variables that name a session's sockets or agents (terminal multiplexers,
#: D-Bus, X11, Wayland, ssh and gpg agents, container engines, editors):
#: removed from the command's environment.
SESSION_VARIABLES = (
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "SESSION_MANAGER",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "PULSE_SERVER",
    "SWAYSOCK",
    "I3SOCK",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "VSCODE_IPC_HOOK_CLI",
)


class NamespacePolicy(NamedTuple):
    """What a sandboxed command may write, and whether it keeps the network.

    Attributes:
        writable: folders or files really writable (bound read-write).
        copy_on_write: folders written through a throw-away layer.
        protected: files or folders inside ``writable`` that stay read-only.
        allow_network: keep the network (no network namespace).
        runtime_dir: ``$XDG_RUNTIME_DIR``, made an empty private folder.
        scratch: the temporary folders among ``copy_on_write``: a private,
            empty folder where a mount beneath one forbids an overlay
            (:func:`.layers.plan_layers`).
        shielded: real folders inside ``writable`` that stay copy-on-write
            (the checkout, the git directory): each an overlay of its own,
            the last layers of :meth:`plan`, mounted above the bind.
    """

    writable: tuple[str, ...]
    copy_on_write: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    allow_network: bool = False
    runtime_dir: str | None = None
    scratch: tuple[str, ...] = ()
    shielded: tuple[str, ...] = ()

    def plan(self, mounts: Sequence[str] | None = None) -> tuple[Layer, ...]:
        """The copy-on-write layers (:func:`.layers.plan_layers`) with the
        mount table ``mounts`` (this process's when ``None``); the n-th is
        ``<layers>/<n>``."""
        table = mount_points() if mounts is None else mounts
        shields = tuple(Layer(folder) for folder in self.shielded)
        return plan_layers(self.copy_on_write, self.scratch, table) + shields

    def layers(self, mounts: Sequence[str] | None = None) -> tuple[str, ...]:
        """The folders of :meth:`plan`."""
        return tuple(layer.folder for layer in self.plan(mounts))


def _depth_order(paths: Sequence[str]) -> list[str]:
    unique = list(dict.fromkeys(os.path.abspath(p) for p in paths))
    return sorted(unique, key=lambda p: p.count("/"))


def _resolv_conf_target() -> str | None:
    """Where ``/etc/resolv.conf`` leads when that is under ``/run``
    (systemd-resolved, NetworkManager): the private ``/run`` would hide it."""
    target = os.path.realpath("/etc/resolv.conf")
    if inside(target, "/run") and os.path.isfile(target):
        return target
    return None


#: Temporary folders every run sees copy-on-write (with ``$TMPDIR``).
TEMPORARY_FOLDERS = ("/tmp", "/var/tmp")


class RunPlaces(NamedTuple):
    """The places of one run's command (:func:`run_policy`): its worktree,
    the worktree's admin folder, the repository's git directory, the
    checkout's top folder, the private ``TMPDIR``, ``$HOME``, the user's
    temporary folders (``$TMPDIR``) and ``$XDG_RUNTIME_DIR``."""

    worktree: str
    admin_dir: str
    common_dir: str
    top: str
    tmpdir: str
    home: str | None = None
    temporary: tuple[str, ...] = ()
    runtime_dir: str | None = None
    kept_answers: str | None = None


def run_policy(
    places: RunPlaces,
    *,
    allow_write: Sequence[str] = (),
    allow_network: bool = False,
    streams: Sequence[str] = (),
) -> NamespacePolicy:
    """The policy of one run's command.

    Really writable: the worktree, its admin folder (``HEAD``, index,
    logs), the private ``tmpdir`` (its ``TMPDIR``), the regular files its
    output goes to (``streams``: writing ``/dev/stderr`` reopens them) and
    ``allow_write``.  Copy-on-write: ``home``, the temporary folders, the
    folder holding the checkout (so the checkout, the worktrees beside it
    and any unix socket there) and the repository's git directory, wherever
    it is.  The pointers between the worktree and the repository
    (``.git``, ``commondir``, ``gitdir``) stay writable: git-isopatch puts
    them back after the run, when nothing the command started is left to
    rewrite them again.  Read-only inside all that: ``kept_answers`` (the
    folder of :func:`.availability.kept_folder`), where it lies in a really
    writable place or holds one.  Copy-on-write whatever ``allow_write``
    says (:func:`_shielded`): the checkout and the git directory.
    """
    parent = os.path.dirname(os.path.abspath(places.top).rstrip("/")) or "/"
    copy_on_write = [*TEMPORARY_FOLDERS, *places.temporary]
    copy_on_write += [parent if parent != "/" else places.top, places.common_dir]
    if places.home:
        copy_on_write.insert(0, places.home)
    writable = (places.worktree, places.admin_dir, places.tmpdir, *streams, *allow_write)
    protected: tuple[str, ...] = ()
    if places.kept_answers:
        kept = os.path.realpath(places.kept_answers)
        if any(inside(kept, p) or inside(p, kept) for p in map(os.path.realpath, writable)):
            protected = (kept,)
    return NamespacePolicy(
        writable=writable,
        copy_on_write=tuple(copy_on_write),
        protected=protected,
        allow_network=allow_network,
        runtime_dir=places.runtime_dir,
        scratch=(*TEMPORARY_FOLDERS, *places.temporary),
        shielded=_shielded(places, allow_write),
    )


def _shielded(places: RunPlaces, allow_write: Sequence[str]) -> tuple[str, ...]:
    """The checkout and the git directory where an allowed path holds
    them, and the allowed paths in the git directory (its hooks, refs):
    real folders, none inside another.  Bound read-write, they would let
    the command write the user's work tree, configuration and hooks."""
    allowed = [os.path.realpath(path) for path in allow_write]
    top, common = os.path.realpath(places.top), os.path.realpath(places.common_dir)
    found = [p for p in (top, common) if any(inside(p, a) for a in allowed)]
    found += [a for a in allowed if inside(a, common) and os.path.isdir(a)]
    found = sorted(set(found), key=lambda p: (p.count("/"), p))
    return tuple(p for p in found if not any(o != p and inside(p, o) for o in found))


def bwrap_arguments(
    policy: NamespacePolicy,
    layers: str,
    *,
    seccomp_fd: int | None = None,
    status_fd: int | None = None,
    chdir: str | None = None,
    plan: Sequence[Layer] | None = None,
) -> list[str]:
    """bubblewrap's options for ``policy`` (everything before ``--``).

    Args:
        layers: the folder on disk holding ``<n>/upper`` and ``<n>/work``
            for the n-th of :meth:`NamespacePolicy.layers`
            (:func:`make_layers` makes them).
        seccomp_fd: a file descriptor bwrap reads the seccomp program from.
        status_fd: where bwrap writes its JSON status (child pid, exit code).
        chdir: the command's working directory.
        plan: the layers (:meth:`NamespacePolicy.plan` when ``None``).
    """
    args = ["--die-with-parent", "--unshare-all", "--unshare-user", "--disable-userns"]
    if policy.allow_network:
        args.append("--share-net")
    args += ["--cap-drop", "ALL"]
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--perms", "1777", "--tmpfs", "/dev/shm"]
    args += ["--perms", "0755", "--tmpfs", "/run"]
    resolv = _resolv_conf_target() if policy.allow_network else None
    if resolv is not None:
        args += ["--ro-bind", resolv, resolv]
    runtime = policy.runtime_dir
    if runtime and os.path.isabs(runtime):
        if inside(os.path.abspath(runtime), "/run"):
            args += ["--perms", "0700", "--dir", os.path.abspath(runtime)]
        else:
            args += ["--perms", "0700", "--tmpfs", os.path.abspath(runtime)]
    shields: list[tuple[str, int]] = []
    for index, layer in enumerate(policy.plan() if plan is None else plan):
        if layer.folder in policy.shielded:
            shields.append((layer.folder, index))
        else:
            args += _layer_arguments(layer, os.path.join(layers, str(index)))
    # by depth, a shield just above the bind holding it, below deeper ones
    mounts = [(p, -1) for p in _depth_order(policy.writable)] + shields
    for path, index in sorted(mounts, key=lambda m: (m[0].count("/"), m[1])):
        if index < 0:
            args += ["--bind", path, path]
        else:
            args += _layer_arguments(Layer(path), os.path.join(layers, str(index)))
    for path in _depth_order(policy.protected):
        if os.path.lexists(path):
            args += ["--ro-bind", path, path]
    if chdir is not None:
        args += ["--chdir", chdir]
    return args


def _layer_arguments(layer: Layer, here: str) -> list[str]:
    """bubblewrap's options mounting ``layer`` from the folder ``here``."""
    if layer.kind == OVERLAY:
        upper_dir, work_dir = os.path.join(here, "upper"), os.path.join(here, "work")
        return ["--overlay-src", layer.folder, "--overlay", upper_dir, work_dir, layer.folder]
    return ["--bind", os.path.join(here, "upper"), layer.folder]


def _pipe(opened: list[int]) -> tuple[int, int]:
    """A pipe whose read end the child does not inherit; both ends are
    added to ``opened``."""
    read_end, write_end = os.pipe()
    opened += [read_end, write_end]
    os.set_inheritable(read_end, False)
    return read_end, write_end


def _seccomp_fd(program: bytes) -> int:
    """A pipe's read end holding ``program`` for ``--seccomp`` (bwrap reads
    it to its end, so each spawn needs its own)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


@dataclass(frozen=True)
class Namespaces:
    """A policy bound to a ``bwrap`` and to its layers folder on disk; its
    layers (:meth:`NamespacePolicy.plan`) are planned once, when it is
    made, so that every spawn and the listing afterwards agree on them;
    ``bounds``: the command's bounds (:mod:`.limits`)."""

    bwrap: Bwrap
    policy: NamespacePolicy
    layers: str
    seccomp: bytes | None = None
    bounds: Bound | None = field(default=None, compare=False)
    plan: tuple[Layer, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", self.policy.plan())

    def bounded(self, bounds: Bound) -> Namespaces:
        """These namespaces with ``bounds``, their layers' plan kept."""
        made = copy.copy(self)
        object.__setattr__(made, "bounds", bounds)
        return made

    def prepare(self) -> None:
        """Make the layers (:func:`.layers.make_layers`)."""
        make_layers(self.plan, self.layers)

    @contextlib.contextmanager
    def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Iterator[Wrapped]:
        """``argv`` run in the namespaces: one spawn's :class:`Wrapped`,
        valid inside the block.  With ``env`` (the command's environment)
        ``argv`` runs through the launcher (:mod:`.launcher`), and
        :attr:`Wrapped.report` holds its wait status after the run."""
        fds: list[int] = []
        try:
            status_read, status_write = _pipe(fds)
            report_read, report_write = _pipe(fds) if env is not None else (None, None)
            seccomp = _seccomp_fd(self.seccomp) if self.seccomp is not None else None
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        options = bwrap_arguments(
            self.policy,
            self.layers,
            seccomp_fd=seccomp,
            status_fd=status_write,
            chdir=cwd,
            plan=self.plan,
        )
        if seccomp is not None:
            options += ["--seccomp", str(seccomp)]
        child = tuple(fd for fd in (status_write, seccomp, report_write) if fd is not None)
        if report_write is not None and env is not None:
            groups = tuple(map(os.dup, self.bounds.fds)) if self.bounds else ()  # its own
            child += groups
            spec = self.bounds.launcher_spec(groups) if self.bounds else "-"
            argv = launcher_argv(argv, report_write, env, spec)
            options.insert(0, "--as-pid-1")  # the launcher is the namespace's init
        wrapped = Wrapped([self.bwrap.path, *options, "--", *argv], child, status_read, report_read)
        try:
            yield wrapped
        finally:
            wrapped.close()

    def outside_writes(self) -> tuple[str, ...]:
        """Every path outside the really writable places that the command
        wrote (into a copy-on-write layer), in order (:func:`.layers.layer_writes`)."""
        found: list[str] = []
        for index, layer in enumerate(self.plan):
            found += layer_writes(upper(self.layers, index), layer.folder, layer.kind)
        # bubblewrap makes the mount points of the writable places in a layer
        mounted = [os.path.abspath(p) for p in self.policy.writable]
        shielded = self.policy.shielded
        return tuple(
            p
            for p in found
            if not any(inside(p, m) for m in mounted) or any(inside(p, s) for s in shielded)
        )

    def layer_of(self, path: str) -> str | None:
        """Where the copy-on-write layer holds what was written at ``path``
        (a folder inside a copy-on-write one), or ``None``."""
        real = os.path.realpath(path)
        # a later layer is mounted above an earlier one that holds its folder
        for index, layer in reversed(list(enumerate(self.plan))):
            if inside(real, layer.folder):
                return os.path.join(upper(self.layers, index), os.path.relpath(real, layer.folder))
        return None

    def discard(self) -> None:
        """Remove the layers (best effort)."""
        shutil.rmtree(self.layers, ignore_errors=True)


def command_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without :data:`SESSION_VARIABLES`."""
    return {k: v for k, v in environ.items() if k not in SESSION_VARIABLES}
