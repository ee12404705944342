"""Base trees (design: procedure step 3): one checkout per commit, shared by
every sandboxed run at it, pinned while in use, kept for the next runs
(``isopatch.baseTrees``, least recently used first), moved to a new commit
by the difference, removed by ``prune`` and expiry.  Driven here through
their life cycle (:class:`git_isopatch.worktrees.base_trees.BaseTrees`) on
real repositories and real git; the runs that use them are tested with
the overlay run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from repo_helpers import git, isopatch

from git_isopatch.git.repo import open_user_repository
from git_isopatch.git.result import Ok
from git_isopatch.git.run import own_git_environment
from git_isopatch.git.types import CommitId
from git_isopatch.worktrees.base_trees import BaseTrees, base_tree_folder, base_trees
from git_isopatch.worktrees.lock import AdminLock, open_pin, try_flock
from git_isopatch.worktrees.store import BASE_LOCK_REASON, GitMetadataStore


def _trees(repo: Path, env: dict[str, str], limit: int = 2) -> BaseTrees:
    match open_user_repository(str(repo), env):
        case Ok(repository):
            pass
    return BaseTrees(repository, env=own_git_environment(env), lock=AdminLock(), limit=limit)


def _head(repo: Path, env: dict[str, str]) -> CommitId:
    return CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())


def _commit(repo: Path, env: dict[str, str], name: str, text: str) -> CommitId:
    (repo / name).write_text(text)
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", name, cwd=repo, env=env)
    return _head(repo, env)


def _files(tree: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(tree)): p.read_bytes()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and p.name != ".git"
    }


def test_a_base_tree_is_a_clean_checkout_of_its_commit_out_of_the_parent_folder(
    env, make_repo
) -> None:
    repo = make_repo({"README": "hello\n", "src/a.txt": "a\n"})
    trees = _trees(repo, env)
    pin = trees.pin(_head(repo, env))
    try:
        path = Path(pin.tree.path)
        assert pin.made and pin.held
        assert _files(path) == {"README": b"hello\n", "src/a.txt": b"a\n"}
        assert git("status", "--porcelain", "--ignored", cwd=path, env=env) == b""
        assert str(path).startswith(base_tree_folder(trees.repository) + os.sep)
        assert sorted(os.listdir(repo.parent)) == ["home", "repo", "tmp"]
        listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
        assert f"worktree {path}\n" in listed and f"locked {BASE_LOCK_REASON}" in listed
    finally:
        trees.release(pin)


def test_runs_at_one_commit_share_one_base_tree(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env)
    first = trees.pin(_head(repo, env))
    second = trees.pin(_head(repo, env))
    try:
        assert first.tree.path == second.tree.path
        assert (first.made, second.made) == (True, False)
        assert len(base_trees(trees.repository, GitMetadataStore())) == 1
    finally:
        trees.release(first)
        trees.release(second)


def test_an_idle_base_tree_moves_to_the_next_commit_writing_what_differs(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "same.txt": "same\n"})
    trees = _trees(repo, env)
    old = trees.pin(_head(repo, env))
    path = Path(old.tree.path)
    untouched = os.stat(path / "same.txt").st_ino
    trees.release(old)
    new_commit = _commit(repo, env, "README", "changed\n")
    moved = trees.pin(new_commit)
    try:
        assert moved.made and Path(moved.tree.path) == path
        assert (path / "README").read_text() == "changed\n"
        assert os.stat(path / "same.txt").st_ino == untouched, "an unchanged file is rewritten"
        assert git("rev-parse", "HEAD", cwd=path, env=env).decode().strip() == new_commit
        assert git("status", "--porcelain", cwd=path, env=env) == b""
    finally:
        trees.release(moved)


def test_a_pinned_base_tree_is_never_moved(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env)
    held = trees.pin(_head(repo, env))
    other = trees.pin(_commit(repo, env, "README", "next\n"))
    try:
        assert other.tree.path != held.tree.path
        assert (Path(held.tree.path) / "README").read_text() == "hello\n"
    finally:
        trees.release(other)
        trees.release(held)


def test_the_least_recently_used_idle_base_trees_go_beyond_the_limit(env, make_repo) -> None:
    repo = make_repo({"README": "one\n"})
    commits = [_head(repo, env)]
    # far apart: every file differs, so each commit gets a base tree of its own
    commits.append(_commit(repo, env, "README", "two\n"))
    commits.append(_commit(repo, env, "README", "three\n"))
    trees = _trees(repo, env, limit=3)
    paths = []
    pins = [trees.pin(commit) for commit in commits]
    paths = [p.tree.path for p in pins]
    assert len(set(paths)) == 3
    for pin in pins:
        trees.release(pin)
    trees.limit = 1
    newest = trees.pin(commits[0])  # used last: the others go first
    trees.release(newest)
    left = base_trees(trees.repository, GitMetadataStore())
    assert [t.path for t in left] == [paths[0]]
    assert not os.path.exists(paths[1]) and not os.path.exists(os.path.dirname(paths[1]))


def test_no_base_tree_is_kept_at_zero(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env, limit=0)
    first = trees.pin(_head(repo, env))
    second = trees.pin(_head(repo, env))
    trees.release(first)
    assert os.path.isdir(second.tree.path), "a base tree in use was removed"
    trees.release(second)
    assert base_trees(trees.repository, GitMetadataStore()) == []
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert listed.count("worktree ") == 1


def test_a_base_tree_its_maker_left_half_made_is_made_again(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env)
    pin = trees.pin(_head(repo, env))
    path, admin = Path(pin.tree.path), Path(pin.tree.admin_dir)
    trees.release(pin)
    record = json.loads((admin / "isopatch-base.json").read_text())
    (admin / "isopatch-base.json").write_text(json.dumps({**record, "ready": False}))
    (path / "README").unlink()  # a checkout that died half-way
    again = trees.pin(_head(repo, env))
    try:
        assert again.made and (Path(again.tree.path) / "README").read_text() == "hello\n"
        assert not path.exists() or Path(again.tree.path) == path
    finally:
        trees.release(again)


#: A process that pins the base tree of HEAD and prints its path.
PIN_SCRIPT = """
import os, sys
from git_isopatch.git.repo import open_user_repository
from git_isopatch.git.run import own_git_environment
from git_isopatch.worktrees.base_trees import BaseTrees
from git_isopatch.worktrees.lock import AdminLock
repository = open_user_repository(sys.argv[1], os.environ).value
trees = BaseTrees(repository, env=own_git_environment(os.environ), lock=AdminLock(), limit=2)
pin = trees.pin(sys.argv[2])
print(pin.tree.path, pin.made, flush=True)
sys.stdin.read()
trees.release(pin)
"""


def test_parallel_runs_at_a_new_commit_make_one_base_tree(env, make_repo) -> None:
    repo = make_repo({f"f{i}.txt": f"{i}\n" * 50 for i in range(300)})
    head = _head(repo, env)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", PIN_SCRIPT, str(repo), head],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    answers = [run.stdout.readline().split() for run in runs]
    for run in runs:
        run.communicate("")
        assert run.returncode == 0
    assert len({path for path, _ in answers}) == 1
    assert sorted(made for _, made in answers) == ["False", "False", "False", "True"]
    (tree,) = base_trees(_trees(repo, env).repository, GitMetadataStore())
    assert len(_files(Path(tree.path))) == 300


def test_prune_removes_idle_base_trees_and_leaves_pinned_ones(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env)
    idle = trees.pin(_head(repo, env))
    held = trees.pin(_commit(repo, env, "README", "next\n"))
    idle.release()  # now idle, the other one pinned
    try:
        listed = isopatch("list", "--porcelain", cwd=repo, env=env)
        states = [line for line in listed.out.splitlines() if line.startswith("state ")]
        assert states == ["state base", "state base"], listed.out
        pruned = isopatch("prune", "-v", cwd=repo, env=env)
        assert pruned.returncode == 0, pruned.err
        assert pruned.out == f"Removing {idle.tree.path}: base\n"
        assert not os.path.exists(idle.tree.path) and os.path.isdir(held.tree.path)
    finally:
        trees.release(held)


def test_list_ends_a_base_tree_line_at_its_age(env, make_repo) -> None:
    """A base tree has no command: its line ends at its age, with no
    padding after it (the other columns are padded to line up)."""
    repo = make_repo()
    trees = _trees(repo, env)
    trees.release(trees.pin(_head(repo, env)))
    listed = isopatch("list", cwd=repo, env=env)
    assert listed.returncode == 0, listed.err
    (line,) = listed.out.splitlines()
    assert line.split()[1:2] == ["base"] and line == line.rstrip(), repr(line)


def test_idle_base_trees_expire_unused_for_the_given_time(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env)
    pin = trees.pin(_head(repo, env))
    trees.release(pin)
    assert trees.trim(unused_since=time.time() - 3600) == []
    (gone,) = trees.trim(unused_since=time.time() + 1)
    assert gone.path == pin.tree.path and not os.path.exists(pin.tree.path)


def test_a_base_tree_pin_is_shared_by_runs_and_exclusive_to_a_mover(env, make_repo) -> None:
    repo = make_repo()
    trees = _trees(repo, env)
    pin = trees.pin(_head(repo, env))
    try:
        fd = open_pin(pin.tree.admin_dir)
        assert fd is not None
        try:
            assert try_flock(fd, exclusive=False)
            assert not try_flock(fd, exclusive=True)
        finally:
            os.close(fd)
    finally:
        trees.release(pin)
    fd = open_pin(pin.tree.admin_dir)
    assert fd is not None and try_flock(fd, exclusive=True)
    os.close(fd)
