"""Every interruption of the pool's writes leaves something ``prune``
removes (design: procedure steps 3 and 7): a claim writes its lock reason
and its record over the pool's, a return to the pool its record and the
pool's lock reason; a SIGKILL between any two of them must leave an orphan,
never a worktree ``locked`` for ever (never claimed, never pruned, counted
against ``isopatch.maxWorktrees``).

git-isopatch runs with its ``os.replace`` wrapped to SIGKILL the process
right before the n-th replacement of one of those files (every write of
the private folder's files is a replacement), so each point is hit
exactly, not by timing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

#: git-isopatch, killed before the n-th os.replace onto a file named argv[1].
KILLED_AT = """
import os, signal, sys
name, nth = sys.argv[1], int(sys.argv[2])
del sys.argv[1:3]
seen = 0
replace = os.replace
def killing_replace(source, target, **kwargs):
    global seen
    if os.path.basename(os.fsdecode(target)) == name:
        seen += 1
        if seen == nth:
            os.kill(os.getpid(), signal.SIGKILL)
    return replace(source, target, **kwargs)
os.replace = killing_replace
from git_isopatch.cli import main
main()
"""


def _entries(repo: Path, env: dict[str, str]) -> list[dict[str, str]]:
    run = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return [
        dict(line.split(" ", 1) for line in block.splitlines())
        for block in run.out.split("\n\n")
        if block.strip()
    ]


def _registered(repo: Path, env: dict[str, str]) -> int:
    return git("worktree", "list", "--porcelain", cwd=repo, env=env).count(b"worktree ")


def _killed_at(repo: Path, env: dict[str, str], name: str, nth: int) -> int:
    """Run a pooled git-isopatch, SIGKILLed before its ``nth`` replacement
    of a file called ``name``."""
    done = subprocess.run(
        [
            sys.executable, "-c", KILLED_AT, name, str(nth),
            "--no-sandbox", "-q", "--", "true",
        ],
        cwd=repo, env={**env, "GIT_CONFIG_PARAMETERS": "'isopatch.pool=1'"},
        capture_output=True, timeout=120,
    )  # fmt: skip
    return done.returncode


@pytest.mark.parametrize(
    ("name", "nth"),
    [("locked", 1), ("isopatch.json", 1), ("isopatch.json", 2), ("locked", 2)],
    ids=["claim-lock", "claim-record", "return-record", "return-lock"],
)
def test_a_run_killed_between_the_pool_writes_leaves_an_orphan(env, make_repo, name, nth):
    repo = make_repo()
    first = isopatch("--no-sandbox", "-q", "--", "true", cwd=repo, env=env,
                     git_options=("-c", "isopatch.pool=1"))  # fmt: skip
    assert first.returncode == 0, first.err
    assert [e["state"] for e in _entries(repo, env)] == ["pooled"]
    assert _killed_at(repo, env, name, nth) == -9, "killed where asked"
    states = [e["state"] for e in _entries(repo, env)]
    assert "locked" not in states and "running" not in states, states
    pruned = isopatch("prune", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert _entries(repo, env) == [] and _registered(repo, env) == 1


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_pool_lock_with_a_record_that_is_not_pooled_is_an_orphan(env, make_repo):
    """What the old order of a claim's writes left, as a repository may
    still hold it: prune removes it."""
    repo = make_repo()
    run = isopatch("--no-sandbox", "-q", "--", "true", cwd=repo, env=env,
                   git_options=("-c", "isopatch.pool=1"))  # fmt: skip
    assert run.returncode == 0, run.err
    record_file = repo / ".git" / "worktrees" / "repo" / "isopatch.json"
    record = json.loads(record_file.read_text())
    record.update(pid=_dead_pid(), host=socket.gethostname(), pooled=False)
    record_file.write_text(json.dumps(record))
    assert [e["state"] for e in _entries(repo, env)] == ["orphaned"]
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert _registered(repo, env) == 1
