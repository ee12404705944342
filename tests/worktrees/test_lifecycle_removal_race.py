"""The removal (design: procedure step 7, "file-descriptor relative") cannot
be redirected: a process the command leaves behind (``setsid``, possible
when the command runs unconfined) swaps folders of the worktree for
symbolic links to the user's checkout while git-isopatch deletes the
worktree.  A removal that walks by path (``git worktree remove``, a plain
``rm -r``) follows such a link and deletes the checkout, ``.git`` included;
ours opens every folder with ``O_NOFOLLOW`` relative to the one before and
deletes nothing outside the worktree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from leftover_helpers import leftover_script, stop_leftover
from repo_helpers import git, isopatch, repo_state

pytestmark = pytest.mark.hostile

#: The leftover: in the worktree's ignored ``build/`` (extraction does not
#: look there, the removal walks it) it makes a folder holding many files
#: and folders named like the checkout's top-level entries (``.git``,
#: ``src``...), forks, leaves the command's session, and for a few seconds
#: keeps exchanging that folder with a symbolic link to the checkout
#: (``renameat2(RENAME_EXCHANGE)``).  A walk by path that opened the real
#: folder then deletes ``<folder>/.git/...`` through the link: the
#: checkout's own.  argv: checkout, pid file, seconds.
ATTACK = leftover_script(
    r"""
import ctypes, os, sys, time
checkout, pidfile, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
exchange = ctypes.CDLL(None, use_errno=True).renameat2
top = os.getcwd()
real = os.path.join(top, "build", "d")
link = os.path.join(os.path.dirname(top), "link")
for name in os.listdir(checkout):
    os.makedirs(os.path.join(real, name, "x"))
for k in range(2000):
    open(os.path.join(real, f"f{k}"), "w").close()
os.symlink(checkout, link)
""",
    r"""
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    exchange(-100, real.encode(), -100, link.encode(), 2)  # AT_FDCWD, RENAME_EXCHANGE
    time.sleep(0.002)
""",
)


@pytest.mark.parametrize("attempt", range(5))
def test_a_leftover_swapping_folders_for_links_deletes_nothing_outside(
    env, make_repo, tmp_path: Path, attempt: int
) -> None:
    repo = make_repo({"README": "hello\n", "src/keep.txt": "precious\n", ".gitignore": "build/\n"})
    before = repo_state(repo, env)
    attack = tmp_path / "attack.py"
    attack.write_text(ATTACK)
    pidfile = tmp_path / "leftover.pid"
    try:
        run = isopatch(
            "--no-sandbox",
            "--porcelain",
            "--",
            sys.executable,
            attack,
            repo,
            pidfile,
            "4",
            cwd=repo,
            env=env,
        )
    finally:
        stop_leftover(pidfile)
    assert run.returncode == 0, run.err
    assert "Traceback" not in run.err
    assert (repo / ".git" / "HEAD").is_file(), "the user's .git is intact"
    assert (repo / "src" / "keep.txt").read_text() == "precious\n"
    assert repo_state(repo, env) | {"worktree list": None} == before | {"worktree list": None}
    # whatever the leftover kept from being deleted, prune takes it now
    pruned = isopatch("prune", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert listed.count("worktree ") == 1, listed
    assert not list(tmp_path.glob("repo.isopatch-*")), "no folder of ours is left"


def test_a_registration_taken_again_the_moment_it_goes_stays_the_new_worktrees(
    env, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run over a base tree removes its own registration without the
    worktree lock (runs started together do not wait for each other's
    deletions), while another run's ``git worktree add`` makes the first
    free ``worktrees/<id>``: the very name just freed.  The removal,
    once its folder went, never looks at that name again: the new
    registration stays whole, and its git finds its repository."""
    from git_isopatch.git.repo import UserRepository
    from git_isopatch.git.types import GitDirPath, WorktreePath
    from git_isopatch.worktrees.removal import remove_ours

    repo = make_repo({"a.txt": "a\n"})
    ours, theirs = tmp_path / "git-isopatch-abcdefgh" / "wt", tmp_path / "other" / "wt"
    git("worktree", "add", "--detach", str(ours), cwd=repo, env=env)
    worktrees = repo / ".git" / "worktrees"
    rename, added = os.rename, []

    def rename_then_add(source, target, **kwargs):
        """The registration goes, and another's ``git worktree add`` takes its name."""
        rename(source, target, **kwargs)
        if os.path.dirname(source) == str(worktrees) and not added:
            added.append(git("worktree", "add", "--detach", str(theirs), cwd=repo, env=env))

    monkeypatch.setattr(os, "rename", rename_then_add)
    repository = UserRepository(str(repo), str(repo / ".git"), str(repo / ".git"), "")
    reason = remove_ours(repository, WorktreePath(str(ours)), GitDirPath(str(worktrees / "wt")))
    monkeypatch.undo()
    assert added, "the registration went"
    assert reason is None
    assert not ours.exists()
    assert {"HEAD", "commondir", "gitdir"} <= set(os.listdir(worktrees / "wt"))
    assert (worktrees / "wt" / "gitdir").read_text().strip() == str(theirs / ".git")
    head = git("rev-parse", "HEAD", cwd=repo, env=env)
    assert git("rev-parse", "HEAD", cwd=theirs, env=env) == head
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert f"worktree {theirs}\n" in listed and f"worktree {ours}\n" not in listed
