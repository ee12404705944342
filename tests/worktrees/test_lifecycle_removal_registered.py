"""The removal (design: procedure step 7) never deletes a folder holding a
worktree that is still registered: a command (a sub-agent) that runs ``git
worktree add -b feat ../agent`` makes a worktree beside its own, in the
folder git-isopatch made; removing that folder lost its files and left its
registration, and ``git switch feat`` then failed in the user's checkout.
The run reports the registration (``shared-write worktrees/<id>
created``) and says where the files are."""

from __future__ import annotations

from pathlib import Path

from repo_helpers import git, isopatch


def _registered(repo: Path, env: dict[str, str]) -> list[str]:
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    return [line.split(" ", 1)[1] for line in listed.splitlines() if line.startswith("worktree ")]


def test_a_worktree_the_command_adds_beside_its_own_stays(env, make_repo) -> None:
    repo = make_repo()
    command = "git worktree add -q -b feat ../agent && echo work > ../agent/made-by-agent"
    # unconfined: in the sandbox the registration is made in a discarded layer
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    records = [line for line in run.out.splitlines() if line.startswith("shared-write ")]
    assert "shared-write worktrees/agent created" in records
    assert "shared-write refs/heads/feat created" in records
    agent = next(Path(p) for p in _registered(repo, env) if p.endswith("/agent"))
    assert (agent / "made-by-agent").read_text() == "work\n", "its files are where git says"
    assert agent.parent.name.startswith("repo.isopatch-")
    assert not (agent.parent / "repo").exists(), "git-isopatch's own worktree is gone"
    assert f"'{agent}'" in run.err, "the run says where its files are"
    # the user can use the branch: remove the agent's worktree as git does, then switch
    git("worktree", "remove", "--force", agent, cwd=repo, env=env)
    git("switch", "-q", "feat", cwd=repo, env=env)
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert listed.out == ""


def test_a_worktree_the_command_adds_inside_its_own_is_not_deleted(env, make_repo) -> None:
    repo = make_repo()
    command = "git worktree add -q --detach nested && echo work > nested/made-by-agent"
    # unconfined: in the sandbox the registration is made in a discarded layer
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", command, cwd=repo, env=env)
    nested = next(Path(p) for p in _registered(repo, env) if p.endswith("/nested"))
    assert (nested / "made-by-agent").read_text() == "work\n"
    assert "shared-write worktrees/nested created" in run.out.splitlines()
    assert f"'{nested}'" in run.err


def test_prune_never_deletes_a_folder_holding_a_registered_worktree(env, make_repo) -> None:
    repo = make_repo()
    kept = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    worktree = Path(kept.fields()["worktree"])
    agent = worktree.parent / "agent"
    git("worktree", "add", "-q", "-b", "feat", agent, cwd=repo, env=env)
    (agent / "made-by-agent").write_text("work\n")
    pruned = isopatch("prune", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert not worktree.exists(), "ours goes"
    assert (agent / "made-by-agent").read_text() == "work\n", "the registered one stays"
    assert str(agent) in _registered(repo, env)
