"""Extraction against a hostile command (design: procedure step 6 and "The
patch"): a command that repoints its ``.git``, swaps or deletes its
worktree, makes a repository inside it, writes where the patch goes, needs
a filter that cannot run or hides a change behind an index flag: one
``fatal:`` line or a warning, the right status, and the user's repository
bit-identical."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from repo_helpers import (
    apply_to_clean_checkout,
    git,
    isopatch,
    registered_worktrees,
    repo_state,
    tree_manifest,
)

pytestmark = pytest.mark.hostile


def _assert_fatal(run, code: str) -> None:
    assert run.returncode == 128, run.err
    assert "Traceback" not in run.err and "report it" not in run.err, run.err
    assert run.err.startswith("fatal: "), run.err
    assert run.fields()["error-code"] == code


def test_a_command_that_points_its_dot_git_at_the_user_repository(env, make_repo) -> None:
    """Our own git calls name the worktree's git directory explicitly, so a
    rewritten ``<worktree>/.git`` cannot make them write the user's index."""
    repo = make_repo()
    before = repo_state(repo, env)
    script = 'printf "gitdir: %s\\n" "$(git rev-parse --git-common-dir)" > .git; echo x > planted'
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert b"b/planted" in Path(run.fields()["patch"]).read_bytes()


def test_a_command_that_swaps_its_worktree_for_a_link_to_the_user_checkout(env, make_repo) -> None:
    repo = make_repo()
    (repo / "precious.txt").write_text("the user's untracked file\n")
    before = repo_state(repo, env)
    script = f't=$(git rev-parse --show-toplevel); cd /; rm -rf "$t"; ln -s {repo} "$t"'
    # unconfined: in the sandbox the worktree's top is a mount point the
    # command cannot remove, and what it did inside is the patch
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    _assert_fatal(run, "worktree-gone")
    assert "patch" not in run.fields()
    after = repo_state(repo, env)
    # extraction failed, so the worktree's registration is kept and reported
    assert registered_worktrees(repo, env) == [f"worktree {run.fields()['worktree']}"]
    del before["worktree list"], after["worktree list"]
    assert after == before
    assert (repo / "precious.txt").read_text() == "the user's untracked file\n"


def test_a_command_that_deletes_its_worktree(env, make_repo) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    script = 't=$(git rev-parse --show-toplevel); cd /; rm -rf "$t"'
    # unconfined: in the sandbox the worktree's top is a mount point the
    # command cannot remove, and what it did inside is the patch
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    _assert_fatal(run, "worktree-gone")
    assert "removed or replaced its worktree" in run.err
    git("worktree", "prune", cwd=repo, env=env)
    assert repo_state(repo, env)["work tree"] == before["work tree"]


def test_an_empty_repository_made_inside_the_worktree(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--", "git", "init", "-q", "inner", cwd=repo, env=env)
    # the kept worktree's planted repository is disarmed first, and says so
    disarmed, fatal = run.err.split("\n", 1)
    assert disarmed.startswith("warning: the command made a repository at 'inner'"), run.err
    _assert_fatal(replace(run, stderr=fatal.encode()), "embedded-repository")
    assert not (Path(run.fields()["worktree"]) / "inner" / ".git").exists()
    assert registered_worktrees(repo, env) == [f"worktree {run.fields()['worktree']}"]


def test_a_command_that_writes_where_the_patch_goes(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        "echo junk > ../isopatch.patch; echo x > y",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert Path(run.fields()["patch"]).read_bytes().startswith(b"diff --git a/y b/y\n")


def test_a_required_filter_that_cannot_run(env, make_repo) -> None:
    repo = make_repo({".gitattributes": "*.dat filter=lfs\n", "a.dat": "data\n"})
    git("config", "filter.lfs.smudge", "no-such-filter-program", cwd=repo, env=env)
    git("config", "filter.lfs.required", "true", cwd=repo, env=env)
    before = repo_state(repo, env)
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    _assert_fatal(run, "filter-failed")
    assert repo_state(repo, env) == before
    assert list(Path(env["TMPDIR"]).iterdir()) == []


@pytest.mark.parametrize("confined", ["--sandbox", "--no-sandbox"])
@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_a_change_hidden_behind_an_index_flag_is_in_the_patch(
    env, make_repo, tmp_path, flag, confined
):
    """A command that marks a file assume-unchanged or skip-worktree and
    then edits it: git diff would not look at the file.  Unconfined, the
    index is read in process; in the sandbox, git lists it."""
    repo = make_repo({"a": "a\n", "b": "b\n"})
    run = isopatch(
        "--porcelain", "--keep", confined, "--", "sh", "-c",
        f"git update-index {flag} a && echo changed >> a && echo new > c",
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["files"] == "2"
    applied = apply_to_clean_checkout(
        repo, fields["base"], Path(fields["patch"]), tmp_path / "clean", env
    )
    assert tree_manifest(applied) == tree_manifest(Path(fields["worktree"]))
    assert isopatch("prune", cwd=repo, env=env).returncode == 0


def test_a_repository_the_command_makes_is_named_in_a_warning(env, make_repo) -> None:
    """``git clone`` or ``git init`` + commit inside the worktree: git
    records the new repository as a gitlink, so its files are not in the
    patch; the warning says so."""
    repo = make_repo({"a": "a\n"})
    make = "mkdir -p vendor/lib && cd vendor/lib && git init -q && echo c > c && git add c"
    run = isopatch(
        "--porcelain", "--", "sh", "-c", f"{make} && git commit -qm x", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.err == (
        "warning: 'vendor/lib' is a repository the command made: the patch holds its "
        "commit (a gitlink), not its files\n"
    )
    assert b"new file mode 160000" in Path(run.fields()["patch"]).read_bytes()
