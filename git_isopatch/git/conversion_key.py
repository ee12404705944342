"""What the paths a checkout alone changes depend on, as digests.

Which tracked files git sees differ from their blobs once it reads them
(:data:`.baseline.CONVERSION_PATHSPECS`) is decided, path by path, by the
file on disk, its blob, the attributes that apply to it and the
configuration that converts.  What can be read without reading the files
is digested: what applies to every path (the attributes files outside the
tree, the ``core.*``, ``filter.*`` and ``attr.*`` settings, the variables
that choose the attributes files and find the programs, the git program)
with the whole index file (:attr:`ConversionInputs.key`: the same index,
the same answer); and, for an index that differs, the same with the
tracked ``.gitattributes`` as they are on disk instead of the index
(:attr:`EntryInputs.key`) and one digest per index entry
(:attr:`EntryInputs.entries`: its path, object id, mode, flags and stat
data, :mod:`.index_entries`).  Under the stat data's word, which is what
a claim's ``git read-tree`` and ``git status`` take too, an entry that
has not changed stands for the same file on disk (a file rewritten since
gets new stat data: its change time moves).  What they do not see: the
code of a filter's program.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from typing import Any

from .admin_files import common_dir_of
from .attributes import is_attributes_file
from .index_entries import parse_entries, read_index
from .pinned import ATTRIBUTES_FILE, CONVERSION_SECTIONS
from .record import Record
from .types import GitDirPath, WorktreePath

#: The variables that choose which attributes files git reads.
ATTRIBUTE_VARIABLES = ("GIT_ATTR_NOSYSTEM", "GIT_ATTR_SOURCE", "HOME", "XDG_CONFIG_HOME")

#: The settings naming a command git runs on checkout (gitattributes(5),
#: "filter"): the program it names is looked up on ``PATH``.
_FILTER_COMMANDS = (".clean", ".smudge", ".process")
#: What makes a filter's command more than a program and its arguments
#: for the shell git hands it to: then the whole ``PATH`` is keyed.
_SHELL_SYNTAX = frozenset("\n;&|<>()$`\\\"'*?[]#~={}!")

#: Variables that change a checkout's files but not what git reads back:
#: Git LFS's, which leaves pointer files.
CHECKOUT_VARIABLES = ("GIT_LFS_SKIP_SMUDGE",)

#: Bytes read of one attributes file at most; a larger one is not keyed.
FILE_LIMIT = 1 << 24

#: Bytes of an entry's digest.
DIGEST_SIZE = 16


class ConversionInputs(Record):
    """What the paths a checkout alone changes depend on, but the tracked
    attributes.

    Attributes:
        key: hex digest of all of it with the whole index file: the same
            key, the same answer.
        common: digest of what applies to every path but the tracked
            ``.gitattributes`` (:func:`entry_inputs` adds them).
        index: the index file's bytes.
    """

    key: str
    common: bytes
    index: bytes


class EntryInputs(Record):
    """The same, entry by entry (:func:`entry_inputs`).

    Attributes:
        key: hex digest of what applies to every path, the tracked
            ``.gitattributes`` as they are on disk included.
        entries: each index entry's path -> the digest of the entry
            (:data:`DIGEST_SIZE` bytes, the path in it).
    """

    key: str
    entries: Mapping[bytes, bytes]


def conversion_inputs(
    worktree: WorktreePath,
    git_dir: GitDirPath,
    *,
    settings: Mapping[str, str | None],
    env: Mapping[str, str],
    extra: Sequence[str] = (),
) -> ConversionInputs | None:
    """What :func:`.baseline.read_baseline`'s reading look at ``worktree``
    (private folder ``git_dir``) depends on, with ``extra`` (the look's
    own arguments); ``settings`` is the configuration as
    :func:`.pinned.read_settings` reads it.  ``None`` when one of the
    inputs cannot be read (the index, an attributes file that is not a
    regular file) or the index is split: then nothing is known."""
    import hashlib  # only where attributes apply in a claimed worktree

    index = read_index(git_dir)
    if index is None:
        return None
    parts: list[bytes] = [b"conversion-key 1", os.fsencode(worktree)]
    parts += [os.fsencode(item) for item in extra]
    applying = _settings_parts(worktree, git_dir, settings, env)
    if applying is None:
        return None
    common = _digest(hashlib.sha256(), parts + applying)
    return ConversionInputs(_digest(hashlib.sha256(), [common, index]).hex(), common, index)


def settings_key(
    git_dir: GitDirPath,
    *,
    settings: Mapping[str, str | None],
    env: Mapping[str, str],
    extra: Sequence[str] = (),
) -> str | None:
    """Hex digest of what applies to every path of a checkout of the
    repository of ``git_dir`` (``settings`` as :func:`.pinned.read_settings`
    reads them, the attributes files outside the tree,
    :data:`CHECKOUT_VARIABLES`), with ``extra``: no index, no path of the
    checkout's own (a base tree's key, :mod:`..worktrees.base_trees`).  A
    relative ``core.attributesFile`` is its name alone: git reads it from
    the top of the worktree it runs in (its folder after setup), a file of
    the commit checked out there, never the user's copy.  ``None`` when an attributes file
    cannot be read.  By the interpreter's own BLAKE2: ``hashlib`` loads
    OpenSSL, some 11 M instructions, on every run over a base tree."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter built without it
        from hashlib import blake2b
    parts = _settings_parts(None, git_dir, settings, env)
    if parts is None:
        return None
    parts += [f"{name}={env.get(name)}".encode() for name in CHECKOUT_VARIABLES]
    parts = [b"settings-key 1", *map(os.fsencode, extra), *parts]
    return _digest(blake2b(digest_size=32), parts).hex()


