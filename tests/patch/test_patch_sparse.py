"""Sparse checkout (issue 10, kind C): the worktree is sparse as the user's
checkout is, and a file the command writes outside the sparse set is in the
patch like any other.

``git worktree add`` (git 2.36+) copies the sparse-checkout patterns and the
worktree's ``core.sparseCheckout`` into the new worktree, so the command sees
what the user sees.  ``git add`` refuses paths outside the sparse set unless
told ``--sparse`` (git 2.34, git-add(1)); the intent-to-add step and the
``--include-uncommitted`` snapshot pass it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import (
    apply_to_clean_checkout,
    git,
    isopatch,
    repo_state,
    tree_manifest,
    write_tree,
)

FILES = {"inside/a": "a\n", "outside/b": "b\n", "top": "t\n"}

#: Writes inside and outside the sparse set: a new file in an absent
#: folder, a change to a tracked file that is not checked out, an edit.
COMMAND = (
    "test ! -e outside/b || exit 3; mkdir -p outside/new; echo n > outside/new/file; "
    "echo changed > outside/b; echo edited >> inside/a"
)


def _sparse(make_repo, env, how: str) -> Path:
    repo = make_repo(FILES)
    if how == "cone":
        git("sparse-checkout", "set", "inside", cwd=repo, env=env)
    elif how == "sparse-index":
        git("sparse-checkout", "set", "--sparse-index", "inside", cwd=repo, env=env)
    else:  # the old way: core.sparseCheckout in the shared configuration
        git("config", "core.sparseCheckout", "true", cwd=repo, env=env)
        (repo / ".git" / "info" / "sparse-checkout").write_text("/top\n/inside/\n")
        git("read-tree", "-mu", "HEAD", cwd=repo, env=env)
    assert not (repo / "outside").exists()
    return repo


@pytest.mark.parametrize("how", ["cone", "sparse-index", "non-cone"])
def test_files_written_outside_the_sparse_set_are_in_the_patch(
    env, make_repo, tmp_path, how, no_leftovers
) -> None:
    repo = _sparse(make_repo, env, how)
    before = repo_state(repo, env)
    run = isopatch("--porcelain", "--", "sh", "-c", COMMAND, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "Traceback" not in run.err
    fields = run.fields()
    assert fields["files"] == "3"
    assert repo_state(repo, env) == before
    applied = apply_to_clean_checkout(repo, "HEAD", Path(fields["patch"]), tmp_path / "c", env)
    assert (applied / "outside" / "new" / "file").read_text() == "n\n"
    assert (applied / "outside" / "b").read_text() == "changed\n"
    assert (applied / "inside" / "a").read_text() == "a\nedited\n"
    assert (applied / "top").read_text() == "t\n"


def test_the_worktree_is_sparse_as_the_users_checkout(env, make_repo) -> None:
    repo = _sparse(make_repo, env, "cone")
    run = isopatch(
        "--keep", "--porcelain", "--", "sh", "-c", "git sparse-checkout list", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    worktree = Path(run.fields()["worktree"])
    assert (worktree / "inside" / "a").exists()
    assert not (worktree / "outside").exists()
    git("worktree", "remove", "--force", worktree, cwd=repo, env=env)


def test_include_uncommitted_takes_untracked_files_outside_the_sparse_set(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    """The snapshot holds them, and the command sees them where the user
    has them, although the sparse patterns leave their folder out."""
    repo = _sparse(make_repo, env, "cone")
    write_tree(repo, {"outside/untracked": "u\n", "inside/a": "dirty\n"})
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        "cat outside/untracked > seen || exit 3; test ! -e outside/b || exit 4; "
        "echo more >> outside/untracked",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    fields = run.fields()
    snapshot = fields["base"]
    assert git("show", f"{snapshot}:outside/untracked", cwd=repo, env=env) == b"u\n"
    assert git("show", f"{snapshot}:inside/a", cwd=repo, env=env) == b"dirty\n"
    assert git("show", f"{snapshot}:outside/b", cwd=repo, env=env) == b"b\n"
    expected = tree_manifest(repo)
    git("apply", "--binary", fields["patch"], cwd=repo, env=env)
    assert (repo / "seen").read_text() == "u\n"
    assert (repo / "outside" / "untracked").read_text() == "u\nmore\n"
    changed = {p for p in tree_manifest(repo) if expected.get(p) != tree_manifest(repo)[p]}
    assert changed == {b"seen", b"outside/untracked"}
