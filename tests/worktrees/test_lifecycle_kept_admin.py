"""A kept worktree (design: procedure step 7, "or keep it"; issue 19:
"git-isopatch's own steps cannot be redirected") has its ``commondir``,
``gitdir``, ``config.worktree`` and ``.git`` put back to what git-isopatch
wrote before its path is given to the user: a command, or a process it
left behind after the run put ``commondir`` back, that plants a
``core.fsmonitor`` (a program git runs on ``git status``) in
``config.worktree`` or points ``commondir`` at a repository of its own
would otherwise run that program on the user's next ``git status`` in the
kept worktree."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from leftover_helpers import leftover_script, stop_leftover
from repo_helpers import git, isopatch, repo_state

pytestmark = pytest.mark.hostile


def _planted(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path, Path]:
    """A program that leaves a marker, and a bare repository whose
    configuration names it as ``core.fsmonitor``."""
    marker = tmp_path / "fsmonitor-ran"
    program = tmp_path / "fsmonitor"
    program.write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 1\n")
    program.chmod(0o755)
    fake = tmp_path / "fake.git"
    git("init", "-q", "--bare", fake, cwd=tmp_path, env=env)
    git("config", "--file", fake / "config", "core.fsmonitor", program, cwd=tmp_path, env=env)
    return marker, program, fake


def _worktree_config_repo(make_repo, env: dict[str, str]) -> Path:
    repo = make_repo()
    git("config", "extensions.worktreeConfig", "true", cwd=repo, env=env)
    return repo


def _assert_put_right(kept: Path, admin: Path, marker: Path, env: dict[str, str]) -> None:
    assert (admin / "commondir").read_bytes() == b"../..\n"
    assert (admin / "gitdir").read_bytes() == f"{kept}/.git\n".encode()
    assert not (admin / "config.worktree").exists()
    assert (kept / ".git").read_bytes() == f"gitdir: {admin}\n".encode()
    marker.unlink(missing_ok=True)
    git("status", "--short", cwd=kept, env=env)
    assert not marker.exists(), "the planted core.fsmonitor did not run"


def _admin(kept: Path) -> Path:
    return Path((kept / ".git").read_text().split(": ", 1)[1].strip())


def test_what_the_command_plants_does_not_survive_keep(env, make_repo, tmp_path: Path) -> None:
    repo = _worktree_config_repo(make_repo, env)
    marker, program, fake = _planted(tmp_path, env)
    before = repo_state(repo, env)
    command = (
        "admin=$(git rev-parse --absolute-git-dir) && "
        f'printf "[core]\\n\\tfsmonitor = {program}\\n" > "$admin/config.worktree" && '
        f'echo "{fake}" > "$admin/commondir" && echo /elsewhere/.git > "$admin/gitdir" && '
        "echo change > README"
    )
    run = isopatch("--keep", "--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    kept = Path(run.fields()["worktree"])
    admin = _admin(kept)
    assert f"warning: the command rewrote '{admin / 'config.worktree'}'; put back" in run.err
    _assert_put_right(kept, admin, marker, env)
    assert repo_state(repo, env) | {"worktree list": None} == before | {"worktree list": None}
    assert isopatch("prune", cwd=repo, env=env).returncode == 0


#: The leftover: waits until the run has put ``commondir`` back after the
#: command, then points it at its own repository and plants
#: ``config.worktree`` and ``.git``, once.  argv: fake repository,
#: program, pid file.
LEFTOVER = leftover_script(
    r"""
import os, sys, time
fake, program, pidfile = sys.argv[1:4]
top = os.getcwd()
admin = open(os.path.join(top, ".git")).read().split(": ", 1)[1].strip()
commondir = os.path.join(admin, "commondir")
original = open(commondir).read()
open(commondir, "w").write(fake + "\n")
""",
    r"""
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        if open(commondir).read() == original:
            break
    except OSError:
        pass
    time.sleep(0.001)
open(commondir, "w").write(fake + "\n")
open(os.path.join(admin, "config.worktree"), "w").write(f"[core]\n\tfsmonitor = {program}\n")
open(os.path.join(top, ".git"), "w").write(f"gitdir: {fake}\n")
""",
)


def test_a_leftover_planting_after_the_run_put_commondir_back(
    env, make_repo, tmp_path: Path
) -> None:
    repo = _worktree_config_repo(make_repo, env)
    marker, program, fake = _planted(tmp_path, env)
    leftover = tmp_path / "leftover.py"
    leftover.write_text(LEFTOVER)
    pidfile = tmp_path / "leftover.pid"
    try:
        run = isopatch(
            "--no-sandbox",
            "--keep",
            "--porcelain",
            "--",
            sys.executable,
            leftover,
            fake,
            program,
            pidfile,
            cwd=repo,
            env=env,
        )
    finally:
        stop_leftover(pidfile)
    assert "Traceback" not in run.err
    kept = Path(run.fields()["worktree"])
    admin = next(
        a for a in (repo / ".git" / "worktrees").iterdir() if (a / "isopatch.json").exists()
    )
    assert f"warning: the command rewrote '{admin / 'commondir'}'; put back" in run.err
    _assert_put_right(kept, admin, marker, env)
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert not (repo / ".git" / "worktrees").exists()


def test_what_the_command_leaves_in_the_private_folder_is_named_in_a_few_lines(
    env, make_repo, tmp_path: Path
) -> None:
    """A command that leaves hundreds of files in the worktree's private
    folder (and rewrites ``commondir``) gets them removed from the kept
    worktree's, and named in a few lines of ``warning:``, not one line
    each: ``commondir`` first."""
    repo = make_repo()
    _, _, fake = _planted(tmp_path, env)
    command = (
        "admin=$(git rev-parse --absolute-git-dir)"
        ' && for i in $(seq 500); do : > "$admin/junk-$i"; done'
        f' && echo "{fake}" > "$admin/commondir" && echo change > README'
    )
    run = isopatch("--keep", "--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    admin = _admin(Path(run.fields()["worktree"]))
    warnings = [line for line in run.err.splitlines() if line.startswith("warning:")]
    assert f"warning: the command rewrote '{admin / 'commondir'}'; put back" in warnings
    assert len(warnings) <= 12, warnings[:20]
    assert "warning: the command rewrote 490 more; put back" in warnings, run.err[-600:]
    assert not list(admin.glob("junk-*"))
    git("worktree", "remove", "--force", run.fields()["worktree"], cwd=repo, env=env)
