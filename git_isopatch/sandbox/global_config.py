"""The user's global git configuration, attributes and excludes as they
were before the command, for git-isopatch's own git after it (design:
"What the command left is hostile input").

Inside the namespaces ``$HOME`` (and ``$XDG_CONFIG_HOME``, the temporary
folders) are copy-on-write: the command may write ``~/.gitconfig``,
``$XDG_CONFIG_HOME/git/config``, ``attributes`` or ``ignore`` there
(``git config --global core.autocrlf true``, a global excludes file, a
clean filter), and those writes are discarded with its layer.  git-isopatch's
own git, which runs in the same namespaces after the command, would read
them, and take the patch with a configuration the user's git never sees:
an ignore rule hides a new file, a filter turns an edit back into the
base's content.  So the real folders are bound read-only, once, when the
namespaces are made, each below :data:`PLACE` (a small tmpfs made
read-only after them: the command can neither write in it nor rename a
folder of it, each a mount point), and the environment of every git
git-isopatch runs inside names them (:meth:`GlobalConfig.environment`):
``$HOME`` (where ``~/.gitconfig`` is, and what ``~/`` in a configured path
expands to), ``$XDG_CONFIG_HOME`` (``git/config``, the default
``core.attributesFile`` and ``core.excludesFile``), the folder of
``$GIT_CONFIG_GLOBAL``, and the folders of ``PATH`` inside them, where
the programs a filter names are found.  A folder that does not exist stays absent there:
git reads no file, as the user's git would not.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from .layers import inside

#: Where the real folders are bound inside the namespaces.
PLACE = "/run/git-isopatch"

#: The variables that name where git finds its global configuration,
#: attributes and excludes, translated by :meth:`GlobalConfig.environment`.
VARIABLES = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL")


def _absolute(value: str | None) -> str | None:
    return os.path.normpath(value) if value and os.path.isabs(value) else None


class GlobalConfig(NamedTuple):
    """The real folders (absolute, normalised) bound read-only below
    :data:`PLACE`, the n-th at ``PLACE/<n>``."""

    folders: tuple[str, ...] = ()

    @classmethod
    def of(cls, environ: Mapping[str, str]) -> GlobalConfig:
        """The folders ``environ`` names (:data:`VARIABLES`; a
        ``$GIT_CONFIG_GLOBAL``'s own folder), none inside another."""
        home = _absolute(environ.get("HOME"))
        config = _absolute(environ.get("XDG_CONFIG_HOME"))
        named = _absolute(environ.get("GIT_CONFIG_GLOBAL"))
        folders: list[str] = []
        for folder in (home, config, named and os.path.dirname(named)):
            if folder and not any(inside(folder, f) for f in folders):
                folders.append(folder)
        return cls(tuple(folders))

    def arguments(self) -> list[str]:
        """bubblewrap's options binding :attr:`folders` (a missing one is
        left out), then making :data:`PLACE` read-only."""
        if not self.folders:
            return []
        args = ["--perms", "0755", "--tmpfs", PLACE]
        for n, folder in enumerate(self.folders):
            args += ["--ro-bind-try", folder, f"{PLACE}/{n}"]
        return [*args, "--remount-ro", PLACE]

    def real(self, path: str) -> str:
        """``path`` (absolute) in the real folders, where one holds it."""
        value = os.path.normpath(path)
        for n, folder in enumerate(self.folders):
            if inside(value, folder):
                return f"{PLACE}/{n}" + value[len(folder.rstrip("/")) :]
        return path

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` whose :data:`VARIABLES`, and the folders of ``PATH``
        (a program a filter names, planted in ``~/.local/bin``), lead to
        the real folders."""
        made = dict(env)
        for name in VARIABLES:
            value = env.get(name)
            if value and os.path.isabs(value):
                made[name] = self.real(value)
        if env.get("PATH"):
            folders = env["PATH"].split(os.pathsep)
            made["PATH"] = os.pathsep.join(self.real(f) if os.path.isabs(f) else f for f in folders)
        return made
