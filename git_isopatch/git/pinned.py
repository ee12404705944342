"""Settings pinned for every git in a worktree, git-isopatch's and the
command's, through the environment (``GIT_CONFIG_COUNT``, git 2.31), so
that nothing of the user's configuration is written.

Two settings of the user's repository can be wrong for the worktree:

- ``core.ignoreCase`` says what the file system does (git-config(1): git
  probes it at ``git init``/``git clone``), and a repository copied from
  macOS or Windows keeps ``true`` on Linux.  There git takes a new
  ``README.MD`` beside the tracked ``README.md`` for the same file, and it
  is missing from the patch.  :func:`ignore_case_settings` pins it to what
  the worktree's own file system does.
- ``submodule.recurse=true`` makes ``git reset --hard``, ``git checkout
  .`` and ``git restore .`` recurse into every active submodule, and one
  that is active but not populated (no git directory: a fresh worktree's
  submodule folders are empty) makes them fail (``fatal: not a git
  repository: .../modules/sub``), in a checkout as in a worktree.
  :func:`recurse_setting` turns recursion off where a submodule is not
  populated, as ``git worktree add`` itself does for its own reset (git
  2.25, "worktree: teach add to ignore submodule.recurse config").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence

from .config_read import parse_bool, read_entries
from .result import Err, Ok
from .run import run_git
from .temporary import make_file
from .types import GitDirPath

#: The pairs :func:`with_config` adds are git's ``GIT_CONFIG_COUNT``
#: entries (git-config(1), ENVIRONMENT).
COUNT = "GIT_CONFIG_COUNT"


#: Settings that have git read no index of an object store
#: (git-config(1)): its ``commit-graph`` (a commit's tree, without reading
#: the commit), ``multi-pack-index`` and reverse indexes (where an object
#: lies) are not what git checks, and a sandboxed command may have written
#: them in its view of the repository's store.
NO_STORE_INDEXES = (
    ("core.commitGraph", "false"),
    ("core.multiPackIndex", "false"),
    ("pack.readReverseIndex", "false"),
)


def with_config(env: Mapping[str, str], pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``env`` with ``pairs`` appended to its ``GIT_CONFIG_COUNT`` entries.

    They act as ``git -c`` does, above every configuration file, and go
    down to every git the command runs; a ``git -c`` of the user's
    (``GIT_CONFIG_PARAMETERS``, which git reads after these) or of the
    command still wins.  A ``GIT_CONFIG_COUNT`` that is not a number is
    left as it is (git refuses it, and git-isopatch has said so before).
    """
    out = dict(env)
    if not pairs:
        return out
    try:
        count = int(out.get(COUNT, "0"))
    except ValueError:
        return out
    for key, value in pairs:
        out[f"GIT_CONFIG_KEY_{count}"] = key
        out[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    out[COUNT] = str(count)
    return out


def file_system_ignores_case(folder: str) -> bool | None:
    """Whether the file system of ``folder`` takes names that differ only in
    case for one: a file made there with a lowercase name is looked up in
    upper case, then removed (git's own probe at ``git init`` writes
    ``CoNfIg`` in the git directory).  ``None`` when the probe cannot be
    made (the folder cannot be written)."""
    try:
        fd, path = make_file(folder, ".isopatch-case-")
    except OSError:
        return None
    try:
        os.close(fd)
        head, name = os.path.split(path)
        return os.path.lexists(os.path.join(head, name.upper()))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


#: The settings :func:`read_settings` reads, lower-cased as git lists them.
HOOKS_PATH = "core.hookspath"
IGNORE_CASE = "core.ignorecase"
RECURSE = "submodule.recurse"
ATTRIBUTES_FILE = "core.attributesfile"
_SETTINGS = frozenset({HOOKS_PATH, IGNORE_CASE, RECURSE, ATTRIBUTES_FILE})

#: The sections whose settings may change how git converts a file
#: (``core.autocrlf``, ``core.eol``, ``filter.<driver>.clean``,
#: ``attr.tree``, git-lfs's ``lfs.fetchexclude``, which leaves the paths it
#: names as pointers on checkout...), all of them to be safe:
#: :func:`read_settings` reads them too (:mod:`.conversion_key`).
CONVERSION_SECTIONS = ("core.", "filter.", "attr.", "lfs.")


#: What makes a linked worktree read other settings than the repository
#: (git-config(1)): an ``includeIf`` whose condition is the git directory
#: or its branch, and each worktree's own ``config.worktree``.
_PER_WORKTREE = ("includeif.gitdir:", "includeif.gitdir/i:", "includeif.onbranch:")
_WORKTREE_CONFIG = "extensions.worktreeconfig"


def read_settings(git_dir: GitDirPath, env: Mapping[str, str]) -> dict[str, str | None]:
    """``core.hooksPath``, ``core.ignoreCase``, ``submodule.recurse`` and
    ``core.attributesFile`` as git reads them for the repository of ``git_dir`` (the worktree's
    private folder: its whole configuration chain), in one ``git config``,
    with every other setting of the sections that convert content
    (:data:`CONVERSION_SECTIONS`, a subsection's case
    kept); the last value of each wins; a key without ``=`` is ``None`` (true).
    Empty when none is set or git cannot read them.  In process where
    libgit2 reads what git does (:func:`.config_read.read_entries`)."""
    return read_shared_settings(git_dir, env)[0]


def read_shared_settings(
    git_dir: GitDirPath, env: Mapping[str, str]
) -> tuple[dict[str, str | None], bool]:
    """:func:`read_settings`, and whether every linked worktree of the
    repository reads the same (no :data:`_PER_WORKTREE` condition, no
    ``extensions.worktreeConfig``): then one reading serves a run's
    worktree too."""
    entries = read_entries(git_dir, env)
    if entries is None:  # git reads them: one process
        pattern = (
            r"^(core|filter|attr|lfs|includeif)\.|^submodule\.recurse$|^extensions\.worktreeconfig$"
        )
        match run_git([f"--git-dir={git_dir}", "config", "-z", "--get-regexp", pattern], env=env):
            case Ok(output):
                pass
            case Err():
                return {}, False
        entries = []
        for record in output.split(b"\0"):
            if record:
                key, newline, value = os.fsdecode(record).partition("\n")
                entries.append((key, value if newline else None))
    values = {_name(key): value for key, value in entries if _wanted(key)}
    shared = not any(
        key.lower().startswith(_PER_WORKTREE) or key.lower() == _WORKTREE_CONFIG
        for key, _ in entries
    )
    return values, shared


def _wanted(key: str) -> bool:
    """Whether :func:`read_settings` keeps the setting ``key``."""
    return key.lower() in _SETTINGS or key.lower().startswith(CONVERSION_SECTIONS)


def _name(key: str) -> str:
    """``key`` as :func:`read_settings` names it: section and name in
    lower case, a subsection as written (``filter.LFS.clean``)."""
    section, dot, rest = key.partition(".")
    subsection, dot2, name = rest.rpartition(".")
    if not dot2:
        return key.lower()
    return f"{section.lower()}{dot}{subsection}.{name.lower()}"


def _configured_bool(settings: Mapping[str, str | None], key: str) -> bool:
    """``key`` of ``settings`` as a boolean; false when unset or not one."""
    if key not in settings:
        return False
    match parse_bool(key, settings[key]):
        case Ok(value):
            return value
    return False


def ignore_case_configured(settings: Mapping[str, str | None]) -> bool:
    """``core.ignoreCase`` as the configuration (``settings``,
    :func:`read_settings`) sets it."""
    return _configured_bool(settings, IGNORE_CASE)


def ignore_case_settings(
    worktree: str, settings: Mapping[str, str | None]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``core.ignoreCase`` as the worktree's file system does
    (:func:`file_system_ignores_case`): for git-isopatch's own git always
    (the command may set the repository's, which that git reads as the
    command left it: folding case, it takes a new ``README.MD`` for the
    tracked ``README.md`` and leaves it out of the patch), for the command
    only when the configuration (``settings``, :func:`read_settings`) says
    otherwise (its environment stays as given); nothing when the probe
    cannot tell."""
    ignores = file_system_ignores_case(worktree)
    if ignores is None:
        return [], []
    pinned = [("core.ignoreCase", "true" if ignores else "false")]
    return pinned, [] if ignores == _configured_bool(settings, IGNORE_CASE) else pinned


def recurse_setting(
    worktree: str, submodule_paths: Sequence[str], settings: Mapping[str, str | None]
) -> list[tuple[str, str]]:
    """``submodule.recurse=false`` when the configuration (``settings``)
    sets it true and one of the worktree's submodules (``submodule_paths``,
    from the top) is not populated (its folder holds no ``.git``), else
    nothing: recursion into populated submodules works and stays as the
    user configured it."""
    if not _configured_bool(settings, RECURSE):
        return []
    for path in submodule_paths:
        if not os.path.lexists(os.path.join(worktree, path, ".git")):
            return [("submodule.recurse", "false")]
    return []
