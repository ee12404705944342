"""What one run's command may write (design: "What it does"): its places
(:class:`RunPlaces`) made a :class:`.namespaces.NamespacePolicy`
(:func:`run_policy`): really writable, copy-on-write, shielded; and what
of the user's session its environment keeps (:func:`command_environment`).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..git.record import Record
from .cache_layer import usable_folders
from .global_config import GlobalConfig
from .layers import Layer, WorktreeOverlay, inside
from .namespaces import NamespacePolicy

#: Temporary folders every run sees copy-on-write (with ``$TMPDIR``).
TEMPORARY_FOLDERS = ("/tmp", "/var/tmp")


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


class RunPlaces(Record):
    """The places of one run's command (:func:`run_policy`): its worktree,
    the worktree's admin folder, the repository's git directory, the
    checkout's top folder, the private ``TMPDIR``, ``$HOME``, the user's
    temporary folders (``$TMPDIR``) and ``$XDG_RUNTIME_DIR``; where git's
    global configuration is (:class:`.global_config.GlobalConfig`)."""

    worktree: str
    admin_dir: str
    common_dir: str
    top: str
    tmpdir: str
    home: str | None = None
    temporary: tuple[str, ...] = ()
    runtime_dir: str | None = None
    kept_answers: str | None = None
    overlay: WorktreeOverlay | None = None
    global_config: GlobalConfig = GlobalConfig()


def run_policy(
    places: RunPlaces,
    *,
    allow_write: Sequence[str] = (),
    allow_network: bool = False,
    streams: Sequence[str] = (),
    caches: Sequence[Layer] = (),
) -> NamespacePolicy:
    """The policy of one run's command.

    Really writable: the worktree (or, over a base tree, its overlay:
    ``places.overlay``), its admin folder (``HEAD``, index,
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
    says (:func:`_shielded`): the checkout and the git directory.  Over
    the copy-on-write layers: the cache layers ``caches``
    (:func:`cache_folders`).  Bound read-only for git-isopatch's own git
    (``places.global_config``): the real folders of the copy-on-write ones
    (:meth:`.global_config.GlobalConfig.showing`).
    """
    copy_on_write = _copy_on_write(places)
    worktree = () if places.overlay is not None else (places.worktree,)
    writable = (*worktree, places.admin_dir, places.tmpdir, *streams, *allow_write)
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
        caches=tuple(caches),
        worktree=places.overlay,
        global_config=places.global_config,
    )


def _copy_on_write(places: RunPlaces) -> list[str]:
    """``$HOME``, the temporary folders, the folder holding the checkout
    and the git directory."""
    parent = os.path.dirname(os.path.abspath(places.top).rstrip("/")) or "/"
    copy_on_write = [*TEMPORARY_FOLDERS, *places.temporary]
    copy_on_write += [parent if parent != "/" else places.top, places.common_dir]
    if places.home:
        copy_on_write.insert(0, places.home)
    return copy_on_write


def cache_folders(
    places: RunPlaces, environ: Mapping[str, str], writable: Sequence[str] = ()
) -> tuple[str, ...]:
    """The cache folders of ``environ`` that get a cache layer in the run
    (:func:`.cache_layer.usable_folders`): inside a copy-on-write folder,
    apart from the checkout, the git directory and every really writable
    place (``writable``: the allowed paths, the files of the command's
    output).  bubblewrap makes each such place's mount point after the
    layers, and 0.11 follows a link the layer holds on the way there,
    out of the namespaces: a layer kept from an earlier run must hold none."""
    apart = (places.top, places.common_dir, places.worktree, places.admin_dir, places.tmpdir)
    return usable_folders(environ, within=_copy_on_write(places), apart_from=(*apart, *writable))


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


def command_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without :data:`SESSION_VARIABLES`."""
    return {k: v for k, v in environ.items() if k not in SESSION_VARIABLES}
