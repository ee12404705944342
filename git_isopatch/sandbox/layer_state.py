"""The shared state (refs, configuration, watched files, registered
worktrees) as a sandboxed command left it in its copy-on-write layers
(:meth:`.confinement.Namespaced.shared_writes`): what it changed there was
discarded, and is reported as such.

Layering: reads the git directory's files; git runs only inside the
namespaces, and only when the layers hold refs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..git.shared_state import SharedState

if TYPE_CHECKING:
    from ..git.repo import UserRepository
    from .namespaces import Namespaces


def shared_state_in(
    box: Namespaces, repository: UserRepository, old: SharedState, env: Mapping[str, str]
) -> SharedState | None:
    """The shared state as the command left it in its layers: the refs
    listed by git in the namespaces, the files read through the layer."""
    import stat

    from ..git.shared_state import CONFIG, HOOKS, WATCHED_FILES, read_entry

    refs = _refs_in(box, repository, old, env)
    if refs is None:
        return None
    common = os.path.realpath(repository.common_dir)

    def through(name: str) -> str | None:
        layer = box.layer_of(os.path.join(common, name))
        if layer is not None and os.path.lexists(layer):
            st = os.lstat(layer)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: removed
                return None
            return layer
        return os.path.join(common, name)

    names = set(WATCHED_FILES) | set(old.files)
    for folder in (os.path.join(common, HOOKS), box.layer_of(os.path.join(common, HOOKS))):
        if folder is not None:
            with contextlib.suppress(OSError):
                names |= {f"{HOOKS}/{n}" for n in os.listdir(folder)}
    files = {}
    for name in sorted(names):
        path = through(name)
        entry = read_entry(path) if path is not None else None
        if entry is not None:
            files[name] = entry
    config = None
    config_path = through(CONFIG)
    if config_path is not None:
        with contextlib.suppress(OSError), open(config_path, "rb") as handle:
            config = handle.read()
    worktrees = {}
    registered = set(old.worktrees)
    layer = box.layer_of(os.path.join(common, "worktrees"))
    if layer is not None:
        with contextlib.suppress(OSError):
            registered |= {f"worktrees/{n}" for n in os.listdir(layer)}
    for name in sorted(registered):
        gitdir = through(f"{name}/gitdir")
        if gitdir is None:
            continue
        with contextlib.suppress(OSError), open(gitdir, "rb") as handle:
            dotgit = handle.read().decode("utf-8", "surrogateescape").strip()
            if dotgit:
                admin = os.path.join(common, name)
                worktrees[name] = os.path.normpath(os.path.dirname(os.path.join(admin, dotgit)))
    return SharedState(refs, config, files, worktrees)


#: Where git keeps refs, in a git directory.
REF_STORES = ("refs", "packed-refs", "reftable")


def _refs_in(
    box: Namespaces, repository: UserRepository, old: SharedState, env: Mapping[str, str]
) -> dict[str, str] | None:
    """The refs as the command left them: ``old``'s when its layers hold
    nothing where refs are kept, else as git lists them in the namespaces
    (``None`` when it cannot)."""
    import subprocess

    stores = {os.path.realpath(repository.common_dir), os.path.realpath(repository.git_dir)}
    layered = [box.layer_of(os.path.join(d, name)) for d in stores for name in REF_STORES]
    if all(layer is not None and not os.path.lexists(layer) for layer in layered):
        return dict(old.refs)
    argv = ["git", f"--git-dir={repository.git_dir}", "for-each-ref",
            "--format=%(objectname) %(refname)"]  # fmt: skip
    with box.wrap(argv, cwd="/") as wrapped:
        try:
            done = subprocess.run(
                wrapped.argv,
                pass_fds=wrapped.pass_fds,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                timeout=120,
                check=False,
                process_group=0,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        wrapped.finish()
    if done.returncode != 0:
        return None
    refs = {}
    for line in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        oid, _, name = line.partition(" ")
        refs[name] = oid
    return refs
