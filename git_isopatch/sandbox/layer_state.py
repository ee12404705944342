"""The shared state (refs, configuration, watched files, registered
worktrees) as a sandboxed command left it in its copy-on-write layers
(:meth:`.confinement.Namespaced.shared_writes`): what it changed there was
discarded, and is reported as such; and what it planted in its view of
the git directory that no git may open (:func:`planted_in_git_dir`).

What a layer holds is the command's: its files are read a component at a
time, never through a link, never blocking, with a limit
(:mod:`.untrusted`); git runs only inside the namespaces (``spawn``), and
only when the layers hold refs.

Layering: knows nothing of the command line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from ..git.process import Spawn
from ..git.result import Ok
from ..git.run import run_git
from ..git.shared_state import CONFIG, HOOKS, WATCHED_FILES, SharedState, read_entry
from .layer_writes import is_whiteout
from .touched import OPAQUE
from .untrusted import (
    link_beneath,
    list_beneath,
    lstat_beneath,
    read_beneath,
    walk,
    xattr_beneath,
)

if TYPE_CHECKING:
    from ..git.repo import UserRepository
    from .namespaces import Namespaces

_T = TypeVar("_T")

#: What stands for a file of the shared state the command made something
#: that is not one (a FIFO, a link): it differs from any content.
NOT_A_FILE = b"\0not a regular file"


class _Layered:
    """The repository's git directory ``common`` as the command left it.
    It is copy-on-write whatever the run allows (:func:`.run_policy.run_policy`),
    so what the command wrote there is in the layer that holds it
    (:meth:`.namespaces.Namespaces.place`), and a name the layer does not
    hold is as it was before the command: it is not read again."""

    def __init__(self, box: Namespaces, common: str) -> None:
        self.box = box
        self.common = common

    def written(self) -> bool:
        """Whether the layer holds anything at or beneath the git directory
        (outside every layer: whether it may have been written)."""
        place = self.box.place(self.common)
        return place is None or lstat_beneath(*place) is not None

    def entry(self, name: str, before: _T) -> tuple[int, bytes] | None | _T:
        """(type and mode, content or link target) of ``name``, as
        :func:`..git.shared_state.read_entry`; ``None`` when removed;
        ``before`` when the layer does not hold it."""
        place = self.box.place(os.path.join(self.common, name))
        if place is None:
            return read_entry(os.path.join(self.common, name))
        root, relative = place
        st = lstat_beneath(root, relative)
        if st is None:
            return None if _hidden(root, relative) else before
        if is_whiteout(st):
            return None
        if stat.S_ISLNK(st.st_mode):
            return st.st_mode, link_beneath(root, relative) or b""
        if not stat.S_ISREG(st.st_mode):
            return st.st_mode, NOT_A_FILE
        data = read_beneath(root, relative)
        return (st.st_mode, data) if data is not None else None

    def names(self, folder: str) -> set[str]:
        """The names the layer holds in ``folder`` (outside every layer:
        those in the repository)."""
        place = self.box.place(os.path.join(self.common, folder))
        if place is None:
            return set(list_beneath(self.common, folder))
        return set(list_beneath(*place))


def shared_state_in(
    box: Namespaces,
    repository: UserRepository,
    old: SharedState,
    env: Mapping[str, str],
    spawn: Spawn,
) -> SharedState | None:
    """The shared state as the command left it in its layers: the refs
    listed by git inside the namespaces (``spawn``), the files read
    through the layer where it holds them, else as they were (``old``)."""
    refs = _refs_in(box, repository, old, env, spawn)
    if refs is None:
        return None
    layered = _Layered(box, os.path.realpath(repository.common_dir))
    if not layered.written():
        return SharedState(refs, old.config, old.files, old.worktrees)
    names = set(WATCHED_FILES) | set(old.files)
    names |= {f"{HOOKS}/{name}" for name in layered.names(HOOKS)}
    files = {}
    for name in sorted(names):
        entry = layered.entry(name, old.files.get(name))
        if entry is not None:
            files[name] = entry
    before = None if old.config is None else (stat.S_IFREG, old.config)
    config_entry = layered.entry(CONFIG, before)
    config = None
    if config_entry is not None:
        config = config_entry[1] if stat.S_ISREG(config_entry[0]) else NOT_A_FILE
    worktrees = {}
    registered = set(old.worktrees) | {f"worktrees/{n}" for n in layered.names("worktrees")}
    for name in sorted(registered):
        gitdir = layered.entry(f"{name}/gitdir", _AS_BEFORE)
        if gitdir is _AS_BEFORE:  # not written: as it was
            if name in old.worktrees:
                worktrees[name] = old.worktrees[name]
            continue
        if gitdir is None or not stat.S_ISREG(gitdir[0]):
            continue
        dotgit = gitdir[1][:4096].decode("utf-8", "surrogateescape").strip()
        if dotgit and "\0" not in dotgit:
            admin = os.path.join(layered.common, name)
            worktrees[name] = os.path.normpath(os.path.dirname(os.path.join(admin, dotgit)))
    return SharedState(refs, config, files, worktrees)


def _hidden(root: str, relative: str) -> bool:
    """A folder on the way to ``relative`` in the layer ``root`` hides what
    the lower folder holds there: it was removed (a whiteout, or something
    else in its place), or made anew (an opaque folder, with no whiteout
    for each name it held: ``rm -rf hooks && mkdir hooks``)."""
    parts = [part for part in relative.split("/") if part]
    for n in range(1, len(parts)):
        way = "/".join(parts[:n])
        st = lstat_beneath(root, way)
        if st is None:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return True
        if any(xattr_beneath(root, way, name) == b"y" for name in OPAQUE):
            return True
    return False


#: What :meth:`_Layered.entry` is told to give for a file the layer does not hold.
_AS_BEFORE = object()


#: Where git keeps refs, in a git directory.
REF_STORES = ("refs", "packed-refs", "reftable")


def _refs_in(
    box: Namespaces,
    repository: UserRepository,
    old: SharedState,
    env: Mapping[str, str],
    spawn: Spawn,
) -> dict[str, str] | None:
    """The refs as the command left them: ``old``'s when its layers hold
    nothing where refs are kept, else as git lists them inside the
    namespaces (``None`` when it cannot)."""
    stores = {os.path.realpath(repository.common_dir), os.path.realpath(repository.git_dir)}
    places = [box.place(os.path.join(d, name)) for d in stores for name in REF_STORES]
    if all(place is not None and lstat_beneath(*place) is None for place in places):
        return dict(old.refs)
    if planted_in_git_dir(box, repository.common_dir, ()):
        return None  # git would wait on it
    argv = [f"--git-dir={repository.git_dir}", "for-each-ref", "--format=%(objectname) %(refname)"]
    match run_git(argv, env=env, cwd="/", spawn=spawn):
        case Ok(output):
            pass
        case _:
            return None
    refs = {}
    for line in output.decode("utf-8", "surrogateescape").splitlines():
        oid, _, name = line.partition(" ")
        refs[name] = oid
    return refs


#: Where a link in a git directory does no harm: git runs no hook for
#: git-isopatch, and a hooks folder may be a link (``core.hooksPath``).
HARMLESS_LINKS = HOOKS


def planted_in_git_dir(box: Namespaces, common_dir: str, own: tuple[str, ...]) -> list[str]:
    """What the command left, in its view of the repository's git
    directory ``common_dir`` and in the run's own git folders ``own`` (the
    worktree's private folder, really written), that git would open and
    wait on, or read without end: a FIFO, a device (but a whiteout), a
    link (but under :data:`HARMLESS_LINKS`); the paths, and the folder
    itself when it holds more than :func:`.untrusted.walk` looks at."""
    found: list[str] = []
    common = os.path.realpath(common_dir)
    places = [(folder, folder, "") for folder in own]
    place = box.place(common)
    if place is not None:
        places.append((common, *place))
    for folder, root, relative in places:
        entries, complete = walk(root, relative)
        if not complete:
            found.append(folder)
        for name, mode in entries:
            if _planted(name, mode, root, os.path.join(relative, name)):
                found.append(os.path.join(folder, name))
    return sorted(found)


def _planted(name: str, mode: int, root: str, path: str) -> bool:
    """The entry ``name`` (of mode ``mode``, at ``path`` in ``root``) is one
    git must not meet (:func:`planted_in_git_dir`)."""
    if stat.S_ISLNK(mode):
        return HARMLESS_LINKS not in name.split("/")
    if stat.S_ISCHR(mode):
        st = lstat_beneath(root, path)
        return st is None or not is_whiteout(st)
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISSOCK(mode))
