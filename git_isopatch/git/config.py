"""Reading ``isopatch.*`` configuration through git's whole chain.

``git config`` reads system, global, repository and worktree files and the
``git -c`` settings (which git passes to subcommands in
``GIT_CONFIG_PARAMETERS``), so git-isopatch asks git rather than parsing
files itself (git-config(1), FILES), except where libgit2 reads the same
files in process (:mod:`.config_read`): that saves a process per read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .config_read import read_entries
from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import GitDirPath

#: The section of git-isopatch's keys.
SECTION = "isopatch"


#: Variables dropped before ``git config`` runs: ``git_dir`` names the
#: repository, and ``GIT_CONFIG`` is honoured by the ``git config`` command
#: alone (git-config(1), ENVIRONMENT), so keeping it would make git-isopatch
#: read another file than every other git command does.
_NOT_FOR_CONFIG = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CONFIG"})


def read_section(
    git_dir: GitDirPath, environ: Mapping[str, str], section: str = SECTION
) -> GitResult[dict[str, list[str | None]]]:
    """All values of ``<section>.*``: lower-cased key -> values in the order
    git reads them (the last one wins for single-valued keys).

    A key written without ``=`` (``[isopatch] keep``, or ``git -c
    isopatch.keep``) has the value ``None``, which git reads as true for a
    boolean; ``keep =`` has the value ``""``, which git reads as false
    (git-config(1), "Values").

    Args:
        git_dir: the repository whose configuration counts (with the
            system and global files).
        environ: the caller's environment, *with* ``GIT_CONFIG_PARAMETERS``
            and ``GIT_CONFIG_COUNT`` (they carry ``git -c``) but ``GIT_DIR``
            is not needed: ``git_dir`` names the repository.

    Returns:
        ``Ok({"isopatch.keep": ["true"], ...})`` (empty when nothing is set),
        or ``Err`` when git cannot read the configuration (a malformed file:
        git's ``bad config line N in file F``).
    """
    env = {k: v for k, v in environ.items() if k not in _NOT_FOR_CONFIG}
    prefix = f"{section}."
    entries = read_entries(git_dir, env)
    if entries is not None:  # in process, where libgit2 reads what git does
        found: dict[str, list[str | None]] = {}
        for key, value in entries:
            if key.lower().startswith(prefix):
                found.setdefault(key.lower(), []).append(value)
        return Ok(found)
    env["LC_ALL"] = "C"
    args = [f"--git-dir={git_dir}", "config", "-z", "--get-regexp", rf"^{section}\."]
    match run_git(args, env=env):
        case Ok(output):
            pass
        case Err(error) if error.returncode == 1 and not error.stderr:
            return Ok({})  # no key matched
        case Err() as err:
            return err
    values: dict[str, list[str | None]] = {}
    for record in output.split(b"\0"):
        if not record:
            continue
        key, newline, value = record.decode("utf-8", "surrogateescape").partition("\n")
        values.setdefault(key.lower(), []).append(value if newline else None)
    return Ok(values)


def parse_expiry_date(text: str, env: Mapping[str, str]) -> GitResult[int]:
    """A time as git's ``--expire <time>`` options read it, in seconds since
    the epoch: an approxidate such as ``2.weeks.ago``, ``yesterday`` or
    ``2024-01-31``, ``now``/``all`` (every time: the largest value) or
    ``never`` (0).  Git itself parses it (git-config(1), ``--type=expiry-date``;
    ``--file /dev/null`` so that no configuration is read).

    Returns:
        ``Ok(seconds)``, or ``Err`` whose reason says the time is malformed.
    """
    key = f"{SECTION}.expire"
    args = ["config", "--file", os.devnull, "--type=expiry-date", "--default", text, "--get", key]
    match run_git(args, env=env):
        case Ok(output):
            try:
                return Ok(int(output.strip()))
            except ValueError:
                pass
        case Err():
            pass
    return Err(GitError(reason=f"malformed expiration date '{text}'"))
