"""The worktree lock, ``$GIT_COMMON_DIR/isopatch.lock`` (design: procedure
steps 3 and 7, "git-isopatch's own steps cannot be redirected"): a holder
that never lets go (a process an unconfined command left behind) makes a
run or ``prune`` end with one ``fatal:`` naming the lock after
``ISOPATCH_LOCK_TIMEOUT`` seconds (default 60), and a Ctrl-C during the wait
ends it at once with 130, no traceback and nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, git, isopatch, repo_state

pytestmark = pytest.mark.hostile


def _held(lock: Path) -> bool:
    return subprocess.run(["flock", "-n", lock, "true"], check=False).returncode != 0


@pytest.fixture
def holder(make_repo) -> Iterator[tuple[Path, Path]]:
    """A repository and its worktree lock, held by a ``flock`` that never
    lets go (ended after the test)."""
    repo = make_repo()
    lock = repo / ".git" / "isopatch.lock"
    process = subprocess.Popen(["flock", lock, "sleep", "600"], start_new_session=True)
    try:
        wait_until(lambda: _held(lock), seconds=10, what="flock holds the lock")
        yield repo, lock
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_run_gives_up_on_a_lock_that_is_never_let_go(env, holder, no_leftovers) -> None:
    repo, lock = holder
    before = repo_state(repo, env)
    started = time.monotonic()
    run = isopatch(
        "--porcelain", "--", "true", cwd=repo, env={**env, "ISOPATCH_LOCK_TIMEOUT": "1.5"}
    )
    took = time.monotonic() - started
    assert run.returncode == 128, run.err
    lines = run.err.splitlines()
    assert lines[0] == f"fatal: another process has held the lock '{lock}' for 1.5 seconds"
    assert lines[1].startswith("hint: ") and "ISOPATCH_LOCK_TIMEOUT" in lines[1]
    assert len(lines) == 2, run.err
    assert "error-code lock-timeout" in run.out.splitlines()
    assert 1.5 <= took < 15, took
    assert repo_state(repo, env) == before


def test_prune_gives_up_on_a_lock_that_is_never_let_go(env, holder) -> None:
    repo, lock = holder
    run = isopatch("prune", cwd=repo, env={**env, "ISOPATCH_LOCK_TIMEOUT": "1"})
    assert run.returncode == 128, run.err
    assert run.err.startswith(f"fatal: another process has held the lock '{lock}' for 1 second\n")
    assert "Traceback" not in run.err


@pytest.mark.parametrize("words", [(), ("prune",)], ids=["run", "prune"])
def test_ctrl_c_ends_the_wait_at_once(env, holder, words: tuple[str, ...]) -> None:
    """The default wait (60 seconds) is under way when SIGINT arrives."""
    repo, _ = holder
    before = repo_state(repo, env)
    argv = [ISOPATCH, *words] if words else [ISOPATCH, "--", "true"]
    process = subprocess.Popen(
        argv, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(3)  # start-up done, waiting for the lock
    assert process.poll() is None, "it waits for the lock"
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert time.monotonic() - sent < 3
    assert process.returncode == 130, err
    assert b"Traceback" not in err
    assert repo_state(repo, env) == before
    assert not list(repo.parent.glob("repo.isopatch-*")), "no worktree folder is left"


def test_a_leftover_holding_the_lock_does_not_hang_the_run_or_the_next(
    env, make_repo, tmp_path: Path
) -> None:
    """The issue's leftover: an unconfined command leaves a ``flock`` on the
    lock behind (``setsid``).  Its own run cannot take the lock to remove
    its worktree and says so; the next run and ``prune`` end with the
    ``fatal:``; once the holder is gone, ``prune`` removes what was left."""
    repo = make_repo()
    lock = repo / ".git" / "isopatch.lock"
    pidfile = tmp_path / "holder.pid"
    leave = (
        f"setsid sh -c 'echo $$ > {pidfile}; exec flock {lock} sleep 600' "
        "</dev/null >/dev/null 2>&1 & "
        # until the leftover holds the lock, out of the process group the
        # run's end kills: else, under load, it may die before it holds on
        f"while [ ! -s {pidfile} ] || flock -n {lock} true; do sleep 0.05; done"
    )
    quick = {**env, "ISOPATCH_LOCK_TIMEOUT": "1"}
    try:
        first = isopatch("--no-sandbox", "--", "sh", "-c", leave, cwd=repo, env=quick)
        wait_until(pidfile.exists, seconds=10, what="the leftover started")
        assert _held(lock)
        assert first.returncode == 0, first.err
        assert f"'{lock}'" in first.err and "Traceback" not in first.err
        second = isopatch("--", "true", cwd=repo, env=quick)
        assert second.returncode == 128
        assert second.err.startswith(f"fatal: another process has held the lock '{lock}'")
        assert isopatch("prune", cwd=repo, env=quick).returncode == 128
    finally:
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", seconds=10)
        os.killpg(int(pidfile.read_text()), signal.SIGKILL)
    wait_until(lambda: not _held(lock), seconds=10, what="the leftover let go")
    pruned = isopatch("prune", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert listed.count("worktree ") == 1, listed
    assert not list(tmp_path.glob("repo.isopatch-*")), "no folder of ours is left"
