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
from typing import TYPE_CHECKING

from ..git.process import Spawn
from ..git.result import Ok
from ..git.run import run_git
from ..git.shared_state import CONFIG, HOOKS, WATCHED_FILES, SharedState, read_entry
from .layers import is_whiteout
from .untrusted import link_beneath, list_beneath, lstat_beneath, read_beneath, walk

if TYPE_CHECKING:
    from ..git.repo import UserRepository
    from .namespaces import Namespaces

#: What stands for a file of the shared state the command made something
#: that is not one (a FIFO, a link): it differs from any content.
NOT_A_FILE = b"\0not a regular file"


class _Layered:
    """The repository's git directory ``common`` as the command left it:
    a name is read in the layer that holds it (:meth:`.namespaces.Namespaces.place`),
    else in the repository itself."""

    def __init__(self, box: Namespaces, common: str) -> None:
        self.box = box
        self.common = common

    def entry(self, name: str) -> tuple[int, bytes] | None:
        """(type and mode, content or link target) of ``name``, as
        :func:`..git.shared_state.read_entry`; ``None`` when absent or removed."""
        place = self.box.place(os.path.join(self.common, name))
        if place is None:
            return read_entry(os.path.join(self.common, name))
        root, relative = place
        st = lstat_beneath(root, relative)
        if st is None:
            return read_entry(os.path.join(self.common, name))
        if is_whiteout(st):
            return None
        if stat.S_ISLNK(st.st_mode):
            return st.st_mode, link_beneath(root, relative) or b""
        if not stat.S_ISREG(st.st_mode):
            return st.st_mode, NOT_A_FILE
        data = read_beneath(root, relative)
        return (st.st_mode, data) if data is not None else None

    def names(self, folder: str) -> set[str]:
        """The names in ``folder``, in the repository and in its layer."""
        found = set(list_beneath(self.common, folder))
        place = self.box.place(os.path.join(self.common, folder))
        if place is not None:
            found |= set(list_beneath(*place))
        return found


def shared_state_in(
    box: Namespaces,
    repository: UserRepository,
    old: SharedState,
    env: Mapping[str, str],
    spawn: Spawn,
) -> SharedState | None:
    """The shared state as the command left it in its layers: the refs
    listed by git inside the namespaces (``spawn``), the files read
    through the layer."""
    refs = _refs_in(box, repository, old, env, spawn)
    if refs is None:
        return None
    layered = _Layered(box, os.path.realpath(repository.common_dir))
    names = set(WATCHED_FILES) | set(old.files)
    names |= {f"{HOOKS}/{name}" for name in layered.names(HOOKS)}
    files = {}
    for name in sorted(names):
        entry = layered.entry(name)
        if entry is not None:
            files[name] = entry
    config_entry = layered.entry(CONFIG)
    config = None
    if config_entry is not None:
        config = config_entry[1] if stat.S_ISREG(config_entry[0]) else NOT_A_FILE
    worktrees = {}
    registered = set(old.worktrees) | {f"worktrees/{n}" for n in layered.names("worktrees")}
    for name in sorted(registered):
        gitdir = layered.entry(f"{name}/gitdir")
        if gitdir is None or not stat.S_ISREG(gitdir[0]):
            continue
        dotgit = gitdir[1][:4096].decode("utf-8", "surrogateescape").strip()
        if dotgit and "\0" not in dotgit:
            admin = os.path.join(layered.common, name)
            worktrees[name] = os.path.normpath(os.path.dirname(os.path.join(admin, dotgit)))
    return SharedState(refs, config, files, worktrees)


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
        prefix = "/".join(part for part in relative.split("/") if part)
        for path, mode in entries:
            name = path[len(prefix) + 1 :] if prefix else path
            if _planted(name, mode, root, path):
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
