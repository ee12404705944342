"""``isopatch.maxWorktrees`` and ``--keep`` (design: procedure step 7): at
the limit the oldest kept worktree goes (orphans first) with a warning, a
run is refused when every worktree is running, and no worktree
git-isopatch did not make is ever evicted, whatever its record says."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch, registered_worktrees, tree_manifest


# -- a forged record never removes a worktree git-isopatch did not make -----
def _users_worktree(repo: Path, env: dict[str, str], tmp_path: Path) -> tuple[Path, Path]:
    """The user's own linked worktree with uncommitted work, and its
    private folder ``$GIT_COMMON_DIR/worktrees/<id>``."""
    feature = tmp_path / "feature"
    git("worktree", "add", "-q", "-b", "feature", feature, cwd=repo, env=env)
    (feature / "unsaved.txt").write_text("hours of work\n")
    return feature, repo / ".git" / "worktrees" / "feature"


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _forge_record(admin: Path, *, folder: str, kept: bool) -> None:
    record = {
        "pid": _dead_pid(),
        "host": socket.gethostname(),
        "start_ticks": 1,
        "created": 1.0,
        "tmpdir": folder,
        "base": "0" * 40,
        "command": ["true"],
        "kept": kept,
        "version": 1,
    }
    (admin / "isopatch.json").write_text(json.dumps(record))


@dataclass
class Running:
    process: subprocess.Popen
    release: Path
    command_pid: int

    def finish(self) -> int:
        self.release.touch()
        return self.process.wait(timeout=60)


def _start(repo: Path, env: dict[str, str], where: Path) -> Running:
    """A git-isopatch run whose command waits until ``release`` exists."""
    where.mkdir()
    pidfile, release = where / "pid", where / "release"
    script = f"echo $$ > '{pidfile}.tmp' && mv '{pidfile}.tmp' '{pidfile}'; "
    script += f"while [ ! -e '{release}' ]; do sleep 0.05; done"
    process = subprocess.Popen(
        [ISOPATCH, "-q", "--", "sh", "-c", script],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not pidfile.exists():
        assert process.poll() is None, "git-isopatch ended early"
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    return Running(process, release, int(pidfile.read_text()))


def _orphan(repo: Path, env: dict[str, str], where: Path) -> None:
    """A worktree whose git-isopatch was killed (SIGKILL: no clean-up)."""
    run = _start(repo, env, where)
    run.process.kill()
    run.process.wait()
    os.killpg(run.command_pid, signal.SIGKILL)


def _kept(repo: Path, env: dict[str, str]) -> str:
    run = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return run.fields()["worktree"]


def _listed(repo: Path, env: dict[str, str]) -> list[dict[str, str]]:
    """``git isopatch list --porcelain -z``, parsed."""
    run = isopatch("list", "--porcelain", "-z", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    entries, fields = [], {}
    for record in run.stdout.split(b"\0")[:-1]:
        if not record:
            entries.append(fields)
            fields = {}
            continue
        key, _, value = record.decode().partition(" ")
        fields[key] = value
    assert not fields, "the last entry is not ended"
    return entries


def _git_list(repo: Path, env: dict[str, str]) -> bytes:
    return git("worktree", "list", "--porcelain", cwd=repo, env=env)


def _limit(repo: Path, env: dict[str, str], value: int) -> None:
    git("config", "isopatch.maxWorktrees", str(value), cwd=repo, env=env)


def test_max_worktrees_never_evicts_a_worktree_with_a_forged_record(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo()
    feature, admin = _users_worktree(repo, env, tmp_path)
    _forge_record(admin, folder=str(tmp_path), kept=True)
    git("config", "isopatch.maxWorktrees", "1", cwd=repo, env=env)
    before = tree_manifest(feature)
    run = isopatch("--porcelain", "--", "touch", "made", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning" not in run.err
    assert tree_manifest(feature) == before
    assert registered_worktrees(repo, env) == [f"worktree {feature}"]


@pytest.mark.parametrize(
    ("args", "status"),
    [((), 0), ((), 3), (("--timeout", "1"), 124)],
)
def test_keep_keeps_the_worktree_whatever_the_exit_status(env, make_repo, args, status) -> None:
    """--keep keeps the worktree after every run that gets to run the
    command: a failure and a timeout too, as -h and the man page say;
    without it the same run leaves none."""
    repo = make_repo()
    script = "echo x > new; sleep 5" if status == 124 else f"echo x > new; exit {status}"
    for keep in (True, False):
        flags = ("--keep",) if keep else ()
        run = isopatch("--porcelain", *flags, *args, "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == status, run.err
        fields = run.fields()
        if keep:
            assert Path(fields["worktree"], "new").read_text() == "x\n"
            assert [e["state"] for e in _listed(repo, env)] == ["kept"]
            assert isopatch("prune", cwd=repo, env=env).returncode == 0
        else:
            assert "worktree" not in fields
        assert _listed(repo, env) == []


def test_at_the_limit_the_oldest_kept_worktree_goes_with_a_warning(env, make_repo) -> None:
    repo = make_repo()
    _limit(repo, env, 2)
    oldest, newer = _kept(repo, env), _kept(repo, env)
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err == (
        f"warning: removed the oldest kept worktree '{oldest}' (isopatch.maxWorktrees is 2)\n"
    )
    assert [e["worktree"] for e in _listed(repo, env)] == [newer]


def test_at_the_limit_orphans_go_first(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    _limit(repo, env, 2)
    kept = _kept(repo, env)
    _orphan(repo, env, tmp_path / "orphan")
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err == ""
    assert [(e["worktree"], e["state"]) for e in _listed(repo, env)] == [(kept, "kept")]


def test_at_the_limit_with_every_worktree_running_the_run_is_refused(
    env, make_repo, tmp_path
) -> None:
    repo = make_repo()
    _limit(repo, env, 1)
    running = _start(repo, env, tmp_path / "running")
    try:
        listing = _git_list(repo, env)
        run = isopatch("--", "touch", "made", cwd=repo, env=env)
        assert run.returncode == 128
        assert run.err == (
            "fatal: 1 git-isopatch worktrees are in use in this repository "
            "and isopatch.maxWorktrees is 1\n"
            "hint: wait for a run to finish, or raise isopatch.maxWorktrees\n"
        )
        assert _git_list(repo, env) == listing
        assert len(list(Path(env["TMPDIR"]).glob("git-isopatch-*"))) == 1
    finally:
        assert running.finish() == 0
    _limit(repo, env, 0)  # no limit
    for _ in range(2):
        _kept(repo, env)
    assert len(_listed(repo, env)) == 2
