"""Kept worktrees (issue 5): ``git isopatch list`` and ``prune``, and
``isopatch.maxWorktrees``.  Running, kept and orphaned worktrees are made
for real: a run that waits, ``--keep``, and a run killed with SIGKILL.
Nothing here ever touches a worktree git-isopatch did not make."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch


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


def _users_worktrees(repo: Path, env: dict[str, str], tmp_path: Path) -> bytes:
    """Worktrees the user made: plain, locked with a reason, and one whose
    folder is gone (git calls it prunable).  Returns git's list of them."""
    for name in ("plain", "locked", "gone"):
        git("worktree", "add", "-q", "--detach", tmp_path / f"user-{name}", cwd=repo, env=env)
    git("worktree", "lock", "--reason", "mine", tmp_path / "user-locked", cwd=repo, env=env)
    shutil.rmtree(tmp_path / "user-gone")
    return _git_list(repo, env)


def _git_list(repo: Path, env: dict[str, str]) -> bytes:
    return git("worktree", "list", "--porcelain", cwd=repo, env=env)


def _user_entries(listing: bytes, tmp_path: Path) -> list[bytes]:
    return [e for e in listing.split(b"\n\n") if str(tmp_path / "user-").encode() in e]


def test_list_shows_running_kept_and_orphaned_and_none_of_the_users(
    env, make_repo, tmp_path
) -> None:
    repo = make_repo()
    users = _users_worktrees(repo, env, tmp_path)
    kept = _kept(repo, env)
    _orphan(repo, env, tmp_path / "orphan")
    running = _start(repo, env, tmp_path / "running")
    try:
        entries = _listed(repo, env)
        human = isopatch("list", cwd=repo, env=env)
    finally:
        assert running.finish() == 0
    assert [e["state"] for e in entries] == ["kept", "orphaned", "running"]
    assert entries[0]["worktree"] == kept
    assert entries[2]["pid"] == str(running.process.pid)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    for entry in entries:
        assert entry["head"] == head
        assert abs(int(entry["created"]) - time.time()) < 3600
        assert not entry["worktree"].startswith(str(tmp_path / "user-"))
    assert entries[0]["command"] == "true"
    assert human.returncode == 0, human.err
    rows = [re.split(r" {2,}", line) for line in human.out.splitlines()]
    assert [row[:2] for row in rows] == [
        [kept, "kept"],
        [entries[1]["worktree"], "orphaned"],
        [entries[2]["worktree"], f"running (pid {running.process.pid})"],
    ]
    assert all(re.fullmatch(r"\d+ seconds? ago|\d+ minutes? ago", row[2]) for row in rows)
    assert rows[0][3] == "true"
    assert _user_entries(_git_list(repo, env), tmp_path) == _user_entries(users, tmp_path)


def test_list_porcelain_quotes_paths_unless_z(env, make_repo) -> None:
    repo = make_repo(name='odd "name"')
    quoted_in_capture = _kept(repo, env)
    path = _listed(repo, env)[0]["worktree"]
    assert path.endswith('/odd "name"')
    run = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    quoted = '"' + path.replace('"', '\\"') + '"'
    assert quoted == quoted_in_capture
    assert run.out.splitlines()[0] == f"worktree {quoted}"
    assert run.out.endswith("\n\n")


def test_prune_removes_kept_and_orphaned_never_running_nor_the_users(
    env, make_repo, tmp_path
) -> None:
    repo = make_repo()
    users = _users_worktrees(repo, env, tmp_path)
    kept = _kept(repo, env)
    _orphan(repo, env, tmp_path / "orphan")
    orphan = _listed(repo, env)[1]["worktree"]
    running = _start(repo, env, tmp_path / "running")
    try:
        dry = isopatch("prune", "-n", cwd=repo, env=env)
        assert dry.returncode == 0, dry.err
        assert dry.out == f"Removing {kept}: kept\nRemoving {orphan}: orphaned\n"
        assert [e["state"] for e in _listed(repo, env)] == ["kept", "orphaned", "running"]

        pruned = isopatch("prune", "-v", cwd=repo, env=env)
        assert pruned.returncode == 0, pruned.err
        assert pruned.out == f"Removing {kept}: kept\nRemoving {orphan}: orphaned\n"
        assert [e["state"] for e in _listed(repo, env)] == ["running"]
    finally:
        assert running.finish() == 0
    for gone in (kept, orphan):
        assert not Path(gone).parent.exists(), "its git-isopatch-* folder is removed too"
        assert gone.encode() not in _git_list(repo, env)
    assert _user_entries(_git_list(repo, env), tmp_path) == _user_entries(users, tmp_path)
    assert _listed(repo, env) == []


