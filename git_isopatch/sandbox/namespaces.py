"""The sandbox on the kernel's namespaces, through bubblewrap (design: "What it does").

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
  namespace and could remount what is read-only; the launcher alone keeps
  two); no nested user namespace (``--disable-userns``);
- the seccomp filter of :func:`.seccomp.seccomp_filter` (terminal input
  injection, the kernel's keyrings), given as ``--seccomp <fd>``;
- with ``env`` given to :meth:`Namespaces.launch`, the command started by
  the launcher (:mod:`.launcher`), which reports its wait status
  (bubblewrap says ``128+N`` both for a command killed by signal N and
  for one that exited ``128+N``), then serves git-isopatch's own git in
  the same namespaces (:mod:`.inside`), with git's global configuration
  the real one (:mod:`.global_config`).

Nothing the command starts outlives it: once it ends, the launcher, the
namespace's first process, kills every other process in it before it
reports; when the launcher ends the kernel kills whatever is left, and
``--die-with-parent`` ends it when git-isopatch dies; :func:`.pidns.wait_gone`
waits until the namespace's first process, thus every process in it, is gone.

This is the one mechanism: the read-only mount denies every path-based
write and every change of metadata, the PID, IPC and network namespaces
take signals, processes and sockets out of reach, and what git-isopatch
does with what the command left runs inside too.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import _socket  # socket costs some 11 M instructions to load
import contextlib
import copy
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from typing import IO

from ..git.record import Record
from .bwrap import MINIMUM_VERSION as MINIMUM_VERSION
from .bwrap import UNAVAILABLE as UNAVAILABLE
from .bwrap import Bwrap as Bwrap
from .bwrap import find_bwrap as find_bwrap
from .global_config import GlobalConfig
from .inside import Gone, Inside
from .launcher import CAPABILITIES, Report, launcher_argv, launcher_program, signals_blocked
from .layer_writes import layer_writes
from .layers import (
    SPLIT,
    Layer,
    MountTable,
    WorktreeOverlay,
    here,
    inside,
    make_layers,
    mount_points,
    overlaid_folders,
    plan_layers,
    upper,
)
from .limits import Bound
from .pidns import Wrapped as Wrapped
from .pidns import _alive as _alive
from .untrusted import remove_tree


class NamespacePolicy(Record):
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
        caches: the cache layers (:mod:`.cache_layer`), above all but ``shielded``.
        worktree: the run's worktree as an overlay of its base tree, in
            place of a writable worktree (:class:`.layers.WorktreeOverlay`).
        global_config: git's global configuration for our own git (:mod:`.global_config`).
    """

    writable: tuple[str, ...]
    copy_on_write: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    allow_network: bool = False
    runtime_dir: str | None = None
    scratch: tuple[str, ...] = ()
    shielded: tuple[str, ...] = ()
    caches: tuple[Layer, ...] = ()
    worktree: WorktreeOverlay | None = None
    global_config: GlobalConfig = GlobalConfig()

    def plan(self, mounts: Sequence[str] | None = None) -> tuple[Layer, ...]:
        """The copy-on-write layers (:func:`.layers.plan_layers`) with the
        mount table ``mounts`` (this process's when ``None``), the folders
        of ``PATH`` kept readable first, then the caches with no mount
        beneath (no lower layer then); the n-th is ``<layers>/<n>``."""
        table = mount_points() if mounts is None else mounts
        shields = tuple(Layer(folder) for folder in self.shielded)
        path = os.environ.get("PATH", "").split(os.pathsep)
        caches = tuple(c for c in self.caches if not any(inside(m, c.folder) for m in table))
        return plan_layers(self.copy_on_write, self.scratch, table, path) + caches + shields

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
    plan = policy.plan() if plan is None else plan
    args += policy.global_config.showing(plan).arguments()
    shields: list[tuple[str, int]] = []
    for index, layer in enumerate(plan):
        if layer.folder in policy.shielded:
            shields.append((layer.folder, index))
        else:
            args += layer.arguments(here(layers, index, layer))
    # by depth, a shield just above the bind holding it, below deeper ones
    mounts = [(p, -1) for p in _depth_order(policy.writable)] + shields
    if policy.worktree is not None:
        mounts.append((os.path.abspath(policy.worktree.target), -2))
    for path, index in sorted(mounts, key=lambda m: (m[0].count("/"), m[1])):
        if index == -2 and policy.worktree is not None:
            args += policy.worktree.arguments()
        elif index < 0:
            args += ["--bind", path, path]
        else:
            args += Layer(path).arguments(os.path.join(layers, str(index)))
    for path in _depth_order(policy.protected):
        if os.path.lexists(path):
            args += ["--ro-bind", path, path]
    if chdir is not None:
        args += ["--chdir", chdir]
    return args


