"""Where the command runs (design: procedure step 5): in the worktree folder
that mirrors where the user stands, made when the base lacks it, and never
entered through a symbolic link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, registered_worktrees, repo_state, tree_manifest


# -- the caller's folder is a symbolic link at the base ----------------------
def _pr_with(repo: Path, env: dict[str, str], files: dict[str, str]) -> None:
    """Branch ``pr``: ``src`` replaced by what ``files`` says."""
    git("checkout", "-q", "-b", "pr", cwd=repo, env=env)
    git("rm", "-q", "-r", "src", cwd=repo, env=env)
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("symlink:"):
            os.symlink(content[len("symlink:") :], path)
        else:
            path.write_text(content)
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "pr", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)


# -- a mount point in the worktree: kept, never removed through -------------


@pytest.mark.parametrize(
    "link",
    [
        pytest.param("../../..", id="relative-out-of-the-worktree"),
        pytest.param("ABSOLUTE", id="absolute"),
        pytest.param("lib", id="inside-the-worktree"),
    ],
)
def test_a_symbolic_link_where_you_stand_at_the_base_is_refused(
    env, make_repo, tmp_path: Path, link: str, no_leftovers
) -> None:
    repo = make_repo({"src/a.py": "x = 1\n", "lib/b.py": "y = 2\n"})
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "c.py").write_text("z   =   3\n")
    target = str(victim) if link == "ABSOLUTE" else link
    _pr_with(repo, env, {"src": f"symlink:{target}"})
    before = repo_state(repo, env)
    victim_before = tree_manifest(victim)
    run = isopatch(
        "--base",
        "pr",
        "--",
        "sh",
        "-c",
        "mkdir made && touch made/x && echo hi > new",
        cwd=repo / "src",
        env=env,
    )
    assert run.returncode == 128, run.err
    assert run.err == (
        "fatal: 'src' is a symbolic link at the base; refusing to run the command there\n"
        "hint: run it from a folder that is a folder at the base, or from the top of the "
        "work tree\n"
    )
    assert tree_manifest(victim) == victim_before
    assert repo_state(repo, env) == before
    assert registered_worktrees(repo, env) == []


def test_a_nested_link_and_a_file_where_you_stand_are_refused(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"src/deep/a.py": "x = 1\n", "src/b.py": "y\n"})
    _pr_with(repo, env, {"src/deep": "symlink:.", "src/b.py": "y\n"})
    run = isopatch("--base", "pr", "--json", "--", "touch", "x", cwd=repo / "src" / "deep", env=env)
    assert run.returncode == 128
    assert json.loads(run.out)["error-code"] == "prefix-not-a-folder"
    assert "'src/deep' is a symbolic link at the base" in run.err

    git("branch", "-q", "-D", "pr", cwd=repo, env=env)
    _pr_with(repo, env, {"src": "a file now\n"})
    run = isopatch("--base", "pr", "--", "touch", "x", cwd=repo / "src" / "deep", env=env)
    assert run.returncode == 128
    assert run.err.startswith("fatal: 'src' is not a folder at the base;"), run.err


def test_a_folder_missing_at_the_base_is_made_and_entered(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"README": "x\n"})
    (repo / "new" / "deeper").mkdir(parents=True)
    run = isopatch(
        "--porcelain", "--", "sh", "-c", "pwd; echo x > f", cwd=repo / "new" / "deeper", env=env
    )
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text().strip().endswith("/repo/new/deeper")
    assert b"+++ b/new/deeper/f" in Path(run.fields()["patch"]).read_bytes()
