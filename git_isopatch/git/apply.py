"""Bring a patch into the user's work tree with ``git apply``, all or nothing.

``git apply`` without ``--index`` or ``--cached`` writes the work tree only,
never the index (git-apply(1)), and it checks every hunk of every file
before it writes a single one, so a patch that does not apply leaves the
work tree as it was.  ``--check`` runs that check alone first, so that a
refusal is known before git is asked to write.  No ``--3way`` and no
``--reject``: neither conflict markers nor ``.rej`` files are ever left.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .result import Err, GitResult, Ok
from .run import run_git
from .types import GitDirPath, RepoPath

#: ``-c`` settings for ``git apply`` that have no command-line form: the
#: user's ``apply.ignoreWhitespace`` would let context match loosely
#: (git-config(1)); no hook and no file system monitor hook runs.
APPLY_CONFIG: tuple[tuple[str, str], ...] = (
    ("apply.ignoreWhitespace", "no"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
)

#: ``git apply`` options: ``--whitespace=nowarn`` overrides the user's
#: ``apply.whitespace`` (``error`` would refuse, ``fix`` would rewrite what
#: the command wrote: the work tree must get exactly the captured change).
APPLY_OPTIONS: tuple[str, ...] = ("--whitespace=nowarn",)


def _apply(
    git_dir: GitDirPath, top: RepoPath, patch: str, *, env: Mapping[str, str], check: bool
) -> GitResult[None]:
    args = [f"--git-dir={git_dir}", f"--work-tree={top}", "-C", top, "apply", *APPLY_OPTIONS]
    if check:
        args.append("--check")
    match run_git([*args, "--", os.path.abspath(patch)], env=env, config=APPLY_CONFIG):
        case Ok():
            return Ok(None)
        case Err() as err:
            return err


def apply_to_work_tree(
    git_dir: GitDirPath, top: RepoPath, patch: str, *, env: Mapping[str, str]
) -> GitResult[None]:
    """Apply ``patch`` to the work tree at ``top``, as it is now.

    Git runs at the top (``-C``): paths in the patch are from the top, and
    ``git apply`` in a subfolder would leave out every path outside it
    (git-apply(1), "when running from a subdirectory").  Content conversion
    (``core.autocrlf``, the ``eol`` and ``filter`` attributes) is git's own:
    ``git apply`` reads each file as git would store it and writes it back
    as a checkout would.

    Args:
        git_dir: the user's git directory.
        top: the top of the user's work tree.
        patch: the patch file (``a/``/``b/`` prefixes, binary-safe).
        env: git-isopatch's own git environment
            (:func:`.run.own_git_environment`).

    Returns:
        ``Ok(None)`` once applied; ``Err(GitError)`` with git's ``error:``
        lines when any part of the patch does not apply (then nothing was
        written), or when a write failed.
    """
    checked = _apply(git_dir, top, patch, env=env, check=True)
    if isinstance(checked, Err):
        return checked
    return _apply(git_dir, top, patch, env=env, check=False)


def diff_color(git_dir: GitDirPath, *, to_terminal: bool, env: Mapping[str, str]) -> bool:
    """Whether git would colour a diff written to a terminal or not.

    ``git config --get-colorbool color.diff <to_terminal>`` decides with the
    user's ``color.diff`` and ``color.ui`` (``auto`` by default) and
    ``TERM=dumb`` (git-config(1), ``--get-colorbool``).  Git's own ``auto``
    looks at its standard output, which is a pipe to us: ``to_terminal`` is
    where the diff really goes (our standard error is a terminal).

    Returns:
        ``True`` for colour; ``False`` also when git cannot answer (a bad
        configuration value is reported elsewhere).
    """
    match run_git(
        [
            f"--git-dir={git_dir}",
            "config",
            "--get-colorbool",
            "color.diff",
            "true" if to_terminal else "false",
        ],
        env=env,
    ):
        case Ok(output):
            return output.strip() == b"true"
        case Err():
            return False
