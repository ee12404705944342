"""What a linked worktree shares with the user's repository: refs (the
stash among them), the repository's configuration file, and the files of
the git directory that change what git does there (:data:`WATCHED_FILES`,
the hooks).

A command that runs ``git branch``, ``git tag``, ``git stash`` or ``git
config`` in the worktree writes there, since linked worktrees share them
(git-worktree(1), "DETAILS": only HEAD and a few per-worktree refs are
private); so does ``pre-commit install`` (a hook in ``hooks/``), a tool that
adds a line to ``info/exclude`` (which hides the user's new files from
``git status``), ``git clone --shared`` in reverse (``objects/info/alternates``)
or ``git fetch --depth`` (``shallow``).  git-isopatch cannot stop that, but
it can see and say it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from .quote import quote_c_style, quoted
from .record import Record
from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath
from .worktree import worktree_admin_dirs


class SharedState(Record):
    """Refs and configuration of a repository at one moment.

    Attributes:
        refs: full ref name -> object id, as ``git for-each-ref`` lists them.
        config: the bytes of ``$GIT_COMMON_DIR/config`` (``None`` if absent).
        files: name relative to ``$GIT_COMMON_DIR`` (``hooks/pre-commit``,
            ``info/exclude``) -> (file type and mode, content or link
            target), for each of :data:`WATCHED_FILES` and each entry of
            ``hooks/`` that exists.
        worktrees: ``worktrees/<id>`` -> top folder, for each registered
            linked worktree (a command's ``git worktree add`` registers one
            in the user's repository).
    """

    refs: Mapping[str, str]
    config: bytes | None
    files: Mapping[str, tuple[int, bytes]] = MappingProxyType({})
    worktrees: Mapping[str, str] = MappingProxyType({})


#: Files of ``$GIT_COMMON_DIR`` besides ``config`` that a linked worktree
#: shares and that change what git does in the user's repository
#: (gitrepository-layout(5)): ignore rules and attributes for every work
#: tree, another object store, the shallow boundary.
WATCHED_FILES = ("info/exclude", "info/attributes", "objects/info/alternates", "shallow")

#: The name of ``$GIT_COMMON_DIR/info/attributes`` among :data:`WATCHED_FILES`.
INFO_ATTRIBUTES = "info/attributes"

#: The folder of the repository's hooks (githooks(5)); every entry in it is
#: watched (``pre-commit install`` writes ``hooks/pre-commit``).
HOOKS = "hooks"


def read_entry(path: str) -> tuple[int, bytes] | None:
    """(type and mode, content or link target) of ``path``; a folder's
    content is empty; ``None`` if absent or unreadable."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return mode, os.fsencode(os.readlink(path))
        if not stat.S_ISREG(mode):
            return mode, b""
        with open(path, "rb") as handle:
            return mode, handle.read()
    except OSError:
        return None


def read_watched_files(common_dir: GitDirPath) -> dict[str, tuple[int, bytes]]:
    """:data:`WATCHED_FILES` and the entries of :data:`HOOKS` as they are
    now (see :attr:`SharedState.files`): a few small files, read whole."""
    names = list(WATCHED_FILES)
    try:
        names += sorted(f"{HOOKS}/{name}" for name in os.listdir(os.path.join(common_dir, HOOKS)))
    except OSError:
        pass
    files = {}
    for name in names:
        entry = read_entry(os.path.join(common_dir, name))
        if entry is not None:
            files[name] = entry
    return files


def refs_in_process(git_dir: GitDirPath, common_dir: GitDirPath) -> dict[str, str] | None:
    """The refs as ``git for-each-ref --format='%(objectname) %(refname)'``
    lists them, read by libgit2 in this process (no git process),
    or ``None`` where it might not list the same ones, and git must.

    Equivalent where this answers: every ref under ``refs/``, loose or
    packed, a symbolic one under its own name with the object id it
    resolves to; a dangling symbolic ref and a loose ref file git cannot
    parse are left out, as git leaves them out (``ignoring broken ref``);
    a ref naming a missing object is kept, as git keeps it.  Only for the
    main work tree's git directory (``git_dir`` is ``common_dir``): for a
    linked one, which refs git counts as that worktree's own is git's to
    say.  Any error of libgit2 gives ``None``.
    """
    if os.path.realpath(git_dir) != os.path.realpath(common_dir):
        return None
    from .library import load_pygit2

    pygit2 = load_pygit2()  # loaded already on every path that reads shared state

    try:
        repository = pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        if repository.is_bare:
            return None
        refs = {}
        for reference in repository.references.iterator():
            try:
                target = reference.resolve().target
            except KeyError:  # dangling symbolic ref (pygit2.NotFoundError)
                continue
            refs[reference.raw_name.decode("utf-8", "surrogateescape")] = str(target)
        return refs
    except Exception:  # noqa: BLE001 - whatever libgit2 cannot answer, git answers
        return None


def read_shared_state(
    git_dir: GitDirPath, common_dir: GitDirPath, *, env: Mapping[str, str]
) -> GitResult[SharedState]:
    """The refs (:func:`refs_in_process`, else one ``git for-each-ref``), a
    read of the configuration file and of the watched files
    (:func:`read_watched_files`).

    Returns:
        ``Ok(SharedState)`` or ``Err`` when git cannot list the refs.
    """
    refs = refs_in_process(git_dir, common_dir)
    if refs is None:
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
    worktrees = {
        f"worktrees/{os.path.basename(admin)}": top
        for top, admin in worktree_admin_dirs(common_dir).items()
    }
    files = read_watched_files(common_dir)
    return Ok(SharedState(refs=refs, config=config, files=files, worktrees=worktrees))


#: ``SharedWrite.name`` of the repository's configuration file.
CONFIG = "config"


class SharedWrite(Record):
    """One change to what a linked worktree shares with its repository.

    Attributes:
        name: a full ref name (``refs/heads/x``, ``refs/stash``),
            :data:`CONFIG` for the configuration file
            ``$GIT_COMMON_DIR/config``, or the name of a watched file
            relative to ``$GIT_COMMON_DIR`` (``hooks/pre-commit``,
            ``info/exclude``; :data:`WATCHED_FILES`); a ref name always
            starts with ``refs/``.
            ``worktrees/<id>`` for a worktree registration.
        change: ``created``, ``changed`` or ``deleted``.
        where: a registered worktree's top folder (its files), else ``None``.
        discarded: the change was made in a copy-on-write view of the
            repository (the sandbox) and never reached it.
    """

    name: str
    change: str
    where: str | None = None
    discarded: bool = False

    def __str__(self) -> str:
        """A short phrase for people: ``refs/heads/x (created)``, ``the
        configuration file``, ``worktree '/src/agent' (created)``; a
        discarded change says so."""
        if self.name == CONFIG:
            return "the configuration file" + (" (discarded)" if self.discarded else "")
        gone = ", discarded" if self.discarded else ""
        if self.where is not None:
            return f"worktree {quoted(self.where)} ({self.change}{gone})"
        name = quote_c_style(os.fsencode(self.name)).decode("ascii")
        return f"{name} ({self.change}{gone})"

    def record(self) -> str:
        """The porcelain and JSON form, ``<name> <change>[ discarded]``:
        ``refs/heads/x created``, ``config changed discarded``."""
        return f"{self.name} {self.change}" + (" discarded" if self.discarded else "")


#: Where git finds replace refs (git-replace(1)): with one there, git reads
#: another object wherever the one it replaces is named.
REPLACE_REFS = "refs/replace/"


def replacing_pins(writes: Iterable[SharedWrite]) -> tuple[tuple[str, str], ...]:
    """``core.useReplaceRefs=false`` when ``writes`` (what the command
    changed) hold a replace ref, else nothing: git-isopatch's own git after
    the command then reads the base as it is, not as the command chose (an
    edited file with the base's blob replaced by the edit reads as
    unchanged, and the patch hides it).  The user's own replace refs stay
    in force where the command changed none."""
    if any(write.name.startswith(REPLACE_REFS) for write in writes):
        return (("core.useReplaceRefs", "false"),)
    return ()


def _change(old: object, new: object) -> str:
    return "created" if old is None else "deleted" if new is None else "changed"


def describe_changes(before: SharedState, after: SharedState) -> list[SharedWrite]:
    """What changed between two states: the refs in the order of their
    names, then the configuration file, then the watched files in the
    order of their names (a change of mode alone counts)."""
    changes = []
    for name in sorted(set(before.refs) | set(after.refs)):
        old, new = before.refs.get(name), after.refs.get(name)
        if old != new:
            changes.append(SharedWrite(name, _change(old, new)))
    if before.config != after.config:
        changes.append(SharedWrite(CONFIG, _change(before.config, after.config)))
    for name in sorted(set(before.files) | set(after.files)):
        old_file, new_file = before.files.get(name), after.files.get(name)
        if old_file != new_file:
            changes.append(SharedWrite(name, _change(old_file, new_file)))
    for name in sorted(set(before.worktrees) | set(after.worktrees)):
        old_top, new_top = before.worktrees.get(name), after.worktrees.get(name)
        if old_top != new_top:
            where = new_top or old_top
            changes.append(SharedWrite(name, _change(old_top, new_top), where=where))
    return changes
