"""Hooks (issue 4): creating, filling and removing the worktree runs no
repository hook (githooks(5)): not ``post-checkout`` (husky, LFS), not
``reference-transaction`` (the detached HEAD git writes), not
``post-index-change`` (git-isopatch's ``add --intent-to-add``).  The
command itself runs git with the repository's hooks as it likes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import script
from repo_helpers import git, isopatch, repo_state

#: The hooks git would run while git-isopatch works.
HOOKS = ("post-checkout", "reference-transaction", "post-index-change")


def _plant_hooks(folder: Path, marks: Path) -> None:
    for name in HOOKS:
        script(folder / name, f'echo "{name} $* in $(pwd)" >> {marks}/{name}\n')


@pytest.mark.parametrize("where", [".git/hooks", "core.hooksPath", "global", "husky"])
def test_making_the_worktree_runs_no_hook(env, make_repo, tmp_path: Path, where: str) -> None:
    repo = make_repo()
    marks = tmp_path / "marks"
    marks.mkdir()
    if where == ".git/hooks":
        _plant_hooks(repo / ".git" / "hooks", marks)
    elif where == "core.hooksPath":
        _plant_hooks(tmp_path / "hooks", marks)
        git("config", "core.hooksPath", tmp_path / "hooks", cwd=repo, env=env)
    elif where == "global":
        _plant_hooks(tmp_path / "hooks", marks)
        git("config", "--global", "core.hooksPath", tmp_path / "hooks", cwd=repo, env=env)
    else:  # husky: tracked hooks, a relative core.hooksPath
        _plant_hooks(repo / ".husky" / "_", marks)
        git("add", ".husky", cwd=repo, env=env)
        git("commit", "-q", "--no-verify", "-m", "husky", cwd=repo, env=env)
        git("config", "core.hooksPath", ".husky/_", cwd=repo, env=env)
        for mark in marks.iterdir():
            mark.unlink()
    before = repo_state(repo, env)

    run = isopatch("--porcelain", "--", "sh", "-c", "echo new > new.txt", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"+++ b/new.txt" in Path(run.fields()["patch"]).read_bytes()
    assert {p.name: p.read_text() for p in marks.iterdir()} == {}
    assert repo_state(repo, env) == before

    # the witness: the same hooks do run for git's own worktree add and add
    git("worktree", "add", "-q", "--detach", tmp_path / "by-hand", cwd=repo, env=env)
    (tmp_path / "by-hand" / "new.txt").write_text("new\n")
    git("add", "new.txt", cwd=tmp_path / "by-hand", env=env)
    assert sorted(p.name for p in marks.iterdir()) == sorted(HOOKS)


def test_the_command_runs_git_with_hooks(env, make_repo, tmp_path: Path) -> None:
    """A commit the command makes runs the repository's pre-commit and
    post-commit hooks, in the worktree, as it would anywhere."""
    repo = make_repo()
    marks = tmp_path / "marks"
    marks.mkdir()
    for name in ("pre-commit", "post-commit"):
        script(repo / ".git" / "hooks" / name, f"pwd > {marks}/{name}\n")
    command = "echo made > made.txt; git add made.txt; git commit -qm by-the-command"
    run = isopatch("--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"+++ b/made.txt" in Path(run.fields()["patch"]).read_bytes()
    for name in ("pre-commit", "post-commit"):  # in the worktree beside the checkout
        ran_in = Path((marks / name).read_text().strip())
        assert ran_in.parent.parent == repo.parent and ran_in.name == repo.name
        assert ran_in.parent.name.startswith(f"{repo.name}.isopatch-")