def _settings_parts(
    worktree: WorktreePath | None,
    git_dir: GitDirPath,
    settings: Mapping[str, str | None],
    env: Mapping[str, str],
) -> list[bytes] | None:
    """The parts of :func:`conversion_inputs` that apply to every path,
    ``None`` when an attributes file cannot be read (``worktree``: see
    :func:`_attribute_files`)."""
    parts: list[bytes] = []
    for name, value in sorted(settings.items()):
        if name.startswith(CONVERSION_SECTIONS):
            parts += [name.encode(), b"\1" if value is None else b"=" + os.fsencode(value)]
    for name in ATTRIBUTE_VARIABLES:
        parts.append(f"{name}={env[name]}".encode() if name in env else name.encode())
    parts += _filter_programs(settings, env)
    # by size and time: git's exec path holds a copy of the git on PATH
    parts.append(repr(_program_stamp("git", env)).encode())
    for path in _attribute_files(worktree, git_dir, settings, env):
        content = _regular_content(path)
        if content is False:
            return None
        parts += [os.fsencode(path), b"\1" if content is None else b"=" + content]
    return parts


def _filter_programs(settings: Mapping[str, str | None], env: Mapping[str, str]) -> list[bytes]:
    """What the filter commands of ``settings`` run, as ``PATH`` finds it
    (by size and time, as the git program: ``git isopatch`` puts git's
    exec path first), rather than ``PATH`` itself: a virtual environment
    put first on it changes no checkout.  The whole
    ``PATH`` (as git searches it) for a command in the shell's syntax."""
    parts: list[bytes] = []
    for name, value in sorted(settings.items()):
        if not (name.startswith("filter.") and name.endswith(_FILTER_COMMANDS) and value):
            continue
        if _SHELL_SYNTAX.intersection(value):
            return [f"PATH={_search_path(env)}".encode()] if "PATH" in env else [b"PATH"]
        words = value.split()
        program = words[0] if words else ""
        # from the worktree's top, a file of the commit: its name alone
        here = "/" in program and not os.path.isabs(program)
        stamp = None if here or not program else _program_stamp(program, env)
        parts.append(repr((program, stamp)).encode())
    return parts


