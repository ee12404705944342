"""Submodules the command resets or removes (design: The patch, submodules;
issue 21, items 8-9).

- ``submodule.recurse=true`` makes ``git reset --hard``, ``git checkout .``
  and ``git restore .`` recurse into every active submodule, and one that is
  active but not populated (a fresh worktree's empty folder; also a
  checkout after ``git submodule init`` alone) makes them fail with
  ``fatal: not a git repository: .../modules/sub`` (treehouse issue #142,
  claude-code issue #55387).  Where a submodule is not populated the
  command's git runs with ``submodule.recurse=false``; the user's
  configuration is not written.
- With ``--recurse-submodules``, a command that removes a submodule
  (``git rm``, ``rm -rf``, a checkout of a commit without it) gets a patch
  that removes it, which ``git apply`` reproduces.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")


def _superproject(make_repo, tmp_path: Path, env) -> Path:
    """``repo`` (files ``t``) with the submodule ``sub`` checked out, on a
    second commit; the first commit has no submodule."""
    make_repo({"s": "s\n"}, name="sub-up")
    repo = make_repo({"t": "t\n"})
    git(*FILE_PROTOCOL, "submodule", "add", "-q", tmp_path / "sub-up", "sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "submodule", cwd=repo, env=env)
    return repo


@pytest.mark.parametrize(
    "command", [["git", "reset", "--hard"], ["git", "checkout", "."], ["git", "restore", "."]]
)
def test_recursing_commands_work_beside_an_unpopulated_submodule(
    env, make_repo, tmp_path, command
) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    git("config", "submodule.recurse", "true", cwd=repo, env=env)
    config = (repo / ".git" / "config").read_bytes()
    run = isopatch("--", "sh", "-c", 'echo x >> t && "$@"', "sh", *command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "not a git repository" not in run.err
    assert "0 files changed" in run.err  # the command undid its own edit
    assert (repo / ".git" / "config").read_bytes() == config


def test_recursion_into_a_populated_submodule_stays(env, make_repo, tmp_path) -> None:
    """With ``--recurse-submodules`` every submodule is populated, and the
    user's ``submodule.recurse`` reaches the command: ``git reset --hard``
    resets inside the submodule too."""
    repo = _superproject(make_repo, tmp_path, env)
    git("config", "submodule.recurse", "true", cwd=repo, env=env)
    script = "echo x >> sub/s && echo y >> t && git reset -q --hard && git config submodule.recurse"
    run = isopatch(
        "--porcelain", "--recurse-submodules", "--", "sh", "-c", script, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "0"
    assert Path(run.fields()["stdout"]).read_text() == "true\n"


@pytest.mark.parametrize(
    "script",
    ["git rm -q sub", "rm -rf sub", "git checkout -q HEAD~1"],
    ids=["git-rm", "rm-rf", "checkout-without-it"],
)
def test_a_removed_submodule_is_a_removal_in_the_patch(env, make_repo, tmp_path, script) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    run = isopatch(
        "--porcelain", "--recurse-submodules", "--", "sh", "-c", script, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    fields = run.fields()
    patch = Path(fields["patch"])
    text = patch.read_bytes()
    assert b"diff --git a/sub b/sub\ndeleted file mode 160000" in text
    assert "is a repository the command made" not in run.err
    dest = tmp_path / "checkout"
    git("clone", "-q", repo, dest, cwd=tmp_path, env=env)
    git("apply", "--index", patch, cwd=dest, env=env)
    assert git("ls-files", "-s", "sub", cwd=dest, env=env) == b""
    if script != "rm -rf sub":  # rm -rf leaves .gitmodules as it was
        assert b"a/.gitmodules" in text


def test_a_removal_beside_a_kept_submodule_keeps_its_changes(env, make_repo, tmp_path) -> None:
    """Two submodules: one removed, one edited inside; the patch removes
    the first and holds the second's file change."""
    repo = _superproject(make_repo, tmp_path, env)
    make_repo({"o": "o\n"}, name="other-up")
    git(*FILE_PROTOCOL, "submodule", "add", "-q", tmp_path / "other-up", "other", cwd=repo, env=env)
    git("commit", "-q", "-m", "other", cwd=repo, env=env)
    script = "rm -rf sub && echo more >> other/o"
    run = isopatch(
        "--porcelain", "--recurse-submodules", "--", "sh", "-c", script, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    text = Path(run.fields()["patch"]).read_bytes()
    assert b"diff --git a/sub b/sub\ndeleted file mode 160000" in text
    assert b"diff --git a/other/o b/other/o" in text
    assert b"a/other b/other" not in text
