"""Report: writes to shared state (design: procedure step 7), with other
runs on the same repository.  Parallel runs are fine (README: "For
agents"): another run's worktree added, kept or pruned while this run's
command runs is git-isopatch's own doing, not the command's, and is no
``shared-write`` record of this run (a hint would send the user to remove
a worktree another run is using).  A worktree the command adds itself
stays one.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch

MODES = {"unconfined": ("--no-sandbox",), "sandboxed": ("--sandbox",)}


def _wait_for(path: Path, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _shared_writes(stdout: bytes) -> list[bytes]:
    return [line for line in stdout.split(b"\n") if line.startswith(b"shared-write ")]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_other_runs_worktrees_are_not_the_commands_writes(
    env, make_repo, tmp_path: Path, mode: str
) -> None:
    repo = make_repo({"README": "hello\n"})
    kept_before = isopatch("--porcelain", "--keep", "--no-sandbox", "--", "true", cwd=repo, env=env)
    assert kept_before.returncode == 0, kept_before.err
    started, go_on = tmp_path / "started", tmp_path / "go-on"
    waiting = f"touch {started}; while [ ! -e {go_on} ]; do sleep 0.05; done; echo x > new"
    long_run = subprocess.Popen(
        [ISOPATCH, "--porcelain", *MODES[mode], "--allow-write", str(tmp_path), "--"]
        + ["sh", "-c", waiting],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        _wait_for(started, long_run)
        # meanwhile: another run keeps its worktree, and prune removes the
        # one kept before (git-isopatch's worktrees, added and deleted)
        kept = isopatch("--porcelain", "--keep", "--no-sandbox", "--", "true", cwd=repo, env=env)
        assert kept.returncode == 0, kept.err
        pruned = isopatch("prune", "--expire", "now", cwd=repo, env=env)
        assert pruned.returncode == 0, pruned.err
        assert not Path(kept_before.fields()["worktree"]).exists()
        go_on.touch()
        out, err = long_run.communicate(timeout=120)
    finally:
        go_on.touch()
        if long_run.poll() is None:
            long_run.kill()
            long_run.wait()
    assert long_run.returncode == 0, err
    assert _shared_writes(out) == []
    assert b"your repository changed" not in err, err
    assert b"worktree remove" not in err, err
    assert b"new" in out  # the command's own change is captured


def test_a_worktree_the_command_adds_is_still_a_shared_write(env, make_repo, tmp_path) -> None:
    repo = make_repo({"README": "hello\n"})
    elsewhere = tmp_path / "elsewhere"
    run = isopatch(
        "--porcelain", "--no-sandbox", "--", "git", "worktree", "add", "-q", "--detach", elsewhere,
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    (record,) = _shared_writes(run.stdout)
    assert record.startswith(b"shared-write worktrees/") and record.endswith(b" created")
    git("worktree", "remove", "--force", elsewhere, cwd=repo, env=env)
