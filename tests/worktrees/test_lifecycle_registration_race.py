"""A registration that goes while git reads it (design: procedure steps 3
and 7): git reads every folder of ``$GIT_COMMON_DIR/worktrees`` (worktree.c,
``get_worktrees``; ``git worktree add`` and ``list`` do), each file looked
at, then read.  A registration of ours leaves that folder at once, moved
out of git's sight, before a file of it is deleted; and a run over a base
tree removes its own without the worktree lock, so another run's ``git
worktree add`` (an unconfined run's: a sandboxed one registers its own
without git) can look at it there and find it gone when it reads it: git
dies ("failed to read .../commondir"), and the run asks git once more.

The adding git is held between looking at the other registration's
``commondir`` and reading it by ``strace`` (a ``SIGSTOP`` injected after
its ``lstat``): a real git on a real file system, let go on once the other
run ended.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import BIN_DIR, git, isopatch

#: ``git`` for the second run: its first ``git worktree add`` runs under
#: strace, stopped after its first ``lstat`` of ``$HOOKED``; the rest as is.
SHIM = """#!/bin/sh
case " $* " in
*" worktree add "*)
    if mkdir "$SHIM_MARK" 2>/dev/null; then
        exec strace -f -qq -o "$SHIM_LOG" -P "$HOOKED" -e trace=newfstatat,lstat \\
            -e inject=newfstatat,lstat:signal=SIGSTOP:when=1 "$REAL_GIT" "$@"
    fi;;
esac
exec "$REAL_GIT" "$@"
"""


def _started(marks: Path, run: subprocess.Popen) -> bool:
    assert run.poll() is None, run.communicate()
    return (marks / "started").exists()


@pytest.mark.needs("strace")
def test_a_worktree_add_survives_another_runs_registration_going_under_it(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo({"README": "hello\n"})
    assert isopatch("-q", "--", "true", cwd=repo, env=env).returncode == 0  # the base tree
    worktrees = repo / ".git" / "worktrees"
    (base_tree,) = os.listdir(worktrees)
    marks = tmp_path / "marks"
    marks.mkdir()
    script = f": > '{marks}/started'; while [ ! -e '{marks}/go' ]; do sleep 0.05; done"
    first = subprocess.Popen(
        [BIN_DIR / "git-isopatch", "--porcelain", "--allow-write", marks, "--", "sh", "-c", script],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: _started(marks, first), what="the first run's command")
    (registration,) = set(os.listdir(worktrees)) - {base_tree}
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "git").write_text(SHIM)
    (shim / "git").chmod(0o755)
    log = tmp_path / "strace.log"
    second_env = {
        **env,
        "PATH": f"{shim}{os.pathsep}{env['PATH']}",
        "REAL_GIT": shutil.which("git", path=env["PATH"]),
        "HOOKED": str(worktrees / registration / "commondir"),
        "SHIM_MARK": str(tmp_path / "shim-used"),
        "SHIM_LOG": str(log),
    }
    second = subprocess.Popen(
        # unconfined: a sandboxed run registers its worktree without git
        [BIN_DIR / "git-isopatch", "--porcelain", "--no-sandbox", "--", "sh", "-c", "echo y > new"],
        cwd=repo,
        env=second_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            lambda: log.exists() and "stopped by SIGSTOP" in log.read_text(),
            what="the second run's git worktree add, stopped",
        )
        (marks / "go").touch()
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        assert not (worktrees / registration).exists(), "the first run's registration went"
    finally:
        if log.exists():  # let the stopped git go on
            for line in log.read_text().splitlines():
                if "stopped by SIGSTOP" in line:
                    os.kill(int(line.split()[0]), signal.SIGCONT)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert b"fatal" not in err and b"warning" not in err, err
    fields = dict(line.split(b" ", 1) for line in out.splitlines())
    assert b"+y" in Path(fields[b"patch"].decode()).read_bytes()
    assert os.listdir(worktrees) == [base_tree]
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert listed.count("worktree ") == 2, listed  # the checkout and the base tree
    assert not [p for p in repo.parent.iterdir() if ".isopatch-" in p.name]


def _registered(repo: Path, env) -> list[str]:
    """What git sees of the linked worktrees: ``git worktree list`` and
    what ``git worktree prune`` would prune."""
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    pruned = subprocess.run(
        ["git", "worktree", "prune", "-n", "-v"], cwd=repo, env=env, capture_output=True
    )
    assert pruned.returncode == 0, pruned.stderr
    tops = [line for line in listed.splitlines() if line.startswith("worktree ")][1:]
    return tops + (pruned.stdout + pruned.stderr).decode().splitlines()


def test_git_never_sees_a_registration_half_deleted(
    env, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whenever the removal deletes a file of the registration, git sees no
    linked worktree at all: the registration left ``worktrees/`` at once."""
    from git_isopatch.git.repo import UserRepository
    from git_isopatch.git.types import GitDirPath, WorktreePath
    from git_isopatch.worktrees.removal import remove_ours

    repo = make_repo({"a.txt": "a\n"})
    ours = tmp_path / "git-isopatch-abcdefgh" / "wt"
    git("worktree", "add", "--detach", str(ours), cwd=repo, env=env)
    unlink, seen = os.unlink, []

    def unlink_and_look(path, *, dir_fd=None):
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else path
        if folder.startswith(str(repo / ".git")):
            seen.append(_registered(repo, env))
        unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink_and_look)
    repository = UserRepository(str(repo), str(repo / ".git"), str(repo / ".git"), "")
    admin_dir = GitDirPath(str(repo / ".git" / "worktrees" / "wt"))
    reason = remove_ours(repository, WorktreePath(str(ours)), admin_dir)
    monkeypatch.undo()
    assert reason is None
    assert len(seen) >= 3, "the registration's files were deleted one by one"
    assert seen == [[]] * len(seen)
    assert not (repo / ".git" / "worktrees").exists()
    assert not (repo / ".git" / "isopatch-removed").exists()


def test_a_removal_ended_after_the_move_leaves_nothing_git_sees_and_prune_deletes_it(
    env, make_repo, tmp_path: Path
) -> None:
    """A removal ended (a crash, SIGKILL) between moving a registration out
    of ``worktrees/`` and deleting it: git sees nothing of it, ``list``
    neither, and ``prune`` deletes it."""
    from git_isopatch.worktrees.registration import SET_ASIDE_FOLDER, set_aside

    repo = make_repo({"a.txt": "a\n"})
    ours = tmp_path / "git-isopatch-abcdefgh" / "wt"
    git("worktree", "add", "--detach", "--lock", str(ours), cwd=repo, env=env)
    moved = set_aside(str(repo / ".git"), "wt")
    assert moved is not None
    left = Path(moved)  # moved whole, no folder made for it: each one costs a discard
    assert left.parent == repo / ".git" / SET_ASIDE_FOLDER
    assert {"HEAD", "commondir", "gitdir", "index", "locked"} <= set(os.listdir(left))
    assert _registered(repo, env) == []
    assert git("fsck", "--no-progress", cwd=repo, env=env) == b""
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert listed.returncode == 0 and listed.out == "", listed.err
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert not (repo / ".git" / SET_ASIDE_FOLDER).exists()
    assert _registered(repo, env) == []
