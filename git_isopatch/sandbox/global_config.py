"""The user's global git configuration, and every file it names, as they
were before the command, for git-isopatch's own git after it (design:
"What the command left is hostile input").

Inside the namespaces ``$HOME`` (and ``$XDG_CONFIG_HOME``, the temporary
folders) are copy-on-write: the command may write ``~/.gitconfig``,
``$XDG_CONFIG_HOME/git/config``, ``attributes`` or ``ignore`` there, and
any file the configuration names by its absolute path (a
``core.excludesFile``, a ``core.attributesFile``, an ``include.path``,
the program a filter runs); those writes are discarded with its layer.
git-isopatch's own git, which runs in the same namespaces after the
command, would read them, and take the patch with a configuration the
user's git never sees: an ignore rule hides a new file, a filter turns an
edit back into the base's content.  No list of keys can say which files
git reads, so our own git sees the real folders at their own paths.

The real folders are bound read-only, once, when the namespaces are
made, each below :data:`PLACE` (a small tmpfs made read-only after them:
the command can neither write in it nor rename a folder of it): every
folder the command could change (:meth:`GlobalConfig.showing`: its
copy-on-write layers, ``$HOME``, the temporary folders, the folder
holding the checkout: the configuration may name a file anywhere there,
a team's excludes beside the checkouts, an ``include.path`` in ``/tmp``),
and the folders of the global configuration that lie in the command's
private temporary folder.  The command never sees them: it runs in a
mount namespace of its own where an empty tmpfs covers :data:`PLACE` (a
unix socket of a read-only bind still answers;
:func:`.launcher_main._hide_real`).
Once the command has ended and nothing of it is left, the launcher
(:mod:`.launcher`), which alone keeps ``CAP_SYS_ADMIN`` (and
``CAP_SETPCAP``, to drop it) in the sandbox's user namespace (the command
never holds a capability), takes a mount namespace of its own
(:func:`.launcher_main.own_view`), where each real folder is shown over
the command's view of it through a read-only overlay, never a bind, so
that a unix socket in it, a tmux server's or an ssh master's, cannot be
connected to by a filter the command planted (none has a mount beneath:
the kernel would refuse the overlay; a folder with one is split into
layers that have none, its own files shown without their sockets,
:data:`.layers.SPLIT`), and what git-isopatch's own git must read as the
command left it
(:attr:`GlobalConfig.kept`: the worktree, its admin folder, the private
``TMPDIR``, the repository's git directory; and, where they can be, the
paths ``--allow-write`` makes really writable) is
moved back on top; then it drops its capabilities for good.  Every git it
serves runs in that namespace, with the user's own environment.  A folder
the command replaced by a link fails the view, and so the run, and so does
a kept folder that is no folder at its path in the real view (a folder on
its way became a link): our own git would read another folder there.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Mapping, Sequence

from ..git.record import Record
from .layers import CACHE, OVERLAY, PRIVATE, Layer, inside

#: Where the real folders are bound inside the namespaces.
PLACE = "/run/git-isopatch"

#: The variables that name where git finds its global configuration,
#: attributes and excludes.
VARIABLES = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL")


def _real(value: str | None) -> str | None:
    return os.path.realpath(value) if value and os.path.isabs(value) else None


class GlobalConfig(Record):
    """The real folders (absolute, without links) bound read-only below
    :data:`PLACE`, the n-th at ``PLACE/<n>`` (:meth:`of`: those of git's
    global configuration; :meth:`showing`: every folder the command could
    change); the folders our own git reads
    as the command left them where a real folder holds them, each with what
    it is (``kept``: the worktree, its admin folder, the private
    ``TMPDIR``, the repository's git directory: the view fails without
    one) and those it reads so where they can be (``optional``: the
    paths ``--allow-write`` makes really writable).  A cache folder is
    shown as it is: its layer is kept for the repository's later runs, and
    what a command planted there (an excludes file the configuration
    names) must shape neither this run's patch nor a later one's."""

    folders: tuple[str, ...] = ()
    kept: tuple[tuple[str, str], ...] = ()
    optional: tuple[str, ...] = ()

    @classmethod
    def of(cls, environ: Mapping[str, str], kept: Sequence[tuple[str, str]] = ()) -> GlobalConfig:
        """The folders of the global configuration ``environ`` names (:data:`VARIABLES`; a
        ``$GIT_CONFIG_GLOBAL``'s own folder), none inside another;
        ``kept``: ``(what, path)``."""
        home = _real(environ.get("HOME"))
        config = _real(environ.get("XDG_CONFIG_HOME"))
        named = _real(environ.get("GIT_CONFIG_GLOBAL"))
        folders: list[str] = []
        for folder in (home, config, named and os.path.dirname(named)):
            if folder and folder != "/" and not any(inside(folder, f) for f in folders):
                folders = [f for f in folders if not inside(f, folder)] + [folder]
        return cls(tuple(folders), tuple((w, os.path.realpath(p)) for w, p in kept))

    def keeping(self, optional: Sequence[str]) -> GlobalConfig:
        """These, with ``optional`` read as the command left them where
        they can be."""
        return self._replace(optional=tuple(os.path.realpath(p) for p in optional))

    def showing(self, layers: Sequence[Layer]) -> GlobalConfig:
        """The folders the command could change, ``layers`` being its
        copy-on-write ones (:func:`.layers.plan_layers`): the global
        configuration may name any file there by its absolute path (an
        excludes file beside the checkouts, in ``/tmp``), and git runs
        programs from there; the command rewrote them in its view.  Each
        overlay's folder, a cache layer's too (none has a mount beneath, so
        each can be shown through an overlay), but those inside a folder
        read as the command left it (:attr:`kept`, :attr:`optional`) or
        inside another; a split
        folder's own files are read-only for the command already.  Of
        :meth:`of`'s folders, those in the command's private temporary
        folder outside every other layer; the files of that private folder
        itself stay the command's.  Without a kept folder no view was asked
        for (nothing of ours reads what a command left): as it is."""
        if not self.kept:
            return self
        kept = [*(path for _, path in self.kept), *self.optional]
        overlays = [layer.folder for layer in layers if layer.kind in (OVERLAY, CACHE)]
        private = [layer.folder for layer in layers if layer.kind == PRIVATE]
        others = [layer.folder for layer in layers if layer.kind not in (PRIVATE, CACHE)]
        named = [
            folder
            for folder in self.folders
            if any(inside(folder, p) for p in private)
            and not any(inside(folder, o) for o in others)
        ]
        shown: list[str] = []
        for folder in sorted({*overlays, *named}, key=lambda p: (p.count("/"), p)):
            if not any(inside(folder, k) for k in kept):
                if not any(inside(folder, f) for f in shown):
                    shown.append(folder)
        return self._replace(folders=tuple(shown))

    def arguments(self) -> list[str]:
        """bubblewrap's options binding :attr:`folders` (a missing one is
        left out), then making :data:`PLACE` read-only."""
        if not self.folders:
            return []
        args = ["--perms", "0755", "--tmpfs", PLACE, "--dir", f"{PLACE}/empty"]
        for n, folder in enumerate(self.folders):
            args += ["--ro-bind-try", folder, f"{PLACE}/{n}"]
        return [*args, "--remount-ro", PLACE]

    def view(self) -> str:
        """The launcher's argument for its view (``-``: nothing to do)."""
        if not self.folders:
            return "-"
        folders, optional = (
            tuple(map(os.fsencode, paths)) for paths in (self.folders, self.optional)
        )
        kept = tuple((what, os.fsencode(path)) for what, path in self.kept)
        return marshal.dumps((folders, kept, optional)).hex()

    @staticmethod
    def environment(env: Mapping[str, str]) -> dict[str, str]:
        """``env`` whose :data:`VARIABLES` name the real folders without a
        link: resolved here, outside the namespaces, since a link on the way
        (``HOME=/tmp/me`` leading to ``/data/me``) may lie in a folder that is
        copy-on-write inside, where the command pointed it at its own."""
        made = dict(env)
        for name in VARIABLES:
            real = _real(env.get(name))
            if real:
                made[name] = real
        return made
