"""Reading configuration in process, where libgit2 reads what git reads.

``git config`` costs a process; libgit2 (pygit2) reads the same files in
this one, but not quite as git does: it ignores ``GIT_CONFIG_GLOBAL`` and
``GIT_CONFIG_SYSTEM``, reads the system file even under
``GIT_CONFIG_NOSYSTEM``, knows nothing of ``git -c`` (``GIT_CONFIG_PARAMETERS``,
``GIT_CONFIG_COUNT``), takes ``$HOME`` and ``$XDG_CONFIG_HOME`` from the
process when it starts (not from the environment a caller passes), has no
``includeIf "hasconfig:..."`` and evaluates ``includeIf "onbranch:..."``
differently in a linked worktree.  :func:`read_entries` answers only where
none of that can make a difference, and says ``None`` otherwise: the caller
then asks git.  What it can make up for, it does: ``git -c`` settings are
parsed as git parses them (config.c, ``git_config_from_parameters``) and
come last, and under ``GIT_CONFIG_NOSYSTEM`` the system level is left out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .result import Err, GitError, GitResult, Ok

#: Variables that choose other files than libgit2 reads: git only.
_OTHER_FILES = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM")
#: Exec paths of a git whose system file is ``/etc/gitconfig`` (prefix
#: ``/usr``: git's Makefile sets ``sysconfdir = /etc`` for it), as git
#: exports ``GIT_EXEC_PATH`` to the commands it runs.
_USR_EXEC_PATHS = frozenset({"/usr/lib/git-core", "/usr/libexec/git-core"})
#: ``includeIf`` conditions libgit2 evaluates as git does, in the user's
#: repository and in a linked worktree alike.
_SAME_CONDITIONS = ("includeif.gitdir:", "includeif.gitdir/i:")
_KEY = re.compile(r"\A[A-Za-z0-9-]+(\..*)?\.[A-Za-z][A-Za-z0-9-]*\Z", re.DOTALL)
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off", ""})
#: An integer as git's ``git_parse_signed`` reads one with ``strtoimax``
#: in base 0 (leading space, a sign, hexadecimal, octal or decimal), then
#: a unit (config.c, ``get_unit_factor``).
_INTEGER = re.compile(
    r"\A[ \t\n\v\f\r]*([+-]?)(?:0[xX]([0-9a-fA-F]+)|(0[0-7]*)|([1-9][0-9]*))([kKmMgG]?)\Z"
)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
#: The largest ``int`` of C, which a boolean read as an integer fits in.
_INT_MAX = (1 << 31) - 1

Entries = list[tuple[str, str | None]]


def _sq_dequote_step(text: str, at: int) -> tuple[str, int] | None:
    """One single-quoted word of ``text`` from ``at`` (git's
    ``sq_dequote_step``: ``'\\''`` and ``'\\!'`` resume the quote); the word
    and where it ends, or ``None`` when it is malformed."""
    if text[at : at + 1] != "'":
        return None
    word, index = [], at + 1
    while True:
        end = text.find("'", index)
        if end < 0:
            return None
        word.append(text[index:end])
        index = end + 1
        if text[index : index + 1] == "\\" and text[index + 1 : index + 3] in ("''", "!'"):
            word.append(text[index + 1])
            index += 3
            continue
        return "".join(word), index


def _canonical(key: str) -> str | None:
    """``key`` as git stores it: section and name lower-cased, the
    subsection as written; ``None`` when git would refuse it."""
    if not _KEY.match(key):
        return None
    section, _, rest = key.partition(".")
    middle, dot, name = rest.rpartition(".")
    if dot:
        return f"{section.lower()}.{middle}.{name.lower()}"
    return f"{section.lower()}.{name.lower()}"


def command_line_entries(environ: Mapping[str, str]) -> Entries | None:
    """The ``git -c`` settings of ``environ`` in the order git applies
    them (``GIT_CONFIG_COUNT`` pairs, then ``GIT_CONFIG_PARAMETERS``), or
    ``None`` when git would refuse them or they hold an include."""
    entries: Entries = []
    count = environ.get("GIT_CONFIG_COUNT")
    if count is not None:
        if not (count.isascii() and count.isdigit()):
            return None
        for index in range(int(count)):
            key = environ.get(f"GIT_CONFIG_KEY_{index}")
            value = environ.get(f"GIT_CONFIG_VALUE_{index}")
            if key is None or value is None:
                return None
            entries.append((key, value))
    text = environ.get("GIT_CONFIG_PARAMETERS", "")
    at = 0
    while at < len(text):
        step = _sq_dequote_step(text, at)
        if step is None:
            return None
        word, at = step
        if at >= len(text) or text[at].isspace():  # old style 'key=value', or 'key'
            key, equals, value = word.partition("=")
            entries.append((key.strip(), value if equals else None))
        elif text[at] == "=":  # new style 'key'='value', or 'key'= (no value)
            at += 1
            if text[at : at + 1] == "'":
                step = _sq_dequote_step(text, at)
                if step is None or (step[1] < len(text) and not text[step[1]].isspace()):
                    return None
                value, at = step
                entries.append((word, value))
            elif at >= len(text) or text[at].isspace():
                entries.append((word, None))
            else:
                return None
        else:
            return None
        while at < len(text) and text[at].isspace():
            at += 1
    canonical: Entries = []
    for key, value in entries:
        name = _canonical(key)
        if name is None or name == "include.path" or name.startswith("includeif."):
            return None
        canonical.append((name, value))
    return canonical


def parse_bool(key: str, value: str | None) -> GitResult[bool]:
    """A boolean as git reads one (git-config(1), "Values"; config.c,
    ``git_config_bool``): true/yes/on and false/no/off (any case), the
    empty string (false), an integer that fits C's ``int`` (non-zero is
    true: :data:`_INTEGER`), and a key with no ``=`` at all (``value is
    None``: true).

    Returns:
        ``Ok(bool)``, or ``Err`` whose reason is ``bad config value for '<key>'``.
    """
    if value is None or value.lower() in _TRUE:
        return Ok(True)
    if value.lower() in _FALSE:
        return Ok(False)
    number = _INTEGER.match(value)
    if number is not None:
        _sign, hexadecimal, octal, decimal, unit = number.groups()
        magnitude = (
            int(hexadecimal, 16) if hexadecimal else int(octal or decimal, 8 if octal else 10)
        )
        if magnitude <= _INT_MAX // _UNITS[unit.lower()]:
            return Ok(magnitude != 0)
    return Err(GitError(reason=f"bad config value for '{key}'"))


def _no_system(environ: Mapping[str, str]) -> bool | None:
    value = environ.get("GIT_CONFIG_NOSYSTEM")
    if value is None:
        return False
    return _read_bool("GIT_CONFIG_NOSYSTEM", value)


def _read_bool(key: str, value: str | None) -> bool | None:
    """:func:`parse_bool`'s boolean, ``None`` where git refuses ``value``."""
    match parse_bool(key, value):
        case Ok(boolean):
            return boolean
    return None


