"""Placement: the worktree's path holds no segment that starts with a dot
(unless the checkout's own path does).  Tools take a dot segment of an
absolute path for a hidden file and refuse to read or serve what lies below
it (express's ``res.sendFile`` answers 404), so the worktree is a visible
sibling of the checkout, ``../<repo>.isopatch-XXXXXXXX/<repo>``; folders of
older versions (``../.git-isopatch-XXXXXXXX``) are still listed and pruned."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from lifecycle_helpers import _prune_after_a_link_named
from repo_helpers import git, isopatch

from git_isopatch.worktrees.placement import made_by_isopatch, place_worktree

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")


def _where_it_ran(run) -> Path:
    assert run.returncode == 0, run.err
    return Path(Path(run.fields()["stdout"]).read_text().strip())


def _dot_segments(path: Path) -> list[str]:
    return [part for part in path.parts if part.startswith(".")]


def test_no_segment_of_the_worktree_path_is_hidden(env, make_repo, tmp_path: Path, no_leftovers):
    repo = make_repo()
    (repo / "pub").mkdir()
    assert _dot_segments(repo / "pub") == [], "the test's own folders are visible"
    run = isopatch("--porcelain", "--", "pwd", cwd=repo / "pub", env=env)
    ran = _where_it_ran(run)
    assert _dot_segments(ran) == []
    assert ran.parent.parent.parent == tmp_path, "a sibling of the checkout"
    assert ran.parent.parent.name.startswith("repo.isopatch-")
    assert len(ran.parent.parent.name) == len("repo.isopatch-") + 8


def test_a_hidden_checkout_gives_a_visible_worktree(env, make_repo, tmp_path: Path, no_leftovers):
    repo = make_repo(name=".dotfiles")
    ran = _where_it_ran(isopatch("--porcelain", "--", "pwd", cwd=repo, env=env))
    assert ran.parent.parent == tmp_path
    assert ran.name == "worktree" and ran.parent.name.startswith("worktree.isopatch-")


def test_a_long_checkout_name_is_placed_listed_and_pruned(env, make_repo, tmp_path: Path) -> None:
    name = "n" * 240  # with ".isopatch-XXXXXXXX" over NAME_MAX
    repo = make_repo(name=name)
    run = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning" not in run.err
    kept = Path(run.fields()["worktree"])
    assert kept.name == name and kept.parent.parent == tmp_path
    assert kept.parent.name.startswith("worktree.isopatch-")
    assert (
        f"worktree {kept}\nstate kept\n" in isopatch("list", "--porcelain", cwd=repo, env=env).out
    )
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.out == f"Removing {kept}: kept\n", pruned.err
    assert not kept.parent.exists()


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_worktree_an_older_version_placed_is_listed_and_pruned(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    folder = tmp_path / ".git-isopatch-abcd_123"
    folder.mkdir(mode=0o700)
    old = folder / "repo"
    git("worktree", "add", "-q", "--detach", old, cwd=repo, env=env)
    record = {
        "pid": _dead_pid(),
        "host": socket.gethostname(),
        "start_ticks": 1,
        "created": 1.0,
        "tmpdir": str(folder),
        "base": git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip(),
        "command": ["true"],
        "kept": True,
        "container": str(folder),
    }
    (repo / ".git" / "worktrees" / "repo" / "isopatch.json").write_text(json.dumps(record))
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert f"worktree {old}\nstate kept\n" in listed.out, listed.err
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.out == f"Removing {old}: kept\n", pruned.err
    assert not folder.exists()
    assert git("worktree", "list", "--porcelain", cwd=repo, env=env).count(b"worktree ") == 1


def test_prune_never_deletes_through_a_link_named_like_our_visible_folder(
    env, make_repo, tmp_path: Path
) -> None:
    """As for the older name (test_sandbox_admin): a link the command plants
    inside its worktree, named as our folder is, and a ``gitdir`` and a
    record naming a worktree behind it."""
    victim = _prune_after_a_link_named("precious.isopatch-abcdefgh", make_repo, env, tmp_path)
    assert (victim / "f").read_text() == "data\n"


def test_places_beside_the_checkout_are_named_after_it(tmp_path: Path) -> None:
    top = tmp_path / "my.project"
    top.mkdir()
    place = place_worktree(str(top), fallback_root="/nonexistent", warn=print)
    assert place.beside_checkout
    assert Path(place.container).parent == tmp_path
    assert Path(place.container).name.startswith("my.project.isopatch-")
    assert place.worktree == f"{place.container}/my.project"
    assert made_by_isopatch(place.worktree, place.container)


@pytest.mark.parametrize(
    ("path", "container", "ours"),
    [
        ("/src/repo.isopatch-ab_12cde/repo", "/src/repo.isopatch-ab_12cde", True),
        ("/src/repo.isopatch-ab_12cde/repo", None, True),
        ("/src/worktree.isopatch-ab_12cde/" + "n" * 240, None, True),
        ("/src/a.b.isopatch-ab_12cde/a.b", None, True),
        ("/src/other.isopatch-ab_12cde/repo", None, False),  # not named after it
        ("/src/repo.isopatch-ab_12cd/repo", None, False),
        ("/src/repo.isopatch-AB_12CDE/repo", None, False),
        ("/src/.isopatch-ab_12cde/repo", None, False),
        ("/src/repo.isopatch-ab_12cde/repo", "/src/repo.isopatch-zz", False),
        ("/src/repo.isopatch-ab_12cde/x/repo", "/src/repo.isopatch-ab_12cde", False),
        ("/src/.git-isopatch-ab_12cde/repo", "/src/.git-isopatch-ab_12cde", True),
    ],
)
def test_made_by_isopatch_beside_the_checkout(path: str, container: str | None, ours: bool):
    assert made_by_isopatch(path, container) is ours
