"""Helpers for the hostile-environment tests (issue 4): read-only mounts,
process checks, hooks and scripts.  Repository helpers (and ``tmpfs``) are
in ``repo_helpers.py``."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
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


def process_running(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


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


PYTHON = sys.executable
