"""``git isopatch prune`` (design: procedure step 7 and "Placement"): it
removes kept and orphaned worktrees and old result folders, never a running
one, never the user's, never one whose record or lock reason is forged,
and ``--expire`` reads as git's."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from hostile import wait_until
from lifecycle_helpers import (
    _age,
    _dead_pid,
    _forge_record,
    _git_list,
    _kept,
    _listed,
    _old_result_folder,
    _orphan,
    _start,
    _user_entries,
    _users_worktree,
    _users_worktrees,
)
from repo_helpers import ISOPATCH, git, isopatch, registered_worktrees, tree_manifest

from git_isopatch.worktrees import results

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")

# -- a forged record never removes a worktree git-isopatch did not make -----


CHANGE = ("sh", "-c", "echo changed >> README")


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "orphaned"])
@pytest.mark.parametrize("folder", ["parent", "elsewhere"])
def test_prune_never_removes_a_worktree_with_a_forged_record(
    env, make_repo, tmp_path: Path, kept: bool, folder: str
) -> None:
    repo = make_repo()
    feature, admin = _users_worktree(repo, env, tmp_path)
    named = str(tmp_path) if folder == "parent" else str(tmp_path / "git-isopatch-abcdefgh")
    _forge_record(admin, folder=named, kept=kept)
    before = tree_manifest(feature)
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert listed.returncode == 0 and listed.out == "", listed.out
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert pruned.out == ""
    assert tree_manifest(feature) == before
    assert registered_worktrees(repo, env) == [f"worktree {feature}"]


def test_prune_never_removes_a_worktree_locked_with_a_forged_reason(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    feature, _ = _users_worktree(repo, env, tmp_path)
    reason = f"git-isopatch pid {_dead_pid()} on {socket.gethostname()} started 1"
    git("worktree", "lock", "--reason", reason, feature, cwd=repo, env=env)
    before = tree_manifest(feature)
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert (pruned.returncode, pruned.out) == (0, ""), pruned.err
    assert tree_manifest(feature) == before
    assert registered_worktrees(repo, env) == [f"worktree {feature}"]


def test_prune_removes_old_result_folders_of_this_repository_only(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    other = make_repo(name="other")
    tmp = Path(env["TMPDIR"])
    old = _old_result_folder(tmp, repo / ".git", "old")
    recent = _old_result_folder(tmp, repo / ".git", "recent", days=3)
    others = _old_result_folder(tmp, other / ".git", "others")
    unmarked = tmp / "git-isopatch-unmarked"
    unmarked.mkdir()
    _age(unmarked, 30)
    not_ours = tmp / "not-isopatch"
    not_ours.mkdir()
    results.mark(str(not_ours), str(repo / ".git"))
    _age(not_ours, 30)
    link = tmp / "git-isopatch-link"
    link.symlink_to(old)

    dry = isopatch("prune", "-n", cwd=repo, env=env)
    assert dry.out == f"Removing {old}: result folder\n"
    assert old.is_dir()

    done = isopatch("prune", "-v", cwd=repo, env=env)
    assert done.returncode == 0, done.err
    assert done.out == f"Removing {old}: result folder\n"
    assert not old.exists()
    assert recent.is_dir() and others.is_dir() and unmarked.is_dir() and not_ours.is_dir()
    assert link.is_symlink()

    now = isopatch("prune", "--expire", "now", cwd=repo, env=env)
    assert now.returncode == 0, now.err
    assert not recent.exists() and others.is_dir()


def test_prune_reads_only_the_configuration_it_uses(env, make_repo) -> None:
    """A bad value of a key prune does not use is no error: git reads a key
    where a command uses it."""
    repo = make_repo()
    old = _old_result_folder(Path(env["TMPDIR"]), repo / ".git", "old")
    bad = ("-c", "isopatch.pool=few", "-c", "isopatch.sandbox=maybe", "-c", "isopatch.timeout=x")
    done = isopatch("prune", "-v", cwd=repo, env=env, git_options=bad)
    assert done.returncode == 0, done.err
    assert done.out == f"Removing {old}: result folder\n"


def test_prune_leaves_a_folder_that_holds_a_worktree_to_worktree_pruning(env, make_repo) -> None:
    repo = make_repo()
    kept = isopatch("--keep", "--porcelain", "--", *CHANGE, cwd=repo, env=env)
    folder = Path(kept.fields()["worktree"]).parent
    _age(folder, 30)
    found = results.result_folders(str(repo / ".git"), str(folder.parent))
    assert [f.path for f in found] == []
    assert not results.discard(str(folder))
    assert (folder / "repo" / ".git").is_file()


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


def test_prune_removes_the_folder_a_run_killed_waiting_for_the_lock_left(
    env, make_repo, tmp_path: Path
) -> None:
    """A run killed (SIGKILL: an agent's timeout) while another holds the
    worktree lock leaves the folder it made beside the checkout, empty:
    prune removes it once older than the lock's wait, and the folder every
    run of the checkout tries first is theirs again.  A younger one (a run
    still waiting) and one that holds anything stay."""
    repo = make_repo()
    assert isopatch("-q", "--", "true", cwd=repo, env=env).returncode == 0
    lock = repo / ".git" / "isopatch.lock"
    holder = subprocess.Popen(["flock", str(lock), "sleep", "60"], start_new_session=True)
    try:
        wait_until(
            lambda: subprocess.run(["flock", "-n", str(lock), "true"]).returncode,
            what="the lock held",
        )
        run = subprocess.Popen([ISOPATCH, "--", "true"], cwd=repo, env=env)
        wait_until(lambda: list(tmp_path.glob("repo.isopatch-*")), what="the run's folder")
        run.kill()
        run.wait()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # its sleep holds the lock too
        holder.wait()
    (left,) = tmp_path.glob("repo.isopatch-*")
    assert os.listdir(left) == []
    young = tmp_path / "repo.isopatch-young000"
    young.mkdir()
    full = tmp_path / "repo.isopatch-full0000"
    (full / "repo").mkdir(parents=True)
    (full / "repo" / "README").write_text("hello\n")
    for folder in (left, full):
        os.utime(folder, (time.time() - 3600, time.time() - 3600))
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert sorted(tmp_path.glob("repo.isopatch-*")) == [full, young]
    kept = isopatch("--keep", "--porcelain", "--", "true", cwd=repo, env=env)
    assert Path(kept.fields()["worktree"]).parent == left  # the first tried, free again
    git("worktree", "remove", "--force", kept.fields()["worktree"], cwd=repo, env=env)
    shutil.rmtree(full)
    young.rmdir()


@pytest.mark.needs("strace")
def test_prune_removes_what_a_run_killed_while_it_registered_left(
    env, make_repo, tmp_path: Path
) -> None:
    """A run killed (SIGKILL) between writing its worktree's ``.git`` and
    moving the registration it names in leaves ``<name>/.git`` beside the
    checkout: prune removes it once older than the lock's wait, and the
    folder every run tries first is theirs again, as does an empty one.  A
    ``.git`` naming a registration there, or another repository's, stays."""
    repo = make_repo()
    inject = ("-e", "trace=renameat2", "-e", "inject=renameat2:signal=KILL:when=1")
    killed = subprocess.run(
        ["strace", "-qq", "-o", os.devnull, *inject, ISOPATCH, "--", "true"],
        cwd=repo,
        env=env,
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # as strace passes it on
    (left,) = tmp_path.glob("repo.isopatch-*")
    assert [p.name for p in left.rglob("*")] == ["repo", ".git"]
    registered = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert str(left) not in registered
    named = {
        "named000": repo / ".git" / "worktrees" / "decoy",
        "other000": tmp_path / "worktrees" / "x",
    }
    for suffix, gitdir in named.items():
        (tmp_path / f"repo.isopatch-{suffix}" / "repo").mkdir(parents=True)
        (tmp_path / f"repo.isopatch-{suffix}" / "repo" / ".git").write_text(f"gitdir: {gitdir}\n")
    (repo / ".git" / "worktrees" / "decoy").mkdir(parents=True)
    stays = sorted(tmp_path.glob("repo.isopatch-*0"))
    half = tmp_path / "repo.isopatch-half0000"  # killed before its .git was written
    (half / "repo").mkdir(parents=True)
    for folder in (left, half, *stays):
        os.utime(folder, (time.time() - 3600, time.time() - 3600))
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert sorted(tmp_path.glob("repo.isopatch-*")) == stays
    assert all((folder / "repo" / ".git").is_file() for folder in stays)
    kept = isopatch("--keep", "--porcelain", "--", "true", cwd=repo, env=env)
    assert Path(kept.fields()["worktree"]).parent == left  # the first tried, free again
