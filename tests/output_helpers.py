"""Helpers of the tests of where the patch goes: a run under a given umask,
a command whose output fills a small file system, and the check that a
failed write keeps the worktree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from repo_helpers import (
    ISOPATCH,
    registered_worktrees,
    worktree_list,
)


def _run_with_umask(umask: int, repo: Path, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ISOPATCH), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(umask),
        timeout=120,
    )


#: Writes 300 kB of incompressible bytes in the worktree: more than the
#: small file systems below hold, as a file and as a patch.
BIG_OUTPUT = "echo done > done.txt; head -c 300000 /dev/urandom > random.bin"


def _assert_kept(run, repo: Path, env, code: str, target: str) -> Path:
    """One fatal line and a hint; the worktree kept, registered and
    unlocked, with the command's files in it."""
    assert run.returncode == 128, run.err
    lines = run.err.splitlines()
    assert lines[0].startswith(f"fatal: could not write patch '{target}': "), run.err
    assert len(lines) == 2 and lines[1].startswith("hint: the worktree is kept")
    fields = run.fields()
    assert fields["error-code"] == code
    assert "patch" not in fields and "files" not in fields
    worktree = Path(fields["worktree"])
    assert (worktree / "done.txt").read_text() == "done\n"
    assert registered_worktrees(repo, env) == [f"worktree {worktree}"]
    assert b"locked" not in worktree_list(repo, env)
    return worktree