def _pipe(opened: list[int]) -> tuple[int, int]:
    """A pipe whose read end the child does not inherit; both ends are
    added to ``opened``."""
    read_end, write_end = os.pipe()
    opened += [read_end, write_end]
    os.set_inheritable(read_end, False)
    return read_end, write_end


def _inherited(stream: int | IO[bytes] | None) -> int:
    """A descriptor of its own for the command's standard error ``stream``
    (ours when ``None``; ``/dev/null`` where ours is closed)."""
    try:
        return os.dup(
            2 if stream is None else stream if isinstance(stream, int) else stream.fileno()
        )
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


class Namespaces:
    """A policy bound to a ``bwrap`` and to its layers folder on disk; its
    layers (:meth:`NamespacePolicy.plan`) are planned once, when it is
    made, so that every spawn and the listing afterwards agree on them;
    ``bounds``: the command's bounds (:mod:`.limits`).

    The plan follows the mount table of that moment (:mod:`.layers`): a
    mount made or removed under a copy-on-write folder before bubblewrap
    sets the namespaces up (another program's, a parallel test's), or a
    folder the plan overlays removed (another run's private folder in a
    ``/tmp`` split into its subfolders), can make the plan wrong ("Can't
    make overlay mount", "Can't find source path"), :meth:`plan_moved`
    says so, and, while nothing ran in them yet, :meth:`replanned` plans
    again."""

    def __init__(
        self,
        bwrap: Bwrap,
        policy: NamespacePolicy,
        layers: str,
        seccomp: bytes | None = None,
        bounds: Bound | None = None,
    ) -> None:
        self.bwrap = bwrap
        self.policy = policy
        self.layers = layers
        self.seccomp = seccomp
        self.bounds = bounds
        self.mounts = MountTable()
        self.plan: tuple[Layer, ...] = self.policy.plan(self.mounts.points)

    def bounded(self, bounds: Bound) -> Namespaces:
        """These namespaces with ``bounds``, their layers' plan kept."""
        made = copy.copy(self)
        made.bounds = bounds
        return made

    def plan_moved(self) -> bool:
        """A mount was made or removed since the plan (:class:`.layers.MountTable`),
        or a folder it overlays is gone."""
        return self.mounts.moved() or not all(map(os.path.isdir, overlaid_folders(self.plan)))

    def replanned(self, *, caches: bool = True) -> Namespaces:
        """These namespaces planned again on the mount table of now (without
        their cache layers: ``caches`` false), their layers made anew (the
        old ones removed): only while nothing has run in them, whose writes
        the old layers would hold."""
        self.mounts.close()
        remove_tree(self.layers)
        policy = self.policy if caches else self.policy._replace(caches=())
        made = Namespaces(self.bwrap, policy, self.layers, self.seccomp, self.bounds)
        made.prepare()
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
        valid inside the block (:meth:`launch`)."""
        wrapped = self.launch(argv, cwd=cwd, env=env)
        try:
            yield wrapped
        finally:
            wrapped.close()

    def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stderr: int | IO[bytes] | None = None,
    ) -> Wrapped:
        """``argv`` run in the namespaces: one spawn's :class:`Wrapped`,
        whose owner closes it.  With ``env`` (the command's environment)
        ``argv`` runs through the launcher (:mod:`.launcher`):
        :attr:`Wrapped.report` holds its wait status after the run, and
        the namespaces then serve git-isopatch's own git
        (:meth:`Wrapped.serving`); the command's standard error is
        ``stderr`` (ours when ``None``), bubblewrap's own a pipe
        (:attr:`Wrapped.said`): what it says of a failed set-up is
        git-isopatch's to tell, never mixed into the command's output."""
        from .seccomp import program_pipe  # ctypes: loaded by the filter's own run

        fds: list[int] = []
        control = child = said = None
        try:
            status_read, status_write = _pipe(fds)
            if env is not None:
                control, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
                fds.append(child.detach())
                child = fds[-1]  # inherited through pass_fds, as the others
                said = _pipe(fds)
                fds.append(_inherited(stderr))  # the command's
                fds.append(program_pipe(launcher_program()))  # the launcher's own
            seccomp = program_pipe(self.seccomp) if self.seccomp is not None else None
        except OSError:
            for fd in fds:
                os.close(fd)
            if control is not None:
                control.close()
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
        kept = tuple(fd for fd in (status_write, seccomp, child) if fd is not None)
        if child is not None and env is not None and said is not None:
            groups = tuple(map(os.dup, self.bounds.fds)) if self.bounds else ()  # its own
            kept += (*fds[-2:], *groups)  # its standard error, its program
            spec = self.bounds.launcher_spec(groups) if self.bounds else "-"
            view = self.policy.global_config.showing(self.plan).view()
            argv = launcher_argv(argv, child, env, spec, *fds[-2:], view)
            options = ["--as-pid-1", *options, *CAPABILITIES]  # the launcher is its init
        argv = [self.bwrap.path, *options, "--", *argv]
        return Wrapped(argv, kept, status_read, control, self.bounds, said)

    def serve(self) -> Inside:
        """The namespaces, served by a launcher that runs no command: for
        git-isopatch's own git when the command's are gone (it never
        started, or a signal ended them).

        Raises:
            Gone: bubblewrap could not make them.
        """
        nothing = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            wrapped = self.launch([], env={}, stderr=nothing)
        finally:
            os.close(nothing)
        try:
            with signals_blocked():
                process = subprocess.Popen(
                    wrapped.argv,
                    pass_fds=wrapped.pass_fds,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=wrapped.stderr,
                    process_group=0,
                )
        except OSError as exc:
            wrapped.close()
            raise Gone(f"cannot run bubblewrap: {exc.strerror or exc}") from None
        wrapped.spawned(process)
        wrapped.report = Report()  # no command: served from the start
        inside = wrapped.serving()
        if inside is None:
            raise Gone("bubblewrap could not make the namespaces")
        return inside

    def outside_writes(self) -> tuple[str, ...]:
        """Every path outside the really writable places that the command
        wrote into a throw-away layer (:func:`.layer_writes.layer_writes`), in order."""
        found: list[str] = []
        for index, layer in enumerate(self.plan):
            found += layer_writes(upper(self.layers, index), layer.folder, layer.kind)
        # bubblewrap makes the mount points of the writable places in a layer
        mounted = [os.path.abspath(p) for p in self.policy.writable]
        if self.policy.worktree is not None:
            mounted.append(os.path.abspath(self.policy.worktree.target))
        shielded = self.policy.shielded
        return tuple(
            p
            for p in found
            if not any(inside(p, m) for m in mounted) or any(inside(p, s) for s in shielded)
        )

    def place(self, path: str) -> tuple[str, str] | None:
        """Where the copy-on-write layer holds what was written at ``path``
        (a folder inside a copy-on-write one): its upper folder and the
        path relative to it; ``None`` outside every layer."""
        real = os.path.realpath(path)
        # a later layer is mounted above an earlier one that holds its folder
        for index, layer in reversed(list(enumerate(self.plan))):
            if layer.kind != SPLIT and inside(real, layer.folder):
                return upper(self.layers, index, layer), os.path.relpath(real, layer.folder)
        return None

    def layer_of(self, path: str) -> str | None:
        """:meth:`place` as one path (reached through whatever the command
        made of the folders on the way: read it with :mod:`.untrusted`)."""
        place = self.place(path)
        return None if place is None else os.path.normpath(os.path.join(*place))

    def discard(self) -> None:
        """Remove the layers, however deep (best effort: :func:`.untrusted.remove_tree`)."""
        self.mounts.close()
        remove_tree(self.layers)
