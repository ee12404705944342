"""Reading ``isopatch.*`` configuration through git's whole chain.

``git config`` reads system, global, repository and worktree files and the
``git -c`` settings (which git passes to subcommands in
``GIT_CONFIG_PARAMETERS``), so git-isopatch asks git rather than parsing
files itself (git-config(1), FILES).
"""

from __future__ import annotations

from collections.abc import Mapping

from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import GitDirPath

#: The section of git-isopatch's keys.
SECTION = "isopatch"


def read_section(
    git_dir: GitDirPath, environ: Mapping[str, str], section: str = SECTION
) -> GitResult[dict[str, list[str]]]:
    """All values of ``<section>.*``: lower-cased key -> values in the order
    git reads them (the last one wins for single-valued keys).

    Args:
        git_dir: the repository whose configuration counts (with the
            system and global files).
        environ: the caller's environment, *with* ``GIT_CONFIG_PARAMETERS``
            and ``GIT_CONFIG_COUNT`` (they carry ``git -c``) but ``GIT_DIR``
            is not needed: ``git_dir`` names the repository.

    Returns:
        ``Ok({"isopatch.keep": ["true"], ...})`` (empty when nothing is set),
        or ``Err`` when git cannot read the configuration (a malformed file).
    """
    env = {
        k: v for k, v in environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")
    }
    env["LC_ALL"] = "C"
    args = [f"--git-dir={git_dir}", "config", "-z", "--get-regexp", rf"^{section}\."]
    match run_git(args, env=env):
        case Ok(output):
            pass
        case Err(error) if error.returncode == 1 and not error.stderr:
            return Ok({})  # no key matched
        case Err() as err:
            return err
    values: dict[str, list[str]] = {}
    for record in output.split(b"\0"):
        if not record:
            continue
        key, _, value = record.decode("utf-8", "surrogateescape").partition("\n")
        values.setdefault(key.lower(), []).append(value)
    return Ok(values)


_TRUE = frozenset({"true", "yes", "on", "1", ""})
_FALSE = frozenset({"false", "no", "off", "0"})


def parse_bool(key: str, value: str) -> GitResult[bool]:
    """A boolean as git reads one (git-config(1), "Values": true/yes/on/1,
    false/no/off/0, case-insensitive; a key with no ``=`` is true)."""
    folded = value.strip().lower()
    if folded in _TRUE:
        return Ok(True)
    if folded in _FALSE:
        return Ok(False)
    return Err(GitError(reason=f"bad config value for '{key}'"))
