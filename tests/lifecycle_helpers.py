"""Helpers of the life-cycle tests (list, prune, isopatch.maxWorktrees): runs
that wait, orphaned and kept worktrees, and the listings."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from repo_helpers import ISOPATCH, git, isopatch

from git_isopatch.worktrees import results

DAY = 24 * 3600


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
        # unconfined: the pid file is written outside, and the pid is signalled
        [ISOPATCH, "-q", "--no-sandbox", "--", "sh", "-c", script],
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


def _users_worktrees(repo: Path, env: dict[str, str], tmp_path: Path) -> bytes:
    """Worktrees the user made: plain, locked with a reason, and one whose
    folder is gone (git calls it prunable).  Returns git's list of them."""
    for name in ("plain", "locked", "gone"):
        git("worktree", "add", "-q", "--detach", tmp_path / f"user-{name}", cwd=repo, env=env)
    git("worktree", "lock", "--reason", "mine", tmp_path / "user-locked", cwd=repo, env=env)
    shutil.rmtree(tmp_path / "user-gone")
    return _git_list(repo, env)


def _user_entries(listing: bytes, tmp_path: Path) -> list[bytes]:
    return [e for e in listing.split(b"\n\n") if str(tmp_path / "user-").encode() in e]


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then), follow_symlinks=False)


def _old_result_folder(tmp: Path, common_dir: Path, name: str, days: float = 15) -> Path:
    """A result folder as a run leaves it, last modified ``days`` ago."""
    folder = tmp / f"git-isopatch-{name}"
    folder.mkdir(mode=0o700)
    (folder / "isopatch.patch").write_text("")
    results.mark(str(folder), str(common_dir))
    _age(folder, days)
    return folder


#: The command's forgery: a link inside its worktree named ``{name}`` (as
#: git-isopatch's folder is named), leading to ``$VICTIM_PARENT``, and a
#: ``gitdir`` and a record naming a worktree behind it.
_FORGED_LINK = """\
A=$(git rev-parse --git-dir); W=$PWD
ln -s "$VICTIM_PARENT" "$W/{name}"
echo "$W/{name}/precious/.git" > "$A/gitdir"
record='{{"pid":999999,"host":"%s","start_ticks":1,"created":1,'
record="$record"'"tmpdir":"%s","base":"x","kept":true}}'
printf "$record" "$(hostname)" "$W/{name}" > "$A/isopatch.json"
"""


def _prune_after_a_link_named(
    name: str, make_repo, env: dict[str, str], tmp_path: Path, extra: str = ""
) -> Path:
    """A victim folder ``precious`` holding ``f``; a sandboxed command that
    plants :data:`_FORGED_LINK` named ``name`` (then runs ``extra``); then
    ``list`` and ``prune``.  Returns the victim, for the test to check."""
    victim = tmp_path / "victim" / "precious"
    victim.mkdir(parents=True)
    (victim / "f").write_text("data\n")
    repo = make_repo({"a": "a\n"})
    forge = _FORGED_LINK.format(name=name) + extra
    isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c", forge,
        cwd=repo, env={**env, "VICTIM_PARENT": str(victim.parent)},
    )  # fmt: skip
    isopatch("list", cwd=repo, env=env)
    isopatch("prune", cwd=repo, env=env)
    return victim