def _same_files(
    environ: Mapping[str, str], search_path: object, levels: object, *, system: bool
) -> bool:
    """libgit2 reads the global, XDG and (``system``) system files git
    would read for ``environ``."""
    home = environ.get("HOME", "")
    xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    try:
        if search_path[levels.GLOBAL] != home:  # type: ignore[index,attr-defined]
            return False
        if search_path[levels.XDG] != os.path.join(xdg, "git"):  # type: ignore[index,attr-defined]
            return False
        etc = search_path[levels.SYSTEM]  # type: ignore[index,attr-defined]
    except (KeyError, ValueError, OSError):
        return False
    return not system or (etc == "/etc" and environ.get("GIT_EXEC_PATH") in _USR_EXEC_PATHS)


def _include_reads_alike(name: str, value: str | None, environ: Mapping[str, str]) -> bool:
    """False where an include of ``name``/``value`` may read otherwise in
    libgit2 than in git: a ``gitdir`` pattern that is relative, or whose
    folder part leads through a symbolic link (git matches it with the
    links resolved as well, libgit2 does not: a ``$HOME`` that is a link
    and ``gitdir:~/src/``), and an include path that git refuses (none,
    empty, a folder) where libgit2 reads on."""
    if name == "include.path" or (name.startswith("includeif.") and name.endswith(".path")):
        if not value:
            return False
        path = _expand_home(value, environ)
        if path is not None and os.path.isabs(path) and os.path.isdir(path):
            return False
    if name.startswith(_SAME_CONDITIONS) and name.endswith(".path"):
        pattern = name.partition(":")[2].rpartition(".")[0]
        expanded = _expand_home(pattern, environ)
        if expanded is None or not os.path.isabs(expanded):
            return False
        literal = re.split(r"[*?\[\\]", expanded, maxsplit=1)[0]
        folder = literal if literal.endswith("/") else os.path.dirname(literal)
        folder = folder.rstrip("/") or "/"
        if os.path.realpath(folder) != os.path.normpath(folder):
            return False
    return True


