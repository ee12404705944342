"""A sandboxed run's worktree over its base tree is registered without
``git worktree add`` (design: procedure step 3): the registration git
would write (``locked``, ``gitdir``, ``commondir``, ``HEAD`` and the
worktree's ``.git``), written whole out of git's sight and moved into
``worktrees/`` at once, so that git never reads it half made."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, started_gits

REASON = "git-isopatch pid 1 on host started 2"


def _files(admin: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in admin.iterdir() if p.is_file()}


def _seen(repo: Path, env) -> tuple[str, str]:
    """What git sees of the linked worktrees: ``git worktree list`` and
    what ``git worktree prune`` would prune (each must succeed)."""
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=repo, env=env, capture_output=True
    )
    assert listed.returncode == 0, listed.stderr
    pruned = subprocess.run(
        ["git", "worktree", "prune", "-n", "-v"], cwd=repo, env=env, capture_output=True
    )
    assert pruned.returncode == 0, pruned.stderr
    return listed.stdout.decode(), (pruned.stdout + pruned.stderr).decode()


def _repository(repo: Path):
    from git_isopatch.git.repo import UserRepository

    return UserRepository(str(repo), str(repo / ".git"), str(repo / ".git"), "")


def test_the_registration_is_the_one_git_worktree_add_writes(env, make_repo, tmp_path) -> None:
    from git_isopatch.worktrees.registration import register_detached

    repo = make_repo({"a.txt": "a\n"})
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    by_git = tmp_path / "by-git" / "wt"
    args = ["worktree", "add", "--no-checkout", "--detach", "--lock", "--reason", REASON]
    git(*args, str(by_git), head, cwd=repo, env=env)
    ours = tmp_path / "ours" / "wt"
    ours.parent.mkdir()
    made = register_detached(_repository(repo), str(ours), head, lock_reason=REASON)
    assert made == str(ours)
    worktrees = repo / ".git" / "worktrees"
    assert sorted(os.listdir(worktrees)) == ["wt", "wt1"]  # named as git names them
    theirs, mine = _files(worktrees / "wt"), _files(worktrees / "wt1")
    assert theirs.pop("gitdir") == f"{by_git}/.git\n".encode()
    assert mine.pop("gitdir") == f"{ours}/.git\n".encode()
    assert mine == theirs  # locked, commondir, HEAD
    assert (ours / ".git").read_bytes() == f"gitdir: {worktrees / 'wt1'}\n".encode()
    assert (worktrees / "wt1").stat().st_mode == (worktrees / "wt").stat().st_mode
    listed, pruned = _seen(repo, env)
    assert f"worktree {ours}\nHEAD {head}\ndetached\nlocked {REASON}\n" in listed
    assert pruned == ""
    assert git("-C", str(ours), "rev-parse", "--show-toplevel", "HEAD", cwd=repo, env=env) == (
        f"{ours}\n{head}\n".encode()
    )
    assert os.listdir(repo / ".git" / "isopatch-removed") == []  # written there, moved in
    git("worktree", "remove", "--force", "--force", str(ours), cwd=repo, env=env)
    assert not ours.exists() and sorted(os.listdir(worktrees)) == ["wt"]


def test_git_never_sees_the_registration_half_made(
    env, make_repo, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whenever a file of the registration is written, git sees no linked
    worktree but those there before: it is moved in whole."""
    from git_isopatch.worktrees.registration import register_detached

    repo = make_repo({"a.txt": "a\n"})
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    before = _seen(repo, env)
    real_open, seen = os.open, []

    def open_and_look(path, *args, **kwargs):
        if str(path).startswith(str(repo / ".git")) or str(path).startswith(str(tmp_path / "w")):
            seen.append(_seen(repo, env))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_and_look)
    (tmp_path / "w").mkdir()
    made = register_detached(_repository(repo), str(tmp_path / "w" / "wt"), head, lock_reason="r")
    monkeypatch.undo()
    assert made is not None
    assert len(seen) >= 4, "the registration's files were written one by one"
    assert seen == [before] * len(seen)
    assert _seen(repo, env) != before


def test_a_registration_git_must_copy_to_is_left_to_git(env, make_repo, tmp_path) -> None:
    """The user's worktree's ``config.worktree`` (copied by ``git worktree
    add`` with ``extensions.worktreeConfig``), a folder name git changes,
    a path registered already: nothing is made, git registers it."""
    from git_isopatch.worktrees.registration import register_detached

    repo = make_repo({"a.txt": "a\n"})
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    repository = _repository(repo)
    (tmp_path / "w").mkdir()
    assert register_detached(repository, str(tmp_path / "w" / "a b"), head, lock_reason="r") is None
    assert register_detached(repository, str(tmp_path / "w" / ".x"), head, lock_reason="r") is None
    (repo / ".git" / "config.worktree").write_text("[foo]\n\tbar = 1\n")
    assert register_detached(repository, str(tmp_path / "w" / "wt"), head, lock_reason="r") is None
    assert os.listdir(tmp_path / "w") == []
    assert not (repo / ".git" / "worktrees").exists()


def test_a_sandboxed_run_starts_no_git_worktree_add(env, make_repo, tmp_path) -> None:
    repo = make_repo({"README": "hello\n"})
    trace = tmp_path / "trace2"
    for _ in range(2):  # the base tree made, then a run over it
        trace.unlink(missing_ok=True)
        run = isopatch(
            "--porcelain",
            "--",
            "sh",
            "-c",
            "echo x >> README; git status --porcelain",
            cwd=repo,
            env={**env, "GIT_TRACE2_EVENT": str(trace)},
        )
        assert run.returncode == 0, run.err
    assert run.fields()["sandbox"] == "true"
    started = started_gits(trace)  # none: no git ran
    assert not [argv for argv in started if "worktree" in argv], started
    assert Path(run.fields()["stdout"]).read_text() == " M README\n"
    assert b"+x" in Path(run.fields()["patch"]).read_bytes()
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert listed.count("worktree ") == 2, listed  # the checkout and the base tree


def test_the_registration_deletes_no_folder_on_its_way(
    env, make_repo, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written in a folder of its own, moved whole: no folder is made and
    deleted around it (on a file system that discards what it frees, each
    costs a discard)."""
    from git_isopatch.worktrees.registration import register_detached

    repo = make_repo({"a.txt": "a\n"})
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    removed: list[str] = []
    real_rmdir = os.rmdir

    def rmdir(path, *args, **kwargs):
        removed.append(str(path))
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir)
    (tmp_path / "w").mkdir()
    made = register_detached(_repository(repo), str(tmp_path / "w" / "wt"), head, lock_reason="r")
    monkeypatch.undo()
    assert made is not None and removed == []
