"""The command's environment (design: procedure step 5): the repository
variables git exports to hooks and aliases (GIT_DIR, GIT_WORK_TREE, ...)
never reach the command or a git call in the worktree; ``git -c`` settings
reach it as git passes them on, and the command runs git with the
repository's hooks as it likes."""

from __future__ import annotations

from pathlib import Path

import pytest
from commit_helpers import COMMAND, _expected_after_command, _head, _patched_checkout
from hostile import script
from repo_helpers import (
    git,
    isopatch,
    repo_state,
)

from git_isopatch.git.run import LOCAL_REPO_ENV


def _hostile_repo_env(repo: Path, tmp_path: Path) -> dict[str, str]:
    """Every repository variable git knows, pointing at the user's
    repository or at something wrong."""
    empty_objects = tmp_path / "empty-objects"
    (empty_objects / "info").mkdir(parents=True)
    (empty_objects / "pack").mkdir()
    return {
        "GIT_DIR": str(repo / ".git"),
        "GIT_WORK_TREE": str(repo),
        "GIT_INDEX_FILE": str(repo / ".git" / "index"),
        "GIT_OBJECT_DIRECTORY": str(empty_objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(empty_objects),
        "GIT_COMMON_DIR": str(repo / ".git"),
        "GIT_PREFIX": "sub/",
        "GIT_NAMESPACE": "hostile",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_GRAFT_FILE": str(tmp_path / "grafts"),
        "GIT_SHALLOW_FILE": str(tmp_path / "shallow"),
        "GIT_QUARANTINE_PATH": str(empty_objects),
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_IMPLICIT_WORK_TREE": "0",
    }


def test_git_work_tree_in_the_environment_never_reaches_the_command(
    env, make_repo, no_leftovers
) -> None:
    repo = make_repo()
    hook_like = {**env, "GIT_DIR": str(repo / ".git"), "GIT_WORK_TREE": str(repo)}
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        "git rev-parse --show-toplevel; pwd -P",
        cwd=repo,
        env=hook_like,
    )
    assert run.returncode == 0, run.err
    top, here = Path(run.fields()["stdout"]).read_text().splitlines()
    assert top == here != str(repo)


@pytest.mark.hostile
def test_repository_variables_never_reach_the_worktree(env, make_repo, tmp_path: Path) -> None:
    """With every repository variable set (as a hook of a ``git --git-dir``
    invocation, a pre-receive hook or a namespace would have them), the
    command's ``git add``/``git commit`` act on the worktree, the user's
    index and object store are untouched, and the command sees none of them."""
    repo = make_repo({"README": "hello\n", "sub/file": "one\n"})
    (repo / "sub" / "file").write_text("staged\n")
    git("add", "sub/file", cwd=repo, env=env)
    out = tmp_path / "out"
    out.mkdir()
    base = _head(repo, env)
    before = repo_state(repo, env)
    objects_before = sorted((repo / ".git" / "objects").rglob("*"))
    hostile = {**env, **_hostile_repo_env(repo, tmp_path), "OUT": str(out)}
    command = COMMAND + '; env > "$OUT/command.env"'
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", command, cwd=repo, env=hostile)
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    fields = run.fields()
    assert fields["base"] == base
    # the command's commit went to the shared object store: new objects only
    objects_after = set((repo / ".git" / "objects").rglob("*"))
    assert set(objects_before) <= objects_after
    assert not list((tmp_path / "empty-objects").rglob("*/*"))
    expected = _expected_after_command(repo, base, tmp_path, env)
    got = _patched_checkout(repo, base, Path(fields["patch"]), tmp_path / "checkout", env)
    assert got == expected
    command_env = (out / "command.env").read_text()
    leaked = [v for v in LOCAL_REPO_ENV if f"\n{v}=" in "\n" + command_env]
    assert not leaked


@pytest.mark.hostile
def test_git_c_settings_reach_the_command_as_git_passes_them_on(
    env, make_repo, tmp_path: Path
) -> None:
    """``git -c k=v isopatch`` puts ``k=v`` in GIT_CONFIG_PARAMETERS; git
    keeps it for commands it runs in another repository (submodules,
    ``prepare_other_repo_env``), so the command's git sees it too."""
    repo = make_repo()
    out = git(
        "-c",
        "isopatch-test.colour=blue",
        "isopatch",
        "--porcelain",
        "--",
        "sh",
        "-c",
        "git config isopatch-test.colour > colour.txt",
        cwd=repo,
        env=env,
    )
    fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
    assert b"+blue\n" in Path(fields["patch"]).read_bytes()


@pytest.mark.hostile
def test_the_command_runs_git_with_hooks(env, make_repo, tmp_path: Path) -> None:
    """A commit the command makes runs the repository's pre-commit and
    post-commit hooks, in the worktree, as it would anywhere."""
    repo = make_repo()
    marks = tmp_path / "marks"
    marks.mkdir()
    for name in ("pre-commit", "post-commit"):
        script(repo / ".git" / "hooks" / name, f"pwd > {marks}/{name}\n")
    command = "echo made > made.txt; git add made.txt; git commit -qm by-the-command"
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"+++ b/made.txt" in Path(run.fields()["patch"]).read_bytes()
    for name in ("pre-commit", "post-commit"):  # in the worktree beside the checkout
        ran_in = Path((marks / name).read_text().strip())
        assert ran_in.parent.parent == repo.parent and ran_in.name == repo.name
        assert ran_in.parent.name.startswith(f"{repo.name}.isopatch-")
