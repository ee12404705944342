"""Helpers for the hostile-environment tests (issue 4): read-only mounts,
process checks, hooks and scripts.  Repository helpers (and ``tmpfs``) are
in ``repo_helpers.py``."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from repo_helpers import git


def _mount(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["mount", *args], capture_output=True, check=False)


@contextlib.contextmanager
def read_only_bind(path: Path) -> Iterator[Path]:
    """Make the folder ``path`` read-only with a read-only bind mount of
    itself; always unmounted afterwards."""
    done = _mount(["--bind", str(path), str(path)])
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    try:
        done = _mount(["-o", "remount,bind,ro", str(path)])
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=True)


def wait_until(condition: Callable[[], bool], *, seconds: float = 60.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail after ``seconds`` (a generous
    bound for a slow machine, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what or condition}"
        time.sleep(0.02)


def admin_dirs(repo: Path, env: Mapping[str, str]) -> list[Path]:
    """The ``$GIT_COMMON_DIR/worktrees/<id>`` folders of ``repo``."""
    common = Path(
        git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=repo, env=env)
        .decode()
        .strip()
    )
    folder = common / "worktrees"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def script(path: Path, body: str) -> Path:
    """Write an executable ``sh`` script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def shell(*words: str | os.PathLike[str]) -> str:
    """Quote words for a shell command line."""
    return " ".join(shlex.quote(os.fspath(w)) for w in words)


@dataclass(frozen=True)
class Setting:
    """A hostile setting: configuration pairs, environment variables, and
    whether plain ``git diff`` shows its effect (``witness``).

    ``funcname``: the setting may change the text after ``@@ ... @@`` in
    hunk headers, and nothing else.  That text is chosen by the ``diff``
    attribute's driver (``diff.<driver>.xfuncname``), which git-isopatch
    cannot turn off for drivers it does not know; ``git apply`` ignores it.
    """

    name: str
    config: tuple[tuple[str, str], ...] = ()
    environ: dict[str, str] = field(default_factory=dict)
    witness: bool = True
    funcname: bool = False


def hostile_settings(scripts: Path) -> list[Setting]:
    """The family of the issue; ``scripts`` holds the drivers and files."""
    attributes = scripts / "attributes"
    order = scripts / "order"
    return [
        Setting("noprefix", (("diff.noprefix", "true"),)),
        Setting("mnemonicPrefix", (("diff.mnemonicPrefix", "true"),)),
        # diff.srcPrefix/dstPrefix came with git 2.45; 2.39 ignores them
        Setting(
            "srcPrefix/dstPrefix",
            (("diff.srcPrefix", "SRC/"), ("diff.dstPrefix", "DST/")),
            witness=False,
        ),
        Setting("color.ui", (("color.ui", "always"),)),
        Setting("color.diff", (("color.diff", "always"), ("diff.colorMoved", "zebra"))),
        Setting("context", (("diff.context", "0"),)),
        Setting("interHunkContext", (("diff.interHunkContext", "10"),)),
        Setting("relative", (("diff.relative", "true"),)),
        Setting("external", (("diff.external", str(scripts / "external")),)),
        Setting(
            "textconv",
            (
                ("diff.hostile.textconv", str(scripts / "textconv")),
                ("core.attributesFile", str(attributes)),
            ),
        ),
        Setting("xfuncname", (("diff.hostile.xfuncname", "^(l.*)$"),), funcname=True),
        Setting(
            "attribute external driver", (("diff.hostile.command", str(scripts / "external")),)
        ),
        Setting("renames=copies", (("diff.renames", "copies"),)),
        Setting("renames=false", (("diff.renames", "false"),)),
        Setting("renameLimit", (("diff.renameLimit", "1"),)),
        Setting("quotePath", (("core.quotePath", "false"),)),
        Setting("submodule=log", (("diff.submodule", "log"),)),
        Setting("submodule=diff", (("diff.submodule", "diff"),)),
        Setting("ignoreSubmodules", (("diff.ignoreSubmodules", "all"),)),
        Setting("submodule.sm.ignore", (("submodule.sm.ignore", "all"),)),
        Setting("orderFile", (("diff.orderFile", str(order)),)),
        Setting("suppressBlankEmpty", (("diff.suppressBlankEmpty", "true"),)),
        Setting("algorithm=patience", (("diff.algorithm", "patience"),)),
        Setting("algorithm=histogram", (("diff.algorithm", "histogram"),)),
        Setting("indentHeuristic", (("diff.indentHeuristic", "false"),)),
        Setting("bigFileThreshold", (("core.bigFileThreshold", "1"),)),
        Setting("abbrev", (("core.abbrev", "4"),)),
        Setting("fileMode", (("core.fileMode", "false"),)),
        # no pager runs on a pipe, so plain git diff shows nothing either
        Setting(
            "pager",
            (("core.pager", str(scripts / "pager")), ("pager.diff", str(scripts / "pager"))),
            witness=False,
        ),
        # an fsmonitor hook that says nothing changed (a stale watcher)
        Setting("fsmonitor", (("core.fsmonitor", str(scripts / "fsmonitor")),), witness=False),
        Setting("GIT_DIFF_OPTS", environ={"GIT_DIFF_OPTS": "--unified=0"}),
        Setting("GIT_EXTERNAL_DIFF", environ={"GIT_EXTERNAL_DIFF": str(scripts / "external")}),
    ]


def write_hostile_scripts(scripts: Path) -> None:
    """Drivers that leave a mark in $HOSTILE_MARKS when git runs them."""
    mark = 'echo "$0 $* from $(ps -o args= $PPID)" >> "$HOSTILE_MARKS/$(basename "$0")"\n'
    script(scripts / "external", mark + 'echo "external diff of $1"\n')
    script(scripts / "textconv", mark + 'sed "s/^/TEXTCONV /" "$1"\n')
    script(scripts / "pager", mark + "sed 's/^/PAGER /'\n")
    script(scripts / "fsmonitor", mark + "printf 'token\\0'\n")
    (scripts / "attributes").write_text("* diff=hostile\n")
    (scripts / "order").write_text("sm\n*.bin\nsub/*\n*\n")


def install_hostile_profile(env: Mapping[str, str], scripts: Path) -> dict[str, str]:
    """Write every setting of :func:`hostile_settings` into the global
    configuration of ``env`` (its ``HOME``); return ``env`` with the
    environment variables of the profile and ``HOSTILE_MARKS`` (a folder
    the drivers leave marks in) added."""
    write_hostile_scripts(scripts)
    marks = scripts / "marks"
    marks.mkdir(exist_ok=True)
    settings = hostile_settings(scripts)
    config = Path(env["HOME"]) / ".gitconfig"
    for key, value in (pair for s in settings for pair in s.config):
        git("config", "--file", config, "--add", key, value, cwd=scripts, env=env)
    extra = {k: v for s in settings for k, v in s.environ.items()}
    return {**env, **extra, "HOSTILE_MARKS": str(marks)}