def _expand_home(path: str, environ: Mapping[str, str]) -> str | None:
    """``path`` with a leading ``~/`` made ``$HOME``; ``None`` for
    ``~user`` (libgit2 and git may look that up otherwise)."""
    if path == "~" or path.startswith("~/"):
        return environ.get("HOME", "") + path[1:]
    if path.startswith("~"):
        return None
    return path


def read_entries(git_dir: str, environ: Mapping[str, str]) -> Entries | None:
    """Every configuration entry git would read for the repository of
    ``git_dir`` (a ``.git``, or a linked worktree's private folder) under
    ``environ``, as ``(key, value)`` in git's order with keys as ``git
    config --list`` prints them (``None``: a key without ``=``); ``None``
    when libgit2 cannot be trusted to read what git reads (see the module)
    or cannot read it at all: ask git then."""
    if any(name in environ for name in _OTHER_FILES):
        return None
    no_system = _no_system(environ)
    command_line = command_line_entries(environ)
    if no_system is None or command_line is None:
        return None
    from .library import load_pygit2

    pygit2 = load_pygit2()  # the run has loaded it already; -h and --version do not

    levels = pygit2.enums.ConfigLevel
    if not _same_files(environ, pygit2.settings.search_path, levels, system=not no_system):
        return None
    skipped = {levels.SYSTEM, levels.PROGRAMDATA} if no_system else set()
    entries: Entries = []
    try:
        repo = pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        for entry in repo.config:
            name = entry.name
            if name.startswith("includeif.") and not name.startswith(_SAME_CONDITIONS):
                return None
            if not _include_reads_alike(name, entry.value, environ):
                return None
            if entry.level not in skipped:
                entries.append((name, entry.value))
    except (pygit2.GitError, OSError, ValueError, KeyError):
        return None
    return entries + command_line


def _booleans(key: str, values: object) -> set[bool | None]:
    """How git reads each of ``values`` of ``key`` as a boolean (``None``:
    a key without ``=``, true); ``None`` in the set: one git refuses."""
    return {_read_bool(key, value) for value in values}  # type: ignore[attr-defined]


def linked_top_may_move(common_dir: str, admin_dir: str) -> bool:
    """False when git in a linked worktree of ``common_dir``, whose private
    folder is ``admin_dir``, takes that worktree as its top whatever its
    configuration says, so that ``git rev-parse --show-toplevel`` need not
    be asked; True when it may not, or when that cannot be told.

    git's setup reads ``core.worktree`` and ``core.bare`` for a linked
    worktree only with ``extensions.worktreeConfig``, and only from the
    repository's own ``config`` (no include, no ``git -c``, no global
    file) and the worktree's ``config.worktree`` (setup.c,
    ``check_repository_format_gently``).  libgit2 reads that file with its
    includes: a value it does not show cannot be git's."""
    from .library import load_pygit2

    pygit2 = load_pygit2()
    try:
        config = pygit2.Config(os.path.join(common_dir, "config"))
        extension = _booleans(
            "extensions.worktreeConfig", config.get_multivar("extensions.worktreeConfig")
        )
        if extension <= {False}:
            return False
        if None in extension or os.path.lexists(os.path.join(admin_dir, "config.worktree")):
            return True  # a value git refuses, or the worktree's own settings
        bare = _booleans("core.bare", config.get_multivar("core.bare"))
        return any(True for _ in config.get_multivar("core.worktree")) or not bare <= {False}
    except (pygit2.GitError, OSError, ValueError):
        return True
