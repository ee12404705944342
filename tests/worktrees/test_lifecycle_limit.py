"""``isopatch.maxWorktrees`` and ``--keep`` (design: procedure step 7): at
the limit the oldest kept worktree goes (orphans first) with a warning, a
run is refused when every worktree is running, and no worktree
git-isopatch did not make is ever evicted, whatever its record says."""

from __future__ import annotations

from pathlib import Path

import pytest
from lifecycle_helpers import (
    _forge_record,
    _git_list,
    _kept,
    _listed,
    _orphan,
    _start,
    _users_worktree,
)
from repo_helpers import git, isopatch, registered_worktrees, tree_manifest

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")

# -- a forged record never removes a worktree git-isopatch did not make -----


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