def _program_stamp(program: str, env: Mapping[str, str]) -> tuple[int, int] | None:
    """The size and time of ``program`` as ``PATH`` finds it; ``None``
    when it finds none."""
    found = shutil.which(program, path=env.get("PATH"))
    try:
        stat = os.stat(found) if found else None
    except OSError:
        return None
    return stat and (stat.st_size, stat.st_mtime_ns)


def _search_path(env: Mapping[str, str]) -> str:
    """``PATH`` as git searches it, however git-isopatch was started:
    ``git isopatch`` finds it with git's exec path (``GIT_EXEC_PATH``)
    put first, which git puts first for every program it runs anyway;
    ``git-isopatch`` (the MCP server's runs, a script's) without it."""
    path, exec_path = env["PATH"], env.get("GIT_EXEC_PATH")
    first, _, rest = path.partition(os.pathsep)
    return rest if exec_path and first == exec_path else path


def entry_inputs(
    inputs: ConversionInputs, worktree: WorktreePath, hash_size: int
) -> EntryInputs | None:
    """``inputs`` entry by entry: the index parsed (``hash_size``: the
    bytes of an object id), and the tracked ``.gitattributes`` read as git
    reads them (from the file, a symbolic link not followed); ``None``
    when the index cannot be parsed or such a file read."""
    import hashlib

    listed = parse_entries(inputs.index, hash_size)
    if listed is None:
        return None
    parts = [inputs.common]
    entries: dict[bytes, bytes] = {}
    for path, meta in listed:
        entries[path] = hashlib.blake2b(path + b"\0" + meta, digest_size=DIGEST_SIZE).digest()
        if path.endswith(b".gitattributes") and is_attributes_file(path):
            content = _in_tree(os.path.join(os.fsencode(worktree), path))
            if content is False:
                return None
            parts += [path, content or b"\1"]
    return EntryInputs(_digest(hashlib.sha256(), parts).hex(), entries)


def _digest(digest: Any, parts: Sequence[bytes]) -> bytes:
    """``parts`` into ``digest``, each with its length first."""
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return bytes(digest.digest())


def _attribute_files(
    worktree: WorktreePath | None,
    git_dir: GitDirPath,
    settings: Mapping[str, str | None],
    env: Mapping[str, str],
) -> list[str]:
    """The attributes files outside the tree git may read
    (gitattributes(5)): the system one, ``core.attributesFile`` or the
    default global one, ``info/attributes`` of the repository (git reads
    none of a linked worktree's private folder).  A relative
    ``core.attributesFile`` is read from the top of ``worktree``, as git
    in it reads it; not at all without one."""
    paths = ["/etc/gitattributes"]
    configured = settings.get(ATTRIBUTES_FILE)
    if configured:
        expanded = os.path.expanduser(configured) if "HOME" in env else configured
        if worktree is not None or os.path.isabs(expanded):
            paths.append(os.path.join(worktree or "/", expanded))
    xdg = env.get("XDG_CONFIG_HOME") or (env.get("HOME") and os.path.join(env["HOME"], ".config"))
    if xdg:
        paths.append(os.path.join(xdg, "git", "attributes"))
    linked = os.path.lexists(os.path.join(git_dir, "commondir"))  # a worktree's private folder
    return [
        *paths,
        os.path.join(common_dir_of(git_dir) if linked else git_dir, "info", "attributes"),
    ]


def _in_tree(path: bytes) -> bytes | None | bool:
    """A tracked ``.gitattributes`` as git reads it: the file's content,
    ``None`` when it is missing or a symbolic link (git does not follow
    one, 2.32), ``False`` when it cannot be read."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return False
    return _regular_content(os.fsdecode(path))


def _regular_content(path: str, limit: int = FILE_LIMIT) -> bytes | None | bool:
    """The content of ``path`` through any symbolic link, ``None`` when
    it does not exist; ``False`` when it is not a regular file, cannot be
    read or holds more than ``limit`` bytes (never blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError:
        return False
    finally:
        os.close(fd)
    return data if len(data) <= limit else False