def test_prune_from_inside_a_kept_worktree_says_it_skips_it(env, make_repo) -> None:
    """The worktree the user stands in is never removed (their shell would
    be left in a deleted folder), and prune says so instead of keeping
    quiet; the others still go."""
    repo = make_repo()
    older = _kept(repo, env)
    inside = _kept(repo, env)
    (Path(inside) / "sub").mkdir()
    name = f"'{inside}'"
    for args in (("prune", "-n"), ("prune",), ("prune", "-v")):
        run = isopatch(*args, cwd=Path(inside) / "sub", env=env)
        assert run.returncode == 0, run.err
        assert run.err == f"warning: not pruning {name}: you are in it\n", args
        assert Path(inside).is_dir()
        if args == ("prune", "-n"):
            assert run.out == f"Removing {older}: kept\n"
    assert [e["worktree"] for e in _listed(repo, env)] == [inside]
    assert not Path(older).exists()
    # --expire that would not take it anyway: nothing to say
    run = isopatch("prune", "--expire", "1.hour.ago", cwd=inside, env=env)
    assert run.returncode == 0 and run.err == "", run.err
    run = isopatch("prune", "-v", cwd=repo, env=env)
    assert run.err == "" and run.out == f"Removing {inside}: kept\n"


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


def test_prune_expire(env, make_repo) -> None:
    repo = make_repo()
    _kept(repo, env)
    assert isopatch("prune", "--expire", "1.hour.ago", cwd=repo, env=env).returncode == 0
    assert len(_listed(repo, env)) == 1
    assert isopatch("prune", "--expire", "now", cwd=repo, env=env).returncode == 0
    assert _listed(repo, env) == []


def test_prune_bad_expire_is_a_usage_error(env, make_repo) -> None:
    repo = make_repo()
    kept = _kept(repo, env)
    run = isopatch("prune", "--expire", "garbage", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.startswith("error: option 'expire': malformed expiration date 'garbage'\n")
    assert "usage: git isopatch prune" in run.err
    assert Path(kept).is_dir()


def _limit(repo: Path, env: dict[str, str], value: int) -> None:
    git("config", "isopatch.maxWorktrees", str(value), cwd=repo, env=env)


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


def test_subcommands_are_only_recognised_first(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "list"
    program.write_text("#!/bin/sh\necho ran > listed\n")
    program.chmod(0o755)
    path_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    run = isopatch("--porcelain", "--", "list", cwd=repo, env=path_env)
    assert run.returncode == 0, run.err
    assert b"+++ b/listed" in Path(run.fields()["patch"]).read_bytes()
    run = isopatch("list", cwd=repo, env=path_env, via_git=True)
    assert (run.returncode, run.out, run.err) == (0, "", "")


@pytest.mark.parametrize(
    ("args", "status", "first_line"),
    [
        (["list", "-h"], 129, "usage: git isopatch list [--porcelain [-z] | --json] [-C <path>]"),
        (["prune", "-h"], 129, "usage: git isopatch prune [--expire <time>] [-n] [-v] [-C <path>]"),
        (["list", "extra"], 129, "error: got unexpected extra argument(s) (extra)"),
        (["list", "-z"], 129, "error: the option '-z' requires '--porcelain'"),
        (["prune", "--expire"], 129, "error: option 'expire' requires a value"),
    ],
)
def test_subcommand_usage(env, make_repo, args, status, first_line) -> None:
    repo = make_repo()
    run = isopatch(*args, cwd=repo, env=env)
    assert run.returncode == status
    text = run.out if args[-1] == "-h" else run.err
    assert text.splitlines()[0] == first_line


def test_list_outside_a_repository_is_fatal(env, tmp_path) -> None:
    run = isopatch("list", cwd=tmp_path, env=env)
    assert run.returncode == 128
    assert run.err == "fatal: not a git repository (or any of the parent directories): .git\n"


def test_prune_removes_a_kept_worktree_whose_folder_is_gone(env, make_repo) -> None:
    repo = make_repo()
    kept = _kept(repo, env)
    shutil.rmtree(Path(kept).parent)
    [entry] = _listed(repo, env)
    assert (entry["state"], entry["prunable"]) == (
        "kept",
        "gitdir file points to non-existent location",
    )
    run = isopatch("prune", cwd=repo, env=env)
    assert (run.returncode, run.out, run.err) == (0, "", "")
    assert _listed(repo, env) == []
    assert _git_list(repo, env).count(b"worktree ") == 1
