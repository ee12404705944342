"""What a linked worktree shares with the user's repository: refs (the
stash among them) and the repository's configuration file.

A command that runs ``git branch``, ``git tag``, ``git stash`` or ``git
config`` in the worktree writes there, since linked worktrees share them
(git-worktree(1), "DETAILS": only HEAD and a few per-worktree refs are
private).  git-isopatch cannot stop that, but it can see and say it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath


@dataclass(frozen=True)
class SharedState:
    """Refs and configuration of a repository at one moment.

    Attributes:
        refs: full ref name -> object id, as ``git for-each-ref`` lists them.
        config: the bytes of ``$GIT_COMMON_DIR/config`` (``None`` if absent).
    """

    refs: Mapping[str, str]
    config: bytes | None


def read_shared_state(
    git_dir: GitDirPath, common_dir: GitDirPath, *, env: Mapping[str, str]
) -> GitResult[SharedState]:
    """One ``git for-each-ref`` and a read of the configuration file.

    Returns:
        ``Ok(SharedState)`` or ``Err`` when git cannot list the refs.
    """
    listed = run_git(
        [f"--git-dir={git_dir}", "for-each-ref", "--format=%(objectname) %(refname)"],
        env=env,
    )
    match listed:
        case Err() as err:
            return err
        case Ok(output):
            pass
    refs = {}
    for line in output.decode("utf-8", "surrogateescape").splitlines():
        object_id, _, name = line.partition(" ")
        refs[name] = object_id
    try:
        with open(os.path.join(common_dir, "config"), "rb") as handle:
            config = handle.read()
    except FileNotFoundError:
        config = None
    return Ok(SharedState(refs=refs, config=config))


#: ``SharedWrite.name`` of the repository's configuration file.
CONFIG = "config"


@dataclass(frozen=True)
class SharedWrite:
    """One change to what a linked worktree shares with its repository.

    Attributes:
        name: a full ref name (``refs/heads/x``, ``refs/stash``), or
            :data:`CONFIG` for the configuration file
            ``$GIT_COMMON_DIR/config`` (a ref name always starts with
            ``refs/``).
        change: ``created``, ``changed`` or ``deleted``.
    """

    name: str
    change: str

    def __str__(self) -> str:
        """A short phrase for people: ``refs/heads/x (created)``, ``the
        configuration file``."""
        return "the configuration file" if self.name == CONFIG else f"{self.name} ({self.change})"

    def record(self) -> str:
        """The porcelain and JSON form, ``<name> <change>``:
        ``refs/heads/x created``, ``config changed``."""
        return f"{self.name} {self.change}"


def _change(old: object, new: object) -> str:
    return "created" if old is None else "deleted" if new is None else "changed"


def describe_changes(before: SharedState, after: SharedState) -> list[SharedWrite]:
    """What changed between two states: the refs in the order of their
    names, then the configuration file."""
    changes = []
    for name in sorted(set(before.refs) | set(after.refs)):
        old, new = before.refs.get(name), after.refs.get(name)
        if old != new:
            changes.append(SharedWrite(name, _change(old, new)))
    if before.config != after.config:
        changes.append(SharedWrite(CONFIG, _change(before.config, after.config)))
    return changes
