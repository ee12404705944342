"""``--include-uncommitted`` (issue 5): the worktree starts from a snapshot
of the user's work tree, made through a temporary index without writing
anything of the user's, and the patch goes on top of that work tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state, tree_manifest, write_tree

#: Lists what the worktree holds into ``seen`` (a file the base tracks).
LIST_FILES = "find . -path ./.git -prune -o -type f -print | sort > seen; cat staged >> seen"


def _work_in_progress(make_repo, env: dict[str, str]) -> Path:
    repo = make_repo(
        {
            ".gitignore": "*.log\n",
            "seen": "\n",
            "staged": "old\n",
            "unstaged": "old\n",
            "deleted": "d\n",
            "both": "old\n",
        }
    )
    write_tree(repo, {"staged": "staged\n", "both": "staged\n"})
    git("add", "staged", "both", cwd=repo, env=env)
    write_tree(
        repo,
        {"unstaged": "unstaged\n", "both": "unstaged\n", "untracked": "u\n", "ignored.log": "i\n"},
    )
    (repo / "deleted").unlink()
    return repo


def _git_dir_listing(repo: Path) -> list[str]:
    """Files of the git directory but objects and git-isopatch's own lock
    (``isopatch.lock``, design: worktree add/remove serialisation)."""
    git_dir = repo / ".git"
    return sorted(
        str(p.relative_to(git_dir))
        for p in git_dir.rglob("*")
        if "objects" not in p.parts and p.name != "isopatch.lock"
    )


def test_worktree_starts_from_the_work_tree_and_the_patch_goes_on_top(
    env, make_repo, no_leftovers
) -> None:
    repo = _work_in_progress(make_repo, env)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    before, listing = repo_state(repo, env), _git_dir_listing(repo)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        f"{LIST_FILES}; echo more >> unstaged; rm untracked; echo new > new",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert _git_dir_listing(repo) == listing
    snapshot = run.fields()["base"]
    assert snapshot != head
    assert git("rev-parse", f"{snapshot}^", cwd=repo, env=env).decode().strip() == head
    # the snapshot is the work tree as it is: staged, unstaged, untracked, not ignored
    for name, content in (("staged", "staged\n"), ("both", "unstaged\n"), ("untracked", "u\n")):
        assert git("show", f"{snapshot}:{name}", cwd=repo, env=env).decode() == content
    names = git("ls-tree", "--name-only", snapshot, cwd=repo, env=env).decode().split()
    assert "deleted" not in names and "ignored.log" not in names

    expected = tree_manifest(repo)
    git("apply", "--binary", run.fields()["patch"], cwd=repo, env=env)
    after = tree_manifest(repo)
    assert (repo / "seen").read_text() == (
        "./.gitignore\n./both\n./seen\n./staged\n./unstaged\n./untracked\nstaged\n"
    )
    assert (repo / "unstaged").read_text() == "unstaged\nmore\n"
    assert not (repo / "untracked").exists()
    assert (repo / "new").read_text() == "new\n"
    changed = {k for k in set(expected) | set(after) if expected.get(k) != after.get(k)}
    assert changed == {b"seen", b"unstaged", b"untracked", b"new"}


def test_snapshot_on_an_unborn_branch(env, tmp_path, no_leftovers) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo, env=env)
    write_tree(repo, {"staged": "s\n", "untracked": "u\n"})
    git("add", "staged", cwd=repo, env=env)
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        "cat staged untracked > both",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    snapshot = run.fields()["base"]
    assert git("rev-list", "--count", snapshot, cwd=repo, env=env).strip() == b"1"
    git("apply", run.fields()["patch"], cwd=repo, env=env)
    assert (repo / "both").read_text() == "s\nu\n"


@pytest.mark.parametrize(
    "config",
    [
        ("user.useConfigOnly", "true"),  # no identity configured: the snapshot has its own
        ("core.splitIndex", "true"),  # no new sharedindex file in the user's git dir
    ],
    ids=lambda c: c[0] if isinstance(c, tuple) else c,
)
def test_user_configuration_does_not_break_the_snapshot(env, make_repo, config) -> None:
    repo = make_repo({"a": "a\n"})
    git("config", *config, cwd=repo, env=env)
    git("config", "gpg.program", "false", cwd=repo, env=env)
    if config[0] == "core.splitIndex":
        (repo / "b").write_text("b\n")
        git("add", "b", cwd=repo, env=env)  # the user's index is now split
    (repo / "a").write_text("changed\n")
    (repo / "new").write_text("untracked\n")
    identity_free = {
        k: v for k, v in env.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))
    }
    before, listing = repo_state(repo, env), _git_dir_listing(repo)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        "cat a > copy",
        cwd=repo,
        env=identity_free,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert _git_dir_listing(repo) == listing
    assert b"+changed" in Path(run.fields()["patch"]).read_bytes()


def test_include_uncommitted_with_base_is_a_usage_error(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--include-uncommitted", "--base", "HEAD", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    run = isopatch("--include-uncommitted", "--base", "main", "--", "true", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.startswith(
        "error: options '--include-uncommitted' and '--base' cannot be used together\n"
    )


def test_read_only_object_store_is_fatal(env, make_repo, no_leftovers) -> None:
    """The snapshot writes objects; where the object store cannot be
    written the run stops with a classified ``fatal:`` and the user's
    repository is as it was."""
    repo = make_repo({"a": "a\n"})
    (repo / "a").write_text("b\n")
    objects = repo / ".git" / "objects"
    subprocess.run(["mount", "--bind", objects, objects], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", objects, objects], check=True)
        before = repo_state(repo, env)
        run = isopatch("--include-uncommitted", "--", "true", cwd=repo, env=env)
        assert run.returncode == 128, run.err
        assert run.err.startswith("fatal: could not snapshot the work tree: ")
        assert "Traceback" not in run.err
        assert len(run.err.splitlines()) == 1
        assert repo_state(repo, env) == before
    finally:
        subprocess.run(["umount", objects], check=True)


def test_no_space_in_tmpdir_for_the_temporary_index_is_fatal(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    repo = make_repo({"a": "a\n"})
    (repo / "a").write_text("b\n")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", full], check=True)
    try:
        (full / "filler").write_bytes(b"x" * 4096)
        before = repo_state(repo, env)
        run = isopatch(
            "--include-uncommitted", "--", "true", cwd=repo, env={**env, "TMPDIR": str(full)}
        )
        assert run.returncode == 128, run.err
        assert run.err.startswith("fatal: could not snapshot the work tree: cannot copy the index")
        assert run.err.endswith(": No space left on device\n")
        assert repo_state(repo, env) == before
        assert sorted(p.name for p in full.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", full], check=True)
