"""The repository's hooks in the worktree (design: The procedure, step 5;
issue 21, item 7).

husky 9 sets ``core.hooksPath=.husky/_`` and generates ``.husky/_`` with a
``.gitignore`` of ``*``: the folder is in the user's checkout and not in a
worktree, so the repository's ``pre-commit`` hook silently does not run
there and a commit it rejects goes through.  A ``warning:`` says so and
names ``--copy``; with ``--copy .husky/_`` the hook runs.
"""

from __future__ import annotations

import os

from repo_helpers import git, isopatch

REJECTING_HOOK = "#!/bin/sh\necho rejected by the hook >&2\nexit 1\n"


def _husky_repo(make_repo, env):
    repo = make_repo({".husky/pre-commit": "exit 1\n", "a": "a\n"})
    generated = repo / ".husky" / "_"
    generated.mkdir()
    (generated / ".gitignore").write_text("*\n")
    (generated / "pre-commit").write_text(REJECTING_HOOK)
    os.chmod(generated / "pre-commit", 0o755)
    git("config", "core.hooksPath", ".husky/_", cwd=repo, env=env)
    return repo


COMMIT = "echo b > a && git commit -q -am change"


def test_a_hooks_path_missing_from_the_worktree_is_named_with_copy(env, make_repo) -> None:
    repo = _husky_repo(make_repo, env)
    run = isopatch("--", "sh", "-c", COMMIT, cwd=repo, env=env)
    assert run.returncode == 0, run.err  # the hook did not run
    assert (
        "warning: core.hooksPath '.husky/_' is not in the worktree (git does not track it), "
        "so the repository's hooks do not run there; bring it in with --copy .husky/_"
    ) in run.err


def test_with_copy_the_hook_runs_and_nothing_is_said(env, make_repo) -> None:
    repo = _husky_repo(make_repo, env)
    run = isopatch("--copy", ".husky/_", "--", "sh", "-c", COMMIT, cwd=repo, env=env)
    assert run.returncode == 1
    assert "rejected by the hook" in run.err
    assert "core.hooksPath" not in run.err


def test_copy_is_named_from_the_users_folder(env, make_repo) -> None:
    repo = _husky_repo(make_repo, env)
    (repo / "src").mkdir()
    run = isopatch("--", "true", cwd=repo / "src", env=env)
    assert "bring it in with --copy ../.husky/_" in run.err


def test_no_warning_for_a_tracked_absolute_or_missing_hooks_path(env, make_repo, tmp_path) -> None:
    repo = make_repo({"hooks/pre-commit": "exit 0\n"})
    for value in ("hooks", str(tmp_path / "elsewhere"), "not-there"):
        git("config", "core.hooksPath", value, cwd=repo, env=env)
        run = isopatch("--", "true", cwd=repo, env=env)
        assert run.returncode == 0, run.err
        assert "core.hooksPath" not in run.err, value
