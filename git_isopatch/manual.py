"""The manual page for ``--help``: ``man git-isopatch`` of this
installation, or, after ``list``, ``prune`` or ``mcp``, that subcommand's
own part of it (:func:`manual_part`).

Loaded only for ``--help``.
"""

from __future__ import annotations

import os
import shutil
import sys

MAN_PAGE = "git-isopatch"


def manual_directories() -> list[str]:
    """The ``share/man`` folders of this installation that hold our page:
    the interpreter's prefix (a virtual environment, pipx's) and the user
    base (``pip install --user``), where the wheel's shared data goes."""
    import site
    import sysconfig

    found = []
    for prefix in (sysconfig.get_path("data"), site.getuserbase()):
        folder = os.path.join(prefix, "share", "man")
        if os.path.isfile(os.path.join(folder, "man1", f"{MAN_PAGE}.1")) and folder not in found:
            found.append(folder)
    return found


#: The part of the manual page a subcommand's ``--help`` shows: the title
#: of its section there.
SUBCOMMAND_SECTIONS = {
    "list": "Kept worktrees: list and prune",
    "prune": "Kept worktrees: list and prune",
    "mcp": "For agents: mcp and the skill",
}


def manual_part(page: str, name: str) -> str | None:
    """``page`` (the manual as ``man`` formats it, plain text) cut to what
    documents the subcommand ``name``: its lines of SYNOPSIS, then its
    section (:data:`SUBCOMMAND_SECTIONS`) up to the next; ``None`` when the
    page does not hold it."""
    lines = page.splitlines()
    title = SUBCOMMAND_SECTIONS[name]
    starts = [n for n, line in enumerate(lines) if line.strip() == title and line[:1] == " "]
    if not starts:
        return None
    end = next(
        (
            n
            for n in range(starts[0] + 1, len(lines))
            if lines[n][:1].strip() or (lines[n].startswith("   ") and lines[n][3:4].strip())
        ),
        len(lines),
    )
    synopsis = [line for line in lines if line.strip().startswith(f"git isopatch {name}")]
    return "\n".join(["SYNOPSIS", *synopsis[:1], "", *lines[starts[0] : end]]).rstrip() + "\n"


def _show_part(man: str, env: dict[str, str], name: str, columns: int | None) -> bool:
    """Show the part of the manual for the subcommand ``name`` through the
    user's pager (``MANPAGER``, ``PAGER``; plain on a pipe); False when
    ``man`` could not give the page."""
    import pydoc
    import subprocess

    formatted = subprocess.run(
        [man, "-P", "cat", MAN_PAGE],
        env={**env, "MANWIDTH": str(columns or 80)},
        capture_output=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    part = manual_part(formatted.stdout.decode("utf-8", "replace"), name)
    if formatted.returncode != 0 or part is None:
        return False
    try:
        pydoc.pager(part)
    except OSError as exc:  # plain on a pipe or a file: stdout full or closed
        sys.stderr.write(f"fatal: could not write to stdout: {exc.strerror or exc}\n")
        raise SystemExit(128) from None
    return True


def open_manual(name: str, columns: int | None) -> None:
    """Show the manual for the command ``name`` (``isopatch``, ``list``,
    ``prune``, ``mcp``) and end the process; return only when there is no
    ``man`` program.

    man-db finds pages beside the folders of ``PATH`` (``<bin>/../share/man``);
    the folders of this installation are put first in ``MANPATH`` too, so
    that ``/path/to/venv/bin/git-isopatch --help`` works off ``PATH``.  A
    trailing ``:`` keeps man's own search path (manpath(5)).
    """
    man = shutil.which("man")
    if man is None:
        return
    env = dict(os.environ)
    folders = manual_directories()
    if folders:
        env["MANPATH"] = ":".join([*folders, env.get("MANPATH", "")])
    if name in SUBCOMMAND_SECTIONS and _show_part(man, env, name, columns):
        sys.stdout.flush()
        raise SystemExit(0)
    os.execve(man, [man, MAN_PAGE], env)
